/**
 * The stack's behaviour, asserted on the synthesized template by properties (resources are found
 * by type, tag or property; stateful resources by their fixed logical ids, which are part of the
 * contract and pinned by upgrade-safety.test.ts).
 */
import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { ConfigError, parseConfig } from '../lib/config';
import {
  ARCHIVER_CRATE,
  AUTO_DELETE_TAG,
  CRATES,
  ENV,
  LOGICAL_IDS,
  OPEN_ROUTES,
  onSubscribeCode,
  SheetlogStack,
  TIMINGS,
} from '../lib/sheetlog-stack';
import { loadStreamFilterPatterns } from '../lib/stream-filter';
import { stubFunctionsDir } from '../lib/stub-crates';
import { channelCtx, grantCases, runTemplateHandler } from './appsync/run';
import { assertKeptTable, functionByBinary, type Json, onlyResource, resourcesOfType, synth } from './support';

const API = CRATES.api.binaryName;
const ROUTER = CRATES.streamRouter.binaryName;
const WORKER = CRATES.snapshotWorker.binaryName;
const WRITER = CRATES.syncWriter.binaryName;

describe('tables', () => {
  const { json, template } = synth();

  const expectedKeys: Record<string, [string, string][]> = {
    [LOGICAL_IDS.entryTable]: [
      ['s', 'B'],
      ['n', 'N'],
    ],
    [LOGICAL_IDS.segmentTable]: [
      ['l', 'B'],
      ['n', 'N'],
    ],
    [LOGICAL_IDS.pendingSnapshotsTable]: [
      ['l', 'B'],
      ['n', 'B'],
    ],
    [LOGICAL_IDS.dedupeTable]: [['p', 'B']],
    [LOGICAL_IDS.clientsTable]: [
      ['k', 'B'],
      ['m', 'N'],
    ],
  };

  test('keys and attribute types are exactly those of docs/storage.md', () => {
    const tables = resourcesOfType(json, 'AWS::DynamoDB::Table');
    assert.deepEqual(tables.map(([id]) => id).sort(), Object.keys(expectedKeys).sort());
    for (const [id, keys] of Object.entries(expectedKeys)) {
      const p = json.Resources[id].Properties;
      assert.deepEqual(
        p.KeySchema,
        keys.map(([name], i) => ({ AttributeName: name, KeyType: i === 0 ? 'HASH' : 'RANGE' })),
        id,
      );
      // The Clients table's byLog index adds its key attribute (docs/storage.md, "Clients table").
      const indexed: [string, string][] = id === LOGICAL_IDS.clientsTable ? [['i', 'B']] : [];
      assert.deepEqual(
        p.AttributeDefinitions,
        [...keys, ...indexed].map(([name, type]) => ({ AttributeName: name, AttributeType: type })),
        id,
      );
      if (id === LOGICAL_IDS.clientsTable) {
        assert.deepEqual(p.GlobalSecondaryIndexes, [
          {
            IndexName: 'byLog',
            KeySchema: [{ AttributeName: 'i', KeyType: 'HASH' }],
            Projection: { ProjectionType: 'KEYS_ONLY' },
          },
        ]);
      } else {
        assert.equal(p.GlobalSecondaryIndexes, undefined, `${id} has no indexes`);
      }
      assert.equal(p.TimeToLiveSpecification, undefined, `${id} has no TTL yet`);
    }
  });

  test('every table is on-demand, recoverable, encrypted, deletion-protected and retained', () => {
    for (const id of Object.keys(expectedKeys)) assertKeptTable(template, json.Resources[id].Properties.KeySchema);
  });

  test('only the Entry table has a stream, with new images', () => {
    assert.deepEqual(json.Resources[LOGICAL_IDS.entryTable].Properties.StreamSpecification, {
      StreamViewType: 'NEW_IMAGE',
    });
    assert.equal(json.Resources[LOGICAL_IDS.segmentTable].Properties.StreamSpecification, undefined);
    assert.equal(json.Resources[LOGICAL_IDS.pendingSnapshotsTable].Properties.StreamSpecification, undefined);
    assert.equal(json.Resources[LOGICAL_IDS.dedupeTable].Properties.StreamSpecification, undefined);
  });
});

describe('bucket', () => {
  const { json, template } = synth();
  const bucket = json.Resources[LOGICAL_IDS.bucket];

  test('blocks public access, encrypts, and is retained', () => {
    assert.equal(bucket.Type, 'AWS::S3::Bucket');
    assert.deepEqual(bucket.Properties.PublicAccessBlockConfiguration, {
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
    assert.deepEqual(bucket.Properties.BucketEncryption, {
      ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
    });
    assert.equal(bucket.DeletionPolicy, 'Retain');
    assert.equal(bucket.UpdateReplacePolicy, 'Retain');
  });

  test('its policy denies every request that is not over TLS', () => {
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      Bucket: { Ref: LOGICAL_IDS.bucket },
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: 'Deny',
            Principal: { AWS: '*' },
            Action: 's3:*',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          }),
        ]),
      },
    });
  });

  test('expires objects still tagged for auto-delete after 3 days and aborts stale multipart uploads', () => {
    const rules: Json[] = bucket.Properties.LifecycleConfiguration.Rules;
    const tagged = rules.filter((r) => r.TagFilters !== undefined);
    assert.deepEqual(tagged, [
      {
        Id: 'expire-auto-delete-tagged',
        Status: 'Enabled',
        TagFilters: [{ Key: AUTO_DELETE_TAG.key, Value: AUTO_DELETE_TAG.value }],
        ExpirationInDays: 3,
      },
    ]);
    assert.deepEqual(AUTO_DELETE_TAG, { key: 'sheetlog-auto-delete', value: 'true' });
    const abort = rules.filter((r) => r.AbortIncompleteMultipartUpload !== undefined);
    assert.equal(abort.length, 1);
    assert.equal(abort[0].Status, 'Enabled');
    assert.ok(abort[0].AbortIncompleteMultipartUpload.DaysAfterInitiation >= 1);
    assert.equal(abort[0].TagFilters, undefined, 'S3 rejects an abort rule filtered by tags');
    assert.equal(abort[0].Prefix, undefined, 'uploads anywhere in the bucket are aborted');
    assert.ok(
      rules.every((r) => r.ExpirationInDays === undefined || r.TagFilters !== undefined),
      'nothing untagged ever expires',
    );
  });

  test("CORS allows only the API's own origin (the web page) unless origins are configured", () => {
    const rules = bucket.Properties.CorsConfiguration.CorsRules;
    assert.equal(rules.length, 1);
    assert.deepEqual(rules[0].AllowedOrigins, [
      { 'Fn::GetAtt': [onlyResource(json, 'AWS::ApiGatewayV2::Api')[0], 'ApiEndpoint'] },
    ]);
    assert.deepEqual([...rules[0].AllowedMethods].sort(), ['GET', 'HEAD', 'PUT']);
  });

  test('CORS lets configured origins PUT and GET through presigned URLs', () => {
    const [, configured] = onlyResource(synth({ corsAllowedOrigins: '*' }).json, 'AWS::S3::Bucket');
    const [rule] = configured.Properties.CorsConfiguration.CorsRules;
    assert.deepEqual([...rule.AllowedMethods].sort(), ['GET', 'HEAD', 'PUT']);
    assert.deepEqual(rule.AllowedOrigins, ['*']);
    assert.deepEqual(rule.AllowedHeaders, ['*'], 'a presigned PUT sends Content-Type and x-amz-tagging');
    assert.ok(rule.ExposedHeaders.includes('ETag'));
  });
});

describe('queues', () => {
  const { json, template } = synth();
  const q = (id: string) => json.Resources[id];

  test('the snapshot queue is standard, keeps messages 14 days and redrives to its DLQ', () => {
    const p = q(LOGICAL_IDS.snapshotQueue).Properties;
    assert.equal(p.FifoQueue, undefined);
    assert.equal(p.MessageRetentionPeriod, 14 * 24 * 3600);
    assert.deepEqual(p.RedrivePolicy, {
      deadLetterTargetArn: { 'Fn::GetAtt': [LOGICAL_IDS.snapshotDeadLetterQueue, 'Arn'] },
      maxReceiveCount: TIMINGS.snapshotMaxReceiveCount,
    });
  });

  test('the snapshot visibility timeout covers the worker: at least six times its timeout', () => {
    const visibility = q(LOGICAL_IDS.snapshotQueue).Properties.VisibilityTimeout;
    const [, worker] = functionByBinary(json, WORKER);
    assert.ok(
      visibility >= 6 * worker.Properties.Timeout,
      `visibility ${visibility}s < 6 x worker timeout ${worker.Properties.Timeout}s`,
    );
    assert.ok(visibility <= 12 * 3600, 'SQS caps visibility at 12 hours');
    // A crashed invocation's job reappears after the visibility timeout; by then its claim must
    // have expired, or the redelivery could only defer again.
    const pending = Number(worker.Properties.Environment.Variables[ENV.pendingTimeoutSecs]);
    assert.ok(visibility >= pending, `visibility ${visibility}s < pending timeout ${pending}s`);
  });

  test('the sync queue is FIFO with the API setting deduplication ids, and redrives to a FIFO DLQ', () => {
    template.hasResourceProperties('AWS::SQS::Queue', {
      FifoQueue: true,
      ContentBasedDeduplication: false,
      RedrivePolicy: {
        deadLetterTargetArn: { 'Fn::GetAtt': [LOGICAL_IDS.syncDeadLetterQueue, 'Arn'] },
        maxReceiveCount: 5,
      },
    });
    assert.equal(q(LOGICAL_IDS.syncQueue).Properties.FifoQueue, true);
    // A FIFO queue's dead-letter queue must be FIFO too.
    assert.equal(q(LOGICAL_IDS.syncDeadLetterQueue).Properties.FifoQueue, true);
    assert.equal(q(LOGICAL_IDS.syncDeadLetterQueue).Properties.RedrivePolicy, undefined);
    // No QueueName: CloudFormation generates one, with the `.fifo` suffix FIFO queues need.
    assert.equal(q(LOGICAL_IDS.syncQueue).Properties.QueueName, undefined);
  });

  test('the sync visibility timeout is at least six times the writer timeout', () => {
    const visibility = q(LOGICAL_IDS.syncQueue).Properties.VisibilityTimeout;
    const [, writer] = functionByBinary(json, WRITER);
    assert.ok(
      visibility >= 6 * writer.Properties.Timeout,
      `visibility ${visibility}s < 6 x writer timeout ${writer.Properties.Timeout}s`,
    );
    assert.equal(visibility, TIMINGS.syncVisibilityTimeout.toSeconds());
  });

  test('every queue is encrypted, TLS-only and keeps messages 14 days', () => {
    const queues = resourcesOfType(json, 'AWS::SQS::Queue');
    assert.deepEqual(
      queues.map(([id]) => id).sort(),
      [
        LOGICAL_IDS.snapshotDeadLetterQueue,
        LOGICAL_IDS.snapshotQueue,
        LOGICAL_IDS.streamRouterFailureQueue,
        LOGICAL_IDS.syncDeadLetterQueue,
        LOGICAL_IDS.syncQueue,
      ].sort(),
    );
    for (const [id, queue] of queues) {
      assert.equal(queue.Properties.SqsManagedSseEnabled, true, id);
      assert.equal(queue.Properties.MessageRetentionPeriod, 1_209_600, id);
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: id }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          ]),
        },
      });
    }
  });
});

describe('functions', () => {
  const { json, template } = synth();

  test('every function is a cargo-lambda build on ARM64 provided.al2023 with the house defaults', () => {
    const ours = resourcesOfType(json, 'AWS::Lambda::Function');
    assert.equal(ours.length, 4);
    for (const binary of [API, ROUTER, WORKER, WRITER]) {
      const [, fn] = functionByBinary(json, binary);
      const p = fn.Properties;
      assert.equal(p.Runtime, 'provided.al2023', binary);
      assert.deepEqual(p.Architectures, ['arm64'], binary);
      assert.equal(p.Handler, 'bootstrap', binary);
      assert.equal(p.LoggingConfig.LogFormat, 'JSON', binary);
      assert.deepEqual(p.TracingConfig, { Mode: 'Active' }, binary);
      assert.ok(p.Timeout > 3 && p.MemorySize >= 256, binary);
      // The API's memory buys the CPU a 256 MiB commit needs within its timeout (bench lambda).
      if (binary === API) assert.equal(p.MemorySize, 1024);
      assert.equal(p.Environment.Variables.RUST_LOG, 'info', binary);
      const logGroup = json.Resources[p.LoggingConfig.LogGroup.Ref];
      assert.equal(logGroup.Type, 'AWS::Logs::LogGroup');
      assert.equal(logGroup.Properties.RetentionInDays, 30, binary);
    }
  });

  test('the x86_64 fallback builds and deploys every function for x86_64', () => {
    const x86 = synth({ architecture: 'x86_64' }).json;
    for (const binary of [API, ROUTER, WORKER, WRITER]) {
      assert.deepEqual(functionByBinary(x86, binary)[1].Properties.Architectures, ['x86_64']);
    }
  });

  test('the API function stays within the HTTP API integration timeout', () => {
    assert.ok(functionByBinary(json, API)[1].Properties.Timeout < 30);
  });

  test('each function gets exactly the environment it needs, with the documented defaults', () => {
    // The publishers' Event API settings are checked on their own (their values are references).
    const pokes = ['SHEETLOG_EVENTS_HTTP_URL', 'SHEETLOG_EVENTS_REALTIME_URL', 'SHEETLOG_EVENTS_NAMESPACE'];
    const env = (binary: string) => {
      const all = { ...functionByBinary(json, binary)[1].Properties.Environment.Variables } as Json;
      for (const k of pokes) delete all[k];
      return all;
    };
    const pokeEnv = (binary: string) => functionByBinary(json, binary)[1].Properties.Environment.Variables as Json;
    for (const binary of [API, WRITER]) {
      assert.equal(pokeEnv(binary).SHEETLOG_EVENTS_NAMESPACE, 'sheets');
      const http = JSON.stringify(pokeEnv(binary).SHEETLOG_EVENTS_HTTP_URL);
      assert.match(http, /https:\/\/.*Dns\.Http.*\/event"/);
    }
    assert.match(
      JSON.stringify(pokeEnv(API).SHEETLOG_EVENTS_REALTIME_URL),
      /wss:\/\/.*Dns\.Realtime.*\/event\/realtime"/,
    );
    assert.equal(pokeEnv(WRITER).SHEETLOG_EVENTS_REALTIME_URL, undefined);
    for (const binary of [ROUTER, WORKER]) assert.equal(pokeEnv(binary).SHEETLOG_EVENTS_HTTP_URL, undefined);
    assert.deepEqual(env(API), {
      RUST_LOG: 'info',
      SHEETLOG_ENTRY_TABLE: { Ref: LOGICAL_IDS.entryTable },
      SHEETLOG_SEGMENT_TABLE: { Ref: LOGICAL_IDS.segmentTable },
      SHEETLOG_DEDUPE_TABLE: { Ref: LOGICAL_IDS.dedupeTable },
      SHEETLOG_CLIENTS_TABLE: { Ref: LOGICAL_IDS.clientsTable },
      // Deleting a log removes its Pending Snapshots items too.
      SHEETLOG_PENDING_TABLE: { Ref: LOGICAL_IDS.pendingSnapshotsTable },
      SHEETLOG_BUCKET: { Ref: LOGICAL_IDS.bucket },
      SHEETLOG_INLINE_BODY_MAX_BYTES: '16384',
      SHEETLOG_SNAPSHOT_INTERVAL: '100',
      SHEETLOG_SEGMENT_MAX_ENTRIES: '10000',
      SHEETLOG_DEDUPE_KEYS_PER_MONTH: '1000000',
      SHEETLOG_UPLOAD_URL_TTL_SECS: '900',
      SHEETLOG_MAX_UPLOAD_BYTES: '268435456',
      SHEETLOG_SYNC_QUEUE_URL: { Ref: LOGICAL_IDS.syncQueue },
      SHEETLOG_SYNC_WRITES: 'queued',
    });
    assert.deepEqual(env(ROUTER), {
      RUST_LOG: 'info',
      SHEETLOG_SNAPSHOT_QUEUE_URL: { Ref: LOGICAL_IDS.snapshotQueue },
      SHEETLOG_BUCKET: { Ref: LOGICAL_IDS.bucket },
    });
    assert.deepEqual(env(WORKER), {
      RUST_LOG: 'info',
      SHEETLOG_ENTRY_TABLE: { Ref: LOGICAL_IDS.entryTable },
      SHEETLOG_SEGMENT_TABLE: { Ref: LOGICAL_IDS.segmentTable },
      SHEETLOG_PENDING_TABLE: { Ref: LOGICAL_IDS.pendingSnapshotsTable },
      // The tombstone: a deleted log's snapshot is not built.
      SHEETLOG_CLIENTS_TABLE: { Ref: LOGICAL_IDS.clientsTable },
      SHEETLOG_BUCKET: { Ref: LOGICAL_IDS.bucket },
      SHEETLOG_SNAPSHOT_QUEUE_URL: { Ref: LOGICAL_IDS.snapshotQueue },
      // Not the snapshot trigger's settings: the worker builds what it is sent.
      SHEETLOG_PENDING_TIMEOUT_SECS: '120',
    });
    // The writer appends pushes and runs the snapshot trigger after them, as the direct push does.
    assert.deepEqual(env(WRITER), {
      RUST_LOG: 'info',
      SHEETLOG_ENTRY_TABLE: { Ref: LOGICAL_IDS.entryTable },
      SHEETLOG_SEGMENT_TABLE: { Ref: LOGICAL_IDS.segmentTable },
      SHEETLOG_CLIENTS_TABLE: { Ref: LOGICAL_IDS.clientsTable },
      SHEETLOG_BUCKET: { Ref: LOGICAL_IDS.bucket },
      SHEETLOG_INLINE_BODY_MAX_BYTES: '16384',
      SHEETLOG_SNAPSHOT_INTERVAL: '100',
      SHEETLOG_SEGMENT_MAX_ENTRIES: '10000',
    });
  });

  test('the writer and the API share the appends settings, so a queued push lands like a direct one', () => {
    const { json } = synth({ snapshotInterval: '40', segmentMaxEntries: '900', inlineBodyMaxBytes: '2048' });
    const env = (binary: string) => functionByBinary(json, binary)[1].Properties.Environment.Variables;
    for (const name of [ENV.snapshotInterval, ENV.segmentMaxEntries, ENV.inlineBodyMaxBytes]) {
      assert.equal(env(WRITER)[name], env(API)[name], name);
    }
  });

  // The exact actions of each role: cdk/test/iam.test.ts, against functions/<crate>/iam-allow-list.json.

  test('no managed policies: each role is trusted by Lambda only and writes only its own log group', () => {
    const roles = resourcesOfType(json, 'AWS::IAM::Role');
    assert.equal(roles.length, 4);
    for (const [id, role] of roles) {
      assert.equal(role.Properties.ManagedPolicyArns, undefined, id);
      assert.deepEqual(role.Properties.AssumeRolePolicyDocument.Statement, [
        { Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' } },
      ]);
    }
    template.resourceCountIs('AWS::IAM::ManagedPolicy', 0);
  });
});

describe('event sources', () => {
  const { json } = synth();

  test('the stream router reads the Entry stream through the shared filter, with bounded retries', () => {
    const [, mapping] = onlyResource(
      json,
      'AWS::Lambda::EventSourceMapping',
      (m) => m.Properties.StartingPosition !== undefined,
    );
    const p = mapping.Properties;
    assert.deepEqual(p.EventSourceArn, { 'Fn::GetAtt': [LOGICAL_IDS.entryTable, 'StreamArn'] });
    assert.deepEqual(p.FunctionName, { Ref: functionByBinary(json, ROUTER)[0] });
    assert.equal(p.StartingPosition, 'TRIM_HORIZON');
    assert.deepEqual(p.FunctionResponseTypes, ['ReportBatchItemFailures']);
    assert.equal(p.BisectBatchOnFunctionError, true);
    assert.equal(p.MaximumRetryAttempts, TIMINGS.streamRetryAttempts);
    assert.ok(p.MaximumRetryAttempts > 0 && p.MaximumRetryAttempts <= 10_000, "within Lambda's range");
    assert.ok(
      p.MaximumRecordAgeInSeconds >= 22 * 3600 && p.MaximumRecordAgeInSeconds < 24 * 3600,
      'retries for most of the 24 h the stream keeps a record, and fails over before it is trimmed',
    );
    assert.deepEqual(p.DestinationConfig, {
      OnFailure: { Destination: { 'Fn::GetAtt': [LOGICAL_IDS.streamRouterFailureQueue, 'Arn'] } },
    });
  });

  test('the filter is the file functions/core/src/aws/stream_filter.json, pattern for pattern', () => {
    const [, mapping] = onlyResource(
      json,
      'AWS::Lambda::EventSourceMapping',
      (m) => m.Properties.StartingPosition !== undefined,
    );
    const deployed = mapping.Properties.FilterCriteria.Filters.map((f: Json) => JSON.parse(f.Pattern));
    assert.deepEqual(deployed, loadStreamFilterPatterns());
    assert.ok(deployed.length >= 1);
  });

  test('the stack follows the filter file rather than a copy of it', () => {
    const custom = [{ eventName: ['INSERT'], dynamodb: { NewImage: { t: { N: ['42'] } } } }];
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const config = parseConfig({});
    const other = new SheetlogStack(app, 'FilterProbe', {
      config,
      functionsDir: stubFunctionsDir(),
      streamFilterPatterns: custom,
    });
    Template.fromStack(other).hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FilterCriteria: { Filters: [{ Pattern: JSON.stringify(custom[0]) }] },
    });
  });

  test('the API and the worker have /tmp room for the largest upload they spool, the API for an export', () => {
    const storage = (json: Json, binary: string) => functionByBinary(json, binary)[1].Properties.EphemeralStorage?.Size;
    const byDefault = synth().json; // 256 MiB uploads
    // The API also writes an XLSX export's XML and file there: 540 MB for 10M cells.
    assert.equal(storage(byDefault, API), 1024);
    assert.equal(storage(byDefault, WORKER), 512);
    const big = synth({ maxUploadBytes: String(2 * 1024 ** 3) }).json;
    assert.equal(storage(big, API), 2048 + 256);
    assert.equal(storage(big, WORKER), 2048 + 256);
    assert.equal(storage(synth({ maxUploadBytes: String(5 * 1024 ** 3) }).json, API), 5120 + 256);
  });

  test("only the snapshot worker may re-send its own work past Lambda's recursive-loop limit", () => {
    const { json } = synth();
    assert.equal(functionByBinary(json, WORKER)[1].Properties.RecursiveLoop, 'Allow');
    for (const binary of [API, ROUTER, WRITER]) {
      assert.notEqual(functionByBinary(json, binary)[1].Properties.RecursiveLoop, 'Allow', binary);
    }
  });

  test('the snapshot worker consumes the snapshot queue one job at a time, bounded, with batch item failures', () => {
    const [, mapping] = onlyResource(json, 'AWS::Lambda::EventSourceMapping', (m) =>
      JSON.stringify(m.Properties.EventSourceArn).includes(LOGICAL_IDS.snapshotQueue),
    );
    const p = mapping.Properties;
    assert.deepEqual(p.EventSourceArn, { 'Fn::GetAtt': [LOGICAL_IDS.snapshotQueue, 'Arn'] });
    assert.deepEqual(p.FunctionName, { Ref: functionByBinary(json, WORKER)[0] });
    assert.equal(p.BatchSize, 1);
    assert.deepEqual(p.FunctionResponseTypes, ['ReportBatchItemFailures']);
    // A burst of snapshots across many logs runs at most this many jobs at once.
    assert.deepEqual(p.ScalingConfig, { MaximumConcurrency: TIMINGS.snapshotWorkerMaxConcurrency });
    assert.ok(TIMINGS.snapshotWorkerMaxConcurrency >= 2, "Lambda's minimum for an SQS source");
  });

  test('the sync writer consumes the sync queue ten pushes at a time, reporting the failed ones', () => {
    const [, writer] = functionByBinary(json, WRITER);
    const template = Template.fromJSON(json);
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [LOGICAL_IDS.syncQueue, 'Arn'] },
      FunctionName: { Ref: functionByBinary(json, WRITER)[0] },
      BatchSize: 10,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    // No batching window: a FIFO source does not allow one, and a push should not wait for company.
    const [, mapping] = onlyResource(json, 'AWS::Lambda::EventSourceMapping', (m) =>
      JSON.stringify(m.Properties.EventSourceArn).includes(LOGICAL_IDS.syncQueue),
    );
    assert.equal(mapping.Properties.MaximumBatchingWindowInSeconds, undefined);
    assert.equal(writer.Properties.Timeout, TIMINGS.syncWriterTimeout.toSeconds());
  });

  test('only the API sends to the sync queue, and only the writer reads large pushes', () => {
    const statements = resourcesOfType(json, 'AWS::IAM::Policy').flatMap(([, p]) =>
      (p.Properties.PolicyDocument.Statement as Json[]).map((s) => ({ roles: p.Properties.Roles, s })),
    );
    const roleOf = (binary: string) => functionByBinary(json, binary)[1].Properties.Role['Fn::GetAtt'][0];
    const senders = statements
      .filter(({ s }) => [s.Action].flat().includes('sqs:SendMessage'))
      .filter(({ s }) => JSON.stringify(s.Resource).includes(LOGICAL_IDS.syncQueue))
      .flatMap(({ roles }) => roles.map((r: Json) => r.Ref));
    assert.deepEqual(senders, [roleOf(API)]);
    const pushReaders = statements
      .filter(({ s }) => [s.Action].flat().includes('s3:GetObject'))
      .filter(({ s }) => JSON.stringify(s.Resource).includes('/pushes/*'))
      .flatMap(({ roles }) => roles.map((r: Json) => r.Ref));
    assert.deepEqual(pushReaders, [roleOf(WRITER)]);
  });
});

describe('HTTP API', () => {
  /** The `$default` route (every data route), and the web page's routes by route key. */
  const routes = (json: Json) => {
    const all = resourcesOfType(json, 'AWS::ApiGatewayV2::Route').map(([, r]) => r);
    const byKey = Object.fromEntries(all.map((r) => [r.Properties.RouteKey, r]));
    assert.equal(all.length, 1 + OPEN_ROUTES.length, 'the $default route and one per open route');
    return { route: byKey.$default, byKey };
  };

  test('routes everything to the API function with IAM authorization by default', () => {
    const { json, template } = synth();
    const { route } = routes(json);
    assert.equal(route.Properties.RouteKey, '$default');
    assert.equal(route.Properties.AuthorizationType, 'AWS_IAM');
    template.resourceCountIs('AWS::ApiGatewayV2::Authorizer', 0);
    template.hasResourceProperties('AWS::ApiGatewayV2::Integration', {
      IntegrationType: 'AWS_PROXY',
      PayloadFormatVersion: '2.0',
      IntegrationUri: { 'Fn::GetAtt': [functionByBinary(json, API)[0], 'Arn'] },
    });
    template.hasOutput('ApiAuthorization', { Value: 'IAM' });
  });

  test('uses a JWT authorizer with the issuer and audience from context when both are set', () => {
    const { json, template } = synth({
      jwtIssuer: 'https://issuer.example.com/pool',
      jwtAudience: 'web-client,cli-client',
    });
    const [authorizerId, authorizer] = onlyResource(json, 'AWS::ApiGatewayV2::Authorizer');
    assert.equal(authorizer.Properties.AuthorizerType, 'JWT');
    assert.deepEqual(authorizer.Properties.JwtConfiguration, {
      Issuer: 'https://issuer.example.com/pool',
      Audience: ['web-client', 'cli-client'],
    });
    assert.deepEqual(authorizer.Properties.IdentitySource, ['$request.header.Authorization']);
    const { route } = routes(json);
    assert.equal(route.Properties.AuthorizationType, 'JWT');
    assert.deepEqual(route.Properties.AuthorizerId, { Ref: authorizerId });
    template.hasOutput('ApiAuthorization', { Value: 'JWT' });
    const [, api] = functionByBinary(json, 'sheetlog-api');
    assert.equal(api.Properties.Environment.Variables.SHEETLOG_ACCESS_CLAIM, 'sheetlog_logs');
  });

  test('serves the page, its sign-in settings, /health and /openapi.json without an authorizer, to the same function', () => {
    for (const context of [
      {},
      { jwtIssuer: 'https://issuer.example.com/pool', jwtAudience: 'web' },
      { authMode: 'cognito' },
    ]) {
      const { json } = synth(context);
      const { byKey } = routes(json);
      const open = Object.keys(byKey).filter((k) => byKey[k].Properties.AuthorizationType === 'NONE');
      assert.deepEqual(open.sort(), OPEN_ROUTES.map((r) => `${r.method} ${r.path}`).sort());
      for (const key of [
        'GET /',
        'GET /sheets/{logId}',
        'GET /app/{proxy+}',
        'GET /config.json',
        'GET /health',
        'GET /openapi.json',
      ]) {
        assert.ok(byKey[key], `${key} is routed`);
        assert.equal(byKey[key].Properties.AuthorizationType, 'NONE');
        const target = byKey[key].Properties.Target['Fn::Join'][1][1].Ref;
        const integration = json.Resources[target];
        assert.deepEqual(integration.Properties.IntegrationUri, {
          'Fn::GetAtt': [functionByBinary(json, API)[0], 'Arn'],
        });
      }
    }
  });

  test('names the per-log access claim under JWT only, as configured', () => {
    const env = (context: Record<string, string>) =>
      functionByBinary(synth(context).json, 'sheetlog-api')[1].Properties.Environment.Variables;
    assert.equal(env({}).SHEETLOG_ACCESS_CLAIM, undefined, 'IAM: every caller may use every log');
    const jwt = { jwtIssuer: 'https://issuer.example.com/pool', jwtAudience: 'web' };
    assert.equal(env({ ...jwt, jwtAccessClaim: 'app_sheets' }).SHEETLOG_ACCESS_CLAIM, 'app_sheets');
  });

  test('throttles the default stage and logs access', () => {
    const { json } = synth();
    const [, stage] = onlyResource(json, 'AWS::ApiGatewayV2::Stage');
    assert.equal(stage.Properties.StageName, '$default');
    assert.equal(stage.Properties.AutoDeploy, true);
    assert.deepEqual(stage.Properties.DefaultRouteSettings, { ThrottlingRateLimit: 1000, ThrottlingBurstLimit: 2000 });
    const format = JSON.parse(stage.Properties.AccessLogSettings.Format);
    assert.equal(format.requestId, '$context.requestId');
    const logGroup = json.Resources[stage.Properties.AccessLogSettings.DestinationArn['Fn::GetAtt'][0]];
    assert.equal(logGroup.Properties.RetentionInDays, 30);
  });

  test('answers no CORS preflight unless origins are configured', () => {
    const [, api] = onlyResource(synth().json, 'AWS::ApiGatewayV2::Api');
    assert.equal(api.Properties.CorsConfiguration, undefined);
  });

  test('answers CORS preflights for configured browser origins', () => {
    const { json } = synth({ corsAllowedOrigins: 'https://sheets.example.com' });
    const [, api] = onlyResource(json, 'AWS::ApiGatewayV2::Api');
    assert.deepEqual(api.Properties.CorsConfiguration.AllowOrigins, ['https://sheets.example.com']);
    assert.ok(api.Properties.CorsConfiguration.AllowHeaders.includes('authorization'));
    const [, bucket] = onlyResource(json, 'AWS::S3::Bucket');
    assert.deepEqual(bucket.Properties.CorsConfiguration.CorsRules[0].AllowedOrigins, ['https://sheets.example.com']);
  });
});

describe('alarms', () => {
  const { json } = synth();
  const alarms = resourcesOfType(json, 'AWS::CloudWatch::Alarm').map(([, a]) => a.Properties);
  const [topicId] = onlyResource(json, 'AWS::SNS::Topic');

  const find = (metric: string, dimension: Json) =>
    alarms.filter(
      (a) =>
        a.MetricName === metric &&
        (a.Dimensions ?? []).some((d: Json) => JSON.stringify(d.Value) === JSON.stringify(dimension)),
    );

  test('fire on any message in a dead-letter queue', () => {
    for (const id of [
      LOGICAL_IDS.snapshotDeadLetterQueue,
      LOGICAL_IDS.streamRouterFailureQueue,
      LOGICAL_IDS.syncDeadLetterQueue,
    ]) {
      const [alarm, ...rest] = find('ApproximateNumberOfMessagesVisible', { 'Fn::GetAtt': [id, 'QueueName'] });
      assert.ok(alarm, `no depth alarm on ${id}`);
      assert.equal(rest.length, 0);
      assert.equal(alarm.Namespace, 'AWS/SQS');
      assert.equal(alarm.Threshold, 1);
      assert.equal(alarm.ComparisonOperator, 'GreaterThanOrEqualToThreshold');
    }
  });

  test('fire when the stream router falls behind the Entry stream', () => {
    const [alarm] = find('IteratorAge', { Ref: functionByBinary(json, ROUTER)[0] });
    assert.ok(alarm);
    assert.equal(alarm.Namespace, 'AWS/Lambda');
    assert.equal(alarm.Statistic, 'Maximum');
    assert.ok(alarm.Threshold > 0 && alarm.Threshold < 24 * 3600 * 1000);
  });

  test('fire on errors and throttles of every function', () => {
    for (const binary of [API, ROUTER, WORKER, WRITER]) {
      for (const metric of ['Errors', 'Throttles']) {
        const [alarm, ...rest] = find(metric, { Ref: functionByBinary(json, binary)[0] });
        assert.ok(alarm, `no ${metric} alarm for ${binary}`);
        assert.equal(rest.length, 0);
        assert.equal(alarm.Threshold, 1);
      }
    }
  });

  const byId = (id: string) => {
    const found = resourcesOfType(json, 'AWS::CloudWatch::Alarm').find(([logicalId]) => logicalId.startsWith(id));
    assert.ok(found, `no alarm ${id}`);
    return found[1].Properties;
  };

  test('fire when the API answers 5xx to more than 5% of requests', () => {
    const a = byId('ApiServerErrorRateAlarm');
    assert.equal(a.Threshold, 5);
    assert.equal(a.EvaluationPeriods, 2);
    const names = a.Metrics.filter((m: Json) => m.MetricStat).map((m: Json) => m.MetricStat.Metric.MetricName);
    assert.deepEqual(names.sort(), ['5xx', 'Count']);
    const expr = a.Metrics.find((m: Json) => m.Expression);
    assert.match(expr.Expression, /errors \/ IF\(requests > 0/);
  });

  test('fire when a snapshot job waits too long', () => {
    const [alarm] = find('ApproximateAgeOfOldestMessage', { 'Fn::GetAtt': [LOGICAL_IDS.snapshotQueue, 'QueueName'] });
    assert.ok(alarm);
    assert.equal(alarm.Threshold, 15 * 60);
    assert.equal(alarm.Statistic, 'Maximum');
  });

  test('fire when a queued push waits over a minute for the writer', () => {
    const [alarm, ...rest] = find('ApproximateAgeOfOldestMessage', {
      'Fn::GetAtt': [LOGICAL_IDS.syncQueue, 'QueueName'],
    });
    assert.ok(alarm, 'no age alarm on the sync queue');
    assert.equal(rest.length, 0);
    assert.equal(alarm.Namespace, 'AWS/SQS');
    assert.equal(alarm.Threshold, 60);
    assert.equal(alarm.Period, 60);
    assert.equal(alarm.Statistic, 'Maximum');
    // Three minutes in a row: one slow batch is not an incident, a stuck log is.
    assert.equal(alarm.EvaluationPeriods, 3);
  });

  test('fire when the worker parks a job or a job waits over an hour (its own metrics)', () => {
    const worker = { Ref: functionByBinary(json, WORKER)[0] };
    const [parked] = find('SnapshotJobsParked', worker);
    assert.ok(parked, 'no parked-jobs alarm');
    assert.equal(parked.Namespace, 'Sheetlog');
    assert.equal(parked.Statistic, 'Sum');
    assert.equal(parked.Threshold, 1);
    const [wait] = find('SnapshotJobWaitSeconds', worker);
    assert.ok(wait, 'no job-wait alarm');
    assert.equal(wait.Statistic, 'Maximum');
    assert.equal(wait.Threshold, 3600);
  });

  test('fire on throttled requests to every table', () => {
    for (const table of ['EntryTable', 'SegmentTable', 'PendingSnapshotsTable', 'DedupeTable', 'ClientsTable']) {
      const a = byId(`${table}ThrottlesAlarm`);
      const tables = a.Metrics.filter((m: Json) => m.MetricStat).map((m: Json) => {
        assert.equal(m.MetricStat.Metric.MetricName, 'ThrottledRequests');
        return JSON.stringify(m.MetricStat.Metric.Dimensions.find((d: Json) => d.Name === 'TableName').Value);
      });
      assert.ok(tables.length >= 5, `${table}: ${tables.length} operations`);
      assert.ok(
        tables.every((t: string) => t === JSON.stringify({ Ref: table })),
        `${table}: ${tables}`,
      );
      assert.equal(a.Threshold, 1);
    }
  });

  test('every alarm notifies the alarm topic, and missing data is not an alarm', () => {
    // DLQ depths, iterator age, errors + throttles per function, API 5xx, queue ages, the
    // worker's own two, table throttles.
    // … and a poke-publish alarm per publisher (API, sync writer).
    assert.equal(alarms.length, 3 + 1 + 8 + 1 + 2 + 2 + 5 + 2);
    for (const alarm of alarms) {
      assert.deepEqual(alarm.AlarmActions, [{ Ref: topicId }]);
      assert.deepEqual(alarm.OKActions, [{ Ref: topicId }]);
      assert.equal(alarm.TreatMissingData, 'notBreaching');
    }
  });

  test('alarmEmail subscribes an address to the topic', () => {
    const { template } = synth({ alarmEmail: 'ops@example.com' });
    template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
    synth().template.resourceCountIs('AWS::SNS::Subscription', 0);
  });
});

describe('pokes (AppSync Events)', () => {
  const nsOf = (j: Json) =>
    Object.values(j.Resources as Record<string, Json>).filter((r) => r.Type === 'AWS::AppSync::ChannelNamespace');
  const apiOf = (j: Json) =>
    Object.values(j.Resources as Record<string, Json>).filter((r) => r.Type === 'AWS::AppSync::Api');

  test('IAM stacks: one Event API, publish and subscribe with IAM, no handler code', () => {
    const { json } = synth();
    const [api] = apiOf(json);
    assert.equal(apiOf(json).length, 1);
    const cfg = api.Properties.EventConfig as Json;
    assert.deepEqual(cfg.AuthProviders, [{ AuthType: 'AWS_IAM' }]);
    assert.deepEqual(cfg.DefaultPublishAuthModes, [{ AuthType: 'AWS_IAM' }]);
    assert.deepEqual(cfg.DefaultSubscribeAuthModes, [{ AuthType: 'AWS_IAM' }]);
    const [ns] = nsOf(json);
    assert.equal(ns.Properties.Name, 'sheets');
    assert.deepEqual(ns.Properties.PublishAuthModes, [{ AuthType: 'AWS_IAM' }]);
    assert.equal(ns.Properties.CodeHandlers, undefined);
  });

  test('JWT stacks: subscribers use the API’s issuer and audiences, and onSubscribe checks the access claim', () => {
    const { json } = synth({ jwtIssuer: 'https://issuer.example.com', jwtAudience: 'web,cli.v2' });
    const cfg = apiOf(json)[0].Properties.EventConfig as Json;
    assert.deepEqual(cfg.DefaultPublishAuthModes, [{ AuthType: 'AWS_IAM' }]);
    assert.deepEqual(cfg.DefaultSubscribeAuthModes, [{ AuthType: 'OPENID_CONNECT' }]);
    assert.deepEqual(cfg.ConnectionAuthModes, [{ AuthType: 'OPENID_CONNECT' }]);
    const oidc = (cfg.AuthProviders as Json[]).find((p) => p.AuthType === 'OPENID_CONNECT');
    assert.equal(oidc?.OpenIDConnectConfig.Issuer, 'https://issuer.example.com');
    assert.equal(oidc?.OpenIDConnectConfig.ClientId, '^(web|cli\\.v2)$');
    const [ns] = nsOf(json);
    assert.deepEqual(ns.Properties.PublishAuthModes, [{ AuthType: 'AWS_IAM' }]);
    assert.deepEqual(ns.Properties.SubscribeAuthModes, [{ AuthType: 'OPENID_CONNECT' }]);
    // The handler module with the configured claim (cdk/lib/stack/appsync/subscribe-jwt.js).
    assert.equal(ns.Properties.CodeHandlers, onSubscribeCode('sheetlog_logs'));
    assert.match(String(ns.Properties.CodeHandlers), /^const ACCESS_CLAIM = "sheetlog_logs"; \/\/ set at synth$/m);
  });

  test('JWT stacks: the template’s onSubscribe handler reads the configured claim by the shared table of cases', () => {
    // The code that deploys, run as the local stack runs it (scripts/lib/appsync_handler.mjs), so
    // a value or a regex lost on the way into the template shows up as a wrong answer. The claim
    // is not the default, and the default claim grants everything: only the configured one counts.
    const claimName = 'https://id.example.com/sheetlog:logs';
    const { json } = synth({ jwtIssuer: 'https://issuer.example.com', jwtAudience: 'web', jwtAccessClaim: claimName });
    const cases = grantCases();
    const answers = runTemplateHandler(
      String(nsOf(json)[0].Properties.CodeHandlers),
      cases.map(({ claim, channel }) => ({
        phase: 'request',
        ctx: channelCtx(channel, { claims: { [claimName]: claim, sheetlog_logs: '*' } }),
      })),
    );
    const wrong = cases.flatMap(({ label, admitted }, i) =>
      answers[i].unauthorized === admitted ? [`${label}: got ${!answers[i].unauthorized}`] : [],
    );
    assert.deepEqual(wrong, []);
    assert.ok(answers.every((a) => a.kind === 'function'));
  });
});

describe('outputs', () => {
  test('name the API URL, tables, bucket, queues and alarm topic', () => {
    const { json } = synth();
    const outputs = json.Outputs as Record<string, Json>;
    assert.deepEqual(Object.keys(outputs).sort(), [
      'AlarmTopicArn',
      'ApiAuthorization',
      'ApiUrl',
      'BucketName',
      'ClientsTableName',
      'DedupeTableName',
      'EntryTableName',
      'EventsHttpUrl',
      'EventsRealtimeUrl',
      'PendingSnapshotsTableName',
      'SegmentTableName',
      'SnapshotDeadLetterQueueUrl',
      'SnapshotQueueUrl',
      'StreamRouterFailureQueueUrl',
      'SyncDeadLetterQueueUrl',
      'SyncQueueUrl',
      'WebUrl',
    ]);
    assert.deepEqual(outputs.EntryTableName.Value, { Ref: LOGICAL_IDS.entryTable });
    assert.deepEqual(outputs.SegmentTableName.Value, { Ref: LOGICAL_IDS.segmentTable });
    assert.deepEqual(outputs.PendingSnapshotsTableName.Value, { Ref: LOGICAL_IDS.pendingSnapshotsTable });
    assert.deepEqual(outputs.DedupeTableName.Value, { Ref: LOGICAL_IDS.dedupeTable });
    assert.deepEqual(outputs.ClientsTableName.Value, { Ref: LOGICAL_IDS.clientsTable });
    assert.deepEqual(outputs.BucketName.Value, { Ref: LOGICAL_IDS.bucket });
    assert.deepEqual(outputs.SnapshotQueueUrl.Value, { Ref: LOGICAL_IDS.snapshotQueue });
    assert.deepEqual(outputs.SyncQueueUrl.Value, { Ref: LOGICAL_IDS.syncQueue });
    assert.deepEqual(outputs.SyncDeadLetterQueueUrl.Value, { Ref: LOGICAL_IDS.syncDeadLetterQueue });
    const url = JSON.stringify(outputs.ApiUrl.Value);
    assert.match(url, /execute-api/);
    assert.match(url, new RegExp(onlyResource(json, 'AWS::ApiGatewayV2::Api')[0]));
  });
});

describe('sandbox (ephemeral) stacks', () => {
  test('delete their tables and bucket with the stack', () => {
    const { json } = synth({ ephemeral: 'true', ephemeralConfirm: 'sheetlog-sandbox', stackName: 'sheetlog-sandbox' });
    for (const [id, r] of [
      ...resourcesOfType(json, 'AWS::DynamoDB::Table'),
      ...resourcesOfType(json, 'AWS::S3::Bucket'),
    ]) {
      assert.equal(r.DeletionPolicy, 'Delete', id);
      assert.equal(r.Properties.DeletionProtectionEnabled ?? false, false, id);
    }
    assert.equal(
      resourcesOfType(json, 'Custom::S3AutoDeleteObjects').length,
      1,
      'the bucket is emptied before deletion',
    );
  });
});

describe('ephemeral needs a confirmation that names the stack', () => {
  test('without it, or naming another stack, synthesis fails and says how to confirm', () => {
    for (const context of [
      { ephemeral: 'true', stackName: 'sheetlog-prod' },
      { ephemeral: 'true', stackName: 'sheetlog-prod', ephemeralConfirm: 'sheetlog-sandbox' },
    ]) {
      assert.throws(
        () => synth(context),
        (err: Error) =>
          err instanceof ConfigError && /confirm with -c ephemeralConfirm=sheetlog-prod/.test(err.message),
      );
    }
  });

  test('a confirmation without ephemeral is refused rather than ignored', () => {
    assert.throws(() => synth({ ephemeralConfirm: 'sheetlog' }), ConfigError);
  });

  test('a stack that is not ephemeral keeps its tables and bucket', () => {
    const { json } = synth();
    for (const [id, r] of [
      ...resourcesOfType(json, 'AWS::DynamoDB::Table'),
      ...resourcesOfType(json, 'AWS::S3::Bucket'),
    ]) {
      assert.equal(r.DeletionPolicy, 'Retain', id);
    }
  });
});

describe('auto-delete expiry', () => {
  test('is at least 3 days, with the reason in the error', () => {
    for (const days of ['1', '2']) {
      assert.throws(
        () => synth({ autoDeleteDays: days }),
        (err: Error) => err instanceof ConfigError && /from 3 to 365.*stream router retries/.test(err.message),
      );
    }
    const { json } = synth({ autoDeleteDays: '3' });
    assert.match(JSON.stringify(resourcesOfType(json, 'AWS::S3::Bucket')), /"ExpirationInDays":3/);
  });
});

describe('segment retention', () => {
  const ARCHIVER = ARCHIVER_CRATE.binaryName;

  test('by default nothing is moved: no archiver function and no schedule', () => {
    const { json, template } = synth();
    assert.ok(!resourcesOfType(json, 'AWS::Lambda::Function').some(([, f]) => JSON.stringify(f).includes(ARCHIVER)));
    template.resourceCountIs('AWS::Events::Rule', 0);
  });

  test('archive: a daily run with the policy in its environment and only the access it uses', () => {
    const { json, template } = synth({
      retentionMode: 'archive',
      retentionKeepSegments: '4',
      retentionAfterDays: '90',
    });
    const [fnId, fn] = functionByBinary(json, ARCHIVER);
    const env = fn.Properties.Environment.Variables;
    assert.equal(env.SHEETLOG_RETENTION_MODE, 'archive');
    assert.equal(env.SHEETLOG_RETENTION_KEEP_SEGMENTS, '4');
    assert.equal(env.SHEETLOG_RETENTION_AFTER_DAYS, '90');
    assert.equal(fn.Properties.Timeout, 900);
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 day)',
      Targets: [{ Arn: { 'Fn::GetAtt': [fnId, 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 2 } }],
    });
    // Its grants: cdk/test/iam.test.ts (functions/archiver/iam-allow-list.json).
    // Its failures alarm like every function's.
    const alarms = resourcesOfType(json, 'AWS::CloudWatch::Alarm').map(([id]) => id);
    assert.ok(
      alarms.some((id) => id.startsWith('ArchiverErrorsAlarm')),
      alarms.join(', '),
    );
  });

  test('the policy is validated: the two newest segments always stay', () => {
    assert.throws(() => synth({ retentionMode: 'archive', retentionKeepSegments: '1' }), /retentionKeepSegments=1/);
    assert.throws(() => synth({ retentionMode: 'forget' }), /retentionMode/);
    assert.throws(() => synth({ retentionMode: 'delete', retentionAfterDays: '0' }), /retentionAfterDays=0/);
  });
});
