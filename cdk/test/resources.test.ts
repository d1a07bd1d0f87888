/**
 * The local-stack description (cdk/lib/resources.ts) that the Rust local runner is compared with:
 * it must be read from the template, agree with docs/storage.md, and be what the script prints.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { describeLocalResources, describeLocalResourcesOfStack, LOCAL_STACK_CONTEXT } from '../lib/resources';
import { loadStreamFilterPatterns } from '../lib/stream-filter';
import { resourcesOfType, synth } from './support';

const REPO_ROOT = path.resolve(__dirname, '..', '..');
/** tsx's loader by URL, so a child process can run TypeScript from any working directory. */
const TSX = pathToFileURL(require.resolve('tsx')).href;

describe('local resources description', () => {
  const { json, stack } = synth(LOCAL_STACK_CONTEXT);
  const local = describeLocalResources(json);

  test('has the tables of docs/storage.md with their keys, types, stream and TTL', () => {
    assert.deepEqual(
      local.tables.map((t) => [
        t.logicalId,
        t.env,
        t.partitionKey,
        t.sortKey,
        t.streamViewType,
        t.ttlAttribute,
        t.billingMode,
      ]),
      [
        [
          'ClientsTable',
          'SHEETLOG_CLIENTS_TABLE',
          { name: 'k', type: 'B' },
          { name: 'm', type: 'N' },
          null,
          null,
          'PAY_PER_REQUEST',
        ],
        ['DedupeTable', 'SHEETLOG_DEDUPE_TABLE', { name: 'p', type: 'B' }, null, null, null, 'PAY_PER_REQUEST'],
        [
          'EntryTable',
          'SHEETLOG_ENTRY_TABLE',
          { name: 's', type: 'B' },
          { name: 'n', type: 'N' },
          'NEW_IMAGE',
          null,
          'PAY_PER_REQUEST',
        ],
        [
          'PendingSnapshotsTable',
          'SHEETLOG_PENDING_TABLE',
          { name: 'l', type: 'B' },
          { name: 'n', type: 'B' },
          null,
          null,
          'PAY_PER_REQUEST',
        ],
        [
          'SegmentTable',
          'SHEETLOG_SEGMENT_TABLE',
          { name: 'l', type: 'B' },
          { name: 'n', type: 'N' },
          null,
          null,
          'PAY_PER_REQUEST',
        ],
      ],
    );
  });

  test('has the bucket with its auto-delete lifecycle rule and CORS', () => {
    assert.equal(local.buckets.length, 1);
    const [bucket] = local.buckets;
    assert.equal(bucket.env, 'SHEETLOG_BUCKET');
    assert.deepEqual(bucket.lifecycleRules, [
      {
        id: 'expire-auto-delete-tagged',
        enabled: true,
        prefix: null,
        tags: { 'sheetlog-auto-delete': 'true' },
        expirationDays: 3,
        abortIncompleteMultipartUploadDays: null,
        noncurrentVersionDays: null,
        expiredObjectDeleteMarker: false,
      },
      {
        id: 'abort-incomplete-multipart-uploads',
        enabled: true,
        prefix: null,
        tags: {},
        expirationDays: null,
        abortIncompleteMultipartUploadDays: 1,
        noncurrentVersionDays: null,
        expiredObjectDeleteMarker: false,
      },
      {
        id: 'expire-noncurrent-versions',
        enabled: true,
        prefix: null,
        tags: {},
        expirationDays: null,
        abortIncompleteMultipartUploadDays: null,
        noncurrentVersionDays: 30,
        expiredObjectDeleteMarker: true,
      },
    ]);
    assert.equal(bucket.versioned, true);
    assert.deepEqual(bucket.cors[0].allowedMethods, ['PUT', 'GET', 'HEAD']);
  });

  test('has the queues with their attributes and redrive', () => {
    assert.deepEqual(local.queues, [
      {
        logicalId: 'SnapshotDeadLetterQueue',
        env: null,
        fifo: false,
        visibilityTimeoutSecs: 30,
        messageRetentionSecs: 1_209_600,
        deadLetter: null,
      },
      {
        logicalId: 'SnapshotQueue',
        env: 'SHEETLOG_SNAPSHOT_QUEUE_URL',
        fifo: false,
        visibilityTimeoutSecs: 1800,
        messageRetentionSecs: 1_209_600,
        deadLetter: { logicalId: 'SnapshotDeadLetterQueue', maxReceiveCount: 100 },
      },
      {
        logicalId: 'StreamRouterFailureQueue',
        env: null,
        fifo: false,
        visibilityTimeoutSecs: 30,
        messageRetentionSecs: 1_209_600,
        deadLetter: null,
      },
      {
        logicalId: 'SyncDeadLetterQueue',
        env: null,
        fifo: true,
        visibilityTimeoutSecs: 30,
        messageRetentionSecs: 1_209_600,
        deadLetter: null,
      },
      {
        logicalId: 'SyncQueue',
        env: 'SHEETLOG_SYNC_QUEUE_URL',
        fifo: true,
        visibilityTimeoutSecs: 180,
        messageRetentionSecs: 1_209_600,
        deadLetter: { logicalId: 'SyncDeadLetterQueue', maxReceiveCount: 5 },
      },
    ]);
  });

  test('has the stream router on the Entry stream with the shared filter, and the workers on the queues', () => {
    assert.deepEqual(local.streamConsumers, [
      {
        function: 'sheetlog-stream-router',
        table: 'EntryTable',
        startingPosition: 'TRIM_HORIZON',
        batchSize: 100,
        filterPatterns: loadStreamFilterPatterns(),
        reportBatchItemFailures: true,
        maximumRetryAttempts: 10_000,
        onFailureQueue: 'StreamRouterFailureQueue',
      },
    ]);
    assert.deepEqual(local.queueConsumers, [
      { function: 'sheetlog-snapshot-worker', queue: 'SnapshotQueue', batchSize: 1, reportBatchItemFailures: true },
      { function: 'sheetlog-sync-writer', queue: 'SyncQueue', batchSize: 10, reportBatchItemFailures: true },
    ]);
  });

  test('has every function with its environment, resources by reference', () => {
    assert.deepEqual(
      local.functions.map((f) => f.binary),
      ['sheetlog-api', 'sheetlog-snapshot-worker', 'sheetlog-stream-router', 'sheetlog-sync-writer'],
    );
    const api = local.functions[0];
    assert.deepEqual(api.environment.SHEETLOG_ENTRY_TABLE, { ref: 'EntryTable' });
    assert.equal(api.environment.SHEETLOG_INLINE_BODY_MAX_BYTES, '16384');
    assert.equal(api.timeoutSecs, 25);
    assert.deepEqual(api.environment.SHEETLOG_SYNC_QUEUE_URL, { ref: 'SyncQueue' });
    const writer = local.functions[3];
    assert.equal(writer.timeoutSecs, 30);
    assert.deepEqual(writer.environment.SHEETLOG_CLIENTS_TABLE, { ref: 'ClientsTable' });
  });

  test('follows the template, not the defaults: context changes show up', () => {
    const other = describeLocalResourcesOfStack(
      synth({ ...LOCAL_STACK_CONTEXT, autoDeleteDays: '9', snapshotInterval: '33' }).stack,
    );
    assert.equal(other.buckets[0].lifecycleRules[0].expirationDays, 9);
    assert.equal(other.functions[0].environment.SHEETLOG_SNAPSHOT_INTERVAL, '33');
    assert.deepEqual(describeLocalResourcesOfStack(stack), local);
  });

  test('lists the routes without an authorizer, read from the template', () => {
    const keys = resourcesOfType(json, 'AWS::ApiGatewayV2::Route')
      .map(([, r]) => r.Properties)
      .filter((p) => p.AuthorizationType === 'NONE')
      .map((p) => p.RouteKey);
    assert.deepEqual(local.openRoutes, [...keys].sort());
    for (const key of ['GET /', 'GET /config.json', 'GET /health', 'GET /openapi.json'])
      assert.ok(local.openRoutes.includes(key), key);
    assert.ok(!local.openRoutes.includes('$default'));
  });

  test("describes the HTTP API's stage throttle and every route with its authorization and function", () => {
    assert.deepEqual(local.httpApi?.throttle, { rateLimit: 1000, burstLimit: 2000 });
    const routes = local.httpApi?.routes ?? [];
    assert.deepEqual(
      routes.map((r) => r.routeKey),
      resourcesOfType(json, 'AWS::ApiGatewayV2::Route')
        .map(([, r]) => r.Properties.RouteKey as string)
        .sort(),
    );
    assert.ok(routes.every((r) => r.function === 'sheetlog-api'));
    assert.deepEqual(
      routes.filter((r) => r.authorizationType === 'NONE').map((r) => r.routeKey),
      local.openRoutes,
    );
    assert.equal(routes.find((r) => r.routeKey === '$default')?.authorizationType, 'AWS_IAM');
    const jwt = describeLocalResourcesOfStack(
      synth({
        ...LOCAL_STACK_CONTEXT,
        authMode: 'cognito',
        throttlingRateLimit: '7',
        throttlingBurstLimit: '9',
      }).stack,
    );
    assert.deepEqual(jwt.httpApi?.throttle, { rateLimit: 7, burstLimit: 9 });
    assert.equal(jwt.httpApi?.routes.find((r) => r.routeKey === '$default')?.authorizationType, 'JWT');
    assert.deepEqual(
      local.functions.map((f) => [f.binary, f.memoryMb]),
      resourcesOfType(json, 'AWS::Lambda::Function')
        .filter(([, f]) => (f.Properties.Tags ?? []).some((t: { Key: string }) => t.Key === 'sheetlog:binary'))
        .map(([, f]) => [
          f.Properties.Tags.find((t: { Key: string }) => t.Key === 'sheetlog:binary').Value,
          f.Properties.MemorySize,
        ])
        .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
  });

  test('describes the Catalog table of a cognito stack and the Clients table with their indexes; other tables have no index field', () => {
    const cognito = describeLocalResourcesOfStack(synth({ ...LOCAL_STACK_CONTEXT, authMode: 'cognito' }).stack);
    const catalog = cognito.tables.find((t) => t.logicalId === 'CatalogTable');
    assert.deepEqual(catalog, {
      globalSecondaryIndexes: [
        {
          name: 'gsi1',
          partitionKey: { name: 'gsi1pk', type: 'S' },
          sortKey: { name: 'gsi1sk', type: 'S' },
          projection: 'ALL',
        },
      ],
      logicalId: 'CatalogTable',
      env: 'SHEETLOG_CATALOG_TABLE',
      partitionKey: { name: 'pk', type: 'S' },
      sortKey: { name: 'sk', type: 'S' },
      billingMode: 'PAY_PER_REQUEST',
      streamViewType: null,
      ttlAttribute: null,
    });
    for (const tables of [local.tables, cognito.tables]) {
      const clients = tables.find((t) => t.logicalId === 'ClientsTable');
      assert.deepEqual(clients?.globalSecondaryIndexes, [
        { name: 'byLog', partitionKey: { name: 'i', type: 'B' }, sortKey: null, projection: 'KEYS_ONLY' },
      ]);
    }
    const indexed = ['CatalogTable', 'ClientsTable'];
    for (const t of [...local.tables, ...cognito.tables].filter((t) => !indexed.includes(t.logicalId))) {
      assert.ok(!('globalSecondaryIndexes' in t), t.logicalId);
    }
    const api = cognito.functions.find((f) => f.binary === 'sheetlog-api');
    assert.deepEqual(api?.environment.SHEETLOG_USER_POOL_ID, { ref: 'UserPool' });
    assert.deepEqual(api?.environment.SHEETLOG_USER_POOL_CLIENT_ID, { ref: 'UserPoolClient' });
    assert.equal(api?.environment.SHEETLOG_AUTH_MODE, 'cognito');
  });

  test('reads a TTL attribute and a FIFO queue when a template has them', () => {
    const template = {
      Resources: {
        Dedupe: {
          Type: 'AWS::DynamoDB::Table',
          Properties: {
            KeySchema: [{ AttributeName: 'p', KeyType: 'HASH' }],
            AttributeDefinitions: [{ AttributeName: 'p', AttributeType: 'S' }],
            TimeToLiveSpecification: { AttributeName: 'x', Enabled: true },
          },
        },
        Fifo: { Type: 'AWS::SQS::Queue', Properties: { FifoQueue: true } },
      },
    };
    const d = describeLocalResources(template);
    assert.deepEqual(d.tables[0], {
      logicalId: 'Dedupe',
      env: null,
      partitionKey: { name: 'p', type: 'S' },
      sortKey: null,
      billingMode: 'PROVISIONED',
      streamViewType: null,
      ttlAttribute: 'x',
    });
    assert.equal(d.queues[0].fifo, true);
  });

  test('is what `cdk/bin/local-resources.ts` prints, context flags included', () => {
    const run = spawnSync(
      process.execPath,
      [
        '--import',
        TSX,
        path.join(REPO_ROOT, 'cdk', 'bin', 'local-resources.ts'),
        '-c',
        'autoDeleteDays=9',
        '-c',
        'snapshotInterval=33',
      ],
      { cwd: os.tmpdir(), encoding: 'utf8' },
    );
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(
      JSON.parse(run.stdout),
      describeLocalResourcesOfStack(
        synth({ ...LOCAL_STACK_CONTEXT, autoDeleteDays: '9', snapshotInterval: '33' }).stack,
      ),
    );
  });

  test('without configured origins the only bucket CORS rule is for the deployed API origin, which the local description leaves out; the local stack allows any origin', () => {
    assert.deepEqual(describeLocalResourcesOfStack(synth().stack).buckets[0].cors, []);
    assert.deepEqual(local.buckets[0].cors[0].allowedOrigins, ['*']);
  });
});

describe('stream filter file', () => {
  const write = (content: string) => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sheetlog-filter-')), 'f.json');
    fs.writeFileSync(file, content);
    return file;
  };

  test('is read pattern by pattern, ignoring its comment', () => {
    const file = write('{"_comment": "x", "filters": [{"eventName": ["INSERT"]}]}');
    assert.deepEqual(loadStreamFilterPatterns(file), [{ eventName: ['INSERT'] }]);
  });

  test('is rejected, naming the file, when malformed', () => {
    assert.throws(() => loadStreamFilterPatterns(write('{"filters": []}')), /f\.json: expected \{"filters"/);
    assert.throws(
      () => loadStreamFilterPatterns(write('{"filters": [[1]]}')),
      /filters\[0\] must be a non-empty JSON object/,
    );
    assert.throws(() => loadStreamFilterPatterns(write('not json')), /cannot read the stream filter .*f\.json/);
    assert.throws(
      () => loadStreamFilterPatterns(write(JSON.stringify({ filters: Array(6).fill({ a: [1] }) }))),
      /at most 5/,
    );
  });
});
