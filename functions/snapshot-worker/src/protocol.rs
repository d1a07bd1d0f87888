//! The Pending Snapshots protocol (`docs/design.md`, "Snapshots"), one job at a time. It is
//! written against ports (the log store, payloads, Pending Snapshots, blobs, import files), so it
//! runs over the AWS adapters in Lambda and over the in-memory stores in fast tests. [`Worker::run`] decides what the job's message should do next and returns it as
//! an [`Outcome`]; the handler turns that into queue actions.
//!
//! In order, for a job naming Snapshot entry (segment, entry) of a log:
//! 1. The log's earliest pending snapshot comes before this one → wait for it (deferred with
//!    backoff and jitter).
//! 2. This snapshot already has a pending item:
//!    - active and written to within the pending timeout → another invocation is on it: come
//!      back when its timeout would run out;
//!    - inactive (handed off, or waiting) or stale (its holder died) → claim it with a write
//!      conditional on the increment we read; losing that race means this message is a
//!      duplicate; winning means continuing from the item's checkpoint.
//! 3. No pending item: the segment's Last Snapshot at or past the entry → a late duplicate.
//!    Otherwise create the pending item, conditional on it not existing (losing → duplicate).
//! 4. Read the log from the previous completed snapshot. An earlier Snapshot entry in between is
//!    not built yet → clear active and wait (deferred with backoff).
//! 5. Build with the incremental builder, resuming from the checkpoint if there is one. After
//!    each chunk write a checkpoint, conditional on the increment (so checkpoints only move
//!    forward; a refused write means another invocation took over, and this one bails out).
//!    Between checkpoints a heartbeat keeps `modified` fresh. After a checkpoint, if the
//!    invocation's time is nearly up, clear active and hand the job off.
//! 6. Complete, in this order: the manifest key into the Snapshot entry, the segment's Last
//!    Snapshot, delete the pending item; the handler then lets the message be deleted.
//!
//! Every S3 object the build writes has a deterministic name (chunks by content hash, the
//! manifest by log and sequence), so duplicate or overlapping invocations write identical bytes
//! to identical keys and leave nothing orphaned.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};
use rand::Rng;
use sheetlog_core::aws::{DynamoLogStore, DynamoPendingStore, DynamoPurge, S3Bucket, s3_client};
use sheetlog_core::config::{ConfigError, LogConfig, Resources};
use sheetlog_core::domain::{
    EntryType, Guarded, PendingKey, PendingSnapshot, RequestUnits, SnapshotJob, now_secs,
};
use sheetlog_core::error::{LogError, StoreError};
use sheetlog_core::log::EventLog;
use sheetlog_core::ports::{Consistency, LogPurge, LogStore, PayloadStore, PendingSnapshots};
use sheetlog_core::snapshot::{
    BlobStore, BuildResult, Checkpoint, ImportSource, LogEntry, Manifest, Progress,
    SnapshotBuilder, SnapshotError, compute_values, resolve_restores,
};
use sheetlog_core::snapshot_input::{
    InputError, InputPages, Located, SnapshotInput, Target, base_manifest, into_log_entries,
    locate, target,
};
use tracing::{debug, info, warn};

use crate::config::WorkerConfig;
use crate::hooks::{NoHooks, Step, StepHook};

pub type AwsLog = EventLog<DynamoLogStore, S3Bucket>;

/// What a pending item's state holds when its checkpoint spilled to S3.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Spilled {
    spilled: String,
}

/// What the last page's build starts from: the manifest the earlier pages were folded into
/// (or the base snapshot's), and the last page's entries.
struct BuildInput {
    base: Option<Manifest>,
    entries: Vec<LogEntry>,
}

/// Where a snapshot's spilled checkpoint lives: one object per snapshot, overwritten by each
/// spill. Any checkpoint of the build is a valid place to resume (the build is deterministic and
/// every chunk a checkpoint names was written before it), so a holder that was taken over and
/// spills once more late does no harm.
pub fn checkpoint_key(key: &PendingKey) -> String {
    format!(
        "snapshots/{}/checkpoints/{}-{}.json",
        key.log, key.segment, key.entry
    )
}

/// Entries read after a completed snapshot to find the next one (the snapshot interval is
/// usually far smaller; a longer gap means the next one is not in the log yet).
const NEXT_SNAPSHOT_SCAN: usize = 1000;

/// Why a job is waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeferReason {
    /// An earlier snapshot of the log has a pending item.
    EarlierPending { segment: u64, entry: u64 },
    /// An earlier Snapshot entry of the log has not been started.
    EarlierUnprocessed { segment: u64, entry: u64 },
    /// Another invocation holds this snapshot's pending item and is alive.
    HeldElsewhere,
}

/// What became of a job, and so what its message should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Built (or its interrupted completion finished); the root is the manifest key.
    Completed { root: String },
    /// The segment's Last Snapshot already covers it: a late duplicate.
    AlreadyComplete,
    /// Another invocation won a race for the pending item: this message is a duplicate.
    Duplicate,
    /// Come back after `delay`.
    Deferred {
        delay: Duration,
        reason: DeferReason,
    },
    /// Ran out of time after `checkpoints` checkpoints; the next invocation resumes.
    HandedOff { checkpoints: u32 },
    /// The job names no Snapshot entry.
    Rejected { reason: String },
    /// The log was deleted: nothing is built (what a build already wrote, the delete removes).
    LogDeleted,
}

impl Outcome {
    /// Whether the message is finished with (deleted) rather than sent round again.
    pub fn is_final(&self) -> bool {
        !matches!(self, Outcome::Deferred { .. } | Outcome::HandedOff { .. })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("encoding a checkpoint failed: {0}")]
    Checkpoint(serde_json::Error),
    /// A [`StepHook`] stopped the worker after this step (a simulated crash).
    #[error("stopped by a step hook after {0}")]
    Stopped(Step),
    /// The invocation ran past the function's timeout and was cut off, as Lambda cuts it off
    /// (set by the local stack's queue driver, `sheetlog_pipeline::QueueDriver`).
    #[error("cut off at the function's timeout ({0:?})")]
    TimedOut(std::time::Duration),
}

/// Builds snapshots for jobs: the log (generic over its store and payloads, [`AwsLog`] by
/// default), the Pending Snapshots table, and where snapshots and import files live.
pub struct Worker<S = DynamoLogStore, P = S3Bucket> {
    log: Arc<EventLog<S, P>>,
    pending: Arc<dyn PendingSnapshots>,
    blobs: Arc<dyn BlobStore>,
    imports: Arc<dyn ImportSource>,
    cfg: WorkerConfig,
    hook: Arc<dyn StepHook>,
    /// Where deleted logs' tombstones are read: a job of one builds nothing.
    tombstones: Option<Arc<dyn LogPurge>>,
}

impl<S, P> Clone for Worker<S, P> {
    fn clone(&self) -> Self {
        Self {
            log: self.log.clone(),
            pending: self.pending.clone(),
            blobs: self.blobs.clone(),
            imports: self.imports.clone(),
            cfg: self.cfg.clone(),
            hook: self.hook.clone(),
            tombstones: self.tombstones.clone(),
        }
    }
}

impl<S, P> std::fmt::Debug for Worker<S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// The worker over the stack's tables and bucket (S3 addressed path-style, which works
    /// against AWS and the local emulator alike).
    pub fn from_sdk(
        sdk: &aws_config::SdkConfig,
        resources: &Resources,
        log_cfg: LogConfig,
        cfg: WorkerConfig,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let bucket = S3Bucket::new(s3_client(sdk), &resources.bucket);
        let store = DynamoLogStore::new(
            dynamo.clone(),
            &resources.entry_table,
            &resources.segment_table,
        );
        let log = EventLog::new(store, bucket.clone(), log_cfg)?;
        let tombstones = resources
            .clients_table
            .as_deref()
            .map(|t| DynamoPurge::tombstones(dynamo.clone(), t));
        let pending = DynamoPendingStore::new(dynamo, resources.require_pending_table()?);
        let bucket = Arc::new(bucket);
        let worker = Self::new(log, Arc::new(pending), bucket.clone(), bucket, cfg);
        Ok(match tombstones {
            Some(t) => worker.with_tombstones(Arc::new(t)),
            None => worker,
        })
    }
}

impl<S: LogStore, P: PayloadStore> Worker<S, P> {
    /// A worker over any implementation of the ports (the in-memory stores in tests).
    pub fn new(
        log: EventLog<S, P>,
        pending: Arc<dyn PendingSnapshots>,
        blobs: Arc<dyn BlobStore>,
        imports: Arc<dyn ImportSource>,
        cfg: WorkerConfig,
    ) -> Self {
        Self {
            log: Arc::new(log),
            pending,
            blobs,
            imports,
            cfg,
            hook: Arc::new(NoHooks),
            tombstones: None,
        }
    }

    /// Reads the log's tombstone before each job and at each checkpoint: a deleted log's
    /// build stops ([`Outcome::LogDeleted`]), so it does not refill the sheet's snapshot prefix.
    pub fn with_tombstones(mut self, tombstones: Arc<dyn LogPurge>) -> Self {
        self.tombstones = Some(tombstones);
        self
    }

    /// Whether the job's log was deleted (one strong GetItem; `false` without tombstones).
    async fn deleted(&self, log: sheetlog_core::domain::LogId) -> Result<bool, WorkerError> {
        let Some(t) = &self.tombstones else {
            return Ok(false);
        };
        match sheetlog_core::log::purge::check_live(t.as_ref(), log).await {
            Ok(()) => Ok(false),
            Err(LogError::LogDeleted(_)) => {
                info!(log = %log, "the log was deleted: no snapshot is built");
                Ok(true)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The same worker reporting its steps to `hook`.
    pub fn with_hook(mut self, hook: Arc<dyn StepHook>) -> Self {
        self.hook = hook;
        self
    }

    pub fn config(&self) -> &WorkerConfig {
        &self.cfg
    }

    pub fn pending(&self) -> &dyn PendingSnapshots {
        self.pending.as_ref()
    }

    pub fn log(&self) -> &EventLog<S, P> {
        &self.log
    }

    /// The log's next Snapshot entry after `job`'s in the same segment, if it has been appended
    /// and is not built yet, as a fresh job. One eventually consistent page of entry items (a
    /// stale page only means the router's own message starts it instead).
    pub async fn next_snapshot(
        &self,
        job: &SnapshotJob,
    ) -> Result<Option<SnapshotJob>, WorkerError> {
        let mut units = RequestUnits::default();
        let page = self
            .log
            .store()
            .read_entries(
                job.log_id,
                job.segment,
                job.entry + 1,
                NEXT_SNAPSHOT_SCAN,
                Consistency::Eventual,
                &mut units,
            )
            .await?;
        Ok(page
            .entries
            .iter()
            .find(|e| e.kind == EntryType::SNAPSHOT)
            .filter(|e| e.snapshot_root.is_none())
            .map(|e| SnapshotJob::new(job.log_id, e.segment, e.num)))
    }

    /// Runs the protocol for one job. `handoff_at` is when the invocation must stop starting new
    /// chunks. After an error the pending item (if this invocation held it) is released, so the
    /// retry resumes from the last checkpoint straight away; a [`StepHook`] stop leaves it as a
    /// killed process would.
    pub async fn run(
        &self,
        job: &SnapshotJob,
        handoff_at: Instant,
    ) -> Result<Outcome, WorkerError> {
        let key = PendingKey::new(job.log_id, job.segment, job.entry);
        if self.deleted(job.log_id).await? {
            return Ok(Outcome::LogDeleted);
        }
        let now = now_secs();

        // 1–2. The earliest pending snapshot of the log is either an earlier one (wait), this one
        // (a retry or duplicate), or a later one / none (this one has no pending item).
        let existing = match self.pending.earliest(job.log_id).await? {
            Some(p) if p.key.position() < key.position() => {
                return Ok(Outcome::Deferred {
                    delay: self.backoff(job.deferrals),
                    reason: DeferReason::EarlierPending {
                        segment: p.key.segment,
                        entry: p.key.entry,
                    },
                });
            }
            Some(p) if p.key == key => Some(p),
            _ => None,
        };

        let held = match existing {
            Some(p) => {
                let timeout = self.cfg.pending_timeout_secs();
                if p.active && !p.is_stale(now, timeout) {
                    let left = timeout - now.saturating_sub(p.modified);
                    return Ok(Outcome::Deferred {
                        delay: Duration::from_secs(u64::try_from(left).unwrap_or(1))
                            + self.jitter(),
                        reason: DeferReason::HeldElsewhere,
                    });
                }
                match self.pending.claim(&p, now).await? {
                    Guarded::Lost => return Ok(Outcome::Duplicate),
                    Guarded::Done(p) => {
                        info!(log = %job.log_id, segment = job.segment, entry = job.entry,
                            retries = p.retries, was_active = p.active, "claimed pending snapshot");
                        self.step(Step::Claimed).await?;
                        p
                    }
                }
            }
            None => {
                // 3. No pending item: finished already, or not started.
                match target(self.log.as_ref(), job.log_id, job.segment, job.entry).await? {
                    Target::NotASnapshot => {
                        return Ok(Outcome::Rejected {
                            reason: "no Snapshot entry at that position".into(),
                        });
                    }
                    Target::AlreadyComplete => return Ok(Outcome::AlreadyComplete),
                    Target::Incomplete { .. } => {}
                }
                self.step(Step::BeforePendingItem).await?;
                match self.pending.create(key, now).await? {
                    Guarded::Lost => return Ok(Outcome::Duplicate),
                    Guarded::Done(p) => {
                        self.step(Step::PendingCreated).await?;
                        p
                    }
                }
            }
        };
        let mut increment = held.increment;
        let result = Box::pin(self.work(job, held, handoff_at, &mut increment)).await;
        if let Err(e) = &result
            && !matches!(e, WorkerError::Stopped(_))
        {
            // Let the retry claim the item at once. Left active, the retry would find it fresh
            // and defer (a fresh message), which would reset the receive count and keep a job
            // that fails every time out of the dead-letter queue. A crash cannot do this; its
            // retry comes after the queue's visibility timeout, long after the item went stale.
            match self.pending.release(key, increment, now_secs()).await {
                Ok(_) => {}
                Err(release) => {
                    warn!(log = %job.log_id, error = %release, "releasing the pending item after an error failed")
                }
            }
        }
        result
    }

    /// Steps 4–6, holding the pending item `held`.
    async fn work(
        &self,
        job: &SnapshotJob,
        held: PendingSnapshot,
        handoff_at: Instant,
        increment: &mut u64,
    ) -> Result<Outcome, WorkerError> {
        let key = held.key;
        // 4. Read the log from the previous completed snapshot.
        let input = match self.locate_input(job, &held).await? {
            ControlFlow::Continue(input) => input,
            ControlFlow::Break(outcome) => return Ok(outcome),
        };
        if let Some(root) = &input.target.snapshot_root {
            // The manifest is complete and recorded; a crash cut the completion short.
            let root = root.clone();
            return self.complete(job, key, &root, increment).await;
        }
        // 5. Build with the incremental builder, resuming from the checkpoint if there is one.
        let Some(last) = self.fold_pages(job, &input, key, increment).await? else {
            return Ok(Outcome::Duplicate);
        };
        let seq = input.target.seq;
        let mut builder = self.start_build(job, &held, seq, last).await?;
        let result = match self
            .build(job, &mut builder, key, handoff_at, increment)
            .await?
        {
            ControlFlow::Continue(result) => result,
            ControlFlow::Break(outcome) => return Ok(outcome),
        };
        debug!(log = %job.log_id, seq, chunks_written = result.stats.chunks_written,
            chunks_reused = result.stats.chunks_reused, "snapshot built");
        self.keep_values(job, &result, handoff_at).await;
        // 6. Complete.
        self.complete(job, key, &result.manifest_key, increment)
            .await
    }

    /// Between steps 5 and 6: the formula values kept beside the snapshot
    /// (`snapshot::compute_values`), so reads show them instead of evaluating. They are derived
    /// state: a failure, or running out of time at `handoff_at`, leaves reads to evaluate what
    /// was not kept, and the snapshot completes either way.
    async fn keep_values(&self, job: &SnapshotJob, result: &BuildResult, handoff_at: Instant) {
        let kept = async {
            let manifest = result.read_manifest(self.blobs.as_ref()).await?;
            compute_values(
                self.blobs.as_ref(),
                self.imports.as_ref(),
                &manifest,
                Some(handoff_at),
            )
            .await
        };
        match kept.await {
            Ok(r) if r.formula_chunks > 0 => {
                info!(log = %job.log_id, formula_chunks = r.formula_chunks,
                    kept_chunks = r.kept_chunks, kept_formulas = r.kept_formulas,
                    cells_evaluated = r.cells_loaded, "formula values kept");
            }
            Ok(_) => {}
            Err(e) => warn!(log = %job.log_id, error = %e, "formula values not kept"),
        }
    }

    /// Step 4: the snapshot's input (its target and base entries), or what becomes of the job
    /// when there is none to build from: a completion to finish, a bogus job, or an earlier
    /// snapshot to wait for.
    async fn locate_input(
        &self,
        job: &SnapshotJob,
        held: &PendingSnapshot,
    ) -> Result<ControlFlow<Outcome, Box<SnapshotInput>>, WorkerError> {
        let key = held.key;
        let outcome = match locate(self.log.as_ref(), job.log_id, job.segment, job.entry).await? {
            Located::Ready(input) => return Ok(ControlFlow::Continue(input)),
            Located::AlreadyComplete => {
                // A completion stopped after advancing Last Snapshot: only the cleanup is left.
                if let Guarded::Lost = self.pending.delete(key, held.increment).await? {
                    return Ok(ControlFlow::Break(Outcome::Duplicate));
                }
                self.step(Step::PendingDeleted).await?;
                Outcome::AlreadyComplete
            }
            Located::NotASnapshot => {
                if let Guarded::Lost = self.pending.delete(key, held.increment).await? {
                    return Ok(ControlFlow::Break(Outcome::Duplicate));
                }
                Outcome::Rejected {
                    reason: "no Snapshot entry at that position".into(),
                }
            }
            Located::EarlierUnprocessed { segment, entry, .. } => {
                // Started before the previous snapshot was: clear the active flag and wait
                // (`docs/design.md`, Pending Snapshots protocol, step 4).
                match self
                    .pending
                    .release(key, held.increment, now_secs())
                    .await?
                {
                    Guarded::Lost => Outcome::Duplicate,
                    Guarded::Done(_) => Outcome::Deferred {
                        delay: self.backoff(job.deferrals),
                        reason: DeferReason::EarlierUnprocessed { segment, entry },
                    },
                }
            }
        };
        Ok(ControlFlow::Break(outcome))
    }

    /// Step 5, the pages before the last: the input's entries are folded in a page at a time,
    /// so the build holds one page of them (`docs/operations.md`, "Memory per request"): every
    /// page but the last is built into an intermediate snapshot at the sequence after it (its
    /// manifest and chunks are written like any other; nothing refers to them but the next
    /// page's build), which is the base for the next page. A build of small entries is one page,
    /// as before. Checkpoints are kept only for the last page's build: a resumed job folds the
    /// earlier pages again, which gives the same chunks (already stored, so not written again)
    /// and the same base. Answers the last page's build input; `None` when a heartbeat found
    /// the item taken over.
    async fn fold_pages(
        &self,
        job: &SnapshotJob,
        input: &SnapshotInput,
        key: PendingKey,
        increment: &mut u64,
    ) -> Result<Option<BuildInput>, WorkerError> {
        let mut base = base_manifest(self.blobs.as_ref(), job.log_id, &input.base).await?;
        let mut pages = InputPages::new(input);
        let mut entries = Vec::new();
        while let Some(page) = pages.next_page(self.log.as_ref(), job.log_id).await? {
            // A `restore` in the page makes its kept state the base of the entries after it.
            (base, entries) = resolve_restores(
                self.blobs.as_ref(),
                *job.log_id.as_uuid(),
                base,
                into_log_entries(page)?,
            )
            .await?;
            if pages.is_done() {
                break;
            }
            let at = pages.next_seq();
            let mut fold = SnapshotBuilder::new(
                self.blobs.as_ref(),
                self.imports.as_ref(),
                self.cfg.build,
                *job.log_id.as_uuid(),
                at,
                base.take(),
                std::mem::take(&mut entries),
            )?;
            let folded = loop {
                match self.step_alive(&mut fold, key, increment).await? {
                    None => return Ok(None),
                    Some(Progress::Checkpoint(_)) => {}
                    Some(Progress::Done(r)) => break r,
                }
            };
            debug!(log = %job.log_id, at, chunks_written = folded.stats.chunks_written, "folded a page of entries");
            base = Some(folded.read_manifest(self.blobs.as_ref()).await?);
        }
        Ok(Some(BuildInput { base, entries }))
    }

    /// Step 5, the last page's builder: resumed from the pending item's checkpoint, if it has
    /// one that fits, else new.
    async fn start_build(
        &self,
        job: &SnapshotJob,
        held: &PendingSnapshot,
        seq: u64,
        last: BuildInput,
    ) -> Result<SnapshotBuilder<'_>, WorkerError> {
        let BuildInput { base, entries } = last;
        let log_uuid = *job.log_id.as_uuid();
        let checkpoint = self
            .load_checkpoint(&held.key, held.state.as_deref())
            .await?;
        let new = |base, entries| {
            SnapshotBuilder::new(
                self.blobs.as_ref(),
                self.imports.as_ref(),
                self.cfg.build,
                log_uuid,
                seq,
                base,
                entries,
            )
        };
        let Some(c) = &checkpoint else {
            return Ok(new(base, entries)?);
        };
        match SnapshotBuilder::resume(
            self.blobs.as_ref(),
            self.imports.as_ref(),
            self.cfg.build,
            log_uuid,
            seq,
            base.clone(),
            entries.clone(),
            c,
        ) {
            Ok(b) => {
                debug!(log = %job.log_id, seq, consumed = c.consumed, "resuming from checkpoint");
                Ok(b)
            }
            // A checkpoint from other build settings (say, a changed chunk target):
            // starting over gives a correct snapshot, only later.
            Err(e) => {
                warn!(log = %job.log_id, error = %e, "checkpoint does not fit; starting over");
                Ok(new(base, entries)?)
            }
        }
    }

    /// Step 5, the build: after each chunk a checkpoint, conditional on the increment (a refused
    /// write means another invocation took over, and this one bails out); between checkpoints
    /// a heartbeat keeps `modified` fresh; after a checkpoint, if the invocation's time is
    /// nearly up, clear active and hand the job off. Answers the built snapshot, or what became
    /// of the job instead.
    async fn build(
        &self,
        job: &SnapshotJob,
        builder: &mut SnapshotBuilder<'_>,
        key: PendingKey,
        handoff_at: Instant,
        increment: &mut u64,
    ) -> Result<ControlFlow<Outcome, BuildResult>, WorkerError> {
        let mut written = 0u32;
        loop {
            let Some(progress) = self.step_alive(builder, key, increment).await? else {
                return Ok(ControlFlow::Break(Outcome::Duplicate));
            };
            let c = match progress {
                Progress::Checkpoint(c) => c,
                Progress::Done(r) => return Ok(ControlFlow::Continue(r)),
            };
            if let Guarded::Lost = self.write_checkpoint(job, key, &c, increment).await? {
                // Another invocation took the item over: it carries on, we stop.
                return Ok(ControlFlow::Break(Outcome::Duplicate));
            }
            written += 1;
            self.step(Step::Checkpoint(written)).await?;
            if self.deleted(job.log_id).await? {
                // Deleted mid-build: stop here (the delete removes the pending item and
                // what was written; releasing it would only recreate it).
                return Ok(ControlFlow::Break(Outcome::LogDeleted));
            }
            if Instant::now() >= handoff_at {
                return Ok(ControlFlow::Break(
                    match self.pending.release(key, *increment, now_secs()).await? {
                        Guarded::Lost => Outcome::Duplicate,
                        Guarded::Done(_) => Outcome::HandedOff {
                            checkpoints: written,
                        },
                    },
                ));
            }
        }
    }

    /// Writes checkpoint `c` into the pending item (spilled to S3 when it is too large to hold
    /// inline), conditional on the increment, which moves on; `Lost` when the item was taken
    /// over.
    async fn write_checkpoint(
        &self,
        job: &SnapshotJob,
        key: PendingKey,
        c: &Checkpoint,
        increment: &mut u64,
    ) -> Result<Guarded<()>, WorkerError> {
        let mut state = serde_json::to_string(c).map_err(WorkerError::Checkpoint)?;
        if state.len() > self.cfg.max_inline_checkpoint_bytes {
            let spill = checkpoint_key(&key);
            debug!(log = %job.log_id, bytes = state.len(), key = %spill, "checkpoint spills to S3");
            self.blobs
                .put(&spill, bytes::Bytes::from(state))
                .await
                .map_err(SnapshotError::from)?;
            state = serde_json::to_string(&Spilled { spilled: spill })
                .map_err(WorkerError::Checkpoint)?;
        }
        let write = self
            .pending
            .checkpoint(key, *increment, &state, now_secs())
            .await?;
        Ok(match write {
            Guarded::Lost => Guarded::Lost,
            Guarded::Done(p) => {
                *increment = p.increment;
                Guarded::Done(())
            }
        })
    }

    /// The checkpoint a pending item's state names: inline JSON, or a pointer to a spilled one.
    /// An unreadable checkpoint (or a spilled one that is gone) means starting over, which gives
    /// the same snapshot later; a failure to read S3 is an error (retried).
    async fn load_checkpoint(
        &self,
        key: &PendingKey,
        state: Option<&str>,
    ) -> Result<Option<Checkpoint>, WorkerError> {
        let Some(state) = state else { return Ok(None) };
        let json = match serde_json::from_str::<Spilled>(state) {
            Ok(Spilled { spilled }) => match self
                .blobs
                .get(&spilled)
                .await
                .map_err(SnapshotError::from)?
            {
                Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                None => {
                    warn!(log = %key.log, key = %spilled, "spilled checkpoint is missing; starting over");
                    return Ok(None);
                }
            },
            Err(_) => state.to_owned(),
        };
        Ok(serde_json::from_str::<Checkpoint>(&json)
            .map_err(|e| warn!(log = %key.log, error = %e, "unreadable checkpoint; starting over"))
            .ok())
    }

    /// One builder step, heartbeating every third of the pending timeout while it runs. `None`
    /// when a heartbeat found the item taken over.
    async fn step_alive(
        &self,
        builder: &mut SnapshotBuilder<'_>,
        key: PendingKey,
        increment: &mut u64,
    ) -> Result<Option<Progress>, WorkerError> {
        let every = (self.cfg.pending_timeout / 3).max(Duration::from_millis(500));
        let mut step = Box::pin(builder.step());
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                progress = &mut step => return Ok(Some(progress?)),
                _ = ticks.tick() => {
                    match self.pending.heartbeat(key, *increment, now_secs()).await? {
                        Guarded::Lost => return Ok(None),
                        Guarded::Done(p) => *increment = p.increment,
                    }
                }
            }
        }
    }

    /// Step 6, in the order `docs/design.md` gives. Each write is idempotent, so a completion cut
    /// short anywhere is finished by whichever invocation comes next. Only the item's holder
    /// completes: a heartbeat conditional on the increment confirms it still holds the item
    /// before the root is written (an invocation that went quiet and was taken over stops here,
    /// so it never records a root while the new holder is still writing), and the delete at the
    /// end is conditional on the same increment.
    async fn complete(
        &self,
        job: &SnapshotJob,
        key: PendingKey,
        root: &str,
        increment: &mut u64,
    ) -> Result<Outcome, WorkerError> {
        match self.pending.heartbeat(key, *increment, now_secs()).await? {
            Guarded::Lost => return Ok(Outcome::Duplicate),
            Guarded::Done(p) => *increment = p.increment,
        }
        let mut units = RequestUnits::default();
        let store = self.log.store();
        store
            .set_snapshot_root(job.log_id, job.segment, job.entry, root, &mut units)
            .await?;
        self.step(Step::RootWritten).await?;
        store
            .advance_last_snapshot(job.log_id, job.segment, job.entry, &mut units)
            .await?;
        self.step(Step::LastSnapshotAdvanced).await?;
        if let Guarded::Lost = self.pending.delete(key, *increment).await? {
            return Ok(Outcome::Duplicate);
        }
        self.step(Step::PendingDeleted).await?;
        info!(log = %job.log_id, segment = job.segment, entry = job.entry, root, "snapshot complete");
        Ok(Outcome::Completed {
            root: root.to_owned(),
        })
    }

    async fn step(&self, step: Step) -> Result<(), WorkerError> {
        match self.hook.reached(step).await {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(()) => Err(WorkerError::Stopped(step)),
        }
    }

    fn backoff(&self, deferrals: u32) -> Duration {
        deferral_delay(&self.cfg, deferrals)
    }

    fn jitter(&self) -> Duration {
        let max = u64::try_from(self.cfg.defer_min.as_millis()).unwrap_or(1000);
        Duration::from_millis(rand::rng().random_range(0..=max))
    }
}

/// The wait before a job deferred `deferrals` times looks again: exponential from `defer_min`
/// to `defer_max`, then "equal jitter" (half fixed, half random) so a crowd of jobs waiting on
/// one snapshot spreads out but none comes straight back.
pub fn deferral_delay(cfg: &WorkerConfig, deferrals: u32) -> Duration {
    let cap = ExponentialBuilder::default()
        .with_min_delay(cfg.defer_min)
        .with_max_delay(cfg.defer_max)
        .with_factor(2.0)
        .without_max_times()
        .build()
        .nth(deferrals.min(64) as usize)
        .unwrap_or(cfg.defer_max);
    let half = cap / 2;
    let micros = u64::try_from(half.as_micros()).unwrap_or(u64::MAX);
    half + Duration::from_micros(rand::rng().random_range(0..=micros))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferrals_back_off_exponentially_with_half_jitter_up_to_the_cap() {
        let cfg = WorkerConfig::default(); // 5 s doubling to 300 s
        for (n, cap) in [
            (0u32, 5u64),
            (1, 10),
            (2, 20),
            (5, 160),
            (6, 300),
            (40, 300),
        ] {
            for _ in 0..50 {
                let d = deferral_delay(&cfg, n);
                let cap = Duration::from_secs(cap);
                assert!(
                    d >= cap / 2 && d <= cap,
                    "deferral {n}: {d:?} outside [{:?}, {cap:?}]",
                    cap / 2
                );
            }
        }
        // Jittered: not every draw is the same.
        let draws: std::collections::BTreeSet<_> =
            (0..50).map(|_| deferral_delay(&cfg, 3)).collect();
        assert!(draws.len() > 1);
    }

    #[test]
    fn deferral_waits_fit_in_an_sqs_delivery_delay() {
        let cfg = WorkerConfig::default();
        assert!(deferral_delay(&cfg, u32::MAX) <= sheetlog_core::aws::queues::MAX_DELAY);
    }

    #[test]
    fn only_waits_and_hand_offs_send_the_job_round_again() {
        assert!(Outcome::Duplicate.is_final());
        assert!(Outcome::AlreadyComplete.is_final());
        assert!(!Outcome::HandedOff { checkpoints: 1 }.is_final());
        assert!(
            !Outcome::Deferred {
                delay: Duration::ZERO,
                reason: DeferReason::HeldElsewhere
            }
            .is_final()
        );
    }
}
