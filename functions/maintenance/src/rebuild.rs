//! Rebuilding snapshots from the log (`sheetlog-maintenance rebuild-snapshots`): the log is the
//! truth and every snapshot object is derived from it, so a lost chunk, manifest or whole
//! `snapshots/` prefix is brought back by building each completed snapshot again, in log order,
//! with the snapshot worker's own builder ([`SnapshotBuilder`], the same chunking settings). A
//! build is deterministic (`docs/design.md`, invariant 4): the same entries give the same bytes
//! under the same keys, so the rebuilt manifest key is the root already on the Snapshot entry.
//!
//! Per log, entries are read from sequence 0 with the reader every other reader uses (it follows
//! segments, archived ones included). Each Snapshot entry with a root is rebuilt from the
//! previous one; an object already in the bucket is left alone (counted as present), a missing
//! one is written. A root that differs from the rebuilt manifest key (which only a change of
//! builder could cause) is replaced on a segment still in DynamoDB, and reported for an archived
//! one. The walk stops at the first Snapshot entry without a root: later ones cannot be complete
//! (snapshots complete in order) and `reprocess` is the tool for unfinished ones.
//!
//! Forks: a fork's entry 0 carries the root of a snapshot built from its source at fork time,
//! and the log does not say which source. While that manifest is present, the fork's later
//! snapshots are rebuilt on it; when it is gone, the log is reported in `forkBasesMissing` and
//! left alone (restore the object from a noncurrent version of the bucket).
//!
//! Idempotent and resumable: a run writes only what is missing, so running it again (after an
//! interruption, or to check) writes nothing more; `--log` limits a run to one log.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Serialize;
use sheetlog_core::aws::{DynamoLogStore, S3Bucket};
use sheetlog_core::domain::{EntryType, LogId, RequestUnits};
use sheetlog_core::error::{LogError, StoreError};
use sheetlog_core::log::{EventLog, SegmentHint};
use sheetlog_core::ports::LogStore;
use sheetlog_core::snapshot::{BlobError, BlobStore, BuildConfig, SnapshotBuilder, SnapshotError};
use sheetlog_core::snapshot_input::{InputError, base_manifest, log_entries};
use tracing::{error, warn};

use crate::logs::LogIds;

#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("scanning the Segment table failed: {0}")]
    Scan(String),
    #[error("log {log}: read {got} entries from sequence 0, expected {expected}")]
    ShortRead { log: LogId, got: u64, expected: u64 },
}

/// What a run found and did (totals over the logs done so far).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RebuildReport {
    pub logs: u64,
    pub entries_read: u64,
    /// Snapshots built again (each completed Snapshot entry after entry 0).
    pub snapshots_rebuilt: u64,
    /// Chunk and manifest objects written (or, in a dry run, that would have been).
    pub objects_written: u64,
    /// Objects the build produced that were already in the bucket.
    pub objects_present: u64,
    /// Snapshot entries whose root differed from the rebuilt manifest key and was replaced.
    pub roots_fixed: u64,
    /// Roots that differ on an archived segment (not changed: the archive is read-only).
    pub roots_differing_archived: u64,
    /// Forks whose entry-0 snapshot is gone; their later snapshots were left alone.
    pub fork_bases_missing: u64,
    /// Snapshot entries not yet complete, where a log's walk stopped.
    pub snapshots_incomplete: u64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RebuildOptions {
    /// Only this log (every log of the Segment table when `None`).
    pub log: Option<LogId>,
    /// Report what would be written without writing it.
    pub dry_run: bool,
}

/// The log and bucket a run works on.
#[derive(Debug)]
pub struct Rebuilder {
    dynamo: aws_sdk_dynamodb::Client,
    segment_table: String,
    log: EventLog<DynamoLogStore, S3Bucket>,
    bucket: S3Bucket,
}

/// Entries read from sequence 0 in one go: an operator's tool, far past any real log's length
/// between archive runs.
const READ_LIMIT: usize = 10_000_000;

impl Rebuilder {
    pub fn new(
        dynamo: aws_sdk_dynamodb::Client,
        entry_table: &str,
        segment_table: &str,
        bucket: S3Bucket,
    ) -> Result<Self, RebuildError> {
        let store = DynamoLogStore::new(dynamo.clone(), entry_table, segment_table);
        let log = EventLog::new(store, bucket.clone(), sheetlog_core::config::LogConfig::default())
            .map_err(LogError::from)?;
        Ok(Self {
            dynamo,
            segment_table: segment_table.to_owned(),
            log,
            bucket,
        })
    }

    /// Runs over one log or every log; `progress` is called after each log with the totals.
    pub async fn run(
        &self,
        opts: RebuildOptions,
        progress: &mut (dyn FnMut(LogId, &RebuildReport) + Send),
    ) -> Result<RebuildReport, RebuildError> {
        let mut report = RebuildReport::default();
        if let Some(log) = opts.log {
            self.rebuild_log(log, opts.dry_run, &mut report).await?;
            report.logs += 1;
            progress(log, &report);
            return Ok(report);
        }
        let mut logs = LogIds::new(self.dynamo.clone(), &self.segment_table);
        while let Some(page) = logs.next_page().await.map_err(RebuildError::Scan)? {
            for log in page {
                self.rebuild_log(log, opts.dry_run, &mut report).await?;
                report.logs += 1;
                progress(log, &report);
            }
        }
        Ok(report)
    }

    /// One log, oldest snapshot first.
    pub async fn rebuild_log(
        &self,
        log: LogId,
        dry_run: bool,
        report: &mut RebuildReport,
    ) -> Result<(), RebuildError> {
        let (next_seq, _) = self.log.next_seq(log).await?;
        let start = SegmentHint {
            segment: 0,
            base_seq: 0,
        };
        let mut entries = self.log.read_from(log, start, 0, READ_LIMIT).await?.entries;
        report.entries_read += entries.len() as u64;
        if entries.len() as u64 != next_seq || entries.first().is_none_or(|e| e.seq != 0) {
            return Err(RebuildError::ShortRead {
                log,
                got: entries.len() as u64,
                expected: next_seq,
            });
        }
        let (segments, _) = self.log.segments(log).await?;
        let archived = |segment: u64| {
            segments
                .iter()
                .any(|s| s.num == segment && s.archive.is_some())
        };
        let blobs = Counting::new(&self.bucket, dry_run);
        if let Some(root) = &entries[0].snapshot_root
            && !blobs.exists(root).await?
        {
            error!(log = %log, root, "the fork's first snapshot is gone; the log does not name its source");
            report.fork_bases_missing += 1;
            return Ok(());
        }
        let uuid = *log.as_uuid();
        let mut base = 0usize;
        for i in 1..entries.len() {
            if entries[i].kind != EntryType::SNAPSHOT {
                continue;
            }
            let Some(root) = entries[i].snapshot_root.clone() else {
                report.snapshots_incomplete += 1;
                break;
            };
            let manifest = base_manifest(&blobs, log, &entries[base]).await?;
            let input = log_entries(&entries[base..i])?;
            let built = SnapshotBuilder::new(
                &blobs,
                &self.bucket,
                BuildConfig::default(),
                uuid,
                entries[i].seq,
                manifest,
                input,
            )?
            .run(|_| {})
            .await?;
            report.snapshots_rebuilt += 1;
            if built.manifest_key != root {
                let (segment, num) = (entries[i].segment, entries[i].num);
                if archived(segment) {
                    warn!(log = %log, segment, entry = num, root, rebuilt = %built.manifest_key,
                        "root differs on an archived segment; left alone");
                    report.roots_differing_archived += 1;
                } else {
                    warn!(log = %log, segment, entry = num, root, rebuilt = %built.manifest_key,
                        "root differs from the rebuilt manifest; replaced");
                    report.roots_fixed += 1;
                    if !dry_run {
                        let mut units = RequestUnits::default();
                        self.log
                            .store()
                            .set_snapshot_root(log, segment, num, &built.manifest_key, &mut units)
                            .await?;
                    }
                }
                entries[i].snapshot_root = Some(built.manifest_key);
            }
            base = i;
        }
        let (written, present) = blobs.counts();
        report.objects_written += written;
        report.objects_present += present;
        Ok(())
    }
}

/// The bucket as the builder sees it during a rebuild: a put of an object already there writes
/// nothing (counted as present); a dry run keeps what it would write in memory so later builds
/// of the same run can read it.
#[derive(Debug)]
struct Counting<'a> {
    inner: &'a S3Bucket,
    dry_run: bool,
    held: Mutex<HashMap<String, Bytes>>,
    written: Mutex<(u64, u64)>,
}

impl<'a> Counting<'a> {
    fn new(inner: &'a S3Bucket, dry_run: bool) -> Self {
        Self {
            inner,
            dry_run,
            held: Mutex::new(HashMap::new()),
            written: Mutex::new((0, 0)),
        }
    }

    fn held(&self, key: &str) -> Option<Bytes> {
        self.held.lock().ok().and_then(|m| m.get(key).cloned())
    }

    fn count(&self, written: bool) {
        if let Ok(mut c) = self.written.lock() {
            if written {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
    }

    /// (written, already present)
    fn counts(&self) -> (u64, u64) {
        self.written.lock().map(|c| *c).unwrap_or_default()
    }
}

#[async_trait]
impl BlobStore for Counting<'_> {
    async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        if self.held(key).is_some() || self.inner.exists(key).await? {
            self.count(false);
            return Ok(());
        }
        if self.dry_run {
            if let Ok(mut m) = self.held.lock() {
                m.insert(key.to_owned(), bytes);
            }
        } else {
            self.inner.put(key, bytes).await?;
        }
        self.count(true);
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, BlobError> {
        match self.held(key) {
            Some(b) => Ok(Some(b)),
            None => self.inner.get(key).await,
        }
    }

    async fn exists(&self, key: &str) -> Result<bool, BlobError> {
        Ok(self.held(key).is_some() || self.inner.exists(key).await?)
    }
}
