/**
 * The stack's outputs: the API's and the page's addresses, the authorization mode (scripts/deploy
 * keeps it on upgrades), every table, the bucket, the queues, the Event API's endpoints, the alarm
 * topic and, under cognito authorization, the catalog, the user pool and its app client.
 */

import { CfnOutput, type Stack } from 'aws-cdk-lib';
import type * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import type * as appsync from 'aws-cdk-lib/aws-appsync';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type { SheetlogConfig } from '../config';
import type { SignIn } from './auth';
import { AUTHORIZATION_OUTPUT, POKE_NAMESPACE } from './names';
import type { Storage } from './storage';

/** What the outputs name. */
export interface Outputs extends Storage, SignIn {
  readonly httpApi: apigw.HttpApi;
  readonly eventApi: appsync.EventApi;
  readonly alarmTopic: sns.Topic;
}

/** The outputs; `stack` is their scope and holds what they name. */
export function addOutputs(stack: Stack & Outputs, config: SheetlogConfig, stage: apigw.HttpStage): void {
  const outputs: Record<string, [string, string]> = {
    ApiUrl: [stage.url, 'Base URL of the HTTP API'],
    ApiAuthorization: [
      AUTHORIZATION_OUTPUT[config.authMode],
      'How requests to the API are authorized (authMode; scripts/deploy keeps it on upgrades)',
    ],
    WebUrl: [`${stack.httpApi.apiEndpoint}/`, 'The web spreadsheet: open it in a browser'],
    EntryTableName: [stack.entryTable.tableName, 'Entry table (the event logs)'],
    SegmentTableName: [stack.segmentTable.tableName, 'Segment table'],
    PendingSnapshotsTableName: [stack.pendingSnapshotsTable.tableName, 'Pending Snapshots table'],
    DedupeTableName: [stack.dedupeTable.tableName, 'Dedupe table (idempotency keys)'],
    ClientsTableName: [stack.clientsTable.tableName, 'Clients table (sync clients)'],
    BucketName: [stack.bucket.bucketName, 'Payload and snapshot bucket'],
    SnapshotQueueUrl: [stack.snapshotQueue.queueUrl, 'Snapshot job queue'],
    SnapshotDeadLetterQueueUrl: [stack.snapshotDeadLetterQueue.queueUrl, 'Snapshot jobs that kept failing'],
    StreamRouterFailureQueueUrl: [
      stack.streamRouterFailureQueue.queueUrl,
      'Entry-stream batches the router could not process',
    ],
    SyncQueueUrl: [stack.syncQueue.queueUrl, 'Replicache pushes waiting for the sync writer (FIFO)'],
    SyncDeadLetterQueueUrl: [stack.syncDeadLetterQueue.queueUrl, 'Pushes the sync writer could not apply'],
    EventsHttpUrl: [`https://${stack.eventApi.httpDns}/event`, 'Event API publish endpoint (pokes; IAM only)'],
    EventsRealtimeUrl: [
      `wss://${stack.eventApi.realtimeDns}/event/realtime`,
      `Event API WebSocket endpoint: subscribe to /${POKE_NAMESPACE}/<logId> for pokes`,
    ],
    AlarmTopicArn: [stack.alarmTopic.topicArn, 'Subscribe here to receive alarm notifications'],
  };
  if (stack.catalogTable && stack.userPool && stack.userPoolClient) {
    outputs.CatalogTableName = [stack.catalogTable.tableName, 'Catalog table (sheets, names, members)'];
    outputs.UserPoolId = [stack.userPool.userPoolId, 'The user pool people sign in with (invite them here)'];
    outputs.UserPoolClientId = [stack.userPoolClient.userPoolClientId, 'The app client of the page and the CLI'];
  }
  for (const [name, [value, description]] of Object.entries(outputs)) {
    new CfnOutput(stack, name, { value, description });
  }
}
