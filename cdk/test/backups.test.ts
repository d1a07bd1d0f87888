/**
 * Backups and the dashboard (cdk/lib/constructs/backups.ts, dashboard.ts): the bucket is
 * versioned with noncurrent versions expiring after a configurable window, expired uploads and
 * their delete markers still go away, the AWS Backup plan is there only when asked for, and the
 * dashboard graphs what docs/operations.md says it does.
 */
import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NONCURRENT_RULE_ID } from '../lib/constructs/backups';
import { LOGICAL_IDS } from '../lib/sheetlog-stack';
import { type Json, resourcesOfType, synth } from './support';

const TABLES = [
  LOGICAL_IDS.entryTable,
  LOGICAL_IDS.segmentTable,
  LOGICAL_IDS.pendingSnapshotsTable,
  LOGICAL_IDS.dedupeTable,
  LOGICAL_IDS.clientsTable,
];

function rules(json: Json): Json[] {
  return json.Resources[LOGICAL_IDS.bucket].Properties.LifecycleConfiguration.Rules;
}

describe('bucket versions', () => {
  const { json } = synth();

  test('the bucket is versioned', () => {
    assert.deepEqual(json.Resources[LOGICAL_IDS.bucket].Properties.VersioningConfiguration, { Status: 'Enabled' });
  });

  test('noncurrent versions expire after 30 days by default, and lone delete markers are removed', () => {
    const noncurrent = rules(json).filter((r) => r.Id === NONCURRENT_RULE_ID);
    assert.deepEqual(noncurrent, [
      {
        Id: NONCURRENT_RULE_ID,
        Status: 'Enabled',
        NoncurrentVersionExpiration: { NoncurrentDays: 30 },
        ExpiredObjectDeleteMarker: true,
      },
    ]);
  });

  test('the window is configurable (noncurrentVersionDays)', () => {
    const noncurrent = rules(synth({ noncurrentVersionDays: '7' }).json).find((r) => r.Id === NONCURRENT_RULE_ID);
    assert.deepEqual(noncurrent?.NoncurrentVersionExpiration, { NoncurrentDays: 7 });
  });

  test('expired uploads still go away: the tag rule makes them noncurrent, the noncurrent rule removes them', () => {
    const all = rules(json);
    const tagged = all.find((r) => r.TagFilters !== undefined);
    assert.equal(tagged?.ExpirationInDays, 3);
    // The noncurrent rule has no filter: it applies to every object, the tagged ones included.
    const noncurrent = all.find((r) => r.Id === NONCURRENT_RULE_ID);
    assert.equal(noncurrent?.Prefix, undefined);
    assert.equal(noncurrent?.TagFilters, undefined);
    assert.equal(noncurrent?.ExpirationInDays, undefined, 'no current object expires by this rule');
  });
});

describe('backup plan', () => {
  test('off by default: no plan, vault or selection', () => {
    const { json } = synth();
    for (const type of ['AWS::Backup::BackupPlan', 'AWS::Backup::BackupVault', 'AWS::Backup::BackupSelection']) {
      assert.equal(resourcesOfType(json, type).length, 0, type);
    }
  });

  test('backupPlan=true backs every table up daily, kept backupRetentionDays', () => {
    const { json } = synth({ backupPlan: 'true', backupRetentionDays: '400' });
    const [[, plan]] = resourcesOfType(json, 'AWS::Backup::BackupPlan');
    const [rule] = plan.Properties.BackupPlan.BackupPlanRule;
    assert.equal(rule.Lifecycle.DeleteAfterDays, 400);
    assert.match(rule.ScheduleExpression, /^cron\(/);
    const [[, vault]] = resourcesOfType(json, 'AWS::Backup::BackupVault');
    assert.equal(vault.DeletionPolicy, 'Retain');
    const [[, selection]] = resourcesOfType(json, 'AWS::Backup::BackupSelection');
    const resources = JSON.stringify(selection.Properties.BackupSelection.Resources);
    for (const table of TABLES) {
      assert.ok(resources.includes(`"${table}"`), `${table} is backed up: ${resources}`);
    }
  });
});

describe('dashboard', () => {
  const { json } = synth();

  test('graphs traffic, API errors and latency, snapshot lag, throttles and every function', () => {
    const [[, dashboard]] = resourcesOfType(json, 'AWS::CloudWatch::Dashboard');
    const body = JSON.stringify(dashboard.Properties.DashboardBody);
    for (const title of [
      'Appends per minute',
      'Pushes per minute',
      'API errors',
      'API latency',
      'Snapshot lag and queue ages',
      'DynamoDB throttled requests',
      'Lambda errors',
      'Lambda duration',
    ]) {
      assert.ok(body.includes(title), `a widget titled ${title}`);
    }
    for (const metric of [
      'ApproximateAgeOfOldestMessage',
      'SnapshotJobWaitSeconds',
      'ThrottledRequests',
      'Latency',
      '5xx',
      'Errors',
      'Duration',
      'NumberOfMessagesSent',
    ]) {
      assert.ok(body.includes(metric), `graphs ${metric}`);
    }
    for (const table of TABLES) {
      assert.ok(body.includes(table), `throttles of ${table}`);
    }
  });
});
