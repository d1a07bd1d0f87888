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
 * authMode=cognito's own resources (the user pool, its app client, the catalog table) are in
 * cdk/test/fixtures/stateful-resources-cognito.json; a cognito stack must match both files together.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { type Json, synth } from './support';

const FIXTURE = path.join(__dirname, 'fixtures', 'stateful-resources.json');
/** What authMode=cognito adds to the default stack's identity (the pool, its client, the catalog). */
const COGNITO_FIXTURE = path.join(__dirname, 'fixtures', 'stateful-resources-cognito.json');

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
  // authMode=cognito. A replaced pool loses every account and password; a replaced client
  // changes the id every signed-in page and CLI refreshes its tokens with.
  'AWS::Cognito::UserPool': [
    'UserPoolName',
    'UsernameAttributes',
    'AliasAttributes',
    'UsernameConfiguration',
    'Schema',
    'DeletionProtection',
  ],
  'AWS::Cognito::UserPoolClient': ['UserPoolId', 'GenerateSecret'],
};

/** Addressable, not stateful: pinned, but they hold no data to retain. */
const ADDRESSABLE = new Set([
  'AWS::ApiGatewayV2::Api',
  'AWS::ApiGatewayV2::Stage',
  'AWS::SNS::Topic',
  'AWS::AppSync::Api',
  'AWS::AppSync::ChannelNamespace',
  'AWS::Cognito::UserPoolClient',
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

function readFixture(file: string): Json {
  const fixture = JSON.parse(fs.readFileSync(file, 'utf8'));
  delete fixture._comment;
  return fixture;
}

/** The default stack's identity, plus the cognito resources for a cognito stack. */
function expected(cognito = false): Json {
  const base = readFixture(FIXTURE);
  if (!cognito) return base;
  const all = { ...base, ...readFixture(COGNITO_FIXTURE) };
  return Object.fromEntries(Object.entries(all).sort(([a], [b]) => a.localeCompare(b)));
}

function assertMatchesFixture(template: Json, what: string, cognito = false): void {
  const actual = statefulIdentity(template);
  assert.deepEqual(
    actual,
    expected(cognito),
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

  test('authMode=cognito adds the pool, its client and the catalog, and replaces nothing else', () => {
    // Switching an existing stack to cognito (or back) keeps every other stateful resource.
    assertMatchesFixture(synth({ authMode: 'cognito' }).json, 'authMode=cognito', true);
    const cognitoOnly = readFixture(COGNITO_FIXTURE);
    assert.deepEqual(Object.keys(cognitoOnly).sort(), ['CatalogTable', 'UserPool', 'UserPoolClient']);
    for (const id of Object.keys(cognitoOnly)) assert.equal(readFixture(FIXTURE)[id], undefined, id);
  });

  test('no cognito setting can replace the pool, its client or the catalog', () => {
    assertMatchesFixture(
      synth({
        authMode: 'cognito',
        cognitoSelfSignUp: 'true',
        cognitoMfa: 'required',
        stackName: 'sheetlog-other',
        corsAllowedOrigins: 'https://a.example',
        architecture: 'x86_64',
      }).json,
      'every cognito knob turned',
      true,
    );
    assertMatchesFixture(synth({ authMode: 'cognito', cognitoMfa: 'off' }).json, 'cognitoMfa=off', true);
  });

  test('stateful logical ids are explicit names, not hashes of a construct path', () => {
    for (const [id, r] of Object.entries(expected(true))) {
      if (!ADDRESSABLE.has(r.Type)) assert.match(id, /^[A-Z][A-Za-z]+$/, id);
    }
  });

  test('the HTTP API, its stage and the alarm topic are pinned too', () => {
    const types = Object.values(expected(true)).map((r) => r.Type);
    for (const t of ADDRESSABLE) assert.ok(types.includes(t), t);
  });

  test('tables, the bucket and the user pool survive stack deletion and failed updates', () => {
    for (const [id, r] of Object.entries(expected(true))) {
      if (r.Type === 'AWS::SQS::Queue') continue; // queues hold only re-creatable jobs (docs/deploy.md)
      if (ADDRESSABLE.has(r.Type)) continue;
      assert.equal(r.DeletionPolicy, 'Retain', id);
      assert.equal(r.UpdateReplacePolicy, 'Retain', id);
    }
  });

  // scripts/deploy asks scripts/lib/auth_guard.py how the stack is deployed; its tests run a
  // deployed stack on moto's CloudFormation. With the project venv (moto), as ./scripts/test has it.
  const venvPython = path.resolve(__dirname, '..', '..', '.venv', 'bin', 'python');
  const hasMoto =
    fs.existsSync(venvPython) && spawnSync(venvPython, ['-c', 'import moto, boto3'], { stdio: 'ignore' }).status === 0;
  test("scripts/deploy keeps a deployed stack's authorization mode unless one is set explicitly", {
    skip: hasMoto ? false : 'the project venv with moto is not installed (./scripts/test installs it)',
  }, () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_')));
    const run = spawnSync(venvPython, ['-m', 'unittest', 'test_auth_guard'], {
      cwd: path.resolve(__dirname, '..', '..', 'scripts', 'lib'),
      encoding: 'utf8',
      env: {
        ...env,
        SHEETLOG_CONFIG: path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sheetlog-guard-')), 'none.json'),
      },
    });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
    assert.match(run.stderr, /Ran \d+ tests/);
    assert.doesNotMatch(run.stderr, /skipped/);
  });
});
