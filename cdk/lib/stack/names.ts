/**
 * The names the stack and its readers share: the function crates, the stateful resources'
 * logical ids, the environment variables the Rust code reads, the catalog's keys, the poke
 * namespace, the open routes, the bucket's prefixes and tag, and the timings that must agree with
 * each other. `cdk/lib/sheetlog-stack.ts` re-exports them all.
 */

import { Duration } from 'aws-cdk-lib';
import type { FunctionCrate } from '../constructs/sheetlog-function';
import { loadOpenRoutes, type OpenRoute } from '../open-routes';

/** The function crates: `functions/<dir>`, package = binary = `binaryName`. */
export const CRATES = {
  api: { dir: 'api', binaryName: 'sheetlog-api' },
  streamRouter: { dir: 'stream-router', binaryName: 'sheetlog-stream-router' },
  snapshotWorker: { dir: 'snapshot-worker', binaryName: 'sheetlog-snapshot-worker' },
  syncWriter: { dir: 'sync-writer', binaryName: 'sheetlog-sync-writer' },
} as const satisfies Record<string, FunctionCrate>;

/** The scheduled retention run; built and deployed only when `retentionMode` is not `keep`. */
export const ARCHIVER_CRATE: FunctionCrate = { dir: 'archiver', binaryName: 'sheetlog-archiver' };

/**
 * Logical ids of the stateful resources. They are their identity across upgrades: never rename one
 * (CloudFormation would create a new, empty resource and drop or orphan the old one).
 */
export const LOGICAL_IDS = {
  entryTable: 'EntryTable',
  segmentTable: 'SegmentTable',
  pendingSnapshotsTable: 'PendingSnapshotsTable',
  dedupeTable: 'DedupeTable',
  clientsTable: 'ClientsTable',
  bucket: 'DataBucket',
  snapshotQueue: 'SnapshotQueue',
  snapshotDeadLetterQueue: 'SnapshotDeadLetterQueue',
  streamRouterFailureQueue: 'StreamRouterFailureQueue',
  syncQueue: 'SyncQueue',
  syncDeadLetterQueue: 'SyncDeadLetterQueue',
  // authMode=cognito only:
  catalogTable: 'CatalogTable',
  userPool: 'UserPool',
  userPoolClient: 'UserPoolClient',
} as const;

/** The environment variables the Rust code reads. CDK owns these names. */
export const ENV = {
  entryTable: 'SHEETLOG_ENTRY_TABLE',
  segmentTable: 'SHEETLOG_SEGMENT_TABLE',
  pendingTable: 'SHEETLOG_PENDING_TABLE',
  dedupeTable: 'SHEETLOG_DEDUPE_TABLE',
  clientsTable: 'SHEETLOG_CLIENTS_TABLE',
  dedupeKeysPerMonth: 'SHEETLOG_DEDUPE_KEYS_PER_MONTH',
  bucket: 'SHEETLOG_BUCKET',
  snapshotQueueUrl: 'SHEETLOG_SNAPSHOT_QUEUE_URL',
  inlineBodyMaxBytes: 'SHEETLOG_INLINE_BODY_MAX_BYTES',
  snapshotInterval: 'SHEETLOG_SNAPSHOT_INTERVAL',
  segmentMaxEntries: 'SHEETLOG_SEGMENT_MAX_ENTRIES',
  uploadUrlTtlSecs: 'SHEETLOG_UPLOAD_URL_TTL_SECS',
  maxUploadBytes: 'SHEETLOG_MAX_UPLOAD_BYTES',
  accessClaim: 'SHEETLOG_ACCESS_CLAIM',
  pendingTimeoutSecs: 'SHEETLOG_PENDING_TIMEOUT_SECS',
  syncQueueUrl: 'SHEETLOG_SYNC_QUEUE_URL',
  syncWrites: 'SHEETLOG_SYNC_WRITES',
  eventsHttpUrl: 'SHEETLOG_EVENTS_HTTP_URL',
  eventsRealtimeUrl: 'SHEETLOG_EVENTS_REALTIME_URL',
  eventsNamespace: 'SHEETLOG_EVENTS_NAMESPACE',
  authMode: 'SHEETLOG_AUTH_MODE',
  catalogTable: 'SHEETLOG_CATALOG_TABLE',
  userPoolId: 'SHEETLOG_USER_POOL_ID',
  userPoolClientId: 'SHEETLOG_USER_POOL_CLIENT_ID',
} as const;

/**
 * The Clients table's index by log (docs/storage.md, "Clients table"): keys only, on the sparse
 * attribute `i` (the log's 16 bytes) that a client's first range item, each group item and the
 * index mark carry. How a delete finds a log's clients without reading anyone else's.
 */
export const CLIENTS_GSI = { indexName: 'byLog', partitionKey: 'i' } as const;

/** The catalog's one global secondary index (docs/storage.md, "Catalog"). */
export const CATALOG_GSI = { indexName: 'gsi1', partitionKey: 'gsi1pk', sortKey: 'gsi1sk' } as const;

/**
 * The catalog item that makes a person a member of a sheet, as the poke channel's onSubscribe
 * handler reads it (a GetItem): partition `pk` = `LOG#<logId>`, sort `sk` = `MEMBER#<userId>`
 * (the token's `sub`), with the member's `role`. The API writes these items (functions/api);
 * this is the one key shape the stack itself depends on.
 */
export const CATALOG_MEMBER_KEY = { pkPrefix: 'LOG#', skPrefix: 'MEMBER#' } as const;
export const CATALOG_ROLES = ['owner', 'editor', 'viewer'] as const;

/** The Event API's channel namespace: one channel per sheet, `/sheets/<logId>` (docs/sync.md, "Pokes"). */
export const POKE_NAMESPACE = 'sheets';

/**
 * The routes without an authorizer: the web page and its bundle, `/config.json` (how to sign in),
 * `/health` and `/openapi.json`; read from `functions/api/src/open_routes.json`, which the API
 * function and the local authorizer stand-in read too.
 */
export const OPEN_ROUTES: readonly OpenRoute[] = loadOpenRoutes();

/** The `ApiAuthorization` output per mode: the deployed stack's record of its mode (scripts/lib/auth_guard.py). */
export const AUTHORIZATION_OUTPUT = { iam: 'IAM', jwt: 'JWT', cognito: 'COGNITO' } as const;

/** Objects written before their entry commits carry this tag; the lifecycle rule expires them. */
export const AUTO_DELETE_TAG = { key: 'sheetlog-auto-delete', value: 'true' } as const;

export const PREFIXES = { payloads: 'payloads/', snapshots: 'snapshots/', pushes: 'pushes/' } as const;

/**
 * Timings that must agree with each other (the test suite checks the relations):
 * - the worker hands off before its Lambda timeout (DESIGN: checkpoints), and SQS must not
 *   redeliver a job while an invocation may still be working on it, so the queue's visibility
 *   timeout is six times the worker's timeout, as AWS recommends for SQS event sources (it leaves
 *   room for the poller's own retries when the function is throttled);
 * - the worker defers (and hands off) a job by sending a fresh copy with a delivery delay, so
 *   waiting does not count towards the redrive threshold: only failed invocations (errors, crashes,
 *   timeouts) do, and 100 of those, each followed by a growing retry delay, park a poison job;
 * - stream records live 24 hours; a batch that keeps failing is retried (bisected) for 23 of
 *   them and then described in the failure queue, an hour before DynamoDB trims the records;
 * - at most `snapshotWorkerMaxConcurrency` snapshot jobs run at once, so a burst of snapshots
 *   across many logs cannot take the account's whole Lambda concurrency.
 */
const SNAPSHOT_WORKER_TIMEOUT = Duration.minutes(5);
/**
 * The sync writer applies one batch of at most 10 queued pushes (docs/sync.md): a head read, one
 * or a few appends and the snapshot trigger, seconds at worst. Its queue's visibility timeout is
 * six times this, as for the snapshot queue; a push that fails five receives is dead-lettered
 * (the client still holds its mutations and pushes them again, so nothing is lost).
 */
const SYNC_WRITER_TIMEOUT = Duration.seconds(30);

export const TIMINGS = {
  apiTimeout: Duration.seconds(25), // below the HTTP API's 30 s integration limit
  streamRouterTimeout: Duration.seconds(30),
  snapshotWorkerTimeout: SNAPSHOT_WORKER_TIMEOUT,
  snapshotVisibilityTimeout: Duration.seconds(6 * SNAPSHOT_WORKER_TIMEOUT.toSeconds()),
  snapshotMaxReceiveCount: 100,
  queueRetention: Duration.days(14),
  streamMaxRecordAge: Duration.hours(23),
  // Lambda's largest setting: in practice the record age above is what ends the retries.
  streamRetryAttempts: 10_000,
  snapshotWorkerMaxConcurrency: 20,
  syncWriterTimeout: SYNC_WRITER_TIMEOUT,
  syncVisibilityTimeout: Duration.seconds(6 * SYNC_WRITER_TIMEOUT.toSeconds()),
  syncMaxReceiveCount: 5,
  syncBatchSize: 10,
} as const;
