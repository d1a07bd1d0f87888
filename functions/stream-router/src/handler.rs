//! Entry-stream records → side effects.
//!
//! Each record is looked at on its own (stream order is only guaranteed per item, and nothing
//! here needs more): an inserted Snapshot entry becomes a snapshot job on the queue; an inserted
//! entry with an external object (an uploaded payload, or a body offloaded to S3) has that
//! object's auto-delete tag removed, which commits it. Everything else is ignored, even though
//! the event-source filter should not let it through — the filter is configuration, and a
//! broadened filter must not make the router do something wrong.
//!
//! Failures are per record: the response lists the sequence numbers of the records whose effect
//! failed. The DynamoDB event source then retries from the lowest of them (records after it in
//! the shard come round again too; every effect is idempotent and jobs may be duplicated, so
//! that is harmless), bisecting the batch, up to the stack's retry limit, after which the batch's
//! coordinates go to the stream router's failure queue and its alarm fires.
//!
//! Poison records — an inserted entry whose keys do not parse — are logged at error level and
//! *not* reported as failures: retrying cannot fix them, and a failing record holds back its
//! whole shard until it expires. A payload object that no longer exists is the same: S3 is
//! strongly consistent, so a missing key will not appear by retrying. It means the object was
//! deleted (or expired) after the entry that references it committed; the error log names both
//! so an operator can restore it, and the record counts as processed.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use futures::StreamExt;
use serde_dynamo::AttributeValue;
use sheetlog_core::aws::items::entry_attr;
use sheetlog_core::aws::{S3Bucket, SqsJobQueue, Untagged};
use sheetlog_core::domain::{EntryType, LogId, SnapshotJob, keys, parse_segment_id};
use sheetlog_core::error::StoreError;
use tracing::{error, info, warn};

/// Un-tagging calls in flight at once; each is one small S3 request.
const UNTAG_CONCURRENCY: usize = 16;

/// The side effects, as a port so tests can fail chosen ones.
#[async_trait]
pub trait Effects: Send + Sync {
    /// Sends snapshot jobs; one result per job, in order.
    async fn send_jobs(&self, jobs: &[SnapshotJob]) -> Vec<Result<(), StoreError>>;
    /// Removes the auto-delete tag from a payload object.
    async fn commit_payload(&self, key: &str) -> Result<Untagged, StoreError>;
}

/// The effects in AWS: the snapshot queue and the bucket.
#[derive(Debug, Clone)]
pub struct AwsEffects {
    queue: SqsJobQueue,
    payloads: S3Bucket,
}

impl AwsEffects {
    pub fn new(queue: SqsJobQueue, payloads: S3Bucket) -> Self {
        Self { queue, payloads }
    }
}

#[async_trait]
impl Effects for AwsEffects {
    async fn send_jobs(&self, jobs: &[SnapshotJob]) -> Vec<Result<(), StoreError>> {
        self.queue.send_batch(jobs).await
    }
    async fn commit_payload(&self, key: &str) -> Result<Untagged, StoreError> {
        self.payloads.remove_auto_delete_tag(key).await
    }
}

/// What one record asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Job(SnapshotJob),
    CommitPayload {
        log: LogId,
        key: String,
    },
    /// Nothing to do (not an insert, an ordinary entry, or a poison record), and why.
    Ignore(String),
}

/// Counts of what a batch did, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteReport {
    pub jobs_sent: usize,
    pub payloads_committed: usize,
    pub payloads_missing: usize,
    pub ignored: usize,
    /// Sequence numbers of the records reported as failed.
    pub failed: Vec<String>,
}

/// Decides what a record asks for. An entry carries at most one effect in practice, but a
/// Snapshot entry with an external object would get both, so this returns a list.
pub fn classify(record: &EventRecord) -> Vec<Action> {
    if record.event_name != "INSERT" {
        return vec![Action::Ignore(format!("{} record", record.event_name))];
    }
    let image = &record.change.new_image;
    let segment_id = match image.get(entry_attr::SEGMENT_ID) {
        Some(AttributeValue::B(b)) => parse_segment_id(b),
        _ => None,
    };
    let Some((log, segment)) = segment_id else {
        return vec![Action::Ignore("poison: no valid segment id".into())];
    };
    let num = |name: &str| match image.get(name) {
        Some(AttributeValue::N(n)) => n.parse::<u64>().ok(),
        _ => None,
    };
    let Some(entry) = num(entry_attr::NUM) else {
        return vec![Action::Ignore("poison: no valid entry number".into())];
    };
    let mut actions = Vec::new();
    if num(entry_attr::TYPE) == Some(u64::from(EntryType::SNAPSHOT.0)) {
        if (segment, entry) == (0, 0) {
            // A log's first entry is the snapshot of the empty sheet, written complete with the
            // log itself: a job would only be discarded by the worker as a late duplicate.
            actions.push(Action::Ignore(
                "the log's first snapshot is complete at creation".into(),
            ));
        } else {
            actions.push(Action::Job(SnapshotJob::new(log, segment, entry)));
        }
    }
    match image.get(entry_attr::EXTERNAL) {
        // Only objects under the log's own payload prefix: anything else was not written by
        // the append path, and the router's permissions do not reach it anyway.
        Some(AttributeValue::S(key)) if keys::is_payload_of(log, key) => {
            actions.push(Action::CommitPayload {
                log,
                key: key.clone(),
            });
        }
        Some(other) => {
            actions.push(Action::Ignore(format!(
                "poison: external object {other:?} outside the log's payload prefix"
            )));
        }
        None => {}
    }
    if actions.is_empty() {
        actions.push(Action::Ignore("entry needs no side effect".into()));
    }
    actions
}

/// Handles a batch and answers with its batch item failures.
pub async fn handle<E: Effects + ?Sized>(effects: &E, event: Event) -> DynamoDbEventResponse {
    let report = route(effects, &event).await;
    let mut response = DynamoDbEventResponse::default();
    for seq in report.failed {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(seq);
        response.batch_item_failures.push(failure);
    }
    response
}

/// Does the work of [`handle`], reporting counts.
pub async fn route<E: Effects + ?Sized>(effects: &E, event: &Event) -> RouteReport {
    let mut report = RouteReport::default();
    let mut jobs: Vec<(usize, SnapshotJob)> = Vec::new();
    let mut commits: Vec<(usize, LogId, String)> = Vec::new();
    for (i, record) in event.records.iter().enumerate() {
        for action in classify(record) {
            match action {
                Action::Job(job) => jobs.push((i, job)),
                Action::CommitPayload { log, key } => commits.push((i, log, key)),
                Action::Ignore(why) => {
                    if why.starts_with("poison") {
                        error!(event = %record.event_id, reason = %why, "skipping a record that cannot be processed");
                    }
                    report.ignored += 1;
                }
            }
        }
    }

    let mut failed = vec![false; event.records.len()];
    if !jobs.is_empty() {
        let batch: Vec<SnapshotJob> = jobs.iter().map(|(_, j)| *j).collect();
        let results = effects.send_jobs(&batch).await;
        for (k, (i, job)) in jobs.iter().enumerate() {
            match results.get(k) {
                Some(Ok(())) => {
                    report.jobs_sent += 1;
                    info!(log = %job.log_id, segment = job.segment, entry = job.entry, "snapshot job sent");
                }
                Some(Err(e)) => {
                    warn!(log = %job.log_id, segment = job.segment, entry = job.entry, error = %e, "sending a snapshot job failed");
                    failed[*i] = true;
                }
                None => failed[*i] = true,
            }
        }
    }

    let outcomes: Vec<(usize, LogId, String, Result<Untagged, StoreError>)> =
        futures::stream::iter(commits)
            .map(|(i, log, key)| async move {
                let r = effects.commit_payload(&key).await;
                (i, log, key, r)
            })
            .buffer_unordered(UNTAG_CONCURRENCY)
            .collect()
            .await;
    for (i, log, key, result) in outcomes {
        match result {
            Ok(Untagged::Done) => report.payloads_committed += 1,
            Ok(Untagged::Missing) => {
                error!(log = %log, key = %key, event = %event.records[i].event_id,
                    "a committed entry references a payload object that does not exist");
                report.payloads_missing += 1;
            }
            Err(e) => {
                warn!(log = %log, key = %key, error = %e, "removing the auto-delete tag failed");
                failed[i] = true;
            }
        }
    }

    // One entry per failed record (a record with two failed effects is reported once).
    let mut seen = HashMap::new();
    for (i, record) in event.records.iter().enumerate() {
        if failed[i] {
            // Lambda identifies a DynamoDB stream record by its sequence number; without one the
            // whole batch is retried, which is still correct.
            let seq = record.change.sequence_number.clone().unwrap_or_default();
            if seen.insert(seq.clone(), ()).is_none() {
                report.failed.push(seq);
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn load(name: &str) -> Event {
        let path = format!("{}/events/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Records every effect; fails the ones it is told to.
    #[derive(Debug, Default)]
    struct Fake {
        jobs: Mutex<Vec<SnapshotJob>>,
        commits: Mutex<Vec<String>>,
        fail_job_entry: Option<u64>,
        fail_key_containing: Option<&'static str>,
        missing_key_containing: Option<&'static str>,
    }

    #[async_trait]
    impl Effects for Fake {
        async fn send_jobs(&self, jobs: &[SnapshotJob]) -> Vec<Result<(), StoreError>> {
            jobs.iter()
                .map(|j| {
                    if Some(j.entry) == self.fail_job_entry {
                        return Err(StoreError::service("SQS", "SendMessageBatch", "throttled"));
                    }
                    if let Ok(mut v) = self.jobs.lock() {
                        v.push(*j);
                    }
                    Ok(())
                })
                .collect()
        }
        async fn commit_payload(&self, key: &str) -> Result<Untagged, StoreError> {
            if self.fail_key_containing.is_some_and(|k| key.contains(k)) {
                return Err(StoreError::service(
                    "S3",
                    "DeleteObjectTagging",
                    "slow down",
                ));
            }
            if self.missing_key_containing.is_some_and(|k| key.contains(k)) {
                return Ok(Untagged::Missing);
            }
            if let Ok(mut v) = self.commits.lock() {
                v.push(key.to_owned());
            }
            Ok(Untagged::Done)
        }
    }

    fn log() -> LogId {
        "0b6e4f3a-52c1-4d2e-9a57-1c4f4bb5e3a1"
            .parse()
            .unwrap_or_else(|_| LogId::new_random())
    }

    #[tokio::test]
    async fn inserted_snapshot_entry_becomes_one_job() {
        let fake = Fake::default();
        let resp = handle(&fake, load("snapshot-insert.json")).await;
        assert!(resp.batch_item_failures.is_empty());
        let jobs = fake.jobs.lock().map(|v| v.clone()).unwrap_or_default();
        assert_eq!(jobs, vec![SnapshotJob::new(log(), 0, 100)]);
    }

    #[tokio::test]
    async fn external_objects_are_committed_whether_payload_or_offloaded_body() {
        let fake = Fake::default();
        let report = route(&fake, &load("payload-insert.json")).await;
        assert_eq!(report.payloads_committed, 2);
        assert_eq!(report.jobs_sent, 0);
        let commits = fake.commits.lock().map(|v| v.clone()).unwrap_or_default();
        assert!(commits.iter().any(|k| k.contains("/uploads/")));
        assert!(commits.iter().any(|k| !k.contains("/uploads/")));
    }

    #[tokio::test]
    async fn everything_else_is_ignored_even_if_the_filter_lets_it_through() {
        let fake = Fake::default();
        let report = route(&fake, &load("mixed-batch.json")).await;
        // INSERT snapshot (1,0) and (0,100) → jobs; INSERT with payload and with offloaded body →
        // commits; plain INSERT, MODIFY (root set) and REMOVE → ignored.
        assert_eq!(report.jobs_sent, 2);
        assert_eq!(report.payloads_committed, 2);
        assert_eq!(report.ignored, 3);
        assert!(report.failed.is_empty());
        let mut jobs = fake.jobs.lock().map(|v| v.clone()).unwrap_or_default();
        jobs.sort_by_key(|j| (j.segment, j.entry));
        assert_eq!(
            jobs,
            vec![
                SnapshotJob::new(log(), 0, 100),
                SnapshotJob::new(log(), 1, 0)
            ]
        );
    }

    #[tokio::test]
    async fn only_the_failed_records_are_reported() {
        let event = load("mixed-batch.json");
        let seq = |i: usize| {
            event.records[i]
                .change
                .sequence_number
                .clone()
                .unwrap_or_default()
        };
        let fake = Fake {
            fail_job_entry: Some(100),
            fail_key_containing: Some("/uploads/"),
            ..Fake::default()
        };
        let resp = handle(&fake, event.clone()).await;
        let mut failed: Vec<String> = resp
            .batch_item_failures
            .iter()
            .filter_map(|f| f.item_identifier.clone())
            .collect();
        failed.sort();
        let mut expected = vec![seq(4), seq(2)];
        expected.sort();
        assert_eq!(failed, expected);
        // The other effects of the batch still happened.
        let jobs = fake.jobs.lock().map(|v| v.clone()).unwrap_or_default();
        assert_eq!(jobs, vec![SnapshotJob::new(log(), 1, 0)]);
        let commits = fake.commits.lock().map(|v| v.clone()).unwrap_or_default();
        assert_eq!(commits.len(), 1);
    }

    #[tokio::test]
    async fn poison_records_and_missing_objects_are_not_retried() {
        let fake = Fake::default();
        let report = route(&fake, &load("malformed.json")).await;
        assert!(report.failed.is_empty());
        assert_eq!(report.ignored, 1);
        assert_eq!(report.jobs_sent, 1);

        let fake = Fake {
            missing_key_containing: Some("/uploads/"),
            ..Fake::default()
        };
        let report = route(&fake, &load("payload-insert.json")).await;
        assert!(report.failed.is_empty());
        assert_eq!(report.payloads_missing, 1);
        assert_eq!(report.payloads_committed, 1);
    }

    #[test]
    fn a_logs_first_snapshot_needs_no_job() {
        let mut event = load("snapshot-insert.json");
        event.records[0]
            .change
            .new_image
            .insert("n".into(), AttributeValue::N("0".into()));
        assert!(matches!(
            classify(&event.records[0]).as_slice(),
            [Action::Ignore(_)]
        ));
    }

    #[test]
    fn payload_keys_outside_the_logs_prefix_are_refused() {
        let mut event = load("payload-insert.json");
        event.records[0].change.new_image.insert(
            "e".into(),
            AttributeValue::S("snapshots/elsewhere/manifest.json".into()),
        );
        let actions = classify(&event.records[0]);
        assert!(matches!(actions.as_slice(), [Action::Ignore(why)] if why.starts_with("poison")));
    }
}
