/**
 * cdk-nag AwsSolutions: no finding may remain unacknowledged, in any configuration we ship, and
 * every acknowledgement must say why. The broad IAM5 acknowledgement for `Resource: "*"` is only
 * safe because of the last test, which fails on any action on "*" outside a short allowlist.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { Validations } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { UNSCOPED_ACTIONS } from '../lib/constructs/sheetlog-function';
import { buildApp } from '../lib/sheetlog-app';
import { resourcesOfType, synth } from './support';

const CONFIGURATIONS: Record<string, Record<string, unknown>> = {
  default: {},
  'JWT authorizer, alarm email, x86_64': {
    jwtIssuer: 'https://issuer.example.com',
    jwtAudience: 'web',
    alarmEmail: 'ops@example.com',
    architecture: 'x86_64',
  },
  'cognito, self sign-up, MFA required': { authMode: 'cognito', cognitoSelfSignUp: 'true', cognitoMfa: 'required' },
  'cognito defaults, ephemeral': {
    authMode: 'cognito',
    ephemeral: 'true',
    ephemeralConfirm: 'sheetlog-integ-test',
    stackName: 'sheetlog-integ-test',
  },
  'ephemeral sandbox': { ephemeral: 'true', ephemeralConfirm: 'sheetlog-integ-test', stackName: 'sheetlog-integ-test' },
};

function acknowledgements(root: IConstruct): { path: string; id: string; reason: string }[] {
  return root.node.findAll().flatMap((c) =>
    c.node.metadata
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) => Object.entries(m.data as Record<string, string>))
      // Core records rule ids of plugins it does not know as annotation ids.
      .map(([id, reason]) => ({ path: c.node.path, id: id.replace(/^annotation::/i, ''), reason })),
  );
}

describe('cdk-nag AwsSolutions', () => {
  for (const [name, context] of Object.entries(CONFIGURATIONS)) {
    test(`leaves no unacknowledged finding: ${name}`, () => {
      const { app } = synth(context);
      const report = new AwsSolutionsChecks().validateScope(app);
      const findings = report.violations.map(
        (v) =>
          `${v.ruleName}: ${v.description}\n      at ${v.violatingResources.map((r) => r.constructPath).join('\n      at ')}`,
      );
      assert.deepEqual(findings, [], `unacknowledged cdk-nag findings:\n  ${findings.join('\n  ')}`);
    });
  }

  test('runs in the app itself: `cdk synth` passes as shipped and fails on a new finding', () => {
    const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'sheetlog-nag-'));
    try {
      const clean = buildApp({
        skipBundling: true,
        context: { stackName: 'nag-clean' },
        configFile: null,
        outdir: path.join(outdir, 'clean'),
      });
      clean.app.synth();

      const dirty = buildApp({
        skipBundling: true,
        context: { stackName: 'nag-dirty' },
        configFile: null,
        outdir: path.join(outdir, 'dirty'),
      });
      // Something cdk-nag objects to: an unencrypted queue without a TLS-only policy or a DLQ.
      new sqs.Queue(dirty.stack, 'Unacceptable', { encryption: sqs.QueueEncryption.UNENCRYPTED });
      assert.throws(() => dirty.app.synth(), /Validation failed/);
      const report = fs.readFileSync(path.join(outdir, 'dirty', 'validation-report.json'), 'utf8');
      assert.match(report, /AwsSolutions-SQS4/);
      assert.match(report, /nag-dirty\/Unacceptable/);
    } finally {
      fs.rmSync(outdir, { recursive: true, force: true });
    }
  });

  test('every acknowledgement gives a reason', () => {
    const acks = [...acknowledgements(synth().app), ...acknowledgements(synth({ authMode: 'cognito' }).app)];
    assert.ok(acks.length > 0);
    for (const { path, id, reason } of acks) {
      assert.match(id, /^AwsSolutions-[A-Z0-9]+(\[.+\])?$/, `${path}: ${id} is not an AwsSolutions rule id`);
      assert.ok(
        reason.trim().length >= 40,
        `${path}: the reason for ${id} is too short to explain anything: "${reason}"`,
      );
    }
  });

  for (const name of ['JWT authorizer, alarm email, x86_64', 'cognito, self sign-up, MFA required'])
    test(`no role holds an action on "*" other than those that cannot be scoped: ${name}`, () => {
      const { json } = synth(CONFIGURATIONS[name]);
      for (const [id, policy] of resourcesOfType(json, 'AWS::IAM::Policy')) {
        for (const s of policy.Properties.PolicyDocument.Statement) {
          const resources = Array.isArray(s.Resource) ? s.Resource : [s.Resource];
          if (!resources.includes('*')) continue;
          const actions: string[] = Array.isArray(s.Action) ? s.Action : [s.Action];
          for (const action of actions) {
            assert.ok((UNSCOPED_ACTIONS as readonly string[]).includes(action), `${id} grants ${action} on "*"`);
          }
        }
      }
    });
});
