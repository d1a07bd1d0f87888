/**
 * What watches the stack: the alarm topic (with the optional email subscription), the alarms on
 * the queues, the stream, the API, the functions' own metrics and throttles, and the dashboard
 * (constructs/dashboard.ts). docs/operations.md says what to do when each alarm fires.
 */

import { Duration, type Stack, Validations } from 'aws-cdk-lib';
import type * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { SheetlogConfig } from '../config';
import { SheetlogDashboard } from '../constructs/dashboard';
import type { Functions } from './functions';
import type { Storage } from './storage';

/** What the alarms and the dashboard watch: the stack's fields, all built by then. */
export interface Watched extends Storage, Functions {
  readonly httpApi: apigw.HttpApi;
  readonly alarmTopic: sns.Topic;
}

/** One alarm on `metric` reaching `threshold` in `periods` consecutive periods; it notifies on alarm and on OK. */
type Alarm = (id: string, description: string, metric: cloudwatch.IMetric, threshold: number, periods?: number) => void;

const FIVE_MINUTES = Duration.minutes(5);

export function addAlarmTopic(stack: Stack, config: SheetlogConfig): sns.Topic {
  const alarmTopic = new sns.Topic(stack, 'AlarmTopic', {
    displayName: `${config.stackName} alarms`,
    enforceSSL: true,
  });
  Validations.of(alarmTopic).acknowledge({
    id: 'AwsSolutions-SNS2',
    reason:
      'Alarm notifications carry alarm names and metric values, no customer data. CloudWatch cannot publish to a ' +
      'topic encrypted with the AWS-managed SNS key, and a customer-managed key is one more thing to administer.',
  });
  if (config.alarmEmail) alarmTopic.addSubscription(new EmailSubscription(config.alarmEmail));
  return alarmTopic;
}

/** The alarms, each notifying the alarm topic; `stack` is their scope and what they watch. */
export function addAlarms(stack: Stack & Watched): void {
  const action = new SnsAction(stack.alarmTopic);
  const alarm: Alarm = (id, description, metric, threshold, periods = 1) => {
    const a = new cloudwatch.Alarm(stack, id, {
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
  addBacklogAlarms(alarm, stack);
  addPublishedMetricAlarms(alarm, stack);
  addThrottleAndErrorAlarms(alarm, stack);
}

/** Work that failed or waits: dead-lettered messages, the stream's age, the API's 5xx share, the queues' ages. */
function addBacklogAlarms(alarm: Alarm, watched: Watched): void {
  for (const [id, queue, what] of [
    [
      'SnapshotDeadLetterQueueDepthAlarm',
      watched.snapshotDeadLetterQueue,
      'Snapshot jobs gave up; see docs/operations.md',
    ],
    [
      'StreamRouterFailureQueueDepthAlarm',
      watched.streamRouterFailureQueue,
      'Entry-stream batches failed; see docs/operations.md',
    ],
    [
      'SyncDeadLetterQueueDepthAlarm',
      watched.syncDeadLetterQueue,
      'Queued pushes failed five times and were dead-lettered (clients re-push them); see docs/operations.md',
    ],
  ] as const) {
    alarm(id, what, queue.metricApproximateNumberOfMessagesVisible({ period: FIVE_MINUTES, statistic: 'Maximum' }), 1);
  }

  alarm(
    'StreamIteratorAgeAlarm',
    'The stream router is falling behind the Entry stream (records expire after 24 hours)',
    watched.streamRouter.function.metric('IteratorAge', { period: FIVE_MINUTES, statistic: 'Maximum' }),
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
        errors: watched.httpApi.metricServerError({ period: FIVE_MINUTES, statistic: 'Sum' }),
        requests: watched.httpApi.metricCount({ period: FIVE_MINUTES, statistic: 'Sum' }),
      },
      period: FIVE_MINUTES,
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
    watched.snapshotQueue.metricApproximateAgeOfOldestMessage({ period: FIVE_MINUTES, statistic: 'Maximum' }),
    Duration.minutes(15).toSeconds(),
    3,
  );

  // A push waits in the sync queue while its log's earlier push is retried, or while the writer
  // fails or is throttled. Clients see their edits late (they stay pending in the browser), so
  // this is alarmed within minutes, not the snapshot queue's quarter of an hour.
  alarm(
    'SyncQueueAgeAlarm',
    'The oldest queued push has waited over a minute to be applied; see docs/operations.md',
    watched.syncQueue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1), statistic: 'Maximum' }),
    Duration.minutes(1).toSeconds(),
    3,
  );
}

/** The functions' own metrics: the snapshot worker's parked and waiting jobs, the publishers' failed pokes. */
function addPublishedMetricAlarms(alarm: Alarm, watched: Watched): void {
  // Published by the worker itself (embedded metric format, dimension FunctionName).
  const workerMetric = (metricName: string, statistic: string) =>
    new cloudwatch.Metric({
      namespace: 'Sheetlog',
      metricName,
      dimensionsMap: { FunctionName: watched.snapshotWorker.function.functionName },
      period: FIVE_MINUTES,
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
    ['ApiPokePublishErrorsAlarm', watched.api],
    ['SyncWriterPokePublishErrorsAlarm', watched.syncWriter],
  ] as const) {
    alarm(
      id,
      'Pokes are failing to publish to the Event API: pages update only by their fallback pull; see docs/operations.md',
      new cloudwatch.Metric({
        namespace: 'Sheetlog',
        metricName: 'PokePublishErrors',
        dimensionsMap: { FunctionName: fn.function.functionName },
        period: FIVE_MINUTES,
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
}

/** Throttled table requests, and each function's failed and throttled invocations. */
function addThrottleAndErrorAlarms(alarm: Alarm, watched: Watched): void {
  // On-demand tables throttle too (a partition's limits, or a sudden jump past twice the
  // previous peak); the SDK retries, so any throttled request that shows here is worth a look.
  for (const [name, table] of [
    ['EntryTable', watched.entryTable],
    ['SegmentTable', watched.segmentTable],
    ['PendingSnapshotsTable', watched.pendingSnapshotsTable],
    ['DedupeTable', watched.dedupeTable],
    ['ClientsTable', watched.clientsTable],
    ...(watched.catalogTable ? ([['CatalogTable', watched.catalogTable]] as const) : []),
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
        period: FIVE_MINUTES,
        statistic: 'Sum',
      }),
      1,
    );
  }

  for (const [name, fn] of [
    ['Api', watched.api],
    ['StreamRouter', watched.streamRouter],
    ['SnapshotWorker', watched.snapshotWorker],
    ['SyncWriter', watched.syncWriter],
    ...(watched.archiver ? ([['Archiver', watched.archiver]] as const) : []),
  ] as const) {
    alarm(
      `${name}ErrorsAlarm`,
      `${fn.crate.binaryName} invocations failed`,
      fn.function.metricErrors({ period: FIVE_MINUTES, statistic: 'Sum' }),
      1,
    );
    alarm(
      `${name}ThrottlesAlarm`,
      `${fn.crate.binaryName} invocations were throttled`,
      fn.function.metricThrottles({ period: FIVE_MINUTES, statistic: 'Sum' }),
      1,
    );
  }
}

/** The dashboard (constructs/dashboard.ts); `stack` is its scope and what it shows. */
export function addDashboard(stack: Stack & Watched, config: SheetlogConfig): cloudwatch.Dashboard {
  return new SheetlogDashboard(stack, 'Dashboard', {
    dashboardName: config.stackName,
    httpApi: stack.httpApi,
    entryTable: stack.entryTable,
    tables: [
      ['Entry', stack.entryTable],
      ['Segment', stack.segmentTable],
      ['PendingSnapshots', stack.pendingSnapshotsTable],
      ['Dedupe', stack.dedupeTable],
      ['Clients', stack.clientsTable],
      ...(stack.catalogTable ? ([['Catalog', stack.catalogTable]] as [string, dynamodb.ITable][]) : []),
    ],
    snapshotQueue: stack.snapshotQueue,
    syncQueue: stack.syncQueue,
    snapshotWorker: stack.snapshotWorker.function,
    functions: [
      ['Api', stack.api.function],
      ['StreamRouter', stack.streamRouter.function],
      ['SnapshotWorker', stack.snapshotWorker.function],
      ['SyncWriter', stack.syncWriter.function],
      ...(stack.archiver ? ([['Archiver', stack.archiver.function]] as [string, lambda.IFunction][]) : []),
    ],
  }).dashboard;
}
