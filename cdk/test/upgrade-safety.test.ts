/**
 * Upgrade safety: an upgrade goes through a CloudFormation change set, and CloudFormation replaces
 * (creates anew, then deletes or orphans the old one) any resource whose logical id or whose
 * replacement-triggering property changes. For a table or the bucket that is data loss; for a
 * queue, lost jobs. This test pins, for every stateful resource, the logical id and those
 * properties (plus the deletion policies and the Entry stream, which the event source depends on)
 * against a reviewed fixture. The addressable resources are pinned the same way: the HTTP API and
 * its stage (a replacement changes the URL every client has) and the alarm topic (a replacement
 * drops every subscription). Their logical ids are CDK's hashed ones, pinned as they are: renaming
 * them to explicit ids would itself replace them in every existing deployment.
 *
 * If this fails after an intended change: run `npx cdk diff` against a deployed stack and check the
 * change set says no stateful resource is replaced ("requires replacement" / "may be replaced").
 * Only then copy the printed JSON into cdk/test/fixtures/stateful-resources.json and say why in the
 * commit message. Adding a resource (say the Dedupe table) also lands here, on purpose.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { type Json, synth } from './support';

const FIXTURE = path.join(__dirname, 'fixtures', 'stateful-resources.json');

/** Per stateful type: the properties whose change replaces the resource, or breaks what depends on it. */
const PINNED: Record<string, string[]> = {
  'AWS::DynamoDB::Table': [
    'TableName',
    'KeySchema',
    'AttributeDefinitions',
    'LocalSecondaryIndexes',
    'ImportSourceSpecification',
    'StreamSpecification',
    'DeletionProtectionEnabled',
  ],
  'AWS::DynamoDB::GlobalTable': ['TableName', 'KeySchema', 'AttributeDefinitions', 'LocalSecondaryIndexes'],
  'AWS::S3::Bucket': ['BucketName', 'ObjectLockEnabled'],
  'AWS::SQS::Queue': ['QueueName', 'FifoQueue'],
  'AWS::KMS::Key': ['KeySpec', 'KeyUsage'],
  'AWS::ApiGatewayV2::Api': ['ProtocolType'],
  'AWS::ApiGatewayV2::Stage': ['StageName'],
  'AWS::SNS::Topic': ['TopicName', 'FifoTopic'],
  // The Event API: a replacement changes the endpoints every open page and publisher uses.
  'AWS::AppSync::Api': [],
  'AWS::AppSync::ChannelNamespace': ['ApiId', 'Name'],
};

/** Addressable, not stateful: pinned, but they hold no data to retain. */
const ADDRESSABLE = new Set([
  'AWS::ApiGatewayV2::Api',
  'AWS::ApiGatewayV2::Stage',
  'AWS::SNS::Topic',
  'AWS::AppSync::Api',
  'AWS::AppSync::ChannelNamespace',
]);

function statefulIdentity(template: Json): Json {
  const identity: Json = {};
  for (const [id, r] of Object.entries(template.Resources as Record<string, Json>).sort(([a], [b]) =>
    a.localeCompare(b),
  )) {
    const pinned = PINNED[r.Type];
    if (pinned === undefined) continue;
    identity[id] = {
      Type: r.Type,
      DeletionPolicy: r.DeletionPolicy ?? 'Delete',
      UpdateReplacePolicy: r.UpdateReplacePolicy ?? 'Delete',
      Properties: Object.fromEntries(pinned.map((p) => [p, r.Properties?.[p] ?? null])),
    };
  }
  return identity;
}

function expected(): Json {
  const fixture = JSON.parse(fs.readFileSync(FIXTURE, 'utf8'));
  delete fixture._comment;
  return fixture;
}

function assertMatchesFixture(template: Json, what: string): void {
  const actual = statefulIdentity(template);
  assert.deepEqual(
    actual,
    expected(),
    `${what}: the stateful resources differ from ${path.relative(process.cwd(), FIXTURE)}. ` +
      'An upgrade through a change set would replace a table, the bucket, a queue, the HTTP API or the alarm topic. Read the comment at the top of ' +
      `cdk/test/upgrade-safety.test.ts before changing the fixture. Actual:\n${JSON.stringify(actual, null, 2)}`,
  );
}

describe('upgrade safety', () => {
  test('stateful resources keep their logical ids and replacement-triggering properties', () => {
    assertMatchesFixture(synth().json, 'default configuration');
  });

  test('no configuration value can replace a stateful resource', () => {
    assertMatchesFixture(
      synth({
        stackName: 'sheetlog-other',
        snapshotInterval: '7',
        segmentMaxEntries: '50',
        inlineBodyMaxBytes: '0',
        autoDeleteDays: '30',
        uploadUrlTtlSecs: '60',
        pendingTimeoutSecs: '900',
        logRetentionDays: '1',
        logLevel: 'trace',
        jwtIssuer: 'https://issuer.example.com',
        jwtAudience: 'a,b',
        corsAllowedOrigins: 'https://a.example',
        throttlingRateLimit: '1',
        throttlingBurstLimit: '1',
        alarmEmail: 'ops@example.com',
        architecture: 'x86_64',
        syncWrites: 'direct',
      }).json,
      'every knob turned',
    );
  });

  test('stateful logical ids are explicit names, not hashes of a construct path', () => {
    for (const [id, r] of Object.entries(expected())) {
      if (!ADDRESSABLE.has(r.Type)) assert.match(id, /^[A-Z][A-Za-z]+$/, id);
    }
  });

  test('the HTTP API, its stage and the alarm topic are pinned too', () => {
    const types = Object.values(expected()).map((r) => r.Type);
    for (const t of ADDRESSABLE) assert.ok(types.includes(t), t);
  });

  test('tables and the bucket survive stack deletion and failed updates', () => {
    for (const [id, r] of Object.entries(expected())) {
      if (r.Type === 'AWS::SQS::Queue') continue; // queues hold only re-creatable jobs (docs/deploy.md)
      if (ADDRESSABLE.has(r.Type)) continue;
      assert.equal(r.DeletionPolicy, 'Retain', id);
      assert.equal(r.UpdateReplacePolicy, 'Retain', id);
    }
  });
});
