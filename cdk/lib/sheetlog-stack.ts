/**
 * The whole of sheetlog in one stack: the event-log tables, the payload/snapshot bucket, the
 * snapshot job queue and the sync (push) queue, the Rust functions with their event sources, the
 * HTTP API, pokes, alarms and outputs. docs/deploy.md describes it for the people who deploy it;
 * docs/design.md says what the functions do with these resources and why.
 *
 * This file holds the `SheetlogStack` class, whose constructor builds the parts in order; each
 * part is made by a function in `cdk/lib/stack/`, with the stack as the scope of every construct:
 * - `names.ts`: the names the stack and its readers share (crates, logical ids, environment
 *   variables, catalog keys, open routes, prefixes, timings), re-exported here;
 * - `storage.ts`: tables, bucket, queues (fixed logical ids from `LOGICAL_IDS`; the upgrade-safety
 *   test pins them and their replacement-triggering properties) and their backups;
 * - `auth.ts`: the user pool and its app client (authMode=cognito);
 * - `functions.ts`: the functions, built by the house construct `SheetlogFunction` (each
 *   environment variable bound together with its permission), their event sources, the archiver;
 * - `pokes.ts` and `handlers.ts`: the Event API, its namespace and its handlers' code
 *   (`onSubscribeCode` and `onSubscribeCatalogCode`, re-exported here), which `handlers.ts` reads
 *   from the AppSync JavaScript modules in `cdk/lib/stack/appsync/`;
 * - `http-api.ts`: the HTTP API, its authorizer, open routes and stage;
 * - `alarms.ts`: the alarm topic, the alarms and the dashboard;
 * - `outputs.ts`: the stack's outputs.
 * The parts built first are handed what they need; alarms, backups, the dashboard and the outputs
 * come last and read the stack's own fields, all set by then.
 */

import { Stack, type StackProps, Tags } from 'aws-cdk-lib';
import type * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import type * as appsync from 'aws-cdk-lib/aws-appsync';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as cognito from 'aws-cdk-lib/aws-cognito';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import type { SheetlogConfig } from './config';
import type { Backups } from './constructs/backups';
import type { SheetlogFunction } from './constructs/sheetlog-function';
import { FUNCTIONS_DIR } from './paths';
import { addAlarms, addAlarmTopic, addDashboard } from './stack/alarms';
import { addUserPool, type SignIn } from './stack/auth';
import {
  addApi,
  addArchiver,
  addEventSources,
  addSnapshotWorker,
  addStreamRouter,
  addSyncWriter,
  type Functions,
  functionDefaults,
} from './stack/functions';
import { addHttpApi } from './stack/http-api';
import { addOutputs } from './stack/outputs';
import { addPokes } from './stack/pokes';
import { addBackups, addBucket, addQueues, addTables, type Storage } from './stack/storage';
import { type FilterPattern, loadStreamFilterPatterns } from './stream-filter';

export { onSubscribeCatalogCode, onSubscribeCode } from './stack/handlers';
export {
  ARCHIVER_CRATE,
  AUTHORIZATION_OUTPUT,
  AUTO_DELETE_TAG,
  CATALOG_GSI,
  CATALOG_MEMBER_KEY,
  CATALOG_ROLES,
  CLIENTS_GSI,
  CRATES,
  ENV,
  LOGICAL_IDS,
  OPEN_ROUTES,
  POKE_NAMESPACE,
  PREFIXES,
  TIMINGS,
} from './stack/names';

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

    // Stateful resources (storage.ts), and the user pool after the catalog table it goes with.
    const tables = addTables(this, config);
    const [userPool, userPoolClient] = config.cognito
      ? addUserPool(this, config.cognito, config.ephemeral)
      : [undefined, undefined];
    const bucket = addBucket(this, config);
    const storage: Storage = { ...tables, bucket, ...addQueues(this) };
    const signIn: SignIn = { userPool, userPoolClient };
    this.entryTable = storage.entryTable;
    this.segmentTable = storage.segmentTable;
    this.pendingSnapshotsTable = storage.pendingSnapshotsTable;
    this.dedupeTable = storage.dedupeTable;
    this.clientsTable = storage.clientsTable;
    this.catalogTable = storage.catalogTable;
    this.userPool = userPool;
    this.userPoolClient = userPoolClient;
    this.bucket = storage.bucket;
    this.snapshotQueue = storage.snapshotQueue;
    this.snapshotDeadLetterQueue = storage.snapshotDeadLetterQueue;
    this.streamRouterFailureQueue = storage.streamRouterFailureQueue;
    this.syncQueue = storage.syncQueue;
    this.syncDeadLetterQueue = storage.syncDeadLetterQueue;

    // The functions (functions.ts), the pokes they publish (pokes.ts), then their event sources:
    // each role's policy statements come in the order of its grants, so this order is kept.
    const defaults = functionDefaults(config, functionsDir);
    const functions: Functions = {
      api: addApi(this, config, defaults, storage, signIn),
      streamRouter: addStreamRouter(this, defaults, storage),
      snapshotWorker: addSnapshotWorker(this, config, defaults, storage),
      syncWriter: addSyncWriter(this, config, defaults, storage),
    };
    this.api = functions.api;
    this.streamRouter = functions.streamRouter;
    this.snapshotWorker = functions.snapshotWorker;
    this.syncWriter = functions.syncWriter;
    this.eventApi = addPokes(this, config, signIn, storage.catalogTable, functions);
    addEventSources(functions, storage, streamFilterPatterns);
    this.archiver = addArchiver(this, config, defaults, storage);

    // The HTTP API (http-api.ts), which also gives the bucket the page's CORS rule.
    const { httpApi, stage } = addHttpApi(this, config, functions.api, storage.bucket, signIn);
    this.httpApi = httpApi;

    // What reads the finished stack's fields: alarms, backups, the dashboard, the outputs.
    this.alarmTopic = addAlarmTopic(this, config);
    addAlarms(this);
    this.backups = addBackups(this, config);
    this.dashboard = addDashboard(this, config);
    addOutputs(this, config, stage);
  }
}
