/**
 * The stack's stateful resources: the tables (keys: docs/storage.md), the payload/snapshot
 * bucket, the snapshot and sync queues with their dead-letter and failure queues, and their
 * backups. Each carries its fixed logical id from `LOGICAL_IDS`; the upgrade-safety test pins them
 * and their replacement-triggering properties.
 */

import { Duration, RemovalPolicy, type Stack, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import type { SheetlogConfig } from '../config';
import { Backups } from '../constructs/backups';
import { SheetlogTable } from '../constructs/sheetlog-table';
import { AUTO_DELETE_TAG, CATALOG_GSI, CLIENTS_GSI, LOGICAL_IDS, TIMINGS } from './names';

export interface Tables {
  readonly entryTable: dynamodb.Table;
  readonly segmentTable: dynamodb.Table;
  readonly pendingSnapshotsTable: dynamodb.Table;
  readonly dedupeTable: dynamodb.Table;
  readonly clientsTable: dynamodb.Table;
  /** authMode=cognito only. */
  readonly catalogTable?: dynamodb.Table;
}

export interface Queues {
  readonly snapshotQueue: sqs.Queue;
  readonly snapshotDeadLetterQueue: sqs.Queue;
  readonly streamRouterFailureQueue: sqs.Queue;
  readonly syncQueue: sqs.Queue;
  readonly syncDeadLetterQueue: sqs.Queue;
}

/** Every stateful resource: what the functions are bound to. */
export interface Storage extends Tables, Queues {
  readonly bucket: s3.Bucket;
}

/**
 * The tables (keys: docs/storage.md). Adding a table is one SheetlogTable here, one LOGICAL_IDS
 * entry, one ENV name (both in names.ts) and a bindTable call per function that uses it
 * (functions.ts); the upgrade-safety fixture then needs the new table added on purpose.
 */
export function addTables(stack: Stack, config: SheetlogConfig): Tables {
  const entryTable = new SheetlogTable(stack, LOGICAL_IDS.entryTable, {
    partitionKey: { name: 's', type: dynamodb.AttributeType.BINARY },
    sortKey: { name: 'n', type: dynamodb.AttributeType.NUMBER },
    stream: dynamodb.StreamViewType.NEW_IMAGE,
    ephemeral: config.ephemeral,
  });
  const segmentTable = new SheetlogTable(stack, LOGICAL_IDS.segmentTable, {
    partitionKey: { name: 'l', type: dynamodb.AttributeType.BINARY },
    sortKey: { name: 'n', type: dynamodb.AttributeType.NUMBER },
    ephemeral: config.ephemeral,
  });
  const pendingSnapshotsTable = new SheetlogTable(stack, LOGICAL_IDS.pendingSnapshotsTable, {
    partitionKey: { name: 'l', type: dynamodb.AttributeType.BINARY },
    sortKey: { name: 'n', type: dynamodb.AttributeType.BINARY },
    ephemeral: config.ephemeral,
  });
  // Idempotency keys: one item per hash prefix, a binary-set column per month (no TTL: the
  // write that records a key removes the columns that aged out).
  const dedupeTable = new SheetlogTable(stack, LOGICAL_IDS.dedupeTable, {
    partitionKey: { name: 'p', type: dynamodb.AttributeType.BINARY },
    ephemeral: config.ephemeral,
  });
  // Sync clients (docs/sync.md): mutation ranges under (log ‖ client, first id), group members
  // under (log ‖ group, 0).
  const clientsTable = new SheetlogTable(stack, LOGICAL_IDS.clientsTable, {
    partitionKey: { name: 'k', type: dynamodb.AttributeType.BINARY },
    sortKey: { name: 'm', type: dynamodb.AttributeType.NUMBER },
    ephemeral: config.ephemeral,
  });
  // Added to existing stacks in place (a new GSI is no replacement); items written before it
  // get their `i` from `sheetlog-maintenance index-clients` (docs/deploy.md, "Upgrading").
  clientsTable.addGlobalSecondaryIndex({
    indexName: CLIENTS_GSI.indexName,
    partitionKey: { name: CLIENTS_GSI.partitionKey, type: dynamodb.AttributeType.BINARY },
    projectionType: dynamodb.ProjectionType.KEYS_ONLY,
  });
  const tables = { entryTable, segmentTable, pendingSnapshotsTable, dedupeTable, clientsTable };
  return config.cognito ? { ...tables, catalogTable: addCatalogTable(stack, config) } : tables;
}

/**
 * Sheets and their members (authMode=cognito): the API chooses the item shapes within these
 * keys (docs/storage.md, "Catalog"); the index serves "my sheets, newest first".
 */
function addCatalogTable(stack: Stack, config: SheetlogConfig): dynamodb.Table {
  const catalogTable = new SheetlogTable(stack, LOGICAL_IDS.catalogTable, {
    partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
    sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
    ephemeral: config.ephemeral,
  });
  catalogTable.addGlobalSecondaryIndex({
    indexName: CATALOG_GSI.indexName,
    partitionKey: { name: CATALOG_GSI.partitionKey, type: dynamodb.AttributeType.STRING },
    sortKey: { name: CATALOG_GSI.sortKey, type: dynamodb.AttributeType.STRING },
    projectionType: dynamodb.ProjectionType.ALL,
  });
  return catalogTable;
}

/** The payload and snapshot bucket. */
export function addBucket(stack: Stack, config: SheetlogConfig): s3.Bucket {
  const bucket = new s3.Bucket(stack, LOGICAL_IDS.bucket, {
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
    // origins configured: only the rule for the API's own origin (the web page, added by
    // http-api.ts once the API exists), so no page on another origin can use the URLs.
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
  (bucket.node.defaultChild as s3.CfnBucket).overrideLogicalId(LOGICAL_IDS.bucket);
  Validations.of(bucket).acknowledge({
    id: 'AwsSolutions-S1',
    reason:
      "Only the stack's own functions and URLs they presign reach this bucket, and the API access log records every " +
      'presign request; server access logs would need a second bucket for every self-hoster to administer. ' +
      'Enable CloudTrail S3 data events for an object-level audit trail (docs/deploy.md).',
  });
  return bucket;
}

/** The snapshot job queue, the sync (push) queue, their dead-letter queues and the stream router's failure queue. */
export function addQueues(stack: Stack): Queues {
  const snapshotDeadLetterQueue = secureQueue(stack, LOGICAL_IDS.snapshotDeadLetterQueue, {});
  const snapshotQueue = secureQueue(stack, LOGICAL_IDS.snapshotQueue, {
    visibilityTimeout: TIMINGS.snapshotVisibilityTimeout,
    deadLetterQueue: { queue: snapshotDeadLetterQueue, maxReceiveCount: TIMINGS.snapshotMaxReceiveCount },
  });
  const streamRouterFailureQueue = secureQueue(stack, LOGICAL_IDS.streamRouterFailureQueue, {});
  Validations.of(streamRouterFailureQueue).acknowledge({
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
  const syncDeadLetterQueue = secureQueue(stack, LOGICAL_IDS.syncDeadLetterQueue, { fifo: true });
  const syncQueue = secureQueue(stack, LOGICAL_IDS.syncQueue, {
    fifo: true,
    contentBasedDeduplication: false,
    visibilityTimeout: TIMINGS.syncVisibilityTimeout,
    deadLetterQueue: { queue: syncDeadLetterQueue, maxReceiveCount: TIMINGS.syncMaxReceiveCount },
  });
  return { snapshotQueue, snapshotDeadLetterQueue, streamRouterFailureQueue, syncQueue, syncDeadLetterQueue };
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

/** Backups of every table and the bucket's old versions (constructs/backups.ts); `stack` holds them. */
export function addBackups(stack: Stack & Storage, config: SheetlogConfig): Backups {
  return new Backups(stack, 'Backups', {
    bucket: stack.bucket,
    tables: [
      stack.entryTable,
      stack.segmentTable,
      stack.pendingSnapshotsTable,
      stack.dedupeTable,
      stack.clientsTable,
      ...(stack.catalogTable ? [stack.catalogTable] : []),
    ],
    noncurrentVersionDays: config.noncurrentVersionDays,
    backupPlan: config.backupPlan,
    backupRetentionDays: config.backupRetentionDays,
    ephemeral: config.ephemeral,
  });
}
