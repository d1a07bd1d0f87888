/**
 * The IAM check of recorded calls (cdk/lib/iam-calls.ts, run on a real record by ./scripts/test):
 * a call its role allows passes, and taking the granting statement out of the template makes the
 * same call fail, named by action — for four functions. Also: every Resource of every role
 * resolves to a local ARN (a grant on a resource the pairing misses would silently allow nothing).
 */
import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type Counterparts,
  describeDenial,
  evaluateRecord,
  type Json,
  localPolicy,
  type RecordLine,
  resourceKey,
} from '../lib/iam-calls';
import { ARCHIVER_CRATE, CRATES } from '../lib/sheetlog-stack';
import { synth } from './support';

const ACCOUNT = '123456789012';
const REGION = 'us-east-1';

/** Every table, bucket and queue of the template named `p-<logical id>` locally. */
function counterparts(template: Json): Counterparts {
  const pairs: Counterparts = { tables: {}, buckets: {}, queues: {} };
  for (const [id, r] of Object.entries(template.Resources as Record<string, Json>)) {
    const name = `p-${id.toLowerCase()}`;
    if (r.Type === 'AWS::DynamoDB::Table') pairs.tables[id] = name;
    if (r.Type === 'AWS::S3::Bucket') pairs.buckets[id] = name;
    if (r.Type === 'AWS::SQS::Queue') pairs.queues[id] = `http://127.0.0.1:1/${ACCOUNT}/${name}`;
  }
  return pairs;
}

/** The template with `action` taken out of every statement of `binary`'s role on `resource`
 * (a resource key as the allow-lists write it); statements left with no action are dropped. */
function without(template: Json, binary: string, action: string, resource: string): Json {
  const copy = structuredClone(template);
  let removed = 0;
  for (const r of Object.values(copy.Resources as Record<string, Json>)) {
    if (r.Type !== 'AWS::IAM::Policy') continue;
    const doc = r.Properties.PolicyDocument;
    doc.Statement = doc.Statement.flatMap((s: Json) => {
      const resources = Array.isArray(s.Resource) ? s.Resource : [s.Resource];
      const actions: string[] = Array.isArray(s.Action) ? s.Action : [s.Action];
      if (!resources.some((x: unknown) => resourceKey(x) === resource) || !actions.includes(action)) return [s];
      removed++;
      const rest = actions.filter((a) => a !== action);
      return rest.length > 0 ? [{ ...s, Action: rest }] : [];
    });
  }
  assert.ok(removed > 0, `no statement grants ${action} on ${resource} to ${binary}`);
  return copy;
}

async function verdict(template: Json, binary: string, action: string, resource: string) {
  const lines: RecordLine[] = [
    { kind: 'stack', stack: 's1', context: [], counterparts: counterparts(template) },
    { kind: 'call', key: `role:${binary}:s1`, action, resource, call: 'test' },
  ];
  const [v] = await evaluateRecord(lines, () => template);
  return v;
}

describe('recorded calls are held against the roles in the template', () => {
  const { json } = synth({ retentionMode: 'archive' });
  const cases: { binary: string; action: string; grant: string; resource: string }[] = [
    {
      binary: CRATES.api.binaryName,
      action: 's3:PutObject',
      grant: 'DataBucket/payloads/*',
      resource: 'arn:aws:s3:::p-databucket/payloads/log/upload',
    },
    {
      binary: CRATES.streamRouter.binaryName,
      action: 'dynamodb:GetRecords',
      grant: 'EntryTable.StreamArn',
      resource: `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/p-entrytable/stream/2026-11-27T00:00:00.000`,
    },
    {
      binary: CRATES.snapshotWorker.binaryName,
      action: 'sqs:ReceiveMessage',
      grant: 'SnapshotQueue',
      resource: `arn:aws:sqs:${REGION}:${ACCOUNT}:p-snapshotqueue`,
    },
    {
      binary: ARCHIVER_CRATE.binaryName,
      action: 'dynamodb:BatchWriteItem',
      grant: 'EntryTable',
      resource: `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/p-entrytable`,
    },
  ];
  for (const c of cases) {
    test(`${c.binary}: ${c.action} is allowed, and refused by name once its statement is gone`, async () => {
      const allowed = await verdict(json, c.binary, c.action, c.resource);
      assert.equal(allowed.allowed, true, `${c.action} on ${c.resource}: ${allowed.reason}`);
      const denied = await verdict(without(json, c.binary, c.action, c.grant), c.binary, c.action, c.resource);
      assert.equal(denied.allowed, false);
      const message = describeDenial(denied, counterparts(json));
      assert.match(message, new RegExp(`NOT ALLOWED  ${c.binary}: ${c.action} on `));
      assert.match(message, /needs a statement like \{"Effect":"Allow","Action":"[^"]+","Resource":"[^"]*<\w+>/);
    });
  }

  test('a Query of an index needs the index grant, not the table', async () => {
    const index = `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/p-clientstable/index/byLog`;
    const api = CRATES.api.binaryName;
    assert.equal((await verdict(json, api, 'dynamodb:Query', index)).allowed, true);
    const noIndex = without(json, api, 'dynamodb:Query', 'ClientsTable/index/*');
    assert.equal((await verdict(noIndex, api, 'dynamodb:Query', index)).allowed, false);
    const table = `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/p-clientstable`;
    assert.equal((await verdict(noIndex, api, 'dynamodb:Query', table)).allowed, true);
  });

  test('a call on another stack, an unknown action or an unrecorded stack is refused', async () => {
    const api = CRATES.api.binaryName;
    const other = await verdict(json, api, 's3:PutObject', 'arn:aws:s3:::other-bucket/payloads/x');
    assert.equal(other.allowed, false);
    const bogus = await verdict(
      json,
      api,
      'dynamodb:PutItems',
      `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/p-entrytable`,
    );
    assert.equal(bogus.allowed, false);
    assert.match(bogus.reason ?? '', /simulator refused/);
    const [orphan] = await evaluateRecord(
      [{ kind: 'call', key: `role:${api}:nowhere`, action: 's3:GetObject', resource: 'arn:aws:s3:::b/k', call: 't' }],
      () => json,
    );
    assert.equal(orphan.allowed, false);
    assert.match(orphan.reason ?? '', /no stack line/);
    const keep = synth({}).json;
    const archiver = await verdict(
      keep,
      ARCHIVER_CRATE.binaryName,
      's3:GetObject',
      'arn:aws:s3:::p-databucket/payloads/x',
    );
    assert.equal(archiver.allowed, false);
    assert.match(archiver.reason ?? '', /has no function sheetlog-archiver/);
  });

  test("every Resource of every function's role resolves to a local ARN", () => {
    const cognito = synth({ authMode: 'cognito', retentionMode: 'archive' }).json;
    for (const template of [json, cognito]) {
      const pairs = { ...counterparts(template), userPool: 'us-east-1_local' };
      for (const crate of [...Object.values(CRATES), ARCHIVER_CRATE]) {
        const policy = localPolicy(template, crate.binaryName, pairs);
        for (const s of policy.Statement) {
          for (const r of s.Resource as string[]) {
            // Only the Lambda runtime writes to the function's own log group.
            const logs = [s.Action].flat().every((a: string) => a.startsWith('logs:'));
            assert.ok(logs || !r.includes('unresolved'), `${crate.binaryName}: ${r} (${s.Action})`);
          }
        }
      }
    }
  });
});
