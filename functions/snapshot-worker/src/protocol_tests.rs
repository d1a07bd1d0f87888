//! The protocol over the in-memory stores: every path of [`Worker::run`] in milliseconds, with no
//! emulator. The same paths run against DynamoDB, S3 and SQS on the emulator in
//! `tests/tests/integration/pipeline.rs`, which is where the adapters are proven.

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::{
    EntryType, Guarded, LogId, NewEntry, PendingKey, SnapshotJob, now_secs,
};
use sheetlog_core::layer::{Layer, Layered};
use sheetlog_core::log::{AppendOptions, EventLog};
use sheetlog_core::memory::{MemLogStore, MemPayloadStore, MemPendingStore};
use sheetlog_core::ports::{BlobLayer, PendingSnapshots};
use sheetlog_core::sheet::{Event, Sheet};
use sheetlog_core::snapshot::{
    BlobError, BlobParts, BlobStore, BuildConfig, Manifest, MemBlobs, MemImports, materialize,
};
use sheetlog_core::snapshot_input::log_entries;

use crate::config::WorkerConfig;
use crate::hooks::{Step, StepHook};
use crate::protocol::{DeferReason, Outcome, Worker, WorkerError};

type MemWorker = Worker<MemLogStore, MemPayloadStore>;

struct Fixture {
    worker: MemWorker,
    pending: Arc<MemPendingStore>,
    blobs: Arc<RecordedBlobs>,
    log: LogId,
}

/// A layer over the in-memory blob store recording which chunk keys each run seals (writes
/// unless already stored, `put_if_absent`): the work a build does, which a resumed build must
/// not repeat.
#[derive(Debug, Default)]
struct Recording {
    chunks: Mutex<Vec<String>>,
    puts: Mutex<Vec<String>>,
}

type RecordedBlobs = Layered<MemBlobs, Recording>;

impl Recording {
    /// Chunk keys sealed since the last call, and every key written.
    fn take(&self) -> (Vec<String>, Vec<String>) {
        let chunks = std::mem::take(&mut *self.chunks.lock().expect("lock"));
        let puts = std::mem::take(&mut *self.puts.lock().expect("lock"));
        (chunks, puts)
    }
}

impl Layer for Recording {}

#[async_trait]
impl BlobLayer for Recording {
    async fn put<S: BlobStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
        bytes: Bytes,
    ) -> Result<(), BlobError> {
        self.puts.lock().expect("lock").push(key.to_owned());
        inner.put(key, bytes).await
    }

    async fn put_parts<S: BlobStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
        parts: &mut dyn BlobParts,
    ) -> Result<(), BlobError> {
        self.puts.lock().expect("lock").push(key.to_owned());
        inner.put_parts(key, parts).await
    }

    async fn put_if_absent<S: BlobStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
        bytes: Bytes,
    ) -> Result<bool, BlobError> {
        if key.contains("/chunks/") {
            self.chunks.lock().expect("lock").push(key.to_owned());
        }
        let wrote = inner.put_if_absent(key, bytes).await?;
        if wrote {
            self.puts.lock().expect("lock").push(key.to_owned());
        }
        Ok(wrote)
    }
}

fn config() -> WorkerConfig {
    WorkerConfig {
        pending_timeout: Duration::from_secs(60),
        handoff_reserve: Duration::ZERO,
        defer_min: Duration::from_secs(1),
        defer_max: Duration::from_secs(1),
        error_retry: Duration::from_secs(1),
        max_handoffs: 3,
        max_inline_checkpoint_bytes: 350 * 1024,
        // Tiny chunks: the small sheets here span many chunks and checkpoints.
        build: BuildConfig { chunk_target: 256 },
    }
}

fn event(json: serde_json::Value) -> NewEntry {
    let ev = Event::from_json(json.to_string().as_bytes()).expect("test event is valid");
    let (code, version, body) = ev.encode();
    NewEntry::new(EntryType(code), version, body)
}

fn rows(at: u32, count: u32, tag: &str) -> NewEntry {
    let values: Vec<serde_json::Value> = (0..count)
        .map(|r| serde_json::json!([format!("{tag}-{r}"), r * 7, format!("note {tag} {r}")]))
        .collect();
    event(serde_json::json!({
        "type": "insert-rows",
        "body": { "at": at, "count": count, "values": values }
    }))
}

fn snapshot_entry() -> NewEntry {
    NewEntry::new(EntryType::SNAPSHOT, 0, Bytes::new())
}

impl Fixture {
    async fn new() -> Self {
        Self::with_config(config()).await
    }

    async fn with_config(cfg: WorkerConfig) -> Self {
        Self::with_configs(cfg, LogConfig::default()).await
    }

    async fn with_configs(cfg: WorkerConfig, log_cfg: LogConfig) -> Self {
        let log = EventLog::new(MemLogStore::new(), MemPayloadStore::new(), log_cfg)
            .expect("config is valid");
        let id = log.create().await.expect("create log").log;
        let pending = Arc::new(MemPendingStore::new());
        let blobs = Arc::new(Layered::new(MemBlobs::new(), Recording::default()));
        let worker = Worker::new(
            log,
            pending.clone(),
            blobs.clone(),
            Arc::new(MemImports::new()),
            cfg,
        );
        Fixture {
            worker,
            pending,
            blobs,
            log: id,
        }
    }

    async fn append(&self, e: NewEntry) -> u64 {
        self.worker
            .log()
            .append(self.log, e, AppendOptions::default())
            .await
            .expect("append")
            .seq
    }

    /// Appends `n` row inserts then a Snapshot entry; returns the job for it.
    async fn edits_then_snapshot(&self, n: u32, tag: &str) -> SnapshotJob {
        for i in 0..n {
            self.append(rows(1, 3, &format!("{tag}{i}"))).await;
        }
        let seq = self.append(snapshot_entry()).await;
        SnapshotJob::new(self.log, 0, seq)
    }

    /// A first snapshot built and complete, then edits and a second Snapshot entry: the job for
    /// the second. Only a snapshot with a base checkpoints (a first snapshot of rows inserted by
    /// events has no source rows to checkpoint against).
    async fn second_snapshot(&self, n: u32) -> SnapshotJob {
        let first = self.edits_then_snapshot(n, "a").await;
        assert!(matches!(
            self.run(&first).await.expect("first"),
            Outcome::Completed { .. }
        ));
        for i in 0..n {
            self.append(event(serde_json::json!({
                "type": "set",
                "body": {"cells": [{"ref": format!("B{}", 1 + 3 * i), "value": format!("edit {i}")}]}
            })))
            .await;
        }
        let seq = self.append(snapshot_entry()).await;
        SnapshotJob::new(self.log, 0, seq)
    }

    async fn run(&self, job: &SnapshotJob) -> Result<Outcome, WorkerError> {
        self.worker
            .run(job, Instant::now() + Duration::from_secs(600))
            .await
    }

    /// The sheet replayed from the log's entries before `seq`.
    async fn replay(&self, seq: u64) -> Sheet {
        let page = self
            .worker
            .log()
            .read_since(self.log, 0, seq as usize)
            .await
            .expect("read");
        let mut sheet = Sheet::new();
        for e in log_entries(&page.entries).expect("decode") {
            for ev in e.entry.events() {
                sheet.apply(ev, None).expect("apply");
            }
        }
        sheet
    }

    async fn manifest(&self, root: &str) -> Manifest {
        let bytes = self
            .blobs
            .get(root)
            .await
            .expect("read manifest")
            .expect("manifest exists");
        Manifest::from_bytes(root, &bytes).expect("manifest readable")
    }
}

#[tokio::test]
async fn a_job_builds_the_snapshot_records_it_and_clears_the_pending_item() {
    let f = Fixture::new().await;
    let job = f.edits_then_snapshot(5, "a").await;
    let Outcome::Completed { root } = f.run(&job).await.expect("run") else {
        panic!("the first run completes")
    };
    let manifest = f.manifest(&root).await;
    assert_eq!(manifest.seq, job.entry);
    let got = materialize(f.blobs.as_ref(), &manifest)
        .await
        .expect("read");
    assert_eq!(got, f.replay(job.entry).await);
    assert!(f.pending.list(f.log).await.expect("list").is_empty());
    // The same job again is a late duplicate.
    assert_eq!(f.run(&job).await.expect("rerun"), Outcome::AlreadyComplete);
}

/// A read budget smaller than the entries since the last snapshot: the worker folds them in a
/// page at a time (here 200 bytes, a couple of entries a page) through intermediate snapshots,
/// and the snapshot is the one a single-page build makes, chunk for chunk. A build handed off
/// in its last page resumes from its checkpoint after folding the earlier pages again.
#[tokio::test]
async fn a_range_past_the_read_budget_is_folded_in_page_by_page() {
    let small = LogConfig {
        read_budget_bytes: 200,
        ..LogConfig::default()
    };
    let f = Fixture::with_configs(config(), small.clone()).await;
    let job = f.second_snapshot(40).await;
    let Outcome::Completed { root } = f.run(&job).await.expect("run") else {
        panic!("the paged build completes")
    };
    let paged = f.manifest(&root).await;
    let whole = Fixture::new().await;
    let same = whole.second_snapshot(40).await;
    let Outcome::Completed { root: whole_root } = whole.run(&same).await.expect("run") else {
        panic!("the single-page build completes")
    };
    let expected = whole.manifest(&whole_root).await;
    assert_eq!(paged.seq, job.entry);
    assert_eq!(paged.chunks, expected.chunks, "the paged build differs");
    // The replay reads through the default budget: the small one would cut it short.
    let got = materialize(f.blobs.as_ref(), &paged).await.expect("read");
    assert_eq!(got, whole.replay(same.entry).await);
    // Intermediate manifests were written on the way (one per page but the last).
    let (_, puts) = f.blobs.layer().take();
    let manifests = puts.iter().filter(|k| k.contains("manifest")).count();
    assert!(manifests > 2, "{manifests} manifests: {puts:?}");

    // Out of time in the last page: hand off, then resume.
    let g = Fixture::with_configs(config(), small).await;
    let job = g.second_snapshot(40).await;
    let out = g.worker.run(&job, Instant::now()).await.expect("run");
    assert!(matches!(out, Outcome::HandedOff { .. }), "{out:?}");
    let Outcome::Completed { root } = g.run(&job).await.expect("resume") else {
        panic!("the resumed build completes")
    };
    let resumed = g.manifest(&root).await;
    assert_eq!(resumed.chunks, expected.chunks, "the resumed build differs");
}

#[tokio::test]
async fn a_later_snapshot_waits_for_an_earlier_pending_one_then_builds_on_it() {
    let f = Fixture::new().await;
    let first = f.edits_then_snapshot(3, "a").await;
    let second = f.edits_then_snapshot(3, "b").await;
    // An earlier snapshot someone else has started.
    let key = PendingKey::new(f.log, first.segment, first.entry);
    let Guarded::Done(_) = f.pending.create(key, now_secs()).await.expect("create") else {
        panic!("no pending item yet")
    };
    let out = f.run(&second).await.expect("run");
    assert!(matches!(
        out,
        Outcome::Deferred {
            reason: DeferReason::EarlierPending { segment: 0, entry },
            ..
        } if entry == first.entry
    ));
    // That holder is fresh: the first job defers to it rather than taking over.
    assert!(matches!(
        f.run(&first).await.expect("run"),
        Outcome::Deferred {
            reason: DeferReason::HeldElsewhere,
            ..
        }
    ));
    // Once released, the first job claims it and completes; then the second builds on it.
    let held = f.pending.get(key).await.expect("get").expect("present");
    f.pending
        .release(key, held.increment, now_secs())
        .await
        .expect("release");
    assert!(matches!(
        f.run(&first).await.expect("run"),
        Outcome::Completed { .. }
    ));
    let Outcome::Completed { root } = f.run(&second).await.expect("run") else {
        panic!("the second completes after the first")
    };
    let got = materialize(f.blobs.as_ref(), &f.manifest(&root).await)
        .await
        .expect("read");
    assert_eq!(got, f.replay(second.entry).await);
}

#[tokio::test]
async fn a_snapshot_whose_predecessor_was_never_started_is_deferred() {
    let f = Fixture::new().await;
    let first = f.edits_then_snapshot(2, "a").await;
    let second = f.edits_then_snapshot(2, "b").await;
    let out = f.run(&second).await.expect("run");
    assert!(
        matches!(out, Outcome::Deferred { reason: DeferReason::EarlierUnprocessed { entry, .. }, .. } if entry == first.entry),
        "{out:?}"
    );
    // It left its pending item released, so the retry claims it at once.
    let key = PendingKey::new(f.log, second.segment, second.entry);
    let p = f.pending.get(key).await.expect("get").expect("kept");
    assert!(!p.active);
}

#[tokio::test]
async fn a_build_out_of_time_hands_off_and_the_next_run_resumes_from_its_checkpoint() {
    let f = Fixture::new().await;
    let job = f.second_snapshot(40).await;
    f.blobs.layer().take();
    // No time at all: hand off after the first checkpoint.
    let out = f.worker.run(&job, Instant::now()).await.expect("run");
    assert_eq!(out, Outcome::HandedOff { checkpoints: 1 });
    let (before, _) = f.blobs.layer().take();
    assert!(
        !before.is_empty(),
        "the first run sealed chunks before its checkpoint"
    );
    let key = PendingKey::new(f.log, job.segment, job.entry);
    let p = f.pending.get(key).await.expect("get").expect("kept");
    assert!(!p.active, "a hand-off releases the item");
    assert!(p.state.is_some(), "and leaves its checkpoint");
    let resumed_checkpoints = Arc::new(CountCheckpoints::default());
    let resumer = f.worker.clone().with_hook(resumed_checkpoints.clone());
    let Outcome::Completed { root } = resumer
        .run(&job, Instant::now() + Duration::from_secs(600))
        .await
        .expect("resume")
    else {
        panic!("the resumed run completes")
    };
    let (after, _) = f.blobs.layer().take();
    let manifest = f.manifest(&root).await;
    let got = materialize(f.blobs.as_ref(), &manifest)
        .await
        .expect("read");
    assert_eq!(got, f.replay(job.entry).await);
    // The resumed run sealed only chunks after the checkpoint: none the first run sealed, and
    // together exactly the chunks an uninterrupted build seals (a restart would seal the first
    // run's chunks again).
    assert!(
        after.iter().all(|k| !before.contains(k)),
        "the resumed run redid chunks from before its checkpoint"
    );
    // The resumed run went on from the checkpoint: with the one before the hand-off, it made
    // exactly as many checkpoints as an uninterrupted build of the same job (a restart would
    // make one more).
    let g = Fixture::new().await;
    let same = g.second_snapshot(40).await;
    g.blobs.layer().take();
    let whole = Arc::new(CountCheckpoints::default());
    let out = g
        .worker
        .clone()
        .with_hook(whole.clone())
        .run(&same, Instant::now() + Duration::from_secs(600))
        .await
        .expect("run");
    assert!(matches!(out, Outcome::Completed { .. }));
    let (all, _) = g.blobs.layer().take();
    assert_eq!(
        before.len() + after.len(),
        all.len(),
        "{before:?} + {after:?} vs {all:?}"
    );
    let whole = whole.count();
    assert!(whole > 2, "the build spans several checkpoints ({whole})");
    assert_eq!(1 + resumed_checkpoints.count(), whole);
}

/// Counts the checkpoints a run writes.
#[derive(Debug, Default)]
struct CountCheckpoints(Mutex<u32>);

impl CountCheckpoints {
    fn count(&self) -> u32 {
        *self.0.lock().expect("lock")
    }
}

#[async_trait]
impl StepHook for CountCheckpoints {
    async fn reached(&self, step: Step) -> ControlFlow<()> {
        if let Step::Checkpoint(_) = step {
            *self.0.lock().expect("lock") += 1;
        }
        ControlFlow::Continue(())
    }
}

/// Stops the worker at one step, as a killed process would.
#[derive(Debug)]
struct StopAt(Step, Mutex<bool>);

#[async_trait]
impl StepHook for StopAt {
    async fn reached(&self, step: Step) -> ControlFlow<()> {
        let mut fired = self.1.lock().expect("lock");
        if step == self.0 && !*fired {
            *fired = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

#[tokio::test]
async fn a_crash_at_any_step_is_finished_by_the_next_run_once_the_holder_is_stale() {
    for step in [
        Step::PendingCreated,
        Step::Checkpoint(1),
        Step::RootWritten,
        Step::LastSnapshotAdvanced,
        Step::PendingDeleted,
    ] {
        let f = Fixture::new().await;
        let job = f.second_snapshot(12).await;
        let crashing = f
            .worker
            .clone()
            .with_hook(Arc::new(StopAt(step, Mutex::new(false))));
        let out = crashing
            .run(&job, Instant::now() + Duration::from_secs(600))
            .await;
        assert!(
            matches!(out, Err(WorkerError::Stopped(s)) if s == step),
            "{step}: {out:?}"
        );
        // Make the dead holder stale, as the pending timeout would.
        let key = PendingKey::new(f.log, job.segment, job.entry);
        if let Some(p) = f.pending.get(key).await.expect("get") {
            f.pending
                .heartbeat(key, p.increment, now_secs() - 3600)
                .await
                .expect("age the item");
        }
        let out = f.run(&job).await.expect("retry");
        assert!(
            matches!(out, Outcome::Completed { .. } | Outcome::AlreadyComplete),
            "{step}: {out:?}"
        );
        assert!(
            f.pending.list(f.log).await.expect("list").is_empty(),
            "{step}"
        );
        let (seg, _) = f.worker.log().segment(f.log, 0).await.expect("segment");
        assert_eq!(
            seg.expect("segment 0").last_snapshot,
            Some(job.entry),
            "{step}"
        );
    }
}

#[tokio::test]
async fn a_job_naming_no_snapshot_entry_is_rejected() {
    let f = Fixture::new().await;
    let seq = f.append(rows(1, 1, "x")).await;
    let out = f.run(&SnapshotJob::new(f.log, 0, seq)).await.expect("run");
    assert!(matches!(out, Outcome::Rejected { .. }), "{out:?}");
    let out = f.run(&SnapshotJob::new(f.log, 0, 999)).await.expect("run");
    assert!(matches!(out, Outcome::Rejected { .. }), "{out:?}");
}

#[tokio::test]
async fn a_checkpoint_too_big_for_an_item_spills_to_s3_and_the_resume_reads_it() {
    // Every checkpoint is "too big" here.
    let f = Fixture::with_config(WorkerConfig {
        max_inline_checkpoint_bytes: 16,
        ..config()
    })
    .await;
    let job = f.second_snapshot(40).await;
    f.blobs.layer().take();
    assert_eq!(
        f.worker.run(&job, Instant::now()).await.expect("run"),
        Outcome::HandedOff { checkpoints: 1 }
    );
    let (before, puts) = f.blobs.layer().take();
    let key = PendingKey::new(f.log, job.segment, job.entry);
    let spilled = crate::protocol::checkpoint_key(&key);
    assert!(puts.contains(&spilled), "{puts:?}");
    let state = f.pending.get(key).await.expect("get").expect("kept").state;
    assert_eq!(
        state,
        Some(serde_json::json!({"spilled": spilled}).to_string()),
        "the item keeps a pointer, not the checkpoint"
    );
    let Outcome::Completed { root } = f.run(&job).await.expect("resume") else {
        panic!("the resumed run completes")
    };
    let (after, _) = f.blobs.layer().take();
    assert!(
        after.iter().all(|k| !before.contains(k)),
        "resumed from the spilled checkpoint, not from scratch"
    );
    let got = materialize(f.blobs.as_ref(), &f.manifest(&root).await)
        .await
        .expect("read");
    assert_eq!(got, f.replay(job.entry).await);
}

/// Takes the pending item over (as another invocation would once the holder went quiet past the
/// pending timeout) when the holder reaches `at`.
#[derive(Debug)]
struct TakeOverAt {
    at: Step,
    pending: Arc<MemPendingStore>,
    key: PendingKey,
}

#[async_trait]
impl StepHook for TakeOverAt {
    async fn reached(&self, step: Step) -> ControlFlow<()> {
        if step == self.at
            && let Ok(Some(seen)) = self.pending.get(self.key).await
        {
            let _ = self.pending.claim(&seen, seen.modified + 10_000).await;
        }
        ControlFlow::Continue(())
    }
}

#[tokio::test]
async fn an_invocation_that_lost_its_item_does_not_complete() {
    let f = Fixture::new().await;
    // A first snapshot builds without checkpoints, so nothing between the claim and the
    // completion would notice the takeover but the completion itself.
    let job = f.edits_then_snapshot(5, "a").await;
    let key = PendingKey::new(f.log, job.segment, job.entry);
    let hook = Arc::new(TakeOverAt {
        at: Step::PendingCreated,
        pending: f.pending.clone(),
        key,
    });
    let out = f
        .worker
        .clone()
        .with_hook(hook)
        .run(&job, Instant::now() + Duration::from_secs(600))
        .await
        .expect("run");
    assert_eq!(
        out,
        Outcome::Duplicate,
        "the old holder stops at its completion"
    );
    let item = f.pending.get(key).await.expect("get");
    assert!(
        item.is_some_and(|p| p.active && p.retries == 1),
        "the new holder's item is left alone"
    );
    let (seg, _) = f.worker.log().segment(f.log, 0).await.expect("segment");
    assert_eq!(
        seg.and_then(|s| s.last_snapshot),
        Some(0),
        "nothing recorded the old holder's snapshot"
    );
    // The new holder (any later invocation) completes it.
    assert!(matches!(
        f.run(&job).await,
        Ok(Outcome::Deferred { .. } | Outcome::Completed { .. })
    ));
}

/// A worker over a log whose store also answers for its tombstone, and the store.
async fn worker_with_tombstones() -> (
    Worker<Arc<MemLogStore>, MemPayloadStore>,
    Arc<MemLogStore>,
    Arc<MemPendingStore>,
    Arc<RecordedBlobs>,
    LogId,
) {
    let store = Arc::new(MemLogStore::new());
    let log = EventLog::new(store.clone(), MemPayloadStore::new(), LogConfig::default())
        .expect("config is valid");
    let id = log.create().await.expect("create log").log;
    let pending = Arc::new(MemPendingStore::new());
    let blobs = Arc::new(Layered::new(MemBlobs::new(), Recording::default()));
    let worker = Worker::new(
        log,
        pending.clone(),
        blobs.clone(),
        Arc::new(MemImports::new()),
        config(),
    )
    .with_tombstones(store.clone());
    (worker, store, pending, blobs, id)
}

/// A job of a deleted log builds nothing: no pending item, no object (a build would refill the
/// sheet's snapshot prefix after its delete finished), and the message is finished with.
#[tokio::test]
async fn a_deleted_logs_job_builds_nothing() {
    use sheetlog_core::ports::LogPurge;
    let (worker, store, pending, blobs, log) = worker_with_tombstones().await;
    for i in 0..3 {
        worker
            .log()
            .append(log, rows(1, 3, &format!("a{i}")), AppendOptions::default())
            .await
            .expect("append");
    }
    let seq = worker
        .log()
        .append(log, snapshot_entry(), AppendOptions::default())
        .await
        .expect("append")
        .seq;
    store
        .mark_deleted(log, now_secs())
        .await
        .expect("tombstone");
    let job = SnapshotJob::new(log, 0, seq);
    let outcome = worker
        .run(&job, Instant::now() + Duration::from_secs(600))
        .await
        .expect("run");
    assert_eq!(outcome, Outcome::LogDeleted);
    assert!(
        outcome.is_final(),
        "the message is deleted, not sent round again"
    );
    assert!(pending.list(log).await.expect("list").is_empty());
    assert_eq!(
        blobs.layer().take(),
        (Vec::new(), Vec::new()),
        "objects written"
    );
}

/// Deleted while its snapshot is being built: the build stops at its next checkpoint.
#[tokio::test]
async fn a_build_stops_at_the_checkpoint_after_its_log_is_deleted() {
    use sheetlog_core::ports::LogPurge;

    #[derive(Debug)]
    struct DeleteAtFirstCheckpoint {
        store: Arc<MemLogStore>,
        log: LogId,
    }

    #[async_trait]
    impl StepHook for DeleteAtFirstCheckpoint {
        async fn reached(&self, step: Step) -> ControlFlow<()> {
            if step == Step::Checkpoint(1) {
                self.store
                    .mark_deleted(self.log, now_secs())
                    .await
                    .expect("tombstone");
            }
            ControlFlow::Continue(())
        }
    }

    let (worker, store, _pending, blobs, log) = worker_with_tombstones().await;
    let append = |e: NewEntry| {
        let worker = &worker;
        async move {
            worker
                .log()
                .append(log, e, AppendOptions::default())
                .await
                .expect("append")
                .seq
        }
    };
    // A first snapshot, then edits to its rows: the second build checkpoints.
    for i in 0..40 {
        append(rows(1, 3, &format!("a{i}"))).await;
    }
    let first = SnapshotJob::new(log, 0, append(snapshot_entry()).await);
    let far = Instant::now() + Duration::from_secs(600);
    assert!(matches!(
        worker.run(&first, far).await.expect("first"),
        Outcome::Completed { .. }
    ));
    for i in 0..40 {
        append(event(serde_json::json!({
            "type": "set",
            "body": {"cells": [{"ref": format!("B{}", 1 + 3 * i), "value": format!("edit {i}")}]}
        })))
        .await;
    }
    let second = SnapshotJob::new(log, 0, append(snapshot_entry()).await);
    blobs.layer().take();
    let worker = worker.with_hook(Arc::new(DeleteAtFirstCheckpoint {
        store: store.clone(),
        log,
    }));
    assert_eq!(
        worker.run(&second, far).await.expect("second"),
        Outcome::LogDeleted
    );
    let (_, puts) = blobs.layer().take();
    assert!(
        !puts.iter().any(|k| !k.contains("/chunks/")),
        "the manifest was written: {puts:?}"
    );
}
