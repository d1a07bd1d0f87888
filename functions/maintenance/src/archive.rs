//! Segment retention (`docs/storage.md`, "Archived segments"): moves old segments out of the
//! Entry table, to one S3 object each (`archive`) or nowhere (`delete`).
//!
//! Which segments: only ones nothing live needs. A segment is eligible when it has ended, is not
//! one of the log's two newest, and a later segment has a completed snapshot (so every snapshot
//! in it is complete, and loads, updates and the snapshot worker all start after it). Of those,
//! the policy picks the ones beyond the newest `keep_segments`, or (with `after_days`) ended
//! more than that many days ago.
//!
//! Archiving one segment, each step safe to repeat and to crash after:
//! 1. read the segment's entries (strongly) and write them as one content-addressed object
//!    (the same entries give the same key and bytes, so a rerun rewrites the same object);
//! 2. set the Segment item's Archive attribute to the key, conditionally (unset, or already this
//!    key);
//! 3. delete the entry items, in order, 25 per batch. Readers that find a prefix gone read the
//!    archive (`EventLog` does this transparently).
//!
//! Deleting is the same without step 1, with Archive set to `deleted`: readers of that history
//! then get a clear error. Payload objects the entries reference are never touched.

use std::time::Instant;

use crate::logs::{LogIds, segment_entries};
use serde::Serialize;
use sheetlog_core::aws::{DynamoLogStore, S3Bucket};
use sheetlog_core::config::{ConfigError, Env, EnvVar};
use sheetlog_core::domain::{EntryRecord, LogId, RequestUnits, SegmentRecord};
use sheetlog_core::error::StoreError;
use sheetlog_core::log::archive::{self, ArchiveError};
use sheetlog_core::ports::{Consistency, LogEntries};
use tracing::{info, warn};

const DAY: i64 = 24 * 3600;

#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("scanning the Segment table failed: {0}")]
    Scan(String),
    #[error("segment {segment} of log {log} names archive {key}, which does not exist")]
    ArchiveMissing {
        log: LogId,
        segment: u64,
        key: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Keep the history, in S3.
    Archive,
    /// Drop the history.
    Delete,
}

/// What to move out of the Entry table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub mode: Mode,
    /// Segments kept in DynamoDB, newest first (at least 2).
    pub keep_segments: u64,
    /// Also move segments that ended more than this many days ago.
    pub after_days: Option<u64>,
}

impl Policy {
    pub fn validate(&self) -> Result<(), String> {
        if self.keep_segments < 2 {
            return Err(
                "keep_segments must be at least 2: loads and updates read the two newest".into(),
            );
        }
        Ok(())
    }
}

/// What [`policy_from_vars`] reads.
pub const POLICY_ENVIRONMENT: &[EnvVar] = &[
    EnvVar::stack("SHEETLOG_RETENTION_MODE"),
    EnvVar::optional("SHEETLOG_RETENTION_KEEP_SEGMENTS"),
    EnvVar::optional("SHEETLOG_RETENTION_AFTER_DAYS"),
];

/// The policy from the environment the stack sets: `SHEETLOG_RETENTION_MODE` (`archive` or
/// `delete`), `SHEETLOG_RETENTION_KEEP_SEGMENTS` (default 3) and `SHEETLOG_RETENTION_AFTER_DAYS`
/// (optional).
pub fn policy_from_vars(env: &Env) -> Result<Policy, ConfigError> {
    let mode = env.text("SHEETLOG_RETENTION_MODE")?;
    let keep_segments = env.parse::<u64>("SHEETLOG_RETENTION_KEEP_SEGMENTS")?;
    let after_days = env.parse::<u64>("SHEETLOG_RETENTION_AFTER_DAYS")?;
    let mode = match mode.as_deref() {
        Some("archive") => Mode::Archive,
        Some("delete") => Mode::Delete,
        other => {
            return Err(ConfigError(format!(
                "SHEETLOG_RETENTION_MODE must be archive or delete, not {other:?}"
            )));
        }
    };
    let policy = Policy {
        mode,
        keep_segments: keep_segments.unwrap_or(3),
        after_days,
    };
    policy.validate().map_err(ConfigError)?;
    Ok(policy)
}

/// A step of archiving one segment, to stop after (crash tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Written,
    Marked,
    /// After this many delete batches.
    Deleted(u32),
}

#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Unix seconds: "now" for `after_days`.
    pub now: i64,
    pub dry_run: bool,
    /// Stop starting new segments after this instant (a scheduled run's time budget); the next
    /// run carries on.
    pub deadline: Option<Instant>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetentionReport {
    pub logs: u64,
    /// Segments the policy selected (in a dry run: would have moved).
    pub segments_selected: u64,
    pub segments_archived: u64,
    pub segments_deleted: u64,
    pub entries_removed: u64,
    pub archive_bytes: u64,
    /// True when the run stopped at its deadline with work left.
    pub stopped_early: bool,
}

#[derive(Debug, Clone)]
pub struct Retention {
    dynamo: aws_sdk_dynamodb::Client,
    segment_table: String,
    store: DynamoLogStore,
    bucket: S3Bucket,
    policy: Policy,
}

impl Retention {
    pub fn new(
        dynamo: aws_sdk_dynamodb::Client,
        entry_table: &str,
        segment_table: &str,
        bucket: S3Bucket,
        policy: Policy,
    ) -> Self {
        Self {
            store: DynamoLogStore::new(dynamo.clone(), entry_table, segment_table),
            dynamo,
            segment_table: segment_table.to_owned(),
            bucket,
            policy,
        }
    }

    /// Applies the policy to every log (a paged scan of the Segment table for log ids).
    /// `progress` is called after each log with the totals so far.
    pub async fn run(
        &self,
        opts: RunOptions,
        progress: &mut (dyn FnMut(LogId, &RetentionReport) + Send),
    ) -> Result<RetentionReport, RetentionError> {
        let mut report = RetentionReport::default();
        let mut logs = LogIds::new(self.dynamo.clone(), &self.segment_table);
        while let Some(page) = logs.next_page().await.map_err(RetentionError::Scan)? {
            for log in page {
                if opts.deadline.is_some_and(|d| Instant::now() >= d) {
                    report.stopped_early = true;
                    return Ok(report);
                }
                self.log(log, opts, &mut report).await?;
                report.logs += 1;
                progress(log, &report);
            }
        }
        Ok(report)
    }

    /// The segments of `log` the policy selects, oldest first.
    pub async fn selected(
        &self,
        log: LogId,
        now: i64,
    ) -> Result<Vec<SegmentRecord>, RetentionError> {
        let mut units = RequestUnits::default();
        let segments = self.store.all_segments(log, &mut units).await?;
        Ok(select(&segments, self.policy, now))
    }

    /// One log: every selected segment that still has entry items.
    pub async fn log(
        &self,
        log: LogId,
        opts: RunOptions,
        report: &mut RetentionReport,
    ) -> Result<(), RetentionError> {
        for seg in self.selected(log, opts.now).await? {
            if opts.deadline.is_some_and(|d| Instant::now() >= d) {
                report.stopped_early = true;
                return Ok(());
            }
            if seg.archive.is_some() && !self.has_items(log, seg.num).await? {
                continue;
            }
            report.segments_selected += 1;
            if !opts.dry_run {
                self.segment(log, &seg, None, report).await?;
            }
        }
        Ok(())
    }

    async fn has_items(&self, log: LogId, segment: u64) -> Result<bool, RetentionError> {
        let mut units = RequestUnits::default();
        Ok(self
            .store
            .newest_entry(log, segment, Consistency::Strong, &mut units)
            .await?
            .is_some())
    }

    /// Moves one segment out, stopping after `stop` if given (as a crash would).
    pub async fn segment(
        &self,
        log: LogId,
        seg: &SegmentRecord,
        stop: Option<Step>,
        report: &mut RetentionReport,
    ) -> Result<(), RetentionError> {
        let mut units = RequestUnits::default();
        let key = match (&seg.archive, self.policy.mode) {
            (Some(key), _) => {
                // Steps 1–2 happened (or a delete marked it); only the deletions may be left.
                if key != archive::DELETED && !self.bucket.object_exists(key).await? {
                    return Err(RetentionError::ArchiveMissing {
                        log,
                        segment: seg.num,
                        key: key.clone(),
                    });
                }
                key.clone()
            }
            (None, Mode::Archive) => {
                let entries = self.entries(log, seg.num).await?;
                let encoded = archive::encode(log, seg.num, &entries)?;
                self.bucket
                    .put_object(&encoded.key, encoded.bytes.clone(), false)
                    .await?;
                report.archive_bytes += encoded.bytes.len() as u64;
                if stop == Some(Step::Written) {
                    return Ok(());
                }
                encoded.key
            }
            (None, Mode::Delete) => archive::DELETED.to_owned(),
        };
        if seg.archive.is_none() {
            if !self
                .store
                .set_archive(log, seg.num, &key, &mut units)
                .await?
            {
                warn!(log = %log, segment = seg.num, "the segment was archived elsewhere meanwhile; leaving it");
                return Ok(());
            }
            if stop == Some(Step::Marked) {
                return Ok(());
            }
        }
        // Delete in order, so what is left is always a suffix: a reader from an entry that is
        // gone sees a gap and reads the archive; one from an entry still there reads on as
        // before, up to the End Segment entry.
        let nums: Vec<u64> = self
            .entries(log, seg.num)
            .await?
            .iter()
            .map(|e| e.num)
            .collect();
        for (i, batch) in nums.chunks(25).enumerate() {
            self.store
                .delete_entries(log, seg.num, batch, &mut units)
                .await?;
            report.entries_removed += batch.len() as u64;
            if stop == Some(Step::Deleted(i as u32 + 1)) {
                return Ok(());
            }
        }
        if key == archive::DELETED {
            report.segments_deleted += 1;
        } else {
            report.segments_archived += 1;
        }
        info!(log = %log, segment = seg.num, key = %key, entries = nums.len(), "segment moved out of the Entry table");
        Ok(())
    }

    /// Every entry item still in the segment, read strongly.
    async fn entries(&self, log: LogId, segment: u64) -> Result<Vec<EntryRecord>, RetentionError> {
        Ok(segment_entries(&self.store, log, segment, 0, Consistency::Strong).await?)
    }
}

/// The segments `policy` selects from a log's segments (oldest first), as of `now`.
pub fn select(segments: &[SegmentRecord], policy: Policy, now: i64) -> Vec<SegmentRecord> {
    let Some(newest) = segments.last() else {
        return Vec::new();
    };
    // The newest segment with a completed snapshot: everything before it is history.
    let Some(completed) = segments.iter().rev().find(|s| s.last_snapshot.is_some()) else {
        return Vec::new();
    };
    segments
        .windows(2)
        .filter_map(|w| {
            let (seg, next) = (&w[0], &w[1]);
            let safe = seg.num + 2 <= newest.num && seg.num < completed.num;
            let old_enough = seg.num + policy.keep_segments <= newest.num
                || policy.after_days.is_some_and(|d| {
                    next.created <= now - i64::try_from(d).unwrap_or(i64::MAX / DAY) * DAY
                });
            (safe && old_enough).then(|| seg.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(num: u64, created: i64, last: Option<u64>) -> SegmentRecord {
        SegmentRecord {
            num,
            created,
            base_seq: num * 100,
            last_snapshot: last,
            archive: None,
        }
    }

    fn nums(v: Vec<SegmentRecord>) -> Vec<u64> {
        v.iter().map(|s| s.num).collect()
    }

    #[test]
    fn only_history_behind_a_completed_snapshot_and_the_two_newest_is_selected() {
        let keep3 = Policy {
            mode: Mode::Archive,
            keep_segments: 3,
            after_days: None,
        };
        let segs: Vec<_> = (0..6).map(|n| seg(n, n as i64 * DAY, Some(0))).collect();
        assert_eq!(nums(select(&segs, keep3, 0)), vec![0, 1, 2]);
        // Keep-2 is the floor: the two newest always stay.
        let keep2 = Policy {
            keep_segments: 2,
            ..keep3
        };
        assert_eq!(nums(select(&segs, keep2, 0)), vec![0, 1, 2, 3]);
        // Nothing at or after the newest completed snapshot's segment.
        let mut behind = segs.clone();
        for s in &mut behind[2..] {
            s.last_snapshot = None;
        }
        assert_eq!(nums(select(&behind, keep2, 0)), vec![0]);
        // No completed snapshot at all: nothing.
        let none: Vec<_> = (0..6).map(|n| seg(n, 0, None)).collect();
        assert!(select(&none, keep2, 0).is_empty());
    }

    #[test]
    fn the_policy_is_read_from_the_variables_the_stack_sets() {
        let vars = |pairs: &[(&str, &str)]| {
            Env::from_map(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            )
        };
        let p = policy_from_vars(&vars(&[
            ("SHEETLOG_RETENTION_MODE", "delete"),
            ("SHEETLOG_RETENTION_AFTER_DAYS", "90"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            Policy {
                mode: Mode::Delete,
                keep_segments: 3,
                after_days: Some(90)
            }
        );
        assert!(policy_from_vars(&vars(&[("SHEETLOG_RETENTION_MODE", "keep")])).is_err());
        assert!(policy_from_vars(&vars(&[])).is_err());
        assert!(
            policy_from_vars(&vars(&[
                ("SHEETLOG_RETENTION_MODE", "archive"),
                ("SHEETLOG_RETENTION_KEEP_SEGMENTS", "1")
            ]))
            .is_err()
        );
    }

    #[test]
    fn age_selects_segments_that_ended_long_enough_ago() {
        let p = Policy {
            mode: Mode::Delete,
            keep_segments: 100,
            after_days: Some(90),
        };
        let segs: Vec<_> = (0..6)
            .map(|n| seg(n, n as i64 * 30 * DAY, Some(0)))
            .collect();
        // Now is day 200: segment n ended when n+1 began, on day 30(n+1).
        let now = 200 * DAY;
        assert_eq!(nums(select(&segs, p, now)), vec![0, 1, 2]);
        assert!(
            Policy {
                keep_segments: 1,
                ..p
            }
            .validate()
            .is_err()
        );
    }
}
