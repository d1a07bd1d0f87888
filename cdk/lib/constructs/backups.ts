/**
 * What keeps a customer's data recoverable beyond the tables' point-in-time recovery
 * (docs/operations.md, "Backups and restore"):
 * - the bucket's noncurrent versions expire after `noncurrentVersionDays` (the bucket itself is
 *   versioned in the stack), and delete markers left with no version behind them are removed, so
 *   objects that lifecycle rules or the delete route remove still go away in the end;
 * - optionally (`backupPlan`), an AWS Backup plan taking a daily backup of every table, kept for
 *   `backupRetentionDays`, for retention past point-in-time recovery's 35 days.
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as backup from 'aws-cdk-lib/aws-backup';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';

export interface BackupsProps {
  readonly bucket: s3.Bucket;
  readonly tables: dynamodb.ITable[];
  readonly noncurrentVersionDays: number;
  readonly backupPlan: boolean;
  readonly backupRetentionDays: number;
  /** Sandbox stacks: the vault is deleted with the stack. */
  readonly ephemeral: boolean;
}

/** The lifecycle rule id the noncurrent versions expire under (pinned by the tests). */
export const NONCURRENT_RULE_ID = 'expire-noncurrent-versions';

export class Backups extends Construct {
  readonly plan?: backup.BackupPlan;

  constructor(scope: Construct, id: string, props: BackupsProps) {
    super(scope, id);
    props.bucket.addLifecycleRule({
      id: NONCURRENT_RULE_ID,
      // A deleted or expired object stays as a noncurrent version this long (restorable), then
      // goes; the delete marker left alone afterwards is removed too.
      noncurrentVersionExpiration: Duration.days(props.noncurrentVersionDays),
      expiredObjectDeleteMarker: true,
    });
    if (props.backupPlan) {
      const vault = new backup.BackupVault(this, 'Vault', {
        removalPolicy: props.ephemeral ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
      });
      this.plan = new backup.BackupPlan(this, 'Plan', {
        backupVault: vault,
        backupPlanRules: [
          new backup.BackupPlanRule({
            ruleName: 'daily',
            scheduleExpression: events.Schedule.cron({ hour: '3', minute: '0' }),
            deleteAfter: Duration.days(props.backupRetentionDays),
          }),
        ],
      });
      this.plan.addSelection('Tables', {
        resources: props.tables.map((t) => backup.BackupResource.fromDynamoDbTable(t)),
      });
    }
  }
}
