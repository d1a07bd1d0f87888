/**
 * The stack's CloudWatch dashboard (docs/operations.md, "Dashboard"): traffic (entries written
 * and pushes per minute), the API's errors and latency, how far snapshots lag (queue ages and the
 * worker's wait metric), DynamoDB throttles, and every function's errors and durations.
 */
import { Duration } from 'aws-cdk-lib';
import type * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

export interface DashboardProps {
  readonly dashboardName: string;
  readonly httpApi: apigw.HttpApi;
  readonly entryTable: dynamodb.ITable;
  readonly tables: [string, dynamodb.ITable][];
  readonly snapshotQueue: sqs.IQueue;
  readonly syncQueue: sqs.IQueue;
  readonly snapshotWorker: lambda.IFunction;
  readonly functions: [string, lambda.IFunction][];
}

const MINUTE = Duration.minutes(1);

/** The operations the functions call on the tables (ThrottledRequests is per operation). */
const THROTTLED_OPERATIONS = [
  dynamodb.Operation.GET_ITEM,
  dynamodb.Operation.PUT_ITEM,
  dynamodb.Operation.UPDATE_ITEM,
  dynamodb.Operation.DELETE_ITEM,
  dynamodb.Operation.QUERY,
  dynamodb.Operation.SCAN,
  dynamodb.Operation.TRANSACT_WRITE_ITEMS,
];

export class SheetlogDashboard extends Construct {
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: DashboardProps) {
    super(scope, id);
    const d = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName,
      defaultInterval: Duration.hours(3),
    });
    const graph = (title: string, left: cloudwatch.IMetric[], right: cloudwatch.IMetric[] = []) =>
      new cloudwatch.GraphWidget({ title, left, right, width: 12, height: 6 });

    d.addWidgets(
      // Every append writes its Entry item in a transaction: successful TransactWriteItems calls
      // on the Entry table per minute are the appends (and segment starts) per minute.
      graph('Appends per minute (Entry table transactions)', [
        new cloudwatch.Metric({
          namespace: 'AWS/DynamoDB',
          metricName: 'SuccessfulRequestLatency',
          dimensionsMap: { TableName: props.entryTable.tableName, Operation: 'TransactWriteItems' },
          statistic: 'SampleCount',
          period: MINUTE,
          label: 'appends',
        }),
      ]),
      graph('Pushes per minute', [
        props.syncQueue.metricNumberOfMessagesSent({ period: MINUTE, statistic: 'Sum', label: 'queued pushes' }),
        props.httpApi.metricCount({ period: MINUTE, statistic: 'Sum', label: 'API requests' }),
      ]),
    );
    d.addWidgets(
      graph('API errors', [
        props.httpApi.metricClientError({ period: MINUTE, statistic: 'Sum', label: '4xx' }),
        props.httpApi.metricServerError({ period: MINUTE, statistic: 'Sum', label: '5xx' }),
      ]),
      graph('API latency (ms)', [
        props.httpApi.metricLatency({ period: MINUTE, statistic: 'p50', label: 'p50' }),
        props.httpApi.metricLatency({ period: MINUTE, statistic: 'p99', label: 'p99' }),
      ]),
    );
    d.addWidgets(
      graph(
        'Snapshot lag and queue ages (s)',
        [
          props.snapshotQueue.metricApproximateAgeOfOldestMessage({
            period: MINUTE,
            statistic: 'Maximum',
            label: 'oldest snapshot job',
          }),
          props.syncQueue.metricApproximateAgeOfOldestMessage({
            period: MINUTE,
            statistic: 'Maximum',
            label: 'oldest queued push',
          }),
          new cloudwatch.Metric({
            namespace: 'Sheetlog',
            metricName: 'SnapshotJobWaitSeconds',
            dimensionsMap: { FunctionName: props.snapshotWorker.functionName },
            statistic: 'Maximum',
            period: MINUTE,
            label: 'job wait behind an earlier snapshot',
          }),
        ],
        [
          props.snapshotQueue.metricApproximateNumberOfMessagesVisible({
            period: MINUTE,
            statistic: 'Maximum',
            label: 'snapshot jobs waiting',
          }),
        ],
      ),
      graph(
        'DynamoDB throttled requests',
        props.tables.map(([name, table]) => {
          // ThrottledRequests is per operation; one sum per table (ids unique across the graph).
          const usingMetrics: Record<string, cloudwatch.IMetric> = {};
          for (const op of THROTTLED_OPERATIONS) {
            usingMetrics[`${name.toLowerCase()}${op.toLowerCase()}`] = new cloudwatch.Metric({
              namespace: 'AWS/DynamoDB',
              metricName: 'ThrottledRequests',
              dimensionsMap: { TableName: table.tableName, Operation: op },
              statistic: 'Sum',
              period: MINUTE,
            });
          }
          return new cloudwatch.MathExpression({
            expression: Object.keys(usingMetrics)
              .map((id) => `FILL(${id}, 0)`)
              .join(' + '),
            usingMetrics,
            period: MINUTE,
            label: name,
          });
        }),
      ),
    );
    d.addWidgets(
      graph(
        'Lambda errors',
        props.functions.map(([name, f]) => f.metricErrors({ period: MINUTE, statistic: 'Sum', label: name })),
      ),
      graph(
        'Lambda duration p99 (ms)',
        props.functions.map(([name, f]) => f.metricDuration({ period: MINUTE, statistic: 'p99', label: name })),
      ),
    );
    this.dashboard = d;
  }
}
