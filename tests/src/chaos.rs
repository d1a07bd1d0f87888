//! A history checker in the spirit of Jepsen and Elle: concurrent writers and readers run against
//! the log over the fault-injecting adapter (`sheetlog_core::faults`), every acknowledged append
//! and every read is recorded, and the history is checked:
//!
//! - the log is gapless and never reorders;
//! - every acknowledged append is present exactly once, at the sequence it was acknowledged with,
//!   with its body;
//! - a read never sees an entry change, a gap, or a later entry without the earlier ones;
//! - an append refused for a stale `expectedSeq` never lands;
//! - cells at a past version equal a replay of the entries before it.
//!
//! - every sync client's mutations pushed through the writer's group commit land once each, in
//!   order, with none an acknowledged batch applied missing (`chaos_pushes.rs`).
//!
//! Writers append with and without `expectedSeq`, identical and distinct bodies, small and
//! S3-sized bodies; segments roll every few entries and the snapshot worker builds snapshots
//! during the run. Everything runs in this process over the in-memory stores, so 100,000
//! operations take minutes, not hours. `./scripts/bench chaos` runs it; a short profile runs
//! in the integration tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::json;
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::{NewEntry, SnapshotJob};
use sheetlog_core::faults::{
    FaultProfile, Faults, FaultyBlobStore, FaultyLogStore, FaultyPayloadStore,
};
use sheetlog_core::log::{AppendOptions, Appended, EventLog};
use sheetlog_core::memory::{MemLogStore, MemPayloadStore, MemPendingStore};
use sheetlog_core::ports::{LogStore, PayloadStore};
use sheetlog_core::sheet::{EntryBody, Event, Range, Sheet, Value};
use sheetlog_core::snapshot::{BuildConfig, MemBlobs, MemImports, read_range};
use sheetlog_core::snapshot_input::{log_entries, sheet_as_of};
use sheetlog_core::{Entry, LogError, LogId, SegmentHint};
use sheetlog_snapshot_worker::{Outcome, Worker, WorkerConfig};

use crate::fixtures::{set_entry, snapshot_entry};

#[path = "chaos_pushes.rs"]
mod pushes;

use pushes::DynLog;
type DynWorker = Worker<Arc<dyn LogStore>, Arc<dyn PayloadStore>>;

/// One run's settings.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    pub profile: FaultProfile,
    pub seed: u64,
    pub ops: u64,
    pub writers: usize,
    pub readers: usize,
    /// Batches of queued pushes the sheet's one sync writer applies during the run.
    pub push_batches: u64,
    pub segment_max_entries: u64,
    pub snapshot_interval: u64,
    /// Versions whose cells are compared with a replay at the end.
    pub cell_checks: usize,
}

impl ChaosConfig {
    pub fn new(profile: FaultProfile, seed: u64, ops: u64) -> Self {
        Self {
            profile,
            seed,
            ops,
            writers: 6,
            readers: 3,
            push_batches: (ops / 20).max(10),
            segment_max_entries: 40,
            snapshot_interval: 10,
            cell_checks: 8,
        }
    }
}

/// What a run did and found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChaosReport {
    pub profile: String,
    pub seed: u64,
    pub ops: u64,
    pub appends: u64,
    pub acknowledged: u64,
    pub reads: u64,
    pub faults_injected: u64,
    pub faults_by_kind: BTreeMap<String, u64>,
    pub anomalies: u64,
    pub acknowledged_lost: u64,
    pub duplicates: u64,
    pub skipped_reads: u64,
    pub changed_reads: u64,
    pub stale_expected_landed: u64,
    pub cells_mismatched: u64,
    /// Group commits of queued pushes (each delivery of a batch counts).
    pub push_batches: u64,
    /// Mutation ids the batches' answers said applied, over every pushing client.
    pub pushed_mutations_acknowledged: u64,
    /// Pushed mutations missing, twice or out of order in the log, or beyond what was made.
    pub push_anomalies: u64,
    /// Group commits that failed, by error (the clients push again; not an anomaly).
    pub push_errors: BTreeMap<String, u64>,
    pub snapshots_completed: u64,
    /// Snapshot jobs still queued when the drain budget ran out after the writers stopped.
    pub snapshot_jobs_unfinished: u64,
    pub segments: u64,
    pub log_entries: u64,
    pub elapsed_s: f64,
    /// The first few anomalies, described.
    pub examples: Vec<String>,
}

#[derive(Debug, Default)]
struct History {
    /// seq -> tag of every acknowledged append.
    acked: BTreeMap<u64, String>,
    /// Tags whose append was refused for a stale expected sequence.
    refused: Vec<String>,
    /// Identical-body appends: acknowledged, and with an unknown outcome.
    same_acked: u64,
    same_unknown: u64,
    /// seq -> tag first seen by any reader.
    seen: HashMap<u64, String>,
    examples: Vec<String>,
}

#[derive(Debug, Default)]
struct Counters {
    appends: AtomicU64,
    reads: AtomicU64,
    duplicates: AtomicU64,
    skipped: AtomicU64,
    changed: AtomicU64,
    snapshots: AtomicU64,
}

fn note(h: &Mutex<History>, what: String) {
    if let Ok(mut h) = h.lock()
        && h.examples.len() < 10
    {
        h.examples.push(what);
    }
}

const SAME: &str = "same";

/// The tag an entry carries: the text it sets (large bodies are the tag followed by padding).
fn tag_of(e: &Entry) -> Option<String> {
    match EntryBody::decode(e.kind.0, e.version, &e.body).ok()? {
        EntryBody::Event(Event::Set(s)) => match &s.cells.first()?.value {
            Value::Text(t) => Some(t.split('|').next().unwrap_or(t).to_owned()),
            _ => None,
        },
        _ => None,
    }
}

/// How long the snapshot queue may keep draining after the writers stop.
const DRAIN_BUDGET: Duration = Duration::from_secs(20);

/// Runs the checker and reports what it found.
pub async fn run(cfg: ChaosConfig) -> anyhow::Result<ChaosReport> {
    let started = Instant::now();
    let (rig, worker) = rig(&cfg)?;
    let id = create_log(&rig.log).await?;
    let shared = Shared::default();
    let (pushed, snapshot_jobs_unfinished) = run_ops(&cfg, &rig.log, id, &shared, worker).await?;

    // The final history: read straight from the store, with no faults in the way.
    let clean: CleanLog = EventLog::new(
        rig.mem.clone(),
        rig.mem_payloads.clone(),
        rig.log_cfg.clone(),
    )?;
    let all = read_all(&clean, id).await?;
    let mut report = counted(&cfg, &shared.counters, snapshot_jobs_unfinished, &all);
    let h = std::mem::take(&mut *shared.history.lock().unwrap_or_else(|e| e.into_inner()));
    let mut examples = Examples(h.examples.clone());
    check_log(&all, &h, &mut report, &mut examples);

    let found = pushes::check(&all, &pushed, &mut |what| examples.push(what));
    report.push_batches = pushed.batches;
    report.push_errors = pushed.errors.clone();
    report.pushed_mutations_acknowledged = found.acknowledged;
    report.push_anomalies = found.lost + found.duplicates + found.reordered + found.beyond_made;

    let blobs = rig.faulty_blobs.inner();
    report.cells_mismatched = check_cells(&cfg, &clean, blobs, id, &all, &mut examples).await?;
    report.anomalies += report.acknowledged_lost
        + report.duplicates
        + report.skipped_reads
        + report.changed_reads
        + report.stale_expected_landed
        + report.cells_mismatched
        + report.push_anomalies;
    report.faults_injected = rig.faults.counts.total();
    report.faults_by_kind = rig
        .faults
        .counts
        .by_kind()
        .iter()
        .map(|(k, n)| ((*k).to_owned(), *n))
        .collect();
    report.examples = examples.0;
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Runs the writers, the readers, the sync writer's pushes and the snapshot worker until the
/// operations run out. Returns the pushes' history and the snapshot jobs left unfinished.
async fn run_ops(
    cfg: &ChaosConfig,
    log: &Arc<DynLog>,
    id: LogId,
    shared: &Shared,
    worker: DynWorker,
) -> anyhow::Result<(pushes::PushHistory, u64)> {
    let (jobs_tx, jobs_rx) = tokio::sync::mpsc::unbounded_channel::<SnapshotJob>();
    let writers_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker_task = tokio::spawn(work_queue(
        worker,
        jobs_rx,
        shared.clone(),
        writers_done.clone(),
    ));

    let mut tasks = Vec::new();
    for w in 0..cfg.writers {
        let (log, shared, jobs) = (log.clone(), shared.clone(), jobs_tx.clone());
        tasks.push(tokio::spawn(writer(w, cfg.clone(), log, id, shared, jobs)));
    }
    // The sheet's one sync writer, applying batches of queued pushes among the appenders.
    let pusher = tokio::spawn(pushes::run(
        log.clone(),
        id,
        cfg.push_batches,
        cfg.seed.wrapping_add(2_000_003),
    ));
    for r in 0..cfg.readers {
        let (log, shared) = (log.clone(), shared.clone());
        tasks.push(tokio::spawn(reader(r, cfg.clone(), log, id, shared)));
    }
    for t in tasks {
        t.await?;
    }
    let pushed = pusher.await?;
    drop(jobs_tx);
    writers_done.store(true, Ordering::Relaxed);
    let snapshot_jobs_unfinished = worker_task.await?;
    Ok((pushed, snapshot_jobs_unfinished))
}

/// The report so far: the run's settings, the counters and the log's size.
fn counted(
    cfg: &ChaosConfig,
    c: &Counters,
    snapshot_jobs_unfinished: u64,
    all: &[Entry],
) -> ChaosReport {
    ChaosReport {
        profile: cfg.profile.name.clone(),
        seed: cfg.seed,
        ops: cfg.ops,
        appends: c.appends.load(Ordering::Relaxed),
        reads: c.reads.load(Ordering::Relaxed),
        duplicates: c.duplicates.load(Ordering::Relaxed),
        skipped_reads: c.skipped.load(Ordering::Relaxed),
        changed_reads: c.changed.load(Ordering::Relaxed),
        snapshots_completed: c.snapshots.load(Ordering::Relaxed),
        snapshot_jobs_unfinished,
        segments: all.last().map_or(0, |e| e.segment + 1),
        log_entries: all.len() as u64,
        ..ChaosReport::default()
    }
}

/// The log read straight from the in-memory stores, under no faults.
type CleanLog = EventLog<Arc<MemLogStore>, Arc<MemPayloadStore>>;

/// The stores under the faults, and the log over them.
struct Rig {
    faults: Arc<Faults>,
    mem: Arc<MemLogStore>,
    mem_payloads: Arc<MemPayloadStore>,
    log_cfg: LogConfig,
    log: Arc<DynLog>,
    /// The worker writes through the faults; the checks read the store under them.
    faulty_blobs: Arc<FaultyBlobStore<MemBlobs>>,
}

/// The in-memory stores under `cfg`'s faults, the log over them, and a snapshot worker writing
/// through them.
fn rig(cfg: &ChaosConfig) -> anyhow::Result<(Rig, DynWorker)> {
    let faults = Faults::new(cfg.profile.clone(), cfg.seed);
    let mem = Arc::new(MemLogStore::new());
    let mem_payloads = Arc::new(MemPayloadStore::new());
    let store: Arc<dyn LogStore> = Arc::new(FaultyLogStore::new(mem.clone(), faults.clone()));
    let payloads: Arc<dyn PayloadStore> = Arc::new(FaultyPayloadStore::new(
        mem_payloads.clone(),
        faults.clone(),
    ));
    let log_cfg = LogConfig {
        min_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(10),
        max_attempts: 60,
        ..LogConfig::default()
    };
    let log: Arc<DynLog> = Arc::new(EventLog::new(
        store.clone(),
        payloads.clone(),
        log_cfg.clone(),
    )?);
    let faulty_blobs = Arc::new(FaultyBlobStore::new(MemBlobs::new(), faults.clone()));
    let worker = Worker::new(
        EventLog::new(store.clone(), payloads.clone(), log_cfg.clone())?,
        Arc::new(MemPendingStore::new()),
        faulty_blobs.clone(),
        Arc::new(MemImports::new()),
        WorkerConfig {
            pending_timeout: Duration::from_secs(2),
            handoff_reserve: Duration::ZERO,
            defer_min: Duration::from_millis(5),
            defer_max: Duration::from_millis(20),
            error_retry: Duration::from_millis(5),
            build: BuildConfig { chunk_target: 512 },
            ..WorkerConfig::default()
        },
    );
    let rig = Rig {
        faults,
        mem,
        mem_payloads,
        log_cfg,
        log,
        faulty_blobs,
    };
    Ok((rig, worker))
}

/// Creates the log, trying again while the store throttles.
async fn create_log(log: &DynLog) -> anyhow::Result<LogId> {
    loop {
        match log.create().await {
            Ok(c) => return Ok(c.log),
            Err(LogError::Store(sheetlog_core::StoreError::Throttled { .. })) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// What the writers, the readers and the worker share.
#[derive(Debug, Clone, Default)]
struct Shared {
    history: Arc<Mutex<History>>,
    counters: Arc<Counters>,
    /// The next operation's number, over writers and readers.
    next_op: Arc<AtomicU64>,
}

/// The snapshot worker, fed as a queue feeds it: a job that is not done (deferred behind an
/// earlier snapshot, handed off, failed) goes to the back of the queue, so it never blocks the
/// jobs behind it, the earlier snapshot it waits for included. Returns the jobs left unfinished.
async fn work_queue(
    worker: DynWorker,
    mut jobs_rx: tokio::sync::mpsc::UnboundedReceiver<SnapshotJob>,
    shared: Shared,
    writers_done: Arc<std::sync::atomic::AtomicBool>,
) -> u64 {
    let mut queue: std::collections::VecDeque<(SnapshotJob, u32)> = Default::default();
    let mut drain_deadline = None;
    loop {
        while let Ok(job) = jobs_rx.try_recv() {
            queue.push_back((job, 0));
        }
        let Some((job, tries)) = queue.pop_front() else {
            if writers_done.load(Ordering::Relaxed) && jobs_rx.is_closed() {
                return 0;
            }
            match jobs_rx.recv().await {
                Some(job) => queue.push_back((job, 0)),
                None => return 0,
            }
            continue;
        };
        if writers_done.load(Ordering::Relaxed) {
            // Once the writers stop, the queue gets a bounded time to drain.
            let deadline = *drain_deadline.get_or_insert_with(|| Instant::now() + DRAIN_BUDGET);
            if Instant::now() > deadline {
                return queue.len() as u64 + 1;
            }
        }
        match worker
            .run(&job, Instant::now() + Duration::from_secs(30))
            .await
        {
            Ok(Outcome::Completed { .. }) => {
                shared.counters.snapshots.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Outcome::AlreadyComplete | Outcome::Duplicate | Outcome::LogDeleted) => {}
            Ok(Outcome::Rejected { reason }) => {
                note(
                    &shared.history,
                    format!("snapshot job {job:?} rejected: {reason}"),
                );
            }
            Ok(Outcome::Deferred { .. } | Outcome::HandedOff { .. }) | Err(_) => {
                if tries < 2000 {
                    queue.push_back((job, tries + 1));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
}

/// Writer `w`: appends until the operations run out, with and without `expectedSeq`, recording
/// every acknowledged and refused append; sends the snapshot jobs its appends start.
async fn writer(
    w: usize,
    cfg: ChaosConfig,
    log: Arc<DynLog>,
    id: LogId,
    shared: Shared,
    jobs: tokio::sync::mpsc::UnboundedSender<SnapshotJob>,
) {
    let mut rng = StdRng::seed_from_u64(cfg.seed.wrapping_add(w as u64 * 7919));
    let mut last_next = 0u64;
    let mut hint = None;
    let mut i = 0u64;
    while shared.next_op.fetch_add(1, Ordering::Relaxed) < cfg.ops {
        shared.counters.appends.fetch_add(1, Ordering::Relaxed);
        // Tags are unique by construction, so a tag twice in the log is a duplicate.
        i += 1;
        let (tag, entry, roll) = next_append(&mut rng, w, i);
        let expected = (roll >= 80).then_some(last_next);
        let opts = AppendOptions {
            expected_seq: expected,
            segment_hint: hint,
        };
        match log.append(id, entry, opts).await {
            Ok(a) => {
                last_next = a.next_seq;
                hint = Some(a.hint);
                record_ack(&shared, &tag, a.seq);
                if let Some(h) = after_ack(&log, id, &a, &cfg, &jobs).await {
                    hint = Some(h);
                }
            }
            Err(LogError::Conflict { next_seq, .. }) if expected.is_some() => {
                last_next = next_seq;
                let mut h = shared.history.lock().unwrap_or_else(|e| e.into_inner());
                h.refused.push(tag);
            }
            Err(_) => {
                // Throttled or out of attempts: the outcome is unknown.
                if tag == SAME {
                    shared
                        .history
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .same_unknown += 1;
                }
            }
        }
    }
}

/// Writer `w`'s `i`th append: its tag, its entry (identical, S3-sized or small) and the roll
/// that chose it (80 and over: with `expectedSeq`).
fn next_append(rng: &mut StdRng, w: usize, i: u64) -> (String, NewEntry, i32) {
    let row = rng.random_range(1..=50);
    let roll = rng.random_range(0..100);
    let (tag, entry) = if roll < 10 {
        (SAME.to_owned(), set_entry(&[("A1", json!(SAME))]))
    } else if roll < 14 {
        // Over the 16 KB inline threshold: the body goes to the payload store.
        let tag = format!("w{w}-{i}-big");
        let text = format!("{tag}|{}", "x".repeat(20_000));
        (tag, set_entry(&[(format!("A{row}"), json!(text))]))
    } else {
        let tag = format!("w{w}-{i}");
        (tag.clone(), set_entry(&[(format!("A{row}"), json!(tag))]))
    };
    (tag, entry, roll)
}

/// Records an acknowledged append; a sequence acknowledged to two tags is a duplicate.
fn record_ack(shared: &Shared, tag: &str, seq: u64) {
    let dup = {
        let mut h = shared.history.lock().unwrap_or_else(|e| e.into_inner());
        if tag == SAME {
            h.same_acked += 1;
        }
        h.acked.insert(seq, tag.to_owned())
    };
    if let Some(prev) = dup {
        shared.counters.duplicates.fetch_add(1, Ordering::Relaxed);
        note(
            &shared.history,
            format!("seq {seq} acknowledged to {prev} and {tag}"),
        );
    }
}

/// After an acknowledged append: the API's snapshot trigger (and the stream router's job), and
/// a new segment when this one is full. Returns the new segment's hint.
async fn after_ack(
    log: &DynLog,
    id: LogId,
    a: &Appended,
    cfg: &ChaosConfig,
    jobs: &tokio::sync::mpsc::UnboundedSender<SnapshotJob>,
) -> Option<SegmentHint> {
    if a.seq.is_multiple_of(cfg.snapshot_interval) {
        // The API's snapshot trigger, and the stream router's job.
        let snap = snapshot_entry();
        if let Ok(s) = log.append(id, snap, AppendOptions::default()).await {
            let _ = jobs.send(SnapshotJob::new(id, s.segment, s.entry));
        }
    }
    if a.entry >= cfg.segment_max_entries
        && let Ok(s) = log.start_segment(id).await
    {
        let _ = jobs.send(SnapshotJob::new(id, s.segment, 0));
        return Some(s.hint);
    }
    None
}

/// Reader `r`: reads pages from random sequences and whole loads, checking each read.
async fn reader(r: usize, cfg: ChaosConfig, log: Arc<DynLog>, id: LogId, shared: Shared) {
    let mut rng = StdRng::seed_from_u64(cfg.seed.wrapping_add(1_000_003 + r as u64));
    let ops = cfg.ops;
    let mut known = 1u64;
    // Readers take at most half the operations: under stale reads a read is far
    // cheaper than an append's retries, and sharing one budget freely let the readers
    // take 95 % of it, leaving too few appends for the history to mean anything.
    while shared.counters.reads.load(Ordering::Relaxed) < ops / 2
        && shared.next_op.fetch_add(1, Ordering::Relaxed) < ops
    {
        shared.counters.reads.fetch_add(1, Ordering::Relaxed);
        let (from, entries) = if rng.random_bool(0.8) {
            let from = rng.random_range(0..=known);
            let limit = rng.random_range(1..200);
            match log.read_since(id, from, limit).await {
                Ok(p) => (from, p.entries),
                Err(_) => continue,
            }
        } else {
            match log.load(id).await {
                Ok(l) => {
                    let mut all = vec![l.snapshot];
                    all.extend(l.entries);
                    (all[0].seq, all)
                }
                Err(_) => continue,
            }
        };
        check_read(&shared.history, &shared.counters, from, &entries);
        if let Some(last) = entries.last() {
            known = known.max(last.seq + 1);
        }
    }
}

/// Every entry of the log, in pages of 5,000.
async fn read_all(clean: &CleanLog, id: LogId) -> anyhow::Result<Vec<Entry>> {
    let mut all = Vec::new();
    let mut from = 0;
    loop {
        let page = clean
            .read_from(
                id,
                SegmentHint {
                    segment: 0,
                    base_seq: 0,
                },
                from,
                5000,
            )
            .await?;
        let done = page.complete || page.entries.is_empty();
        from = page.next_seq;
        all.extend(page.entries);
        if done {
            break;
        }
    }
    Ok(all)
}

/// The first few anomalies, described.
struct Examples(Vec<String>);

impl Examples {
    fn push(&mut self, what: String) {
        if self.0.len() < 10 {
            self.0.push(what);
        }
    }
}

/// Checks the final log against the history: no gap or reordering, every acknowledged append
/// where it was acknowledged, no tag twice, the identical bodies counted, no refused append.
fn check_log(all: &[Entry], h: &History, report: &mut ChaosReport, examples: &mut Examples) {
    for (i, e) in all.iter().enumerate() {
        if e.seq != i as u64 {
            report.anomalies += 1;
            examples.push(format!("the log has seq {} at position {i}", e.seq));
            break;
        }
    }
    let mut tags: HashMap<String, u64> = HashMap::new();
    for e in all {
        if let Some(t) = tag_of(e) {
            *tags.entry(t).or_default() += 1;
        }
    }
    report.acknowledged = h.acked.len() as u64;
    for (seq, tag) in &h.acked {
        let here = all.get(*seq as usize).and_then(tag_of);
        if here.as_deref() != Some(tag.as_str()) {
            report.acknowledged_lost += 1;
            examples.push(format!(
                "acknowledged {tag} at seq {seq}, the log has {here:?}"
            ));
        }
    }
    for (tag, n) in &tags {
        if tag != SAME && *n > 1 {
            report.duplicates += n - 1;
            examples.push(format!("{tag} is in the log {n} times"));
        }
    }
    let same = tags.get(SAME).copied().unwrap_or(0);
    if same < h.same_acked || same > h.same_acked + h.same_unknown {
        report.anomalies += 1;
        examples.push(format!(
            "{same} identical entries for {} acknowledged (+{} unknown)",
            h.same_acked, h.same_unknown
        ));
    }
    for tag in &h.refused {
        if tags.contains_key(tag) {
            report.stale_expected_landed += 1;
            examples.push(format!(
                "{tag} was refused for a stale expectedSeq but landed"
            ));
        }
    }
}

/// Cells at past versions against a replay of the entries before them: the versions that
/// differ.
async fn check_cells(
    cfg: &ChaosConfig,
    clean: &CleanLog,
    blobs: &MemBlobs,
    id: LogId,
    all: &[Entry],
    examples: &mut Examples,
) -> anyhow::Result<u64> {
    let mut mismatched = 0;
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x5eed);
    let range: Range = "A1:A50".parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    for _ in 0..cfg.cell_checks {
        let at = rng.random_range(0..=all.len() as u64);
        let sheet = sheet_as_of(clean, blobs, id, at).await?;
        let (got, _) = read_range(
            blobs,
            &MemImports::new(),
            *id.as_uuid(),
            sheet.base.as_ref(),
            &sheet.entries,
            range,
        )
        .await?;
        let mut sheet = Sheet::new();
        for e in log_entries(&all[..at as usize])? {
            for ev in e.entry.events() {
                sheet.apply(ev, None)?;
            }
        }
        if got != sheet.read_range(range) {
            mismatched += 1;
            examples.push(format!("cells at {at} differ from a replay"));
        }
    }
    Ok(mismatched)
}

/// A read starts where it was asked to, has no gap, and shows every entry as it was first seen.
fn check_read(history: &Mutex<History>, counters: &Counters, from: u64, entries: &[Entry]) {
    let Some(first) = entries.first() else { return };
    if first.seq != from {
        counters.skipped.fetch_add(1, Ordering::Relaxed);
        note(
            history,
            format!("read from {from} started at {}", first.seq),
        );
    }
    for w in entries.windows(2) {
        if w[1].seq != w[0].seq + 1 {
            counters.skipped.fetch_add(1, Ordering::Relaxed);
            note(
                history,
                format!("read jumped from {} to {}", w[0].seq, w[1].seq),
            );
        }
    }
    let mut h = history.lock().unwrap_or_else(|e| e.into_inner());
    for e in entries {
        let tag = tag_of(e).unwrap_or_else(|| format!("type {}", e.kind.0));
        match h.seen.get(&e.seq) {
            Some(prev) if *prev != tag => {
                counters.changed.fetch_add(1, Ordering::Relaxed);
                let what = format!("seq {} read as {prev}, later as {tag}", e.seq);
                if h.examples.len() < 10 {
                    h.examples.push(what);
                }
            }
            Some(_) => {}
            None => {
                h.seen.insert(e.seq, tag);
            }
        }
    }
}
