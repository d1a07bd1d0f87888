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
//! and the log does not say which source or sequence. While that manifest and the chunks it
//! stores under the fork's own prefix are present, the fork is rebuilt: first each log whose
//! chunks the manifest shares (so a run over every log may take a source before its turn), then
//! the two fork markers per source (`log::purge::fork_markers`, which keep a deleted source's
//! chunks alive for the fork), then the fork's later snapshots on it. When the fork's own first
//! snapshot is gone, the log is reported in `forkBasesMissing` and left alone: restore those
//! objects from a noncurrent version of the bucket (`docs/operations.md`).
//!
//! Restores: a `restore` entry's kept state (the sheet as of the sequence it restores) is what
//! every snapshot after it starts from; the walk meets the entry first, with the snapshots before
//! it rebuilt, and builds a missing one again (`restoresRebuilt`).
//!
//! Deleted logs (a tombstone on the metadata item, `DELETE /logs/{logId}`) are skipped and
//! counted in `logsDeleted`: their objects are being removed on purpose.
//!
//! Idempotent and resumable: a run writes only what is missing, so running it again (after an
//! interruption, or to check) writes nothing more; `--log` limits a run to one log. A log's
//! entries are read whole (an operator's tool; the bodies of one log fit in memory).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Serialize;
use sheetlog_core::aws::{DynamoLogStore, DynamoPurge, S3Bucket};
use sheetlog_core::domain::{Entry, EntryType, LogId, RequestUnits};
use sheetlog_core::error::{LogError, StoreError};
use sheetlog_core::layer::{Call, Layer, Layered};
use sheetlog_core::log::{EventLog, ForkOrigin, SegmentHint};
use sheetlog_core::ports::{BlobLayer, LogEntries, LogPurge};
use sheetlog_core::snapshot::{
    BlobError, BlobParts, BlobStore, BuildConfig, Manifest, SnapshotBuilder, SnapshotError,
};
use sheetlog_core::snapshot_input::{InputError, base_manifest, fork_snapshot, log_entries};
use tracing::{error, info, warn};

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
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error("invalid settings: {0}")]
    Config(#[from] sheetlog_core::config::ConfigError),
    #[error("scanning the Segment table failed: {0}")]
    Scan(String),
    #[error("log {log}: read {got} entries from sequence 0, expected {expected}")]
    ShortRead { log: LogId, got: u64, expected: u64 },
}

/// How a fork's first snapshot stands after [`Rebuilder::fork_first`].
enum ForkBase {
    /// Whole, under this root.
    Whole(String),
    /// Gone, and it cannot be built again.
    Missing,
}

/// A log's entries from sequence 0 in pages of bounded size, following segments (archived ones
/// included) with the reader every other reader uses, up to the end the run started with.
struct Pages {
    log: LogId,
    hint: SegmentHint,
    num: u64,
    /// Entries read so far.
    read: u64,
    /// The log's next sequence when the walk began: entries appended since are not its business.
    end: u64,
    /// Set at an empty page before the end, or at a Snapshot entry not yet complete.
    stopped: bool,
    /// Set at a Snapshot entry not yet complete: the rest is not read, on purpose.
    incomplete: bool,
    page: usize,
}

impl Pages {
    fn new(log: LogId, end: u64, page: usize) -> Self {
        Self {
            log,
            page,
            hint: SegmentHint {
                segment: 0,
                base_seq: 0,
            },
            num: 0,
            read: 0,
            end,
            stopped: false,
            incomplete: false,
        }
    }

    async fn next(
        &mut self,
        log: &EventLog<DynamoLogStore, S3Bucket>,
        report: &mut RebuildReport,
    ) -> Result<Option<Vec<Entry>>, RebuildError> {
        if self.stopped || self.read >= self.end {
            return Ok(None);
        }
        let limit = usize::try_from(self.end - self.read).map_or(self.page, |n| n.min(self.page));
        let (page, _) = log
            .read_from_within(self.log, self.hint, self.num, limit, PAGE_BYTES)
            .await?;
        let Some(last) = page.entries.last() else {
            self.stopped = true;
            return Ok(None);
        };
        self.hint = SegmentHint {
            segment: last.segment,
            base_seq: last.seq - last.num,
        };
        self.num = last.num + 1;
        let n = page.entries.len() as u64;
        self.read += n;
        report.entries_read += n;
        Ok(Some(page.entries))
    }

    /// Ends the walk early (at a Snapshot entry not yet complete).
    fn stop(&mut self) {
        self.stopped = true;
        self.incomplete = true;
    }

    /// True when the walk found fewer entries than the log had when it began.
    fn short(&self) -> bool {
        !self.incomplete && self.read < self.end
    }
}

/// What a run found and did (totals over the logs done so far).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RebuildReport {
    /// Logs visited (deleted ones included).
    pub logs: u64,
    /// Logs skipped because they were deleted (tombstoned).
    pub logs_deleted: u64,
    pub entries_read: u64,
    /// Snapshots built again (completed Snapshot entries after entry 0 with an object missing,
    /// or every one with `verify`).
    pub snapshots_rebuilt: u64,
    /// Snapshots whose manifest and chunks were all present, so not built.
    pub snapshots_intact: u64,
    /// Chunk, manifest and fork-marker objects written (or, in a dry run, that would have been).
    pub objects_written: u64,
    /// Objects the build wrote that were already in the bucket (manifests and fork markers; the
    /// builder itself skips chunks that are there, which are not counted).
    pub objects_present: u64,
    /// Snapshot entries whose root differed from the rebuilt manifest key and was replaced.
    pub roots_fixed: u64,
    /// Roots that differ on an archived segment (not changed: the archive is read-only).
    pub roots_differing_archived: u64,
    /// Forks whose first snapshot (its manifest, or a chunk of it that no source rebuilt) is
    /// gone and cannot be built again (the fork predates recorded origins, or its source is
    /// gone); their later snapshots were left alone.
    pub fork_bases_missing: u64,
    /// Forks whose first snapshot was gone and was built again from the source and sequence
    /// their entry 0 records.
    pub fork_bases_rebuilt: u64,
    /// Snapshot entries not yet complete, where a log's walk stopped.
    pub snapshots_incomplete: u64,
    /// `restore` entries whose kept state (the sheet as of the sequence they restore,
    /// `snapshots/<log>/restores/`) was gone and was built again before the snapshots after them.
    pub restores_rebuilt: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct RebuildOptions {
    /// Only this log (every log of the Segment table when `None`); the logs a fork of it shares
    /// chunks with are rebuilt too.
    pub log: Option<LogId>,
    /// Report what would be written without writing it.
    pub dry_run: bool,
    /// Build every snapshot again, even one whose manifest and chunks are all in the bucket
    /// (which a run otherwise counts as intact and passes over): checks that the builder still
    /// gives the roots on the log.
    pub verify: bool,
    /// The chunking the snapshot worker builds with (its default unless configured otherwise):
    /// the same settings give the same bytes.
    pub build: BuildConfig,
    /// Entries per page of the walk through a log ([`PAGE_ENTRIES`]); memory holds one page and
    /// one snapshot interval of entries.
    pub page_entries: usize,
}

impl Default for RebuildOptions {
    fn default() -> Self {
        Self {
            log: None,
            dry_run: false,
            verify: false,
            build: BuildConfig::default(),
            page_entries: PAGE_ENTRIES,
        }
    }
}

/// The tables and bucket a run works on.
#[derive(Debug, Clone)]
pub struct RebuildTables {
    pub entry_table: String,
    pub segment_table: String,
    /// Holds the logs' metadata items (tombstones of deleted logs).
    pub clients_table: String,
}

/// The log and bucket a run works on.
#[derive(Debug)]
pub struct Rebuilder {
    dynamo: aws_sdk_dynamodb::Client,
    segment_table: String,
    log: EventLog<DynamoLogStore, S3Bucket>,
    meta: DynamoPurge,
    bucket: S3Bucket,
}

/// A page of the walk through a log: at most this many entries (by default) ...
pub const PAGE_ENTRIES: usize = 1_000;
/// ... and about this many bytes of bodies (a page always holds at least one entry).
const PAGE_BYTES: usize = 32 << 20;

/// One log's walk: which log, the run's options, the bucket as the run writes to it, and
/// whether a segment of the log is archived.
struct LogWalk<'a> {
    log: LogId,
    opts: RebuildOptions,
    blobs: &'a CountedBucket,
    archived: &'a dyn Fn(u64) -> bool,
}

/// Logs already done in this run (rebuilt, skipped or being rebuilt).
type Done = HashSet<LogId>;

impl Rebuilder {
    pub fn new(
        dynamo: aws_sdk_dynamodb::Client,
        tables: &RebuildTables,
        bucket: S3Bucket,
    ) -> Result<Self, RebuildError> {
        let store = DynamoLogStore::new(dynamo.clone(), &tables.entry_table, &tables.segment_table);
        let log = EventLog::new(
            store,
            bucket.clone(),
            sheetlog_core::config::LogConfig::default(),
        )?;
        // Only `log_meta` is used, which reads the Clients table.
        let meta = DynamoPurge::new(
            dynamo.clone(),
            &tables.entry_table,
            &tables.segment_table,
            "",
            &tables.clients_table,
        );
        Ok(Self {
            dynamo,
            segment_table: tables.segment_table.clone(),
            log,
            meta,
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
        let mut done = Done::new();
        if let Some(log) = opts.log {
            self.rebuild_log(log, opts, &mut report, &mut done, progress)
                .await?;
            return Ok(report);
        }
        let mut logs = LogIds::new(self.dynamo.clone(), &self.segment_table);
        while let Some(page) = logs.next_page().await.map_err(RebuildError::Scan)? {
            for log in page {
                if !done.contains(&log) {
                    self.rebuild_log(log, opts, &mut report, &mut done, progress)
                        .await?;
                }
            }
        }
        Ok(report)
    }

    /// One log, oldest snapshot first (after the logs its first snapshot shares chunks with).
    pub async fn rebuild_log(
        &self,
        log: LogId,
        opts: RebuildOptions,
        report: &mut RebuildReport,
        done: &mut Done,
        progress: &mut (dyn FnMut(LogId, &RebuildReport) + Send),
    ) -> Result<(), RebuildError> {
        if !done.insert(log) {
            return Ok(());
        }
        self.rebuild_one(log, opts, report, done, progress).await?;
        report.logs += 1;
        progress(log, report);
        Ok(())
    }

    async fn rebuild_one(
        &self,
        log: LogId,
        opts: RebuildOptions,
        report: &mut RebuildReport,
        done: &mut Done,
        progress: &mut (dyn FnMut(LogId, &RebuildReport) + Send),
    ) -> Result<(), RebuildError> {
        if self
            .meta
            .log_meta(log)
            .await?
            .is_some_and(|m| m.deleted.is_some())
        {
            info!(log = %log, "deleted log; skipped");
            report.logs_deleted += 1;
            return Ok(());
        }
        let (next_seq, _) = self.log.next_seq(log).await?;
        let (segments, _) = self.log.segments(log).await?;
        let archived = |segment: u64| {
            segments
                .iter()
                .any(|s| s.num == segment && s.archive.is_some())
        };
        let blobs = Counting::over(&self.bucket, opts.dry_run);
        let walk = LogWalk {
            log,
            opts,
            blobs: &blobs,
            archived: &archived,
        };
        let mut pages = Pages::new(log, next_seq, opts.page_entries.max(1));
        let mut page = pages.next(&self.log, report).await?.unwrap_or_default();
        if page.first().is_none_or(|e| e.seq != 0) {
            return Err(RebuildError::ShortRead {
                log,
                got: 0,
                expected: next_seq,
            });
        }
        let first = page.remove(0);
        let Some(first) = self
            .whole_first(&walk, first, report, done, progress)
            .await?
        else {
            report.fork_bases_missing += 1;
            return Ok(());
        };
        self.rebuild_snapshots(&walk, &mut pages, page, first, report)
            .await?;
        if pages.short() {
            return Err(RebuildError::ShortRead {
                log,
                got: pages.read,
                expected: next_seq,
            });
        }
        let (written, present) = blobs.layer().counts();
        report.objects_written += written;
        report.objects_present += present;
        Ok(())
    }

    /// The log's entry 0, its snapshot (a fork's first) made whole with its root as rebuilt;
    /// `None` when it is a fork whose base is gone and cannot be built again.
    async fn whole_first(
        &self,
        walk: &LogWalk<'_>,
        mut first: Entry,
        report: &mut RebuildReport,
        done: &mut Done,
        progress: &mut (dyn FnMut(LogId, &RebuildReport) + Send),
    ) -> Result<Option<Entry>, RebuildError> {
        let Some(root) = first.snapshot_root.clone() else {
            return Ok(Some(first));
        };
        let (log, opts) = (walk.log, walk.opts);
        match self
            .fork_first(log, &first, &root, opts, walk.blobs, report, done, progress)
            .await?
        {
            ForkBase::Whole(new_root) => {
                if new_root != root {
                    self.replace_root(log, &first, &new_root, opts.dry_run, walk.archived, report)
                        .await?;
                    first.snapshot_root = Some(new_root);
                }
                Ok(Some(first))
            }
            ForkBase::Missing => Ok(None),
        }
    }

    /// Walks the log from `first` (the page after it in hand, the rest from `pages`), each
    /// completed snapshot left alone when intact and built again otherwise, up to the first
    /// Snapshot entry without a root.
    async fn rebuild_snapshots(
        &self,
        walk: &LogWalk<'_>,
        pages: &mut Pages,
        mut page: Vec<Entry>,
        first: Entry,
        report: &mut RebuildReport,
    ) -> Result<(), RebuildError> {
        // The entries from the last completed snapshot (first) up to the next one: what a build
        // needs, so memory holds one snapshot interval, not the log.
        let mut window = vec![first];
        loop {
            for entry in page {
                if entry.kind != EntryType::SNAPSHOT {
                    self.keep_restored(walk, &entry, report).await?;
                    window.push(entry);
                    continue;
                }
                let Some(root) = entry.snapshot_root.clone() else {
                    report.snapshots_incomplete += 1;
                    pages.stop();
                    break;
                };
                if !walk.opts.verify && self.intact(walk.blobs, walk.log, &root).await? {
                    report.snapshots_intact += 1;
                    window = vec![entry];
                    continue;
                }
                let entry = self
                    .rebuild_snapshot(walk, &window, entry, &root, report)
                    .await?;
                window = vec![entry];
            }
            match pages.next(&self.log, report).await? {
                Some(next) => page = next,
                None => break,
            }
        }
        Ok(())
    }

    /// For a `restore` entry: its kept state, built again when it is gone (every read and build
    /// after the restore starts from it). The snapshots before it are rebuilt already, in log
    /// order, so the state as of the sequence it restores can be read.
    async fn keep_restored(
        &self,
        walk: &LogWalk<'_>,
        entry: &Entry,
        report: &mut RebuildReport,
    ) -> Result<(), RebuildError> {
        // An undo of an import is a restore too.
        if entry.kind.0 != sheetlog_core::sheet::event::TYPE_RESTORE
            && entry.kind.0 != sheetlog_core::sheet::undo::TYPE_UNDO
        {
            return Ok(());
        }
        let decoded = log_entries(std::slice::from_ref(entry))?;
        let Some(seq) = decoded
            .first()
            .and_then(sheetlog_core::snapshot::restored_seq)
        else {
            return Ok(());
        };
        let key = sheetlog_core::snapshot::restore_manifest_key(*walk.log.as_uuid(), seq);
        if walk.blobs.exists(&key).await? {
            report.objects_present += 1;
            return Ok(());
        }
        sheetlog_core::snapshot_input::restore_snapshot(
            &self.log,
            walk.blobs,
            &self.bucket,
            walk.opts.build,
            walk.log,
            seq,
        )
        .await?;
        report.restores_rebuilt += 1;
        Ok(())
    }

    /// Builds the snapshot of the Snapshot `entry` (whose root is `root`) again from `window`,
    /// the entries since the previous one; answers the entry with the root as rebuilt.
    async fn rebuild_snapshot(
        &self,
        walk: &LogWalk<'_>,
        window: &[Entry],
        mut entry: Entry,
        root: &str,
        report: &mut RebuildReport,
    ) -> Result<Entry, RebuildError> {
        let manifest = base_manifest(walk.blobs, walk.log, &window[0]).await?;
        let (manifest, input) = sheetlog_core::snapshot::resolve_restores(
            walk.blobs,
            *walk.log.as_uuid(),
            manifest,
            log_entries(window)?,
        )
        .await?;
        let built = SnapshotBuilder::new(
            walk.blobs,
            &self.bucket,
            walk.opts.build,
            *walk.log.as_uuid(),
            entry.seq,
            manifest,
            input,
        )?
        .run(|_| {})
        .await?;
        report.snapshots_rebuilt += 1;
        if built.manifest_key != root {
            self.replace_root(
                walk.log,
                &entry,
                &built.manifest_key,
                walk.opts.dry_run,
                walk.archived,
                report,
            )
            .await?;
            entry.snapshot_root = Some(built.manifest_key);
        }
        Ok(entry)
    }

    /// Records a rebuilt root that differs from the one on the Snapshot entry (which only a
    /// change of builder, or a fork built again from a source whose later snapshots completed
    /// since, can cause): replaced on a segment still in DynamoDB, reported on an archived one.
    async fn replace_root(
        &self,
        log: LogId,
        entry: &Entry,
        rebuilt: &str,
        dry_run: bool,
        archived: &dyn Fn(u64) -> bool,
        report: &mut RebuildReport,
    ) -> Result<(), RebuildError> {
        let (segment, num) = (entry.segment, entry.num);
        let root = entry.snapshot_root.as_deref().unwrap_or_default();
        if archived(segment) {
            warn!(log = %log, segment, entry = num, root, rebuilt,
                "root differs on an archived segment; left alone");
            report.roots_differing_archived += 1;
            return Ok(());
        }
        warn!(log = %log, segment, entry = num, root, rebuilt,
            "root differs from the rebuilt manifest; replaced");
        report.roots_fixed += 1;
        if !dry_run {
            let mut units = RequestUnits::default();
            self.log
                .store()
                .set_snapshot_root(log, segment, num, rebuilt, &mut units)
                .await?;
        }
        Ok(())
    }

    /// True when the manifest under `root` and every chunk it lists are in the bucket: the
    /// snapshot needs no build (a rerun after an interruption goes past what is done at the cost
    /// of one existence check per object).
    async fn intact(
        &self,
        blobs: &CountedBucket,
        log: LogId,
        root: &str,
    ) -> Result<bool, RebuildError> {
        let Some(bytes) = blobs.get(root).await? else {
            return Ok(false);
        };
        let Ok(manifest) = Manifest::from_bytes(root, &bytes) else {
            warn!(log = %log, root, "manifest unreadable; building it again");
            return Ok(false);
        };
        for chunk in &manifest.chunks {
            if !blobs
                .exists(&chunk.key(*log.as_uuid(), manifest.format))
                .await?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A fork's first snapshot, made whole: its sources rebuilt first, its manifest and chunks
    /// checked, and when they are gone, built again from the source its entry 0 names. Answers
    /// the root to use (the entry's own, or the rebuilt one).
    #[allow(clippy::too_many_arguments)]
    async fn fork_first(
        &self,
        log: LogId,
        first: &Entry,
        root: &str,
        opts: RebuildOptions,
        blobs: &CountedBucket,
        report: &mut RebuildReport,
        done: &mut Done,
        progress: &mut (dyn FnMut(LogId, &RebuildReport) + Send),
    ) -> Result<ForkBase, RebuildError> {
        let origin = ForkOrigin::of_first_entry(first);
        if let Some(origin) = origin {
            Box::pin(self.rebuild_log(origin.source, opts, report, done, progress)).await?;
        }
        if let Some(manifest) = self.fork_base(log, root).await? {
            let sources = sources(&manifest);
            for source in &sources {
                Box::pin(self.rebuild_log(*source, opts, report, done, progress)).await?;
            }
            let mut whole = true;
            for chunk in &manifest.chunks {
                let key = chunk.key(*log.as_uuid(), manifest.format);
                if !blobs.exists(&key).await? {
                    warn!(log = %log, root, chunk = key, "a chunk of the fork's first snapshot is gone");
                    whole = false;
                    break;
                }
            }
            if whole {
                self.mark_sources(log, &sources, blobs).await?;
                return Ok(ForkBase::Whole(root.to_owned()));
            }
        }
        let Some(origin) = origin else {
            error!(log = %log, root, "the fork's first snapshot is gone and its entry 0 does not name its source (a fork made before origins were recorded)");
            return Ok(ForkBase::Missing);
        };
        // Built again from the source as of the fork's sequence, as `POST /logs` built it.
        let built = match fork_snapshot(
            &self.log,
            blobs,
            &self.bucket,
            opts.build,
            origin.source,
            origin.at,
            log,
        )
        .await
        {
            Ok(built) => built,
            Err(e) => {
                error!(log = %log, source = %origin.source, at = origin.at, error = %e,
                    "the fork's first snapshot is gone and its source cannot give it again");
                return Ok(ForkBase::Missing);
            }
        };
        report.fork_bases_rebuilt += 1;
        self.mark_sources(log, &sources(&built.read_manifest(blobs).await?), blobs)
            .await?;
        Ok(ForkBase::Whole(built.manifest_key))
    }

    /// The two markers per source whose chunks the fork's first snapshot shares
    /// (`log::purge::fork_markers`), which keep a deleted source's chunks alive for the fork.
    async fn mark_sources(
        &self,
        log: LogId,
        sources: &BTreeSet<LogId>,
        blobs: &CountedBucket,
    ) -> Result<(), RebuildError> {
        for source in sources {
            for marker in sheetlog_core::log::purge::fork_markers(*source, log) {
                blobs.put(&marker, Bytes::new()).await?;
            }
        }
        Ok(())
    }

    /// A fork's first manifest, `None` when it is gone.
    async fn fork_base(&self, log: LogId, root: &str) -> Result<Option<Manifest>, RebuildError> {
        let Some(bytes) = self.bucket.get(root).await? else {
            return Ok(None);
        };
        let manifest = Manifest::from_bytes(root, &bytes)?;
        if manifest.log_id != *log.as_uuid() {
            return Err(SnapshotError::BadManifest {
                key: root.to_owned(),
                reason: format!("manifest is for log {}, expected {log}", manifest.log_id),
            }
            .into());
        }
        Ok(Some(manifest))
    }
}

/// The logs whose chunks a fork's first snapshot shares: each gets the fork's markers.
fn sources(manifest: &Manifest) -> BTreeSet<LogId> {
    manifest
        .other_logs()
        .into_iter()
        .map(LogId::from_uuid)
        .collect()
}

/// The bucket as the builder sees it during a rebuild: the bucket under the [`Counting`] layer.
type CountedBucket = Layered<S3Bucket, Counting>;

/// A layer over the bucket (`sheetlog_core::layer`) for a rebuild: a put of an object already
/// there writes nothing (counted as present); a dry run keeps what it would write in memory so
/// later builds of the same run can read it. A blob method this does not override (one added to
/// the port later) passes through to the bucket, except in a dry run, where it is refused: it
/// might write, and it would not see what the dry run holds.
#[derive(Debug)]
struct Counting {
    dry_run: bool,
    held: Mutex<HashMap<String, Bytes>>,
    written: Mutex<(u64, u64)>,
}

impl Counting {
    fn over(bucket: &S3Bucket, dry_run: bool) -> CountedBucket {
        Layered::new(
            bucket.clone(),
            Self {
                dry_run,
                held: Mutex::new(HashMap::new()),
                written: Mutex::new((0, 0)),
            },
        )
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
impl Layer for Counting {
    async fn around<T, E, F>(&self, call: Call, run: F) -> Result<T, E>
    where
        T: Send,
        E: From<StoreError> + Send,
        F: Future<Output = Result<T, E>> + Send,
    {
        if self.dry_run {
            return Err(StoreError::service(
                call.service,
                call.operation,
                format!(
                    "{}::{} is not simulated by a dry run",
                    call.port, call.method
                ),
            )
            .into());
        }
        run.await
    }
}

#[async_trait]
impl BlobLayer for Counting {
    async fn put<S: BlobStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
        bytes: Bytes,
    ) -> Result<(), BlobError> {
        if self.held(key).is_some() || inner.exists(key).await? {
            self.count(false);
            return Ok(());
        }
        if self.dry_run {
            if let Ok(mut m) = self.held.lock() {
                m.insert(key.to_owned(), bytes);
            }
        } else {
            inner.put(key, bytes).await?;
        }
        self.count(true);
        Ok(())
    }

    /// A manifest written in parts: collected and written as one `put`, so a dry run holds it
    /// and a real run counts it like any other object.
    async fn put_parts<S: BlobStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
        parts: &mut dyn BlobParts,
    ) -> Result<(), BlobError> {
        let mut all = Vec::new();
        while let Some(p) = parts.next_part().await? {
            all.extend_from_slice(&p);
        }
        BlobLayer::put(self, inner, key, Bytes::from(all)).await
    }

    async fn get<S: BlobStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
    ) -> Result<Option<Bytes>, BlobError> {
        match self.held(key) {
            Some(b) => Ok(Some(b)),
            None => inner.get(key).await,
        }
    }

    async fn exists<S: BlobStore + ?Sized>(&self, inner: &S, key: &str) -> Result<bool, BlobError> {
        Ok(self.held(key).is_some() || inner.exists(key).await?)
    }

    /// How a build writes its chunks: counted like `put`; a dry run holds what is new, a real
    /// run sends the bucket's one conditional PUT.
    async fn put_if_absent<S: BlobStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
        bytes: Bytes,
    ) -> Result<bool, BlobError> {
        let wrote = if self.held(key).is_some() {
            false
        } else if self.dry_run {
            let new = !inner.exists(key).await?;
            if new && let Ok(mut m) = self.held.lock() {
                m.insert(key.to_owned(), bytes);
            }
            new
        } else {
            inner.put_if_absent(key, bytes).await?
        };
        self.count(wrote);
        Ok(wrote)
    }
}
