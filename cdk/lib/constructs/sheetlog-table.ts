/**
 * The house DynamoDB table: on-demand, point-in-time recovery, encryption, deletion protection and
 * RETAIN, under a fixed logical id. The id is the table's identity across upgrades: CloudFormation
 * replaces a resource whose logical id changes (a new, empty table), so it is set explicitly
 * rather than derived from the construct path, and cdk/test/upgrade-safety.test.ts pins it.
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type { Construct } from 'constructs';

export interface SheetlogTableProps {
  readonly partitionKey: dynamodb.Attribute;
  readonly sortKey?: dynamodb.Attribute;
  readonly stream?: dynamodb.StreamViewType;
  readonly timeToLiveAttribute?: string;
  /** Sandbox stacks only: no deletion protection, deleted with the stack. */
  readonly ephemeral: boolean;
}

export class SheetlogTable extends dynamodb.Table {
  /**
   * @param logicalId the construct id and the CloudFormation logical id. Never rename it: a
   *   renamed table is a new, empty table.
   */
  constructor(scope: Construct, logicalId: string, props: SheetlogTableProps) {
    super(scope, logicalId, {
      partitionKey: props.partitionKey,
      sortKey: props.sortKey,
      stream: props.stream,
      timeToLiveAttribute: props.timeToLiveAttribute,
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      // The AWS-managed key (aws/dynamodb) rather than the default owned key, so key use shows in
      // CloudTrail; no key of ours to administer.
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      deletionProtection: !props.ephemeral,
      removalPolicy: props.ephemeral ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
    });
    (this.node.defaultChild as dynamodb.CfnTable).overrideLogicalId(logicalId);
  }
}
