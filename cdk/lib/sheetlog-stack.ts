/**
 * The whole of sheetlog in one stack: the event-log tables, the payload/snapshot bucket, the
 * snapshot job queue and the sync (push) queue, the Rust functions with their event sources, the
 * HTTP API, alarms and outputs. docs/deploy.md describes it for the people who deploy it; docs/design.md says what the
 * functions do with these resources and why.
 *
 * Layout:
 * - stateful resources (tables, bucket, queues) carry fixed logical ids from `LOGICAL_IDS`; the
 *   upgrade-safety test pins them and their replacement-triggering properties.
 * - functions are built by the house construct `SheetlogFunction`; each environment variable is
 *   bound together with its permission.
 */

import { CfnOutput, Duration, RemovalPolicy, Size, Stack, type StackProps, Tags, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer, HttpJwtAuthorizer, HttpUserPoolAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as appsync from 'aws-cdk-lib/aws-appsync';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as cognito from 'aws-cdk-lib/aws-cognito';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq, SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import type { CognitoConfig, SheetlogConfig } from './config';
import { Backups } from './constructs/backups';
import { SheetlogDashboard } from './constructs/dashboard';
import { type FunctionCrate, SheetlogFunction } from './constructs/sheetlog-function';
import { SheetlogTable } from './constructs/sheetlog-table';
import { loadOpenRoutes, type OpenRoute } from './open-routes';
import { FUNCTIONS_DIR } from './paths';
import { type FilterPattern, loadStreamFilterPatterns } from './stream-filter';
import { buildWebClient } from './web';

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
 * The namespace's onSubscribe handler (APPSYNC_JS) under JWT authorization: a subscriber may join
 * `/sheets/<logId>` only if its token's access claim grants at least read on that sheet, as the
 * HTTP API requires to pull it. It reads grants by the API's grammar (functions/api/src/access.rs,
 * docs/api.md "Access to logs"): a JSON array or a space- or comma-separated string (`[a b]` as
 * API Gateway writes an array, quotes around a grant); a grant's level is what follows its last
 * `:` (`read` or `write`, none meaning write) and the rest is `*` or the sheet's id in its
 * hyphenated form, any case. `*:x:read`, `:read`, `<logId>:READ` grant nothing; a channel whose
 * second segment is not a hyphenated UUID is no sheet's. cdk/test/fixtures/grants.json is the one
 * table of cases this handler (cdk/test/stack.test.ts runs the synthesized code) and the API's
 * parser must both pass.
 * The code is a template literal: a regex backslash must be written `\\` here to reach the handler.
 * APPSYNC_JS has no `try`, `throw`, `while` or classic `for`; the code uses none.
 */
export function onSubscribeCode(accessClaim: string): string {
  return `import { util } from '@aws-appsync/utils';

export function onSubscribe(ctx) {
  const segments = ctx.info.channel.segments;
  const log = segments.length === 2 ? segments[1].toLowerCase() : '';
  if (log.match(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/) === null) {
    util.unauthorized();
  }
  const claims = (ctx.identity && ctx.identity.claims) || {};
  const raw = claims[${JSON.stringify(accessClaim)}];
  let text = (Array.isArray(raw) ? '[' + raw.join(' ') + ']' : typeof raw === 'string' ? raw : '').trim();
  if (text.startsWith('[') && text.endsWith(']')) {
    text = text.slice(1, text.length - 1);
  }
  const items = text
    .split(/[\\s,]+/)
    .map((g) => g.replace(/^"+|"+$/g, ''))
    .filter((g) => g !== '');
  const granted = items.some((g) => {
    const at = g.lastIndexOf(':');
    const target = (at < 0 ? g : g.slice(0, at)).toLowerCase();
    const level = at < 0 ? 'write' : g.slice(at + 1);
    return (level === 'read' || level === 'write') && (target === '*' || target === log);
  });
  if (!granted) {
    util.unauthorized();
  }
}

export function onPublish(ctx) {
  return ctx.events;
}
`;
}

/**
 * The namespace's onSubscribe handler (APPSYNC_JS) under `cognito` authorization: AppSync has
 * verified the user pool token; the handler reads the person's membership item of the sheet from
 * the catalog (a GetItem through the namespace's DynamoDB data source) and admits any member,
 * whatever the role (every role may read, and pokes only say "pull"). Not a member, no such
 * sheet, or a channel that is not `/sheets/<logId>`: unauthorized. The answer is not cached, so a
 * removed member cannot subscribe again; a subscription already open stays open until its
 * connection ends (docs/sync.md, "Pokes": a poke carries no data, pulls are checked by the API).
 */
export function onSubscribeCatalogCode(): string {
  return `import { util } from '@aws-appsync/utils';
import * as ddb from '@aws-appsync/utils/dynamodb';

export const onSubscribe = {
  request(ctx) {
    const segments = ctx.info.channel.segments;
    const log = segments.length === 2 ? segments[1].toLowerCase() : '';
    const sub = (ctx.identity && ctx.identity.sub) || '';
    if (log === '' || sub === '') {
      util.unauthorized();
    }
    return ddb.get({
      key: { pk: ${JSON.stringify(CATALOG_MEMBER_KEY.pkPrefix)} + log, sk: ${JSON.stringify(CATALOG_MEMBER_KEY.skPrefix)} + sub },
      consistentRead: true,
    });
  },
  response(ctx) {
    const roles = ${JSON.stringify(CATALOG_ROLES)};
    if (ctx.error || !ctx.result || !roles.includes(ctx.result.role)) {
      util.unauthorized();
    }
  },
};

export function onPublish(ctx) {
  return ctx.events;
}
`;
}

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

export interface SheetlogStackProps extends StackProps {
  readonly config: SheetlogConfig;
  /** Folder holding the function crates; tests point it at stub crates. Defaults to `functions/`. */
  readonly functionsDir?: string;
  /** The Entry-stream filter patterns; default: read from `functions/core/src/aws/stream_filter.json`. */
  readonly streamFilterPatterns?: FilterPattern[];
}

export class SheetlogStack extends Stack {
  readonly entryTable: dynamodb.Table;
  readonly segmentTable: dynamodb.Table;
  readonly pendingSnapshotsTable: dynamodb.Table;
  readonly dedupeTable: dynamodb.Table;
  readonly clientsTable: dynamodb.Table;
  /** Sheets, names, members and roles (authMode=cognito only; docs/storage.md, "Catalog"). */
  readonly catalogTable?: dynamodb.Table;
  /** The people who may sign in (authMode=cognito only). */
  readonly userPool?: cognito.UserPool;
  /** The page's and the CLI's app client: public (no secret), SRP sign-in and refresh tokens. */
  readonly userPoolClient?: cognito.UserPoolClient;
  readonly bucket: s3.Bucket;
  readonly snapshotQueue: sqs.Queue;
  readonly snapshotDeadLetterQueue: sqs.Queue;
  readonly streamRouterFailureQueue: sqs.Queue;
  /** Replicache pushes waiting for the sync writer: FIFO, one message group per log. */
  readonly syncQueue: sqs.Queue;
  readonly syncDeadLetterQueue: sqs.Queue;
  readonly api: SheetlogFunction;
  readonly streamRouter: SheetlogFunction;
  readonly snapshotWorker: SheetlogFunction;
  /** Applies queued pushes, one log at a time (the SyncQueue's consumer). */
  readonly syncWriter: SheetlogFunction;
  /** The scheduled retention run, when `retentionMode` is `archive` or `delete`. */
  readonly archiver?: SheetlogFunction;
  readonly httpApi: apigw.HttpApi;
  readonly backups: Backups;
  readonly dashboard: cloudwatch.Dashboard;
  /** Pokes: AppSync Events, one channel per sheet; the API and the sync writer publish. */
  readonly eventApi: appsync.EventApi;
  readonly alarmTopic: sns.Topic;

  constructor(scope: Construct, id: string, props: SheetlogStackProps) {
    super(scope, id, {
      description: 'sheetlog: serverless event-sourced backend for collaborative spreadsheets',
      ...props,
    });
    const { config } = props;
    const functionsDir = props.functionsDir ?? FUNCTIONS_DIR;
    const streamFilterPatterns = props.streamFilterPatterns ?? loadStreamFilterPatterns();
    Tags.of(this).add('sheetlog:stack', config.stackName);

    // ---- Tables (keys: docs/storage.md) -------------------------------------------------------
    // Adding a table is one SheetlogTable here, one LOGICAL_IDS entry, one
    // ENV name and a bindTable call per function that uses it; the upgrade-safety fixture then
    // needs the new table added on purpose.
    this.entryTable = new SheetlogTable(this, LOGICAL_IDS.entryTable, {
      partitionKey: { name: 's', type: dynamodb.AttributeType.BINARY },
      sortKey: { name: 'n', type: dynamodb.AttributeType.NUMBER },
      stream: dynamodb.StreamViewType.NEW_IMAGE,
      ephemeral: config.ephemeral,
    });
    this.segmentTable = new SheetlogTable(this, LOGICAL_IDS.segmentTable, {
      partitionKey: { name: 'l', type: dynamodb.AttributeType.BINARY },
      sortKey: { name: 'n', type: dynamodb.AttributeType.NUMBER },
      ephemeral: config.ephemeral,
    });
    this.pendingSnapshotsTable = new SheetlogTable(this, LOGICAL_IDS.pendingSnapshotsTable, {
      partitionKey: { name: 'l', type: dynamodb.AttributeType.BINARY },
      sortKey: { name: 'n', type: dynamodb.AttributeType.BINARY },
      ephemeral: config.ephemeral,
    });
    // Idempotency keys: one item per hash prefix, a binary-set column per month (no TTL: the
    // write that records a key removes the columns that aged out).
    this.dedupeTable = new SheetlogTable(this, LOGICAL_IDS.dedupeTable, {
      partitionKey: { name: 'p', type: dynamodb.AttributeType.BINARY },
      ephemeral: config.ephemeral,
    });
    // Sync clients (docs/sync.md): mutation ranges under (log ‖ client, first id), group members
    // under (log ‖ group, 0).
    this.clientsTable = new SheetlogTable(this, LOGICAL_IDS.clientsTable, {
      partitionKey: { name: 'k', type: dynamodb.AttributeType.BINARY },
      sortKey: { name: 'm', type: dynamodb.AttributeType.NUMBER },
      ephemeral: config.ephemeral,
    });
    // Added to existing stacks in place (a new GSI is no replacement); items written before it
    // get their `i` from `sheetlog-maintenance index-clients` (docs/deploy.md, "Upgrading").
    this.clientsTable.addGlobalSecondaryIndex({
      indexName: CLIENTS_GSI.indexName,
      partitionKey: { name: CLIENTS_GSI.partitionKey, type: dynamodb.AttributeType.BINARY },
      projectionType: dynamodb.ProjectionType.KEYS_ONLY,
    });

    // Sheets and their members (authMode=cognito): the API chooses the item shapes within these
    // keys (docs/storage.md, "Catalog"); the index serves "my sheets, newest first".
    if (config.cognito) {
      this.catalogTable = new SheetlogTable(this, LOGICAL_IDS.catalogTable, {
        partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
        sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
        ephemeral: config.ephemeral,
      });
      this.catalogTable.addGlobalSecondaryIndex({
        indexName: CATALOG_GSI.indexName,
        partitionKey: { name: CATALOG_GSI.partitionKey, type: dynamodb.AttributeType.STRING },
        sortKey: { name: CATALOG_GSI.sortKey, type: dynamodb.AttributeType.STRING },
        projectionType: dynamodb.ProjectionType.ALL,
      });
      [this.userPool, this.userPoolClient] = this.addUserPool(config.cognito, config.ephemeral);
    }

    // ---- Bucket -------------------------------------------------------------------------------
    this.bucket = new s3.Bucket(this, LOGICAL_IDS.bucket, {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      minimumTLSVersion: 1.2,
      // Objects are never overwritten (payloads by UUID, snapshot chunks by content hash), but they
      // can be deleted by mistake: versions keep a deleted object restorable for
      // noncurrentVersionDays (constructs/backups.ts expires them, and expired uploads with them).
      versioned: true,
      lifecycleRules: [
        {
          // The discardable write: an upload whose entry never commits keeps its tag and expires.
          id: 'expire-auto-delete-tagged',
          tagFilters: { [AUTO_DELETE_TAG.key]: AUTO_DELETE_TAG.value },
          expiration: Duration.days(config.autoDeleteDays),
        },
        {
          // S3 refuses AbortIncompleteMultipartUpload in a rule filtered by tags, hence a rule of its own.
          id: 'abort-incomplete-multipart-uploads',
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
      // Browsers PUT payloads to, and GET snapshots from, URLs the API presigns; the URL's
      // signature is the authorization, the origin list only limits which pages may use it. No
      // origins configured: only the rule for the API's own origin (the web page, added below),
      // so no page on another origin can use the URLs.
      cors:
        config.corsAllowedOrigins.length === 0
          ? undefined
          : [
              {
                allowedMethods: [s3.HttpMethods.PUT, s3.HttpMethods.GET, s3.HttpMethods.HEAD],
                allowedOrigins: config.corsAllowedOrigins,
                allowedHeaders: ['*'],
                exposedHeaders: ['ETag'],
                maxAge: 3600,
              },
            ],
      removalPolicy: config.ephemeral ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
      autoDeleteObjects: config.ephemeral,
    });
    (this.bucket.node.defaultChild as s3.CfnBucket).overrideLogicalId(LOGICAL_IDS.bucket);
    Validations.of(this.bucket).acknowledge({
      id: 'AwsSolutions-S1',
      reason:
        "Only the stack's own functions and URLs they presign reach this bucket, and the API access log records every " +
        'presign request; server access logs would need a second bucket for every self-hoster to administer. ' +
        'Enable CloudTrail S3 data events for an object-level audit trail (docs/deploy.md).',
    });

    // ---- Queues -------------------------------------------------------------------------------
    this.snapshotDeadLetterQueue = secureQueue(this, LOGICAL_IDS.snapshotDeadLetterQueue, {});
    this.snapshotQueue = secureQueue(this, LOGICAL_IDS.snapshotQueue, {
      visibilityTimeout: TIMINGS.snapshotVisibilityTimeout,
      deadLetterQueue: { queue: this.snapshotDeadLetterQueue, maxReceiveCount: TIMINGS.snapshotMaxReceiveCount },
    });
    this.streamRouterFailureQueue = secureQueue(this, LOGICAL_IDS.streamRouterFailureQueue, {});
    Validations.of(this.streamRouterFailureQueue).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason:
        "This queue is itself the on-failure destination of the Entry-stream event source (the stream router's DLQ); " +
        'it holds records of failed batches for an operator, and a DLQ behind it would add nothing.',
    });
    // The snapshot DLQ is found by cdk-nag as the target of SnapshotQueue's redrive policy.

    // Pushes (docs/sync.md, "Queued pushes"): a FIFO queue whose message group is the log, so one
    // writer applies a sheet's pushes at a time and in order. The API sets each message's
    // deduplication id from the push's content (client group, clients, mutation id ranges), so
    // content-based deduplication stays off. A FIFO queue's dead-letter queue must be FIFO too.
    // Both exist in either `syncWrites` mode: switching modes never creates or deletes a queue.
    this.syncDeadLetterQueue = secureQueue(this, LOGICAL_IDS.syncDeadLetterQueue, { fifo: true });
    this.syncQueue = secureQueue(this, LOGICAL_IDS.syncQueue, {
      fifo: true,
      contentBasedDeduplication: false,
      visibilityTimeout: TIMINGS.syncVisibilityTimeout,
      deadLetterQueue: { queue: this.syncDeadLetterQueue, maxReceiveCount: TIMINGS.syncMaxReceiveCount },
    });

    // ---- Functions ----------------------------------------------------------------------------
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

    // The API embeds the web client's bundle at compile time (cdk/lib/web.ts).
    if (this.bundlingRequired && functionsDir === FUNCTIONS_DIR) buildWebClient();
    this.api = new SheetlogFunction(this, 'Api', {
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
      ephemeralStorageSize: spool,
    })
      // The API only creates Entry and Segment items (appends, new logs and segments, all
      // conditional puts); the snapshot worker is what updates them.
      // BatchWriteItem (deletes only): DELETE /logs/{logId} removes a log's items
      // (docs/storage.md, "Deleting a log"), finding its clients through the Clients index.
      .bindTable(ENV.entryTable, this.entryTable, ['Query', 'PutItem', 'BatchWriteItem'])
      .bindTable(ENV.segmentTable, this.segmentTable, ['GetItem', 'Query', 'PutItem', 'BatchWriteItem'])
      .bindTable(ENV.pendingTable, this.pendingSnapshotsTable, ['Query', 'BatchWriteItem'])
      // An idempotent append records its key with an UpdateItem inside the append's transaction;
      // deleting a log removes its keys (UpdateItem) and items left empty (DeleteItem).
      .bindTable(ENV.dedupeTable, this.dedupeTable, ['GetItem', 'UpdateItem', 'DeleteItem'])
      .bindTable(
        ENV.clientsTable,
        this.clientsTable,
        ['GetItem', 'Query', 'PutItem', 'UpdateItem', 'BatchWriteItem'],
        ['Query'],
      )
      .bindBucket(ENV.bucket, this.bucket, [
        { prefix: PREFIXES.payloads, access: ['read', 'write', 'tag', 'delete'] },
        // Write: forking a sheet (POST /logs with `from`) builds the fork's first snapshot.
        { prefix: PREFIXES.snapshots, access: ['read', 'write', 'abortUpload', 'delete'] },
        // A push too large for an SQS message is written here (auto-delete tagged) and queued by key.
        { prefix: PREFIXES.pushes, access: ['write', 'tag'] },
      ])
      .bindQueue(ENV.syncQueueUrl, this.syncQueue, 'send')
      .bindSetting(ENV.syncWrites, config.syncWrites)
      .bindSetting(ENV.inlineBodyMaxBytes, config.inlineBodyMaxBytes)
      .bindSetting(ENV.snapshotInterval, config.snapshotInterval)
      .bindSetting(ENV.segmentMaxEntries, config.segmentMaxEntries)
      .bindSetting(ENV.dedupeKeysPerMonth, config.dedupeKeysPerMonth)
      .bindSetting(ENV.uploadUrlTtlSecs, config.uploadUrlTtlSecs)
      .bindSetting(ENV.maxUploadBytes, config.maxUploadBytes);
    // Under JWT authorization, which logs a token may use is in one of its claims (docs/api.md).
    if (config.jwt) this.api.bindSetting(ENV.accessClaim, config.jwt.accessClaim);
    // Under cognito authorization, the catalog says who may use which sheet (contract of issue 31).
    if (this.catalogTable && this.userPool && this.userPoolClient) {
      this.api
        .bindSetting(ENV.authMode, 'cognito')
        // Item reads and writes on the table (TransactWriteItems needs the Put/Update/Delete/
        // ConditionCheck of its parts); on the index only the listing's Query.
        .bindTable(
          ENV.catalogTable,
          this.catalogTable,
          ['GetItem', 'BatchGetItem', 'Query', 'PutItem', 'UpdateItem', 'DeleteItem', 'ConditionCheckItem'],
          ['Query'],
        )
        // The signed-in person's verified email (ListUsers filtered by sub): GET /me, and claiming
        // invitations. Sharing asks the pool nothing (docs/api.md, "Sharing by email").
        .bindUserPool(ENV.userPoolId, this.userPool, ['ListUsers'])
        // Served to the page and the CLI (GET /config.json): a public client id, not a secret.
        .bindSetting(ENV.userPoolClientId, this.userPoolClient.userPoolClientId);
      Validations.of(this.api.role).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${LOGICAL_IDS.catalogTable}.Arn>/index/*]`,
        reason:
          "Query only, on the catalog's indexes (gsi1: a person's sheets, newest first); the wildcard " +
          'stops at the index names of this one table.',
      });
    }

    Validations.of(this.api.role).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${LOGICAL_IDS.clientsTable}.Arn>/index/*]`,
      reason:
        "Query only, on the Clients table's indexes (byLog: a deleted sheet's clients); the wildcard " +
        'stops at the index names of this one table.',
    });

    this.streamRouter = new SheetlogFunction(this, 'StreamRouter', {
      ...common,
      crate: CRATES.streamRouter,
      description: 'sheetlog Entry-stream router: snapshot jobs and payload un-tagging',
      timeout: TIMINGS.streamRouterTimeout,
      memorySize: 256,
    })
      .bindQueue(ENV.snapshotQueueUrl, this.snapshotQueue, 'send')
      .bindBucket(ENV.bucket, this.bucket, [{ prefix: PREFIXES.payloads, access: ['untag'] }]);

    this.snapshotWorker = new SheetlogFunction(this, 'SnapshotWorker', {
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
      .bindTable(ENV.entryTable, this.entryTable, ['Query', 'UpdateItem'])
      .bindTable(ENV.segmentTable, this.segmentTable, ['GetItem', 'Query', 'UpdateItem'])
      // No GetItem: the Query for the log's earliest pending item returns it, checkpoint and all.
      .bindTable(ENV.pendingTable, this.pendingSnapshotsTable, ['Query', 'PutItem', 'UpdateItem', 'DeleteItem'])
      // The log's tombstone: a deleted log's snapshot is not built.
      .bindTable(ENV.clientsTable, this.clientsTable, ['GetItem'], [])
      .bindBucket(ENV.bucket, this.bucket, [
        // A large manifest is a multipart upload, aborted if its build fails halfway.
        { prefix: PREFIXES.snapshots, access: ['read', 'write', 'abortUpload'] },
        { prefix: PREFIXES.payloads, access: ['read'] },
      ])
      .bindQueue(ENV.snapshotQueueUrl, this.snapshotQueue, 'consume')
      // The snapshot trigger's settings are the API's and the writer's: the worker builds what
      // it is sent (tests/tests/integration/function_environment.rs holds each function to what
      // it reads).
      .bindSetting(ENV.pendingTimeoutSecs, config.pendingTimeoutSecs);

    this.syncWriter = new SheetlogFunction(this, 'SyncWriter', {
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
      .bindTable(ENV.entryTable, this.entryTable, ['Query', 'PutItem'])
      .bindTable(ENV.segmentTable, this.segmentTable, ['GetItem', 'Query', 'PutItem'])
      // GetItem also reads the log's tombstone: pushes to a deleted log are dropped.
      .bindTable(
        ENV.clientsTable,
        this.clientsTable,
        ['GetItem', 'Query', 'PutItem', 'UpdateItem', 'BatchWriteItem'],
        [],
      )
      .bindBucket(ENV.bucket, this.bucket, [
        // A large mutation body is offloaded like any entry body, written with the auto-delete tag.
        { prefix: PREFIXES.payloads, access: ['read', 'write', 'tag'] },
        // A push too large for an SQS message, written there by the API.
        { prefix: PREFIXES.pushes, access: ['read'] },
      ])
      .bindSetting(ENV.inlineBodyMaxBytes, config.inlineBodyMaxBytes)
      .bindSetting(ENV.snapshotInterval, config.snapshotInterval)
      .bindSetting(ENV.segmentMaxEntries, config.segmentMaxEntries);

    // ---- Pokes (docs/sync.md, "Pokes") --------------------------------------------------------
    // After each commit the API and the sync writer publish the sheet's next sequence on
    // `/sheets/<logId>`; open pages subscribe over AppSync's WebSocket and pull on a poke.
    // Publishers are IAM-authorized (a SigV4-signed POST /event). Subscribers use the stack's
    // authorization: with JWT the same tokens as the HTTP API (OIDC, the same issuer and client
    // ids) and the onSubscribe handler's check of the access claim; with IAM, IAM.
    // With cognito, the user pool's tokens (AppSync verifies them, access or id token, for this
    // app client only) and the onSubscribe handler's catalog lookup.
    const iamAuth = appsync.AppSyncAuthorizationType.IAM;
    const subscribeAuth = config.jwt
      ? appsync.AppSyncAuthorizationType.OIDC
      : this.userPool
        ? appsync.AppSyncAuthorizationType.USER_POOL
        : iamAuth;
    const escapeRegex = (v: string) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    this.eventApi = new appsync.EventApi(this, 'EventApi', {
      apiName: `${config.stackName}-pokes`,
      authorizationConfig: {
        authProviders: [
          { authorizationType: iamAuth },
          ...(config.jwt
            ? [
                {
                  authorizationType: appsync.AppSyncAuthorizationType.OIDC,
                  openIdConnectConfig: {
                    oidcProvider: config.jwt.issuer,
                    // A regular expression: any of the HTTP API's audiences.
                    clientId: `^(${config.jwt.audience.map(escapeRegex).join('|')})$`,
                  },
                },
              ]
            : []),
          ...(this.userPool && this.userPoolClient
            ? [
                {
                  authorizationType: appsync.AppSyncAuthorizationType.USER_POOL,
                  cognitoConfig: {
                    userPool: this.userPool,
                    appIdClientRegex: `^${this.userPoolClient.userPoolClientId}$`,
                  },
                },
              ]
            : []),
        ],
        connectionAuthModeTypes: [subscribeAuth],
        defaultPublishAuthModeTypes: [iamAuth],
        defaultSubscribeAuthModeTypes: [subscribeAuth],
      },
    });
    const pokeNamespace = this.eventApi.addChannelNamespace('SheetsNamespace', {
      channelNamespaceName: POKE_NAMESPACE,
      authorizationConfig: { publishAuthModeTypes: [iamAuth], subscribeAuthModeTypes: [subscribeAuth] },
      code: config.jwt
        ? appsync.Code.fromInline(onSubscribeCode(config.jwt.accessClaim))
        : this.catalogTable
          ? appsync.Code.fromInline(onSubscribeCatalogCode())
          : undefined,
      subscribeHandlerConfig: this.catalogTable ? { dataSource: this.catalogReader(this.catalogTable) } : undefined,
    });
    for (const publisher of [this.api, this.syncWriter]) {
      // appsync:EventPublish on this namespace only.
      pokeNamespace.grantPublish(publisher.function);
      publisher
        .bindSetting(ENV.eventsHttpUrl, `https://${this.eventApi.httpDns}/event`)
        .bindSetting(ENV.eventsNamespace, POKE_NAMESPACE);
    }
    // The page subscribes here (the API writes it into the page).
    this.api.bindSetting(ENV.eventsRealtimeUrl, `wss://${this.eventApi.realtimeDns}/event/realtime`);

    // ---- Event sources ------------------------------------------------------------------------
    this.streamRouter.function.addEventSource(
      new DynamoEventSource(this.entryTable, {
        // From the oldest record: the mapping is created with the table, and nothing may be skipped.
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: 100,
        filters: streamFilterPatterns.map((pattern) => lambda.FilterCriteria.filter(pattern)),
        reportBatchItemFailures: true,
        bisectBatchOnError: true,
        retryAttempts: TIMINGS.streamRetryAttempts,
        maxRecordAge: TIMINGS.streamMaxRecordAge,
        onFailure: new SqsDlq(this.streamRouterFailureQueue),
      }),
    );
    this.snapshotWorker.function.addEventSource(
      new SqsEventSource(this.snapshotQueue, {
        // One job per invocation: a job can run for minutes and hands off through its own message.
        batchSize: 1,
        reportBatchItemFailures: true,
        maxConcurrency: TIMINGS.snapshotWorkerMaxConcurrency,
      }),
    );
    this.syncWriter.function.addEventSource(
      new SqsEventSource(this.syncQueue, {
        // Up to 10 pushes, of one or several logs, per invocation: the writer appends a log's
        // pushes of the batch together (group commit). A FIFO queue hands a message group to one
        // invocation at a time, so a log's pushes are applied in order by one writer.
        batchSize: TIMINGS.syncBatchSize,
        // A failed push is reported alone; SQS then holds back that log's later pushes (same
        // message group) until it is retried, and other logs' pushes of the batch are done.
        reportBatchItemFailures: true,
      }),
    );

    // ---- Segment retention (docs/storage.md, "Archived segments") -----------------------------
    if (config.retentionMode !== 'keep') {
      this.archiver = new SheetlogFunction(this, 'Archiver', {
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
        .bindTable(ENV.entryTable, this.entryTable, ['Query', 'BatchWriteItem'])
        .bindTable(ENV.segmentTable, this.segmentTable, ['GetItem', 'Query', 'Scan', 'UpdateItem'])
        .bindBucket(ENV.bucket, this.bucket, [{ prefix: PREFIXES.payloads, access: ['read', 'write'] }])
        .bindSetting('SHEETLOG_RETENTION_MODE', config.retentionMode)
        .bindSetting('SHEETLOG_RETENTION_KEEP_SEGMENTS', config.retentionKeepSegments);
      if (config.retentionAfterDays !== undefined) {
        this.archiver.bindSetting('SHEETLOG_RETENTION_AFTER_DAYS', config.retentionAfterDays);
      }
      new events.Rule(this, 'RetentionSchedule', {
        description: 'Runs the sheetlog segment retention policy once a day',
        schedule: events.Schedule.rate(Duration.days(1)),
        targets: [new targets.LambdaFunction(this.archiver.function, { retryAttempts: 2 })],
      });
    }

    // ---- HTTP API -----------------------------------------------------------------------------
    // cognito: a JWT authorizer whose issuer is the pool and whose audience is the app client
    // (Cognito access tokens carry it as `client_id`, which API Gateway checks).
    const authorizer = config.jwt
      ? new HttpJwtAuthorizer('JwtAuthorizer', config.jwt.issuer, { jwtAudience: config.jwt.audience })
      : this.userPool && this.userPoolClient
        ? new HttpUserPoolAuthorizer('UserPoolAuthorizer', this.userPool, { userPoolClients: [this.userPoolClient] })
        : new HttpIamAuthorizer();
    this.httpApi = new apigw.HttpApi(this, 'HttpApi', {
      apiName: config.stackName,
      description: `sheetlog HTTP API (${AUTHORIZATION_OUTPUT[config.authMode]} authorization)`,
      defaultIntegration: new HttpLambdaIntegration('ApiIntegration', this.api.function, {
        payloadFormatVersion: apigw.PayloadFormatVersion.VERSION_2_0,
      }),
      defaultAuthorizer: authorizer,
      // API Gateway answers CORS preflights itself, before any authorizer runs. Off unless
      // origins are configured (corsAllowedOrigins).
      corsPreflight:
        config.corsAllowedOrigins.length === 0
          ? undefined
          : {
              allowOrigins: config.corsAllowedOrigins,
              allowMethods: [apigw.CorsHttpMethod.ANY],
              // A wildcard does not cover Authorization in browsers, hence both.
              allowHeaders: ['authorization', '*'],
              // Readable by browser clients: a replayed idempotent append, and how long to back off.
              exposeHeaders: ['idempotent-replayed', 'retry-after'],
              maxAge: Duration.hours(1),
            },
      createDefaultStage: false,
    });
    // The routes without an authorizer (OPEN_ROUTES): the web spreadsheet (functions/api/src/web.rs,
    // served by the same function on the API's own origin), the settings it signs in with
    // (/config.json, needed before it holds a token), /health and /openapi.json. None reads data;
    // every data route keeps the default authorizer, and the page sends the person's token.
    const webIntegration = new HttpLambdaIntegration('WebIntegration', this.api.function, {
      payloadFormatVersion: apigw.PayloadFormatVersion.VERSION_2_0,
    });
    for (const { method, path, why } of OPEN_ROUTES) {
      for (const route of this.httpApi.addRoutes({
        path,
        methods: [method as apigw.HttpMethod],
        integration: webIntegration,
        authorizer: new apigw.HttpNoneAuthorizer(),
      })) {
        Validations.of(route).acknowledge({
          id: 'AwsSolutions-APIG4',
          reason: `${why} Every data route is authorized.`,
        });
      }
    }
    // The invitation an administrator's `admin-create-user` sends names the page.
    if (this.userPool) {
      (this.userPool.node.defaultChild as cognito.CfnUserPool).addPropertyOverride(
        'AdminCreateUserConfig.InviteMessageTemplate',
        {
          EmailSubject: `Your ${config.stackName} sheets account`,
          EmailMessage:
            `You have been invited to the spreadsheets at ${this.httpApi.apiEndpoint}/ . ` +
            'Sign in with {username} and the temporary password {####}; you will then choose your own password.',
        },
      );
    }
    // The page uploads imports straight to S3 with presigned PUTs, from the API's origin.
    this.bucket.addCorsRule({
      allowedMethods: [s3.HttpMethods.PUT, s3.HttpMethods.GET, s3.HttpMethods.HEAD],
      allowedOrigins: [this.httpApi.apiEndpoint],
      allowedHeaders: ['*'],
      exposedHeaders: ['ETag'],
      maxAge: 3600,
    });
    const accessLogs = new logs.LogGroup(this, 'ApiAccessLogs', {
      retention: logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const stage = new apigw.HttpStage(this, 'DefaultStage', {
      httpApi: this.httpApi,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: config.throttlingRateLimit, burstLimit: config.throttlingBurstLimit },
      accessLogSettings: {
        destination: new apigw.LogGroupLogDestination(accessLogs),
        format: AccessLogFormat.custom(
          JSON.stringify({
            requestId: '$context.requestId',
            ip: '$context.identity.sourceIp',
            caller: '$context.identity.caller',
            requestTime: '$context.requestTime',
            routeKey: '$context.routeKey',
            path: '$context.path',
            status: '$context.status',
            responseLength: '$context.responseLength',
            latencyMs: '$context.responseLatency',
            integrationError: '$context.integrationErrorMessage',
            authorizerError: '$context.authorizer.error',
          }),
        ),
      },
    });

    // ---- Alarms -------------------------------------------------------------------------------
    this.alarmTopic = new sns.Topic(this, 'AlarmTopic', {
      displayName: `${config.stackName} alarms`,
      enforceSSL: true,
    });
    Validations.of(this.alarmTopic).acknowledge({
      id: 'AwsSolutions-SNS2',
      reason:
        'Alarm notifications carry alarm names and metric values, no customer data. CloudWatch cannot publish to a ' +
        'topic encrypted with the AWS-managed SNS key, and a customer-managed key is one more thing to administer.',
    });
    if (config.alarmEmail) this.alarmTopic.addSubscription(new EmailSubscription(config.alarmEmail));
    this.addAlarms();
    this.backups = new Backups(this, 'Backups', {
      bucket: this.bucket,
      tables: [
        this.entryTable,
        this.segmentTable,
        this.pendingSnapshotsTable,
        this.dedupeTable,
        this.clientsTable,
        ...(this.catalogTable ? [this.catalogTable] : []),
      ],
      noncurrentVersionDays: config.noncurrentVersionDays,
      backupPlan: config.backupPlan,
      backupRetentionDays: config.backupRetentionDays,
      ephemeral: config.ephemeral,
    });
    this.dashboard = new SheetlogDashboard(this, 'Dashboard', {
      dashboardName: config.stackName,
      httpApi: this.httpApi,
      entryTable: this.entryTable,
      tables: [
        ['Entry', this.entryTable],
        ['Segment', this.segmentTable],
        ['PendingSnapshots', this.pendingSnapshotsTable],
        ['Dedupe', this.dedupeTable],
        ['Clients', this.clientsTable],
        ...(this.catalogTable ? ([['Catalog', this.catalogTable]] as [string, dynamodb.ITable][]) : []),
      ],
      snapshotQueue: this.snapshotQueue,
      syncQueue: this.syncQueue,
      snapshotWorker: this.snapshotWorker.function,
      functions: [
        ['Api', this.api.function],
        ['StreamRouter', this.streamRouter.function],
        ['SnapshotWorker', this.snapshotWorker.function],
        ['SyncWriter', this.syncWriter.function],
        ...(this.archiver ? ([['Archiver', this.archiver.function]] as [string, lambda.IFunction][]) : []),
      ],
    }).dashboard;

    // ---- Outputs ------------------------------------------------------------------------------
    const outputs: Record<string, [string, string]> = {
      ApiUrl: [stage.url, 'Base URL of the HTTP API'],
      ApiAuthorization: [
        AUTHORIZATION_OUTPUT[config.authMode],
        'How requests to the API are authorized (authMode; scripts/deploy keeps it on upgrades)',
      ],
      WebUrl: [`${this.httpApi.apiEndpoint}/`, 'The web spreadsheet: open it in a browser'],
      EntryTableName: [this.entryTable.tableName, 'Entry table (the event logs)'],
      SegmentTableName: [this.segmentTable.tableName, 'Segment table'],
      PendingSnapshotsTableName: [this.pendingSnapshotsTable.tableName, 'Pending Snapshots table'],
      DedupeTableName: [this.dedupeTable.tableName, 'Dedupe table (idempotency keys)'],
      ClientsTableName: [this.clientsTable.tableName, 'Clients table (sync clients)'],
      BucketName: [this.bucket.bucketName, 'Payload and snapshot bucket'],
      SnapshotQueueUrl: [this.snapshotQueue.queueUrl, 'Snapshot job queue'],
      SnapshotDeadLetterQueueUrl: [this.snapshotDeadLetterQueue.queueUrl, 'Snapshot jobs that kept failing'],
      StreamRouterFailureQueueUrl: [
        this.streamRouterFailureQueue.queueUrl,
        'Entry-stream batches the router could not process',
      ],
      SyncQueueUrl: [this.syncQueue.queueUrl, 'Replicache pushes waiting for the sync writer (FIFO)'],
      SyncDeadLetterQueueUrl: [this.syncDeadLetterQueue.queueUrl, 'Pushes the sync writer could not apply'],
      EventsHttpUrl: [`https://${this.eventApi.httpDns}/event`, 'Event API publish endpoint (pokes; IAM only)'],
      EventsRealtimeUrl: [
        `wss://${this.eventApi.realtimeDns}/event/realtime`,
        `Event API WebSocket endpoint: subscribe to /${POKE_NAMESPACE}/<logId> for pokes`,
      ],
      AlarmTopicArn: [this.alarmTopic.topicArn, 'Subscribe here to receive alarm notifications'],
    };
    if (this.catalogTable && this.userPool && this.userPoolClient) {
      outputs.CatalogTableName = [this.catalogTable.tableName, 'Catalog table (sheets, names, members)'];
      outputs.UserPoolId = [this.userPool.userPoolId, 'The user pool people sign in with (invite them here)'];
      outputs.UserPoolClientId = [this.userPoolClient.userPoolClientId, 'The app client of the page and the CLI'];
    }
    for (const [name, [value, description]] of Object.entries(outputs)) {
      new CfnOutput(this, name, { value, description });
    }
  }

  /**
   * The user pool and its app client (authMode=cognito). Sign-in by email; accounts by invitation
   * unless `cognitoSelfSignUp`; TOTP MFA as `cognitoMfa` says. The client is public (a browser
   * page and a CLI cannot keep a secret): SRP sign-in (USER_SRP_AUTH) for both, so the password
   * never leaves the browser or the terminal, and refresh tokens; no password flow
   * (USER_PASSWORD_AUTH); no hosted UI, so no OAuth flows and no domain.
   */
  private addUserPool(settings: CognitoConfig, ephemeral: boolean): [cognito.UserPool, cognito.UserPoolClient] {
    const pool = new cognito.UserPool(this, LOGICAL_IDS.userPool, {
      selfSignUpEnabled: settings.selfSignUp,
      signInAliases: { email: true },
      signInCaseSensitive: false,
      autoVerify: { email: true },
      keepOriginal: { email: true },
      standardAttributes: { email: { required: true, mutable: true } },
      accountRecovery: cognito.AccountRecovery.EMAIL_ONLY,
      passwordPolicy: {
        minLength: 12,
        requireLowercase: true,
        requireUppercase: true,
        requireDigits: true,
        requireSymbols: true,
        tempPasswordValidity: Duration.days(7),
      },
      mfa: { off: cognito.Mfa.OFF, optional: cognito.Mfa.OPTIONAL, required: cognito.Mfa.REQUIRED }[settings.mfa],
      mfaSecondFactor: settings.mfa === 'off' ? undefined : { otp: true, sms: false },
      deletionProtection: !ephemeral,
      removalPolicy: ephemeral ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
    });
    (pool.node.defaultChild as cognito.CfnUserPool).overrideLogicalId(LOGICAL_IDS.userPool);
    if (settings.mfa !== 'required') {
      Validations.of(pool).acknowledge({
        id: 'AwsSolutions-COG2',
        reason:
          "MFA is each person's choice (cognitoMfa=optional, TOTP) unless the deployer sets cognitoMfa=required; " +
          'requiring it for every colleague is a policy decision of the team, documented in docs/deploy.md.',
      });
    }
    Validations.of(pool).acknowledge({
      id: 'AwsSolutions-COG8',
      reason:
        'The Plus feature plan (threat protection) is billed per monthly active user on top of Essentials; ' +
        'sign-in is by invitation with a strong password policy and optional TOTP MFA. A deployer who wants ' +
        'threat protection switches the pool to Plus (docs/deploy.md).',
    });
    const client = pool.addClient(LOGICAL_IDS.userPoolClient, {
      generateSecret: false,
      authFlows: { userSrp: true },
      disableOAuth: true,
      preventUserExistenceErrors: true,
      enableTokenRevocation: true,
      accessTokenValidity: Duration.hours(1),
      idTokenValidity: Duration.hours(1),
      refreshTokenValidity: Duration.days(30),
    });
    (client.node.defaultChild as cognito.CfnUserPoolClient).overrideLogicalId(LOGICAL_IDS.userPoolClient);
    return [pool, client];
  }

  /**
   * The poke namespace's view of the catalog: an AppSync DynamoDB data source whose role may only
   * GetItem on the catalog table (the onSubscribe membership check). The role is passed without
   * policy updates, so the data source's own read grant (Query, Scan, BatchGetItem, ...) is not added.
   */
  private catalogReader(table: dynamodb.Table): appsync.AppSyncDynamoDbDataSource {
    const role = new iam.Role(this, 'CatalogReaderRole', {
      assumedBy: new iam.ServicePrincipal('appsync.amazonaws.com'),
      description: 'AppSync poke channel: reads a membership item of the catalog',
    });
    role.addToPolicy(new iam.PolicyStatement({ actions: ['dynamodb:GetItem'], resources: [table.tableArn] }));
    return new appsync.AppSyncDynamoDbDataSource(this, 'CatalogDataSource', {
      api: this.eventApi,
      table,
      readOnlyAccess: true,
      description: 'Membership items of the catalog, for onSubscribe',
      serviceRole: role.withoutPolicyUpdates(),
    });
  }

  private addAlarms(): void {
    const action = new SnsAction(this.alarmTopic);
    const alarm = (id: string, description: string, metric: cloudwatch.IMetric, threshold: number, periods = 1) => {
      const a = new cloudwatch.Alarm(this, id, {
        alarmDescription: description,
        metric,
        threshold,
        evaluationPeriods: periods,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      a.addAlarmAction(action);
      a.addOkAction(action);
    };
    const fiveMinutes = Duration.minutes(5);

    for (const [id, queue, what] of [
      [
        'SnapshotDeadLetterQueueDepthAlarm',
        this.snapshotDeadLetterQueue,
        'Snapshot jobs gave up; see docs/operations.md',
      ],
      [
        'StreamRouterFailureQueueDepthAlarm',
        this.streamRouterFailureQueue,
        'Entry-stream batches failed; see docs/operations.md',
      ],
      [
        'SyncDeadLetterQueueDepthAlarm',
        this.syncDeadLetterQueue,
        'Queued pushes failed five times and were dead-lettered (clients re-push them); see docs/operations.md',
      ],
    ] as const) {
      alarm(id, what, queue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes, statistic: 'Maximum' }), 1);
    }

    alarm(
      'StreamIteratorAgeAlarm',
      'The stream router is falling behind the Entry stream (records expire after 24 hours)',
      this.streamRouter.function.metric('IteratorAge', { period: fiveMinutes, statistic: 'Maximum' }),
      Duration.minutes(15).toMilliseconds(),
      3,
    );

    // The share of API requests answered 5xx (throttling and timeouts are 503s the client retries;
    // a sustained share means the service, not a client, is failing).
    alarm(
      'ApiServerErrorRateAlarm',
      'More than 5% of API requests failed with a 5xx for 10 minutes',
      new cloudwatch.MathExpression({
        expression: '100 * errors / IF(requests > 0, requests, 1)',
        usingMetrics: {
          errors: this.httpApi.metricServerError({ period: fiveMinutes, statistic: 'Sum' }),
          requests: this.httpApi.metricCount({ period: fiveMinutes, statistic: 'Sum' }),
        },
        period: fiveMinutes,
        label: 'API 5xx %',
      }),
      5,
      2,
    );

    // Jobs wait in the snapshot queue longer than a burst explains: the worker is failing or
    // starved (a deferred job is re-sent as a fresh message, so waiting behind an earlier
    // snapshot does not age it).
    alarm(
      'SnapshotQueueAgeAlarm',
      'The oldest snapshot job has waited over 15 minutes; see docs/operations.md',
      this.snapshotQueue.metricApproximateAgeOfOldestMessage({ period: fiveMinutes, statistic: 'Maximum' }),
      Duration.minutes(15).toSeconds(),
      3,
    );

    // A push waits in the sync queue while its log's earlier push is retried, or while the writer
    // fails or is throttled. Clients see their edits late (they stay pending in the browser), so
    // this is alarmed within minutes, not the snapshot queue's quarter of an hour.
    alarm(
      'SyncQueueAgeAlarm',
      'The oldest queued push has waited over a minute to be applied; see docs/operations.md',
      this.syncQueue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1), statistic: 'Maximum' }),
      Duration.minutes(1).toSeconds(),
      3,
    );

    // Published by the worker itself (embedded metric format, dimension FunctionName).
    const workerMetric = (metricName: string, statistic: string) =>
      new cloudwatch.Metric({
        namespace: 'Sheetlog',
        metricName,
        dimensionsMap: { FunctionName: this.snapshotWorker.function.functionName },
        period: fiveMinutes,
        statistic,
      });
    alarm(
      'SnapshotJobsParkedAlarm',
      'A snapshot build handed off too many times and was parked; see docs/operations.md',
      workerMetric('SnapshotJobsParked', 'Sum'),
      1,
    );
    // Pokes that could not be published (the writes stand; pages catch up by their slow pull).
    for (const [id, fn] of [
      ['ApiPokePublishErrorsAlarm', this.api],
      ['SyncWriterPokePublishErrorsAlarm', this.syncWriter],
    ] as const) {
      alarm(
        id,
        'Pokes are failing to publish to the Event API: pages update only by their fallback pull; see docs/operations.md',
        new cloudwatch.Metric({
          namespace: 'Sheetlog',
          metricName: 'PokePublishErrors',
          dimensionsMap: { FunctionName: fn.function.functionName },
          period: fiveMinutes,
          statistic: 'Sum',
        }),
        10,
      );
    }
    alarm(
      'SnapshotJobWaitAlarm',
      'A snapshot job has waited over an hour behind an earlier snapshot; see docs/operations.md',
      workerMetric('SnapshotJobWaitSeconds', 'Maximum'),
      Duration.hours(1).toSeconds(),
    );

    // On-demand tables throttle too (a partition's limits, or a sudden jump past twice the
    // previous peak); the SDK retries, so any throttled request that shows here is worth a look.
    for (const [name, table] of [
      ['EntryTable', this.entryTable],
      ['SegmentTable', this.segmentTable],
      ['PendingSnapshotsTable', this.pendingSnapshotsTable],
      ['DedupeTable', this.dedupeTable],
      ['ClientsTable', this.clientsTable],
      ...(this.catalogTable ? ([['CatalogTable', this.catalogTable]] as const) : []),
    ] as const) {
      alarm(
        `${name}ThrottlesAlarm`,
        `DynamoDB throttled requests to the ${name}`,
        table.metricThrottledRequestsForOperations({
          operations: [
            dynamodb.Operation.GET_ITEM,
            dynamodb.Operation.PUT_ITEM,
            dynamodb.Operation.UPDATE_ITEM,
            dynamodb.Operation.DELETE_ITEM,
            dynamodb.Operation.QUERY,
            dynamodb.Operation.SCAN,
            dynamodb.Operation.TRANSACT_WRITE_ITEMS,
          ],
          period: fiveMinutes,
          statistic: 'Sum',
        }),
        1,
      );
    }

    for (const [name, fn] of [
      ['Api', this.api],
      ['StreamRouter', this.streamRouter],
      ['SnapshotWorker', this.snapshotWorker],
      ['SyncWriter', this.syncWriter],
      ...(this.archiver ? ([['Archiver', this.archiver]] as const) : []),
    ] as const) {
      alarm(
        `${name}ErrorsAlarm`,
        `${fn.crate.binaryName} invocations failed`,
        fn.function.metricErrors({ period: fiveMinutes, statistic: 'Sum' }),
        1,
      );
      alarm(
        `${name}ThrottlesAlarm`,
        `${fn.crate.binaryName} invocations were throttled`,
        fn.function.metricThrottles({ period: fiveMinutes, statistic: 'Sum' }),
        1,
      );
    }
  }
}

/** A queue (standard unless `fifo`) with 14-day retention, SSE and a TLS-only policy, under a fixed logical id. */
function secureQueue(scope: Construct, logicalId: string, props: sqs.QueueProps): sqs.Queue {
  const queue = new sqs.Queue(scope, logicalId, {
    retentionPeriod: TIMINGS.queueRetention,
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    ...props,
  });
  (queue.node.defaultChild as sqs.CfnQueue).overrideLogicalId(logicalId);
  return queue;
}
