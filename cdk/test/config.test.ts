/**
 * Configuration through context: documented defaults, values reaching the template, and invalid
 * values failing synthesis with a message that names the key, the value and what is expected.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { AUTH_MODES, ConfigError, DEFAULT_CONFIG, parseConfig } from '../lib/config';
import { buildApp } from '../lib/sheetlog-app';
import { CRATES, ENV, LOGICAL_IDS } from '../lib/sheetlog-stack';
import { functionByBinary, onlyResource, synth } from './support';

const REPO_ROOT = path.resolve(__dirname, '..', '..');
/** tsx's loader by URL, so a child process can run TypeScript from any working directory. */
const TSX = pathToFileURL(require.resolve('tsx')).href;

function problemsOf(context: Record<string, unknown>): string[] {
  try {
    parseConfig(context);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${err}`);
    return err.problems;
  }
  assert.fail(`expected ${JSON.stringify(context)} to be rejected`);
}

describe('configuration defaults', () => {
  test('are the documented ones', () => {
    assert.deepEqual(parseConfig({}), {
      stackName: 'sheetlog',
      architecture: 'arm64',
      lambdaProfile: 'release',
      snapshotInterval: 100,
      segmentMaxEntries: 10_000,
      dedupeKeysPerMonth: 1_000_000,
      inlineBodyMaxBytes: 16_384,
      autoDeleteDays: 3,
      noncurrentVersionDays: 30,
      backupPlan: false,
      backupRetentionDays: 365,
      uploadUrlTtlSecs: 900,
      maxUploadBytes: 268_435_456,
      pendingTimeoutSecs: 120,
      logRetentionDays: 30,
      logLevel: 'info',
      authMode: 'iam',
      jwt: undefined,
      cognito: undefined,
      corsAllowedOrigins: [],
      throttlingRateLimit: 1000,
      throttlingBurstLimit: 2000,
      retentionMode: 'keep',
      retentionKeepSegments: 3,
      retentionAfterDays: undefined,
      syncWrites: 'queued',
      alarmEmail: undefined,
      ephemeral: false,
      ephemeralConfirm: undefined,
    });
    assert.deepEqual(parseConfig({}), DEFAULT_CONFIG);
  });

  test('every default and key is in docs/deploy.md', () => {
    const doc = fs.readFileSync(path.join(REPO_ROOT, 'docs', 'deploy.md'), 'utf8');
    for (const key of Object.keys(DEFAULT_CONFIG).filter((k) => k !== 'jwt' && k !== 'cognito')) {
      assert.match(doc, new RegExp(`\`${key}\``), `docs/deploy.md does not document ${key}`);
    }
    for (const key of ['jwtIssuer', 'jwtAudience', 'jwtAccessClaim', 'cognitoSelfSignUp', 'cognitoMfa']) {
      assert.match(doc, new RegExp(`\`${key}\``), `docs/deploy.md does not document ${key}`);
    }
    for (const mode of AUTH_MODES) assert.match(doc, new RegExp(`\`authMode=${mode}\``), mode);
  });
});

describe('configuration values', () => {
  test('arrive as strings from the command line and as numbers from cdk.json', () => {
    const fromCli = parseConfig({
      snapshotInterval: '250',
      ephemeral: 'true',
      ephemeralConfirm: 'sheetlog',
      corsAllowedOrigins: 'https://a.example, https://b.example',
    });
    assert.equal(fromCli.snapshotInterval, 250);
    assert.equal(fromCli.ephemeral, true);
    assert.deepEqual(fromCli.corsAllowedOrigins, ['https://a.example', 'https://b.example']);
    const fromJson = parseConfig({
      snapshotInterval: 250,
      ephemeral: true,
      ephemeralConfirm: 'sheetlog',
      corsAllowedOrigins: ['https://a.example'],
    });
    assert.equal(fromJson.snapshotInterval, 250);
    assert.deepEqual(fromJson.corsAllowedOrigins, ['https://a.example']);
  });

  test('reach the functions, the bucket, the API and the log groups', () => {
    const { json } = synth({
      snapshotInterval: '50',
      segmentMaxEntries: '2000',
      inlineBodyMaxBytes: '8192',
      uploadUrlTtlSecs: '300',
      maxUploadBytes: '1048576',
      pendingTimeoutSecs: '60',
      autoDeleteDays: '7',
      logRetentionDays: '90',
      logLevel: 'debug,hyper=info',
      throttlingRateLimit: '20',
      throttlingBurstLimit: '40',
      stackName: 'sheetlog-test',
    });
    const api = functionByBinary(json, CRATES.api.binaryName)[1].Properties.Environment.Variables;
    assert.equal(api[ENV.snapshotInterval], '50');
    assert.equal(api[ENV.segmentMaxEntries], '2000');
    assert.equal(api[ENV.inlineBodyMaxBytes], '8192');
    assert.equal(api[ENV.uploadUrlTtlSecs], '300');
    assert.equal(api[ENV.maxUploadBytes], '1048576');
    assert.equal(api.RUST_LOG, 'debug,hyper=info');
    const worker = functionByBinary(json, CRATES.snapshotWorker.binaryName)[1].Properties.Environment.Variables;
    assert.equal(worker[ENV.pendingTimeoutSecs], '60');
    assert.equal(worker[ENV.snapshotInterval], undefined, 'the worker does not read the snapshot trigger');
    const rules = json.Resources[LOGICAL_IDS.bucket].Properties.LifecycleConfiguration.Rules;
    assert.equal(rules.find((r: { TagFilters?: unknown }) => r.TagFilters).ExpirationInDays, 7);
    const [, stage] = onlyResource(json, 'AWS::ApiGatewayV2::Stage');
    assert.deepEqual(stage.Properties.DefaultRouteSettings, { ThrottlingRateLimit: 20, ThrottlingBurstLimit: 40 });
    for (const [, group] of Object.entries(
      json.Resources as Record<string, { Type: string; Properties: { RetentionInDays: number } }>,
    ).filter(([, r]) => r.Type === 'AWS::Logs::LogGroup')) {
      assert.equal(group.Properties.RetentionInDays, 90);
    }
  });

  test('syncWrites reaches the API and leaves the queue and the writer in place', () => {
    for (const mode of ['queued', 'direct']) {
      const { json } = synth({ syncWrites: mode });
      const api = functionByBinary(json, CRATES.api.binaryName)[1].Properties.Environment.Variables;
      assert.equal(api[ENV.syncWrites], mode);
      assert.deepEqual(api[ENV.syncQueueUrl], { Ref: LOGICAL_IDS.syncQueue });
      functionByBinary(json, CRATES.syncWriter.binaryName);
      assert.ok(json.Resources[LOGICAL_IDS.syncQueue], mode);
      assert.ok(json.Resources[LOGICAL_IDS.syncDeadLetterQueue], mode);
    }
  });

  test('name the stack', () => {
    const { stack } = synth({ stackName: 'sheetlog-test' });
    assert.equal(stack.stackName, 'sheetlog-test');
  });
});

describe('authorization mode', () => {
  test('unset: jwt when an issuer is configured, else iam, as before the setting existed', () => {
    assert.equal(parseConfig({}).authMode, 'iam');
    const jwt = parseConfig({ jwtIssuer: 'https://i.example.com', jwtAudience: 'c' });
    assert.equal(jwt.authMode, 'jwt');
    assert.deepEqual(jwt.jwt, { issuer: 'https://i.example.com', audience: ['c'], accessClaim: 'sheetlog_logs' });
    assert.equal(jwt.cognito, undefined);
  });

  test('explicit modes, and the cognito defaults: invitation only, optional TOTP MFA', () => {
    assert.equal(parseConfig({ authMode: 'iam' }).authMode, 'iam');
    assert.equal(
      parseConfig({ authMode: 'jwt', jwtIssuer: 'https://i.example.com', jwtAudience: 'c' }).jwt?.issuer,
      'https://i.example.com',
    );
    const cognito = parseConfig({ authMode: 'cognito' });
    assert.equal(cognito.authMode, 'cognito');
    assert.equal(cognito.jwt, undefined);
    assert.deepEqual(cognito.cognito, { selfSignUp: false, mfa: 'optional' });
    assert.deepEqual(parseConfig({ authMode: 'cognito', cognitoSelfSignUp: 'true', cognitoMfa: 'required' }).cognito, {
      selfSignUp: true,
      mfa: 'required',
    });
  });
});

describe('invalid configuration', () => {
  test('names the key, the value and the accepted range', () => {
    assert.deepEqual(problemsOf({ snapshotInterval: 'lots' }), [
      'snapshotInterval="lots": expected a whole number (default 100)',
    ]);
    assert.match(
      problemsOf({ autoDeleteDays: '0' })[0],
      /^autoDeleteDays=0: expected a whole number from 3 to 365 \(default 3\)/,
    );
    assert.deepEqual(problemsOf({ syncWrites: 'async' }), [
      'syncWrites="async": expected one of queued, direct (default queued)',
    ]);
    assert.deepEqual(problemsOf({ inlineBodyMaxBytes: 400_000 }), [
      'inlineBodyMaxBytes=400000: expected a whole number from 0 to 350000 (default 16384)',
    ]);
    assert.match(
      problemsOf({ logRetentionDays: '10' })[0],
      /^logRetentionDays=10: expected one of 1, 3, 5, 7, 14, 30,/,
    );
    assert.match(problemsOf({ architecture: 'arm' })[0], /^architecture="arm": expected one of arm64, x86_64/);
    assert.match(problemsOf({ ephemeral: 'yes' })[0], /^ephemeral="yes": expected true or false/);
    assert.match(
      problemsOf({ stackName: '1-bad_name' })[0],
      /^stackName="1-bad_name": expected letters, digits and hyphens/,
    );
    assert.match(
      problemsOf({ corsAllowedOrigins: 'https://a.example/path' })[0],
      /corsAllowedOrigins: "https:\/\/a.example\/path" not accepted/,
    );
    assert.match(problemsOf({ alarmEmail: 'nobody' })[0], /^alarmEmail="nobody": expected an email address/);
    assert.match(problemsOf({ logLevel: 'info; rm -rf' })[0], /^logLevel=/);
    assert.match(problemsOf({ snapshotInterval: '1.5' })[0], /expected a whole number/);
  });

  test('rejects half a JWT authorizer and a non-https issuer', () => {
    assert.match(problemsOf({ jwtIssuer: 'https://issuer.example.com' })[0], /jwtIssuer is set but jwtAudience is not/);
    assert.match(problemsOf({ jwtAudience: 'client' })[0], /jwtAudience is set but jwtIssuer is not/);
    assert.match(
      problemsOf({ jwtAccessClaim: 'sheets' })[0],
      /jwtAccessClaim is set but jwtIssuer and jwtAudience are not/,
    );
    assert.match(
      problemsOf({ jwtIssuer: 'https://i.example.com', jwtAudience: 'c', jwtAccessClaim: 'a b' })[0],
      /^jwtAccessClaim="a b": expected a claim name/,
    );
    assert.match(problemsOf({ jwtIssuer: 'http://issuer.example.com', jwtAudience: 'client' })[0], /^jwtIssuer="http:/);
  });

  test('authMode: one of iam, jwt, cognito; each mode refuses the settings of another', () => {
    assert.deepEqual(problemsOf({ authMode: 'oidc' }), ['authMode="oidc": expected one of iam, jwt, cognito']);
    assert.match(problemsOf({ authMode: 'jwt' })[0], /^authMode=jwt needs jwtIssuer and jwtAudience/);
    assert.match(
      problemsOf({ authMode: 'cognito', jwtIssuer: 'https://i.example.com', jwtAudience: 'c' })[0],
      /^jwtIssuer, jwtAudience are set but authMode=cognito: the jwt\* settings apply to authMode=jwt only/,
    );
    assert.match(problemsOf({ authMode: 'iam', jwtAccessClaim: 'x' })[0], /^jwtAccessClaim is set but authMode=iam/);
    assert.match(problemsOf({ cognitoMfa: 'required' })[0], /^cognitoMfa is set but authMode=iam/);
    assert.match(
      problemsOf({ jwtIssuer: 'https://i.example.com', jwtAudience: 'c', cognitoSelfSignUp: 'true' })[0],
      /^cognitoSelfSignUp is set but authMode=jwt/,
    );
    assert.match(
      problemsOf({ authMode: 'cognito', cognitoMfa: 'sms' })[0],
      /^cognitoMfa="sms": expected one of off, optional, required/,
    );
    assert.match(problemsOf({ authMode: 'cognito', cognitoSelfSignUp: 'maybe' })[0], /^cognitoSelfSignUp="maybe"/);
  });

  test('reports every problem at once', () => {
    const problems = problemsOf({ snapshotInterval: '0', autoDeleteDays: 'x', throttlingRateLimit: '-1' });
    assert.equal(problems.length, 3);
    assert.match(
      new ConfigError(problems).message,
      /^Invalid sheetlog configuration \(CDK context\):\n {2}- snapshotInterval=0/,
    );
  });

  test('fails building the app, before any resource exists', () => {
    assert.throws(
      () => buildApp({ skipBundling: true, nag: false, context: { autoDeleteDays: '-3' }, configFile: null }),
      ConfigError,
    );
  });

  test('makes the CDK app exit non-zero with the message and no stack trace', () => {
    const run = spawnSync(process.execPath, ['--import', TSX, path.join(REPO_ROOT, 'cdk', 'bin', 'app.ts')], {
      cwd: os.tmpdir(),
      encoding: 'utf8',
      env: {
        ...process.env,
        CDK_CONTEXT_JSON: JSON.stringify({ snapshotInterval: 'often' }),
        CDK_OUTDIR: '/nonexistent',
      },
    });
    assert.equal(run.status, 1, run.stderr);
    assert.match(
      run.stderr,
      /Invalid sheetlog configuration \(CDK context\):\n {2}- snapshotInterval="often": expected a whole number/,
    );
    assert.doesNotMatch(run.stderr, /at .*\.ts:\d+/);
  });
});

describe('the settings file (sheetlog.config.json, git-ignored)', () => {
  const withFile = (text: string | undefined, context: Record<string, unknown> = {}) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sheetlog-config-'));
    const file = path.join(dir, 'sheetlog.config.json');
    if (text !== undefined) fs.writeFileSync(file, text);
    try {
      return buildApp({ skipBundling: true, nag: false, context, configFile: file }).config;
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };

  test('supplies settings the context does not set; the context wins', () => {
    const file = JSON.stringify({ snapshotInterval: 250, stackName: 'from-file', retentionMode: 'archive' });
    const fromFile = withFile(file);
    assert.equal(fromFile.snapshotInterval, 250);
    assert.equal(fromFile.stackName, 'from-file');
    assert.equal(fromFile.retentionMode, 'archive');
    const overridden = withFile(file, { stackName: 'from-cli' });
    assert.equal(overridden.stackName, 'from-cli');
    assert.equal(overridden.snapshotInterval, 250);
  });

  test('is optional, and validated like the context', () => {
    assert.deepEqual(withFile(undefined), DEFAULT_CONFIG);
    assert.throws(() => withFile('{"snapshotInterval": 1}'), /snapshotInterval=1/);
    assert.throws(() => withFile('{"snapshotIntervall": 200}'), /unknown setting "snapshotIntervall"/);
    assert.throws(() => withFile('[1, 2]'), /expected a JSON object of settings/);
    assert.throws(() => withFile('{"snapshotInterval": '), /not valid JSON/);
  });

  test('is ignored by git, so upgrades never conflict with it', () => {
    const ignored = fs.readFileSync(path.join(REPO_ROOT, '.gitignore'), 'utf8').split('\n');
    assert.ok(ignored.includes('/sheetlog.config.json'));
  });
});
