//! The manual fallback (`docs/design.md`, "The manual fallback"): when stream records or queue messages were
//! lost (expired, dropped, parked in a failure queue), find the side effects that have not
//! happened and start them again.
//!
//! Snapshots, in every state an unfinished one can be in:
//! - never started (its job was lost): a Snapshot entry past its segment's Last Snapshot with no
//!   pending item;
//! - started and stopped (handed off or deferred and the message lost, parked after too many
//!   hand-offs, or crashed with its message in the dead-letter queue): an item in the Pending
//!   Snapshots table, whatever its age or segment;
//! - completion cut short: the root is on the Snapshot entry but Last Snapshot was not advanced
//!   (a root alone is not completion), or Last Snapshot was advanced but the pending item is still
//!   there.
//!
//! Each gets a snapshot job; the worker finishes whatever is left. These are found in *every*
//! segment of every log, not only recent ones, at the cost of reading each segment's entries
//! after its Last Snapshot (snapshots complete in order, so nothing before it can be unfinished)
//! plus one Query of the Pending Snapshots table per log.
//!
//! Payloads: an entry created since the date whose external object still carries the auto-delete
//! tag has it removed. (Older ones have expired or were committed long ago.)
//!
//! Safe to run any number of times: a job for a snapshot that is complete or in progress is a
//! duplicate the worker discards, and removing a tag is idempotent.
//!
//! Finding the logs: nothing indexes entries by date, so the tool scans the Segment table (paged)
//! for every log id — fine for an operator's tool, and far cheaper than scanning entries. For
//! payloads it reads only the segments that can hold entries from the date on: the newest one
//! created before the date and every later one.

use std::collections::BTreeSet;

use crate::logs::{LogIds, segment_entries};
use serde::Serialize;
use sheetlog_core::aws::{DynamoLogStore, DynamoPendingStore, S3Bucket, SqsJobQueue, Untagged};
use sheetlog_core::domain::{EntryType, LogId, RequestUnits, SegmentRecord, SnapshotJob};
use sheetlog_core::error::StoreError;
use sheetlog_core::ports::{Consistency, LogEntries, PendingSnapshots};
use tracing::warn;

#[derive(Debug, thiserror::Error)]
pub enum ReprocessError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("scanning the Segment table failed: {0}")]
    Scan(String),
}

/// What a run found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReprocessReport {
    pub logs: u64,
    pub segments_read: u64,
    pub entries_read: u64,
    /// Snapshot jobs sent (or, in a dry run, that would have been), one per unfinished snapshot.
    pub jobs_enqueued: u64,
    /// Of those: snapshots never started (no pending item).
    pub snapshots_not_started: u64,
    /// Of those: snapshots with an item in the Pending Snapshots table (stopped mid-build,
    /// parked, or waiting).
    pub snapshots_pending: u64,
    /// Of those: a root recorded but the segment's Last Snapshot not advanced.
    pub snapshots_completion_cut_short: u64,
    /// Objects whose auto-delete tag was removed (or would have been).
    pub payloads_untagged: u64,
    /// Objects already without the tag.
    pub payloads_already_committed: u64,
    /// Objects referenced by a committed entry that do not exist (logged with their keys).
    pub payloads_missing: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct ReprocessOptions {
    /// Unix epoch seconds: entries created at or after this are looked at.
    pub since: i64,
    /// Report what would be done without doing it.
    pub dry_run: bool,
}

/// The tables, bucket and queue a run works on.
#[derive(Debug, Clone)]
pub struct Reprocessor {
    dynamo: aws_sdk_dynamodb::Client,
    segment_table: String,
    store: DynamoLogStore,
    pending: DynamoPendingStore,
    payloads: S3Bucket,
    queue: SqsJobQueue,
}

impl Reprocessor {
    pub fn new(
        dynamo: aws_sdk_dynamodb::Client,
        entry_table: &str,
        segment_table: &str,
        pending_table: &str,
        payloads: S3Bucket,
        queue: SqsJobQueue,
    ) -> Self {
        Self {
            store: DynamoLogStore::new(dynamo.clone(), entry_table, segment_table),
            pending: DynamoPendingStore::new(dynamo.clone(), pending_table),
            dynamo,
            segment_table: segment_table.to_owned(),
            payloads,
            queue,
        }
    }

    /// Runs over every log. `progress` is called after each log with the totals so far.
    pub async fn run(
        &self,
        opts: ReprocessOptions,
        progress: &mut (dyn FnMut(LogId, &ReprocessReport) + Send),
    ) -> Result<ReprocessReport, ReprocessError> {
        let mut report = ReprocessReport::default();
        let mut logs = LogIds::new(self.dynamo.clone(), &self.segment_table);
        while let Some(page) = logs.next_page().await.map_err(ReprocessError::Scan)? {
            for log in page {
                self.log(log, opts, &mut report).await?;
                report.logs += 1;
                progress(log, &report);
            }
        }
        Ok(report)
    }

    /// One log.
    pub async fn log(
        &self,
        log: LogId,
        opts: ReprocessOptions,
        report: &mut ReprocessReport,
    ) -> Result<(), ReprocessError> {
        let mut units = RequestUnits::default();
        let segments = self.store.all_segments(log, &mut units).await?;
        let mut jobs: BTreeSet<(u64, u64)> = BTreeSet::new();

        // Started and stopped, in any segment: the Pending Snapshots table.
        for p in self.pending.list(log).await? {
            if jobs.insert((p.key.segment, p.key.entry)) {
                report.snapshots_pending += 1;
            }
        }
        // Never started, or completion cut short: every segment's entries after its Last
        // Snapshot.
        for seg in &segments {
            if seg.archive.is_some() {
                // Archived segments are history; their side effects happened before archiving.
                continue;
            }
            self.unfinished_snapshots(log, seg, report, &mut jobs)
                .await?;
        }
        // Payloads, in the segments that can hold entries from the date on: the newest one
        // created before the date (it can still hold later entries; any older one was closed
        // before it began) and every later one.
        let first = segments
            .iter()
            .rposition(|s| s.created < opts.since)
            .unwrap_or(0);
        for seg in &segments[first..] {
            if seg.archive.is_none() {
                report.segments_read += 1;
                self.payloads(log, seg, opts, report).await?;
            }
        }

        if !jobs.is_empty() {
            let jobs: Vec<SnapshotJob> = jobs
                .into_iter()
                .map(|(segment, entry)| SnapshotJob::new(log, segment, entry))
                .collect();
            report.jobs_enqueued += jobs.len() as u64;
            if !opts.dry_run {
                for (job, result) in jobs.iter().zip(self.queue.send_batch(&jobs).await) {
                    if let Err(e) = result {
                        warn!(log = %log, segment = job.segment, entry = job.entry, error = %e, "enqueueing failed");
                        report.jobs_enqueued -= 1;
                        return Err(e.into());
                    }
                }
            }
        }
        Ok(())
    }

    /// Snapshot entries of `seg` past its Last Snapshot that have no pending item (already in
    /// `jobs`): never started, or (with a root) completed except for Last Snapshot.
    async fn unfinished_snapshots(
        &self,
        log: LogId,
        seg: &SegmentRecord,
        report: &mut ReprocessReport,
        jobs: &mut BTreeSet<(u64, u64)>,
    ) -> Result<(), ReprocessError> {
        let from = seg.last_snapshot.map_or(0, |l| l + 1);
        for e in segment_entries(&self.store, log, seg.num, from, Consistency::Eventual).await? {
            report.entries_read += 1;
            if e.kind == EntryType::SNAPSHOT && jobs.insert((seg.num, e.num)) {
                if e.snapshot_root.is_some() {
                    report.snapshots_completion_cut_short += 1;
                } else {
                    report.snapshots_not_started += 1;
                }
            }
        }
        Ok(())
    }

    /// Entries of `seg` created since the date whose external object is still tagged.
    async fn payloads(
        &self,
        log: LogId,
        seg: &SegmentRecord,
        opts: ReprocessOptions,
        report: &mut ReprocessReport,
    ) -> Result<(), ReprocessError> {
        for e in segment_entries(&self.store, log, seg.num, 0, Consistency::Eventual).await? {
            report.entries_read += 1;
            if e.created < opts.since {
                continue;
            }
            let Some(key) = &e.external else { continue };
            match self.payloads.has_auto_delete_tag(key).await? {
                Some(true) => {
                    report.payloads_untagged += 1;
                    if !opts.dry_run
                        && self.payloads.remove_auto_delete_tag(key).await? == Untagged::Missing
                    {
                        report.payloads_untagged -= 1;
                        report.payloads_missing += 1;
                    }
                }
                Some(false) => report.payloads_already_committed += 1,
                None => {
                    warn!(log = %log, segment = seg.num, entry = e.num, key = %key,
                        "a committed entry references a payload object that does not exist");
                    report.payloads_missing += 1;
                }
            }
        }
        Ok(())
    }
}
