/**
 * The Rust functions, built by the house construct `SheetlogFunction`: the API, the stream
 * router, the snapshot worker and the sync writer, each with its bindings (every environment
 * variable bound together with its permission: the bindTable/bindBucket/bindQueue calls the
 * functions' iam-allow-list.json files name), their event sources, and the archiver with its
 * daily schedule when `retentionMode` is not `keep`. The poke bindings are pokes.ts's.
 */

import { Duration, Size, type Stack, Validations } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq, SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type { SheetlogConfig } from '../config';
import { SheetlogFunction, type SheetlogFunctionProps } from '../constructs/sheetlog-function';
import { FUNCTIONS_DIR } from '../paths';
import type { FilterPattern } from '../stream-filter';
import { buildWebClient } from '../web';
import type { SignIn } from './auth';
import { ARCHIVER_CRATE, CRATES, ENV, LOGICAL_IDS, PREFIXES, TIMINGS } from './names';
import type { Storage } from './storage';

export interface Functions {
  readonly api: SheetlogFunction;
  readonly streamRouter: SheetlogFunction;
  readonly snapshotWorker: SheetlogFunction;
  readonly syncWriter: SheetlogFunction;
  /** When `retentionMode` is `archive` or `delete`. */
  readonly archiver?: SheetlogFunction;
}

/** What the functions share, and the `/tmp` room of the two that spool files there. */
export interface FunctionDefaults {
  readonly common: Pick<
    SheetlogFunctionProps,
    'functionsDir' | 'architecture' | 'logRetention' | 'logLevel' | 'buildWith' | 'cargoProfile'
  >;
  readonly spool: Size;
}

/** The API's /tmp room for an XLSX export (docs/api.md, "Export"). */
export const EXPORT_SPOOL_MIB = 1024;

export function functionDefaults(config: SheetlogConfig, functionsDir: string): FunctionDefaults {
  const architecture = config.architecture === 'arm64' ? lambda.Architecture.ARM_64 : lambda.Architecture.X86_64;
  const logRetention = config.logRetentionDays as logs.RetentionDays;
  // The API spools an upload being committed to /tmp, and the worker an import file being built:
  // room for the largest allowed file and some more (Lambda allows 512 MiB to 10 GiB).
  const spool = Size.mebibytes(Math.min(10_240, Math.max(512, Math.ceil(config.maxUploadBytes / 1024 ** 2) + 256)));
  const common = {
    functionsDir,
    architecture,
    logRetention,
    logLevel: config.logLevel,
    buildWith: Object.values(CRATES),
    cargoProfile: config.lambdaProfile,
  };
  return { common, spool };
}

/** The HTTP API's function; under cognito authorization also bound to the catalog and the user pool. */
export function addApi(
  stack: Stack,
  config: SheetlogConfig,
  { common, spool }: FunctionDefaults,
  storage: Storage,
  signIn: SignIn,
): SheetlogFunction {
  // The API embeds the web client's bundle at compile time (cdk/lib/web.ts).
  if (stack.bundlingRequired && common.functionsDir === FUNCTIONS_DIR) buildWebClient();
  const api = new SheetlogFunction(stack, 'Api', {
    ...common,
    crate: CRATES.api,
    description: 'sheetlog HTTP API',
    timeout: TIMINGS.apiTimeout,
    // From `./scripts/bench lambda`: the API's peak RSS after its largest allowed requests (a
    // 6 MB push, a 6 MB page, committing a 256 MiB upload) is 49 MB, so memory is not the
    // constraint; CPU is. The commit's copy, download and validation took 3.1 s of CPU on one
    // core, and Lambda allots CPU in proportion to memory (1,769 MB = 1 vCPU): about 11 s at
    // 512 MB, before S3's transfer time, of the 25 s timeout; about 5.5 s at 1,024 MB.
    memorySize: 1024,
    // An XLSX export writes its worksheet's XML to /tmp and zips it there too: 540 MB for 10M
    // cells (`./scripts/bench export`, `xlsx_export_tmp_bytes`), more than the 18 s it may spend
    // writes here. One request at a time uses /tmp, so the larger of the two needs is the size.
    ephemeralStorageSize: Size.mebibytes(Math.max(spool.toMebibytes(), EXPORT_SPOOL_MIB)),
  })
    // The API only creates Entry and Segment items (appends, new logs and segments, all
    // conditional puts); the snapshot worker is what updates them.
    // BatchWriteItem (deletes only): DELETE /logs/{logId} removes a log's items
    // (docs/storage.md, "Deleting a log"), finding its clients through the Clients index.
    .bindTable(ENV.entryTable, storage.entryTable, ['Query', 'PutItem', 'BatchWriteItem'])
    .bindTable(ENV.segmentTable, storage.segmentTable, ['GetItem', 'Query', 'PutItem', 'BatchWriteItem'])
    .bindTable(ENV.pendingTable, storage.pendingSnapshotsTable, ['Query', 'BatchWriteItem'])
    // An idempotent append records its key with an UpdateItem inside the append's transaction;
    // deleting a log removes its keys (UpdateItem) and items left empty (DeleteItem).
    .bindTable(ENV.dedupeTable, storage.dedupeTable, ['GetItem', 'UpdateItem', 'DeleteItem'])
    .bindTable(
      ENV.clientsTable,
      storage.clientsTable,
      ['GetItem', 'Query', 'PutItem', 'UpdateItem', 'BatchWriteItem'],
      ['Query'],
    )
    .bindBucket(ENV.bucket, storage.bucket, [
      { prefix: PREFIXES.payloads, access: ['read', 'write', 'tag', 'delete'] },
      // Write: forking a sheet (POST /logs with `from`) builds the fork's first snapshot.
      // It also keeps the state of a restored or named version (snapshots/<log>/restores/).
      { prefix: PREFIXES.snapshots, access: ['read', 'write', 'abortUpload', 'delete'] },
      // A push too large for an SQS message is written here (auto-delete tagged) and queued by key.
      { prefix: PREFIXES.pushes, access: ['write', 'tag'] },
    ])
    .bindQueue(ENV.syncQueueUrl, storage.syncQueue, 'send')
    .bindSetting(ENV.syncWrites, config.syncWrites)
    .bindSetting(ENV.inlineBodyMaxBytes, config.inlineBodyMaxBytes)
    .bindSetting(ENV.snapshotInterval, config.snapshotInterval)
    .bindSetting(ENV.segmentMaxEntries, config.segmentMaxEntries)
    .bindSetting(ENV.dedupeKeysPerMonth, config.dedupeKeysPerMonth)
    .bindSetting(ENV.uploadUrlTtlSecs, config.uploadUrlTtlSecs)
    .bindSetting(ENV.maxUploadBytes, config.maxUploadBytes);
  // Under JWT authorization, which logs a token may use is in one of its claims (docs/api.md).
  if (config.jwt) api.bindSetting(ENV.accessClaim, config.jwt.accessClaim);
  bindApiToCatalog(api, storage, signIn);

  Validations.of(api.role).acknowledge({
    id: `AwsSolutions-IAM5[Resource::<${LOGICAL_IDS.clientsTable}.Arn>/index/*]`,
    reason:
      "Query only, on the Clients table's indexes (byLog: a deleted sheet's clients); the wildcard " +
      'stops at the index names of this one table.',
  });
  return api;
}

/** Under cognito authorization, the catalog says who may use which sheet (contract of issue 31). */
function bindApiToCatalog(api: SheetlogFunction, { catalogTable }: Storage, { userPool, userPoolClient }: SignIn) {
  if (!(catalogTable && userPool && userPoolClient)) return;
  api
    .bindSetting(ENV.authMode, 'cognito')
    // Item reads and writes on the table (TransactWriteItems needs the Put/Update/Delete/
    // ConditionCheck of its parts); on the index only the listing's Query.
    .bindTable(
      ENV.catalogTable,
      catalogTable,
      ['GetItem', 'BatchGetItem', 'Query', 'PutItem', 'UpdateItem', 'DeleteItem', 'ConditionCheckItem'],
      ['Query'],
    )
    // The signed-in person's verified email (ListUsers filtered by sub): GET /me, and claiming
    // invitations. Sharing asks the pool nothing (docs/api.md, "Sharing by email").
    .bindUserPool(ENV.userPoolId, userPool, ['ListUsers'])
    // Served to the page and the CLI (GET /config.json): a public client id, not a secret.
    .bindSetting(ENV.userPoolClientId, userPoolClient.userPoolClientId);
  Validations.of(api.role).acknowledge({
    id: `AwsSolutions-IAM5[Resource::<${LOGICAL_IDS.catalogTable}.Arn>/index/*]`,
    reason:
      "Query only, on the catalog's indexes (gsi1: a person's sheets, newest first); the wildcard " +
      'stops at the index names of this one table.',
  });
}

export function addStreamRouter(stack: Stack, { common }: FunctionDefaults, storage: Storage): SheetlogFunction {
  return new SheetlogFunction(stack, 'StreamRouter', {
    ...common,
    crate: CRATES.streamRouter,
    description: 'sheetlog Entry-stream router: snapshot jobs and payload un-tagging',
    timeout: TIMINGS.streamRouterTimeout,
    memorySize: 256,
  })
    .bindQueue(ENV.snapshotQueueUrl, storage.snapshotQueue, 'send')
    .bindBucket(ENV.bucket, storage.bucket, [{ prefix: PREFIXES.payloads, access: ['untag'] }]);
}

export function addSnapshotWorker(
  stack: Stack,
  config: SheetlogConfig,
  { common, spool }: FunctionDefaults,
  storage: Storage,
): SheetlogFunction {
  return (
    new SheetlogFunction(stack, 'SnapshotWorker', {
      ...common,
      crate: CRATES.snapshotWorker,
      description: 'sheetlog snapshot worker (Pending Snapshots protocol)',
      timeout: TIMINGS.snapshotWorkerTimeout,
      memorySize: 1024,
      ephemeralStorageSize: spool,
      // A long build hands itself off through the snapshot queue, and a completed snapshot
      // starts the log's next one the same way: chains far longer than the ~16 hops after which
      // Lambda would stop them. The worker bounds them itself: past `max_handoffs` (288, a day
      // of 5-minute invocations) a job is parked and SnapshotJobsParkedAlarm fires.
      recursiveLoop: lambda.RecursiveLoop.ALLOW,
    })
      // Records a snapshot's root on its entry and advances the segment's Last Snapshot.
      .bindTable(ENV.entryTable, storage.entryTable, ['Query', 'UpdateItem'])
      .bindTable(ENV.segmentTable, storage.segmentTable, ['GetItem', 'Query', 'UpdateItem'])
      // No GetItem: the Query for the log's earliest pending item returns it, checkpoint and all.
      .bindTable(ENV.pendingTable, storage.pendingSnapshotsTable, ['Query', 'PutItem', 'UpdateItem', 'DeleteItem'])
      // The log's tombstone: a deleted log's snapshot is not built.
      .bindTable(ENV.clientsTable, storage.clientsTable, ['GetItem'], [])
      .bindBucket(ENV.bucket, storage.bucket, [
        // A large manifest is a multipart upload, aborted if its build fails halfway.
        { prefix: PREFIXES.snapshots, access: ['read', 'write', 'abortUpload'] },
        { prefix: PREFIXES.payloads, access: ['read'] },
      ])
      .bindQueue(ENV.snapshotQueueUrl, storage.snapshotQueue, 'consume')
      // The snapshot trigger's settings are the API's and the writer's: the worker builds what
      // it is sent (tests/tests/integration/function_environment.rs holds each function to what
      // it reads).
      .bindSetting(ENV.pendingTimeoutSecs, config.pendingTimeoutSecs)
  );
}

export function addSyncWriter(
  stack: Stack,
  config: SheetlogConfig,
  { common }: FunctionDefaults,
  storage: Storage,
): SheetlogFunction {
  return (
    new SheetlogFunction(stack, 'SyncWriter', {
      ...common,
      crate: CRATES.syncWriter,
      description: 'sheetlog sync writer: applies queued Replicache pushes, one log at a time',
      timeout: TIMINGS.syncWriterTimeout,
      memorySize: 512,
    })
      // The same appends as the API's direct push (conditional puts, new segments in a
      // transaction) and the snapshot trigger after them (trigger::after_append); no idempotency
      // keys (a push is exactly-once through the log and the Clients table, whose range items it
      // writes by window and whose index mark it reads and moves), no snapshot building.
      .bindTable(ENV.entryTable, storage.entryTable, ['Query', 'PutItem'])
      .bindTable(ENV.segmentTable, storage.segmentTable, ['GetItem', 'Query', 'PutItem'])
      // GetItem also reads the log's tombstone: pushes to a deleted log are dropped.
      .bindTable(
        ENV.clientsTable,
        storage.clientsTable,
        ['GetItem', 'Query', 'PutItem', 'UpdateItem', 'BatchWriteItem'],
        [],
      )
      .bindBucket(ENV.bucket, storage.bucket, [
        // A large mutation body is offloaded like any entry body, written with the auto-delete tag.
        { prefix: PREFIXES.payloads, access: ['read', 'write', 'tag'] },
        // A push too large for an SQS message, written there by the API.
        { prefix: PREFIXES.pushes, access: ['read'] },
      ])
      .bindSetting(ENV.inlineBodyMaxBytes, config.inlineBodyMaxBytes)
      .bindSetting(ENV.snapshotInterval, config.snapshotInterval)
      .bindSetting(ENV.segmentMaxEntries, config.segmentMaxEntries)
  );
}

/** The Entry stream into the stream router, and the snapshot and sync queues into their consumers. */
export function addEventSources(functions: Functions, storage: Storage, streamFilterPatterns: FilterPattern[]): void {
  functions.streamRouter.function.addEventSource(
    new DynamoEventSource(storage.entryTable, {
      // From the oldest record: the mapping is created with the table, and nothing may be skipped.
      startingPosition: lambda.StartingPosition.TRIM_HORIZON,
      batchSize: 100,
      filters: streamFilterPatterns.map((pattern) => lambda.FilterCriteria.filter(pattern)),
      reportBatchItemFailures: true,
      bisectBatchOnError: true,
      retryAttempts: TIMINGS.streamRetryAttempts,
      maxRecordAge: TIMINGS.streamMaxRecordAge,
      onFailure: new SqsDlq(storage.streamRouterFailureQueue),
    }),
  );
  functions.snapshotWorker.function.addEventSource(
    new SqsEventSource(storage.snapshotQueue, {
      // One job per invocation: a job can run for minutes and hands off through its own message.
      batchSize: 1,
      reportBatchItemFailures: true,
      maxConcurrency: TIMINGS.snapshotWorkerMaxConcurrency,
    }),
  );
  functions.syncWriter.function.addEventSource(
    new SqsEventSource(storage.syncQueue, {
      // Up to 10 pushes, of one or several logs, per invocation: the writer appends a log's
      // pushes of the batch together (group commit). A FIFO queue hands a message group to one
      // invocation at a time, so a log's pushes are applied in order by one writer.
      batchSize: TIMINGS.syncBatchSize,
      // A failed push is reported alone; SQS then holds back that log's later pushes (same
      // message group) until it is retried, and other logs' pushes of the batch are done.
      reportBatchItemFailures: true,
    }),
  );
}

/**
 * Segment retention (docs/storage.md, "Archived segments"): the archiver and its daily schedule,
 * when `retentionMode` is not `keep`.
 */
export function addArchiver(
  stack: Stack,
  config: SheetlogConfig,
  { common }: FunctionDefaults,
  storage: Storage,
): SheetlogFunction | undefined {
  if (config.retentionMode === 'keep') return undefined;
  const archiver = new SheetlogFunction(stack, 'Archiver', {
    ...common,
    buildWith: [...Object.values(CRATES), ARCHIVER_CRATE],
    crate: ARCHIVER_CRATE,
    description: `sheetlog segment retention (${config.retentionMode})`,
    // A run stops starting segments a minute before this and the next run carries on.
    timeout: Duration.minutes(15),
    memorySize: 512,
  })
    // Reads a segment's entries and deletes them (BatchWriteItem of deletes); finds the logs
    // with a Scan of the Segment table and sets a segment's Archive attribute.
    .bindTable(ENV.entryTable, storage.entryTable, ['Query', 'BatchWriteItem'])
    .bindTable(ENV.segmentTable, storage.segmentTable, ['GetItem', 'Query', 'Scan', 'UpdateItem'])
    .bindBucket(ENV.bucket, storage.bucket, [{ prefix: PREFIXES.payloads, access: ['read', 'write'] }])
    .bindSetting('SHEETLOG_RETENTION_MODE', config.retentionMode)
    .bindSetting('SHEETLOG_RETENTION_KEEP_SEGMENTS', config.retentionKeepSegments);
  if (config.retentionAfterDays !== undefined) {
    archiver.bindSetting('SHEETLOG_RETENTION_AFTER_DAYS', config.retentionAfterDays);
  }
  new events.Rule(stack, 'RetentionSchedule', {
    description: 'Runs the sheetlog segment retention policy once a day',
    schedule: events.Schedule.rate(Duration.days(1)),
    targets: [new targets.LambdaFunction(archiver.function, { retryAttempts: 2 })],
  });
  return archiver;
}
