//! `scale`: sheetlog at sizes customers reach, each part printing cost, time and peak memory.
//! Sizes are flags: the defaults run in a few minutes on a 2-core machine against the emulator,
//! and the sizes of issue-sized runs are one flag away (`--log-store memory --log-entries
//! 1000000`, `--import-rows 1000000`, which is also the 10,000,000-cell sheet).
//!
//! - `log`: a log of `--log-entries` entries over `--segments` segments, every segment ended by a
//!   built snapshot (the worker runs each job): a load (snapshot plus the entries after it), a
//!   cold reader catching up from sequence 0 in pages of 1,000, and a range read as of an old
//!   sequence (a tenth of the way in). Request units are the log's own accounting (AWS's rules);
//!   requests are counted by the fault adapter with no faults. On the emulator (default) or the
//!   in-memory stores (`--log-store memory`): moto's writes slow down as its tables grow (10,000
//!   entries took 31 minutes to build), so a million-entry log is only practical in memory.
//! - `writers`: 8 and 32 concurrent writers on one log, single-entry appends: appends per second,
//!   attempts per append (p50, p99, max) and write units per append; then the same writers each
//!   pushing batches of 100 Replicache mutations through the API's push route: mutations per
//!   second.
//! - `import`: a CSV of `--import-rows` rows of 10 columns through the local stack end to end
//!   (API, stream router, snapshot worker): upload, commit, the snapshot built, the first range
//!   read of the last 100 rows.
//! - `snapshots`: bytes an incremental snapshot writes against the edits since the previous one,
//!   on a `--snapshot-rows` x 10 sheet, edits scattered over it or clustered in a block; `--svg`
//!   draws it.
//!
//! Peak memory is per part: the process's high-water mark is reset (`/proc/self/clear_refs`)
//! before each part and read after it. The API and pipeline of `import` run in this process, so
//! its figure includes them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::{LogId, SnapshotJob};
use sheetlog_core::faults::{FaultProfile, Faults, FaultyLogStore};
use sheetlog_core::log::{AppendOptions, EventLog, SegmentHint};
use sheetlog_core::memory::{MemLogStore, MemPayloadStore, MemPendingStore};
use sheetlog_core::ports::{LogStore, PayloadStore, PendingSnapshots};
use sheetlog_core::sheet::{Range, Row};
use sheetlog_core::snapshot::{
    BlobStore, ImportSource, MemBlobs, MemImports, ReadBudget, read_rows,
};
use sheetlog_core::snapshot_input;
use sheetlog_snapshot_worker::Worker;
use sheetlog_tests::api::{TestApi, begin_upload, commit_upload, json_str, new_log};
use sheetlog_tests::fixtures::{self, snapshot_entry};
use sheetlog_tests::pipeline::{PipelineStack, drive, test_worker_config};

use crate::pipeline::round1;
use crate::snapshot::peak_rss_mb;

#[derive(Debug, clap::Args)]
pub struct ScaleArgs {
    /// Print one JSON object of the figures instead of lines.
    #[arg(long)]
    json: bool,
    /// Entries in the scaled log.
    #[arg(long, default_value_t = 3_000)]
    log_entries: u64,
    /// Segments they are spread over (at least 100 for the issue-sized run).
    #[arg(long, default_value_t = 100)]
    segments: u64,
    /// Where the `log` part's log lives: the emulator, or the in-memory stores for sizes the
    /// emulator cannot hold in reasonable time (`--log-store memory --log-entries 1000000`).
    #[arg(long, value_enum, default_value_t = LogStoreKind::Emulator)]
    log_store: LogStoreKind,
    /// Appends per writer in the concurrency runs.
    #[arg(long, default_value_t = 10)]
    appends_per_writer: usize,
    /// Pushes (of 100 mutations each) per writer in the concurrency runs.
    #[arg(long, default_value_t = 5)]
    pushes_per_writer: usize,
    /// Rows (of 10 columns) in the imported CSV.
    #[arg(long, default_value_t = 100_000)]
    import_rows: u64,
    /// Rows (of 10 columns) of the sheet the `snapshots` part edits.
    #[arg(long, default_value_t = 100_000)]
    snapshot_rows: u64,
    /// Parts to run, comma-separated: log, writers, import, snapshots.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "log,writers,import,snapshots"
    )]
    parts: Vec<String>,
    /// Also draw snapshot bytes written against edits (the `snapshots` part) as SVG to this file.
    #[arg(long)]
    svg: Option<std::path::PathBuf>,
}

const PARTS: [&str; 4] = ["log", "writers", "import", "snapshots"];

/// Edit `i`: a number in one of the first 1,000 rows of column A.
fn set_entry(i: u64) -> sheetlog_core::domain::NewEntry {
    fixtures::set_entry(&[(format!("A{}", i % 1000 + 1), json!(i))])
}

pub fn run(args: ScaleArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(measure(args))
}

async fn measure(args: ScaleArgs) -> anyhow::Result<()> {
    if let Some(bad) = args.parts.iter().find(|p| !PARTS.contains(&p.as_str())) {
        anyhow::bail!("unknown part {bad:?}; the parts are {}", PARTS.join(", "));
    }
    anyhow::ensure!(
        args.segments >= 1 && args.log_entries >= 3 * args.segments,
        "--log-entries must be at least 3 per segment (each segment holds a Snapshot and an End \
         Segment entry)"
    );
    let mut out = serde_json::Map::new();
    let wants = |p: &str| args.parts.iter().any(|x| x == p);
    if wants("log") {
        reset_peak_rss()?;
        out.extend(scaled_log(&args).await?);
        out.insert("log_peak_rss_mb".into(), json!(round1(peak_rss_mb()?)));
    }
    if wants("writers") {
        reset_peak_rss()?;
        for writers in [8, 32] {
            out.extend(contention(writers, args.appends_per_writer).await?);
        }
        for writers in [8, 32] {
            out.extend(pushes(writers, args.pushes_per_writer).await?);
        }
        out.insert("writers_peak_rss_mb".into(), json!(round1(peak_rss_mb()?)));
    }
    if wants("import") {
        reset_peak_rss()?;
        out.extend(import(args.import_rows).await?);
        out.insert("import_peak_rss_mb".into(), json!(round1(peak_rss_mb()?)));
    }
    if wants("snapshots") {
        reset_peak_rss()?;
        out.extend(snapshots(args.snapshot_rows, args.svg.as_deref()).await?);
        out.insert(
            "snapshots_peak_rss_mb".into(),
            json!(round1(peak_rss_mb()?)),
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&Value::Object(out))?);
    } else {
        for (k, v) in &out {
            println!("{k:<48} {v}");
        }
    }
    Ok(())
}

type Figures = serde_json::Map<String, Value>;

/// Resets this process's peak resident memory (`VmHWM`) to its current size, so the next
/// reading is one part's peak (Linux: writing 5 to `/proc/self/clear_refs`).
fn reset_peak_rss() -> anyhow::Result<()> {
    std::fs::write("/proc/self/clear_refs", "5").context("resetting the peak RSS")
}

async fn snapshots(rows: u64, svg: Option<&std::path::Path>) -> anyhow::Result<Figures> {
    const EDITS: [u32; 5] = [1, 10, 100, 1_000, 10_000];
    eprintln!(
        "scale: snapshot bytes written after 1 to 10,000 edits on a {}-cell sheet ...",
        rows * 10
    );
    let t = Instant::now();
    let (full, points) = crate::snapshot::bytes_vs_edits(rows, &EDITS).await?;
    let elapsed = t.elapsed().as_secs_f64();
    if let Some(path) = svg {
        use crate::chart::{COLORS, LegendAt, Line, log_log_svg};
        let line = |name: &str, color, f: fn(&crate::snapshot::EditsPoint) -> u64| Line {
            name: name.into(),
            color,
            points: points
                .iter()
                .map(|p| (f64::from(p.edits), f(p) as f64))
                .collect(),
        };
        log_log_svg(
            path,
            &format!(
                "Bytes an incremental snapshot writes ({} cells; a full one is {:.1} MB)",
                crate::chart::round_label((rows * 10) as f64),
                full as f64 / 1e6
            ),
            ("cell edits since the previous snapshot", "bytes written"),
            LegendAt::MiddleRight,
            &[
                line("edits scattered over the sheet", COLORS[1], |p| {
                    p.scattered_bytes
                }),
                line("edits clustered in one block", COLORS[0], |p| {
                    p.clustered_bytes
                }),
                Line {
                    name: "a full snapshot".into(),
                    color: COLORS[2],
                    points: EDITS.iter().map(|&e| (f64::from(e), full as f64)).collect(),
                },
            ],
        )?;
        eprintln!("scale: chart written to {}", path.display());
    }
    Ok(Figures::from_iter([
        ("snapshots_sheet_cells".into(), json!(rows * 10)),
        ("snapshots_full_bytes".into(), json!(full)),
        (
            "snapshots_bytes_vs_edits".into(),
            serde_json::to_value(&points)?,
        ),
        ("snapshots_s".into(), json!(round1(elapsed))),
    ]))
}

/// The stores the `log` part runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogStoreKind {
    /// The emulator's DynamoDB tables and S3 bucket, over the real wire protocol.
    Emulator,
    /// The in-memory stores the unit tests use (`sheetlog_core::memory`), which charge request
    /// units by the same rules: the same algorithms at sizes moto cannot hold in reasonable time
    /// (its writes slow down as a table grows). Times are then this code's own, without network.
    Memory,
}

impl LogStoreKind {
    fn name(self) -> &'static str {
        match self {
            Self::Emulator => "emulator",
            Self::Memory => "memory",
        }
    }
}

/// The stores the scaled log runs on, of either kind: the worker is built once over them.
struct Stores {
    store: Arc<dyn LogStore>,
    payloads: Arc<dyn PayloadStore>,
    pending: Arc<dyn PendingSnapshots>,
    blobs: Arc<dyn BlobStore>,
    imports: Arc<dyn ImportSource>,
    /// The emulator's stack, kept alive while the figures are taken.
    _stack: Option<PipelineStack>,
}

async fn scaled_log(args: &ScaleArgs) -> anyhow::Result<Figures> {
    // The fault adapter with no faults is a pass-through that counts the requests it sees.
    let profile = FaultProfile::named("none").context("the none fault profile")?;
    let faults = Faults::new(profile, 0);
    let stores = match args.log_store {
        LogStoreKind::Emulator => {
            let px = PipelineStack::new("scale-log").await?;
            let blobs = Arc::new(px.blobs.clone());
            Stores {
                store: Arc::new(px.stack.log_store()),
                payloads: Arc::new(px.stack.bucket()),
                pending: Arc::new(px.pending.clone()),
                blobs: blobs.clone(),
                imports: blobs,
                _stack: Some(px),
            }
        }
        LogStoreKind::Memory => Stores {
            store: Arc::new(MemLogStore::new()),
            payloads: Arc::new(MemPayloadStore::new()),
            pending: Arc::new(MemPendingStore::new()),
            blobs: Arc::new(MemBlobs::new()),
            imports: Arc::new(MemImports::new()),
            _stack: None,
        },
    };
    let Stores {
        store,
        payloads,
        pending,
        blobs,
        imports,
        _stack,
    } = stores;
    let log = EventLog::new(
        FaultyLogStore::new(store, faults.clone()),
        payloads,
        LogConfig::default(),
    )?;
    let worker = Worker::new(
        log,
        pending,
        blobs.clone(),
        imports.clone(),
        test_worker_config(),
    );
    let mut figures = log_figures(args, &worker, blobs.as_ref(), imports.as_ref(), &faults).await?;
    figures.insert("log_store".into(), json!(args.log_store.name()));
    Ok(figures)
}

/// Builds the scaled log through `worker`'s log (every segment ended by a built snapshot), then
/// measures a load, a cold read from sequence 0 and a range read as of an old sequence, each with
/// its requests (counted by `faults`), request units and time.
async fn log_figures<S: LogStore, P: PayloadStore>(
    args: &ScaleArgs,
    worker: &Worker<S, P>,
    blobs: &dyn BlobStore,
    imports: &dyn ImportSource,
    faults: &Faults,
) -> anyhow::Result<Figures> {
    let el = worker.log();
    let (log, appended, build_s) = build_log(args, worker).await?;
    let (loaded, load_s, load_requests) = counted(faults, el.load(log)).await?;
    let (cold, catch_up_s, cold_requests) = counted(faults, cold_read(el, log)).await?;
    let old = appended / 10;
    let (rows, history_s, history_requests) =
        counted(faults, history_read(el, blobs, imports, log, old)).await?;
    let non_empty: usize = rows.iter().map(|r| r.cells.len()).sum();

    Ok(Figures::from_iter([
        ("log_entries".into(), json!(appended)),
        ("log_segments".into(), json!(args.segments)),
        ("log_build_s".into(), json!(round1(build_s))),
        ("load_ms".into(), json!(round1(load_s * 1000.0))),
        ("load_requests".into(), json!(load_requests)),
        ("load_rru".into(), json!(loaded.units.read)),
        (
            "load_entries_after_snapshot".into(),
            json!(loaded.entries.len()),
        ),
        ("cold_read_entries".into(), json!(cold.entries)),
        ("cold_read_pages".into(), json!(cold.pages)),
        ("cold_read_requests".into(), json!(cold_requests)),
        ("cold_read_rru".into(), json!(cold.rru)),
        ("cold_read_s".into(), json!(round1(catch_up_s))),
        ("history_read_at_seq".into(), json!(old)),
        ("history_read_ms".into(), json!(round1(history_s * 1000.0))),
        ("history_read_log_requests".into(), json!(history_requests)),
        ("history_read_cells".into(), json!(non_empty)),
    ]))
}

/// Runs `work`, returning what it returned, the seconds it took and the log-store requests that
/// `faults` counted meanwhile.
async fn counted<T, E>(
    faults: &Faults,
    work: impl Future<Output = Result<T, E>>,
) -> Result<(T, f64, u64), E> {
    let calls = || faults.counts.calls.load(Ordering::Relaxed);
    let before = calls();
    let t = Instant::now();
    let out = work.await?;
    let seconds = t.elapsed().as_secs_f64();
    Ok((out, seconds, calls() - before))
}

/// Creates the scaled log and fills it, every segment ended by a Snapshot entry whose job
/// `worker` runs. Returns the log, its next sequence and the seconds the build took.
async fn build_log<S: LogStore, P: PayloadStore>(
    args: &ScaleArgs,
    worker: &Worker<S, P>,
) -> anyhow::Result<(LogId, u64, f64)> {
    let per_segment = (args.log_entries / args.segments.max(1)).max(2);
    eprintln!(
        "scale: a log of {} entries, {} segments of {per_segment}, on the {} stores ...",
        args.log_entries,
        args.segments,
        args.log_store.name()
    );
    let el = worker.log();
    let log = el.create().await?.log;
    let t = Instant::now();
    let mut hint = None;
    let mut appended = 1u64;
    for s in 0..args.segments {
        for _ in 0..per_segment.saturating_sub(2) {
            let a = el
                .append(
                    log,
                    set_entry(appended),
                    AppendOptions {
                        expected_seq: None,
                        segment_hint: hint,
                    },
                )
                .await?;
            hint = Some(a.hint);
            appended += 1;
        }
        let a = el
            .append(log, snapshot_entry(), AppendOptions::default())
            .await?;
        drive(worker, SnapshotJob::new(log, a.segment, a.entry)).await?;
        appended += 1;
        if s + 1 < args.segments {
            let started = el.start_segment(log).await?;
            drive(worker, SnapshotJob::new(log, started.segment, 0)).await?;
            hint = None;
            appended = started.next_seq;
        }
        if s % 10 == 9 {
            eprintln!(
                "scale: {} segments, {appended} entries, {:.0} s ...",
                s + 1,
                t.elapsed().as_secs_f64()
            );
        }
    }
    Ok((log, appended, t.elapsed().as_secs_f64()))
}

/// What a cold reader read: entries, pages and read units.
struct ColdRead {
    entries: u64,
    pages: u64,
    rru: f64,
}

/// A reader following the whole log from sequence 0, in pages of 1,000: each page starts where
/// the previous one ended (its last entry's segment and number), so a page costs one query per
/// segment it spans.
async fn cold_read<S: LogStore, P: PayloadStore>(
    el: &EventLog<S, P>,
    log: LogId,
) -> anyhow::Result<ColdRead> {
    let mut at = SegmentHint {
        segment: 0,
        base_seq: 0,
    };
    let mut num = 0;
    let mut read = 0u64;
    let mut pages = 0u64;
    let mut rru = 0.0;
    loop {
        let page = el.read_from(log, at, num, 1000).await?;
        pages += 1;
        rru += page.units.read;
        read += page.entries.len() as u64;
        let Some(last) = page.entries.last() else {
            break;
        };
        at = SegmentHint {
            segment: last.segment,
            base_seq: last.seq - last.num,
        };
        num = last.num + 1;
        if page.complete {
            break;
        }
        if pages.is_multiple_of(100) {
            eprintln!("scale: cold reader at sequence {} ...", page.next_seq);
        }
    }
    Ok(ColdRead {
        entries: read,
        pages,
        rru,
    })
}

/// What `GET /logs/{id}/cells?range=A1:A1000&at=<old>` does: the newest completed snapshot at
/// or before the sequence, the entries after it, and the range read over both.
async fn history_read<S: LogStore, P: PayloadStore>(
    el: &EventLog<S, P>,
    blobs: &dyn BlobStore,
    imports: &dyn ImportSource,
    log: LogId,
    old: u64,
) -> anyhow::Result<Vec<Row>> {
    let sheet = snapshot_input::sheet_as_of(el, blobs, log, old).await?;
    let range: Range = "A1:A1000".parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    let (rows, _) = read_rows(
        blobs,
        imports,
        *log.as_uuid(),
        sheet.base.as_ref(),
        &sheet.entries,
        range,
        ReadBudget {
            cells: usize::MAX,
            bytes: usize::MAX,
        },
    )
    .await?;
    Ok(rows)
}

fn pct(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn contention(writers: usize, per_writer: usize) -> anyhow::Result<Figures> {
    eprintln!("scale: {writers} writers x {per_writer} appends on one log ...");
    let px = PipelineStack::new(&format!("scale-w{writers}")).await?;
    let log = px.log.create().await?.log;
    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let plog = px.log.clone();
        tasks.push(tokio::spawn(async move {
            let mut attempts = Vec::new();
            let mut gave_up = 0u64;
            let mut wru = 0.0;
            let mut hint = None;
            for i in 0..per_writer {
                let r = plog
                    .append(
                        log,
                        set_entry((w * per_writer + i) as u64),
                        AppendOptions {
                            expected_seq: None,
                            segment_hint: hint,
                        },
                    )
                    .await;
                match r {
                    Ok(a) => {
                        hint = Some(a.hint);
                        attempts.push(a.attempts);
                        wru += a.units.write;
                    }
                    // The log's retry budget ran out (the API answers 503 busy); the client
                    // would retry, this run counts it.
                    Err(sheetlog_core::LogError::Contention { .. }) => gave_up += 1,
                    Err(e) => return Err(e.into()),
                }
            }
            Ok::<_, anyhow::Error>((attempts, gave_up, wru))
        }));
    }
    let mut attempts = Vec::new();
    let mut gave_up = 0;
    let mut wru = 0.0;
    for task in tasks {
        let (a, g, w) = task.await??;
        attempts.extend(a);
        gave_up += g;
        wru += w;
    }
    let elapsed = t.elapsed().as_secs_f64();
    attempts.sort_unstable();
    let k = |name: &str| format!("writers_{writers}_{name}");
    Ok(Figures::from_iter([
        (k("appends"), json!(attempts.len())),
        (
            k("appends_per_s"),
            json!(round1(attempts.len() as f64 / elapsed)),
        ),
        (k("attempts_p50"), json!(pct(&attempts, 0.5))),
        (k("attempts_p99"), json!(pct(&attempts, 0.99))),
        (
            k("attempts_max"),
            json!(attempts.last().copied().unwrap_or(0)),
        ),
        (k("gave_up_after_retry_budget"), json!(gave_up)),
        (
            k("wru_per_append"),
            json!(round1(wru / attempts.len().max(1) as f64)),
        ),
    ]))
}

async fn pushes(writers: usize, per_writer: usize) -> anyhow::Result<Figures> {
    eprintln!("scale: {writers} writers x {per_writer} pushes of 100 mutations ...");
    let api = TestApi::start(&format!("scale-push{writers}")).await?;
    let c = api.client().await?;
    let v: Value = c.post(api.url("/logs")).send().await?.json().await?;
    let log = json_str(&v, "/logId").to_owned();
    let t = Instant::now();
    let mut tasks = Vec::new();
    let retried = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for w in 0..writers {
        let c = c.clone();
        let retried = retried.clone();
        let url = api.url(&format!("/logs/{log}/replicache/push"));
        tasks.push(tokio::spawn(async move {
            for p in 0..per_writer {
                let mutations: Vec<Value> = (1..=100)
                    .map(|i| {
                        let id = p * 100 + i;
                        json!({"id": id, "clientID": format!("client-{w}"), "name": "set",
                            "args": {"cells": [{"ref": format!("B{}", id % 1000 + 1), "value": id}]},
                            "timestamp": 1.0})
                    })
                    .collect();
                let body = json!({"pushVersion": 1, "clientGroupID": format!("group-{w}"),
                    "mutations": mutations, "profileID": "scale", "schemaVersion": ""});
                // As a client does: a 503 (the log was busy) is retried after its Retry-After.
                let mut tries = 0u32;
                loop {
                    let r = c.post(&url).json(&body).send().await?;
                    if r.status().is_success() {
                        break;
                    }
                    anyhow::ensure!(
                        r.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE && tries < 20,
                        "push: {}",
                        r.status()
                    );
                    tries += 1;
                    retried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let elapsed = t.elapsed().as_secs_f64();
    let mutations = writers * per_writer * 100;
    let k = |name: &str| format!("push_writers_{writers}_{name}");
    Ok(Figures::from_iter([
        (k("mutations"), json!(mutations)),
        (
            k("mutations_per_s"),
            json!(round1(mutations as f64 / elapsed)),
        ),
        (
            k("pushes_per_s"),
            json!(round1((writers * per_writer) as f64 / elapsed)),
        ),
        (
            k("pushes_retried_after_503"),
            json!(retried.load(std::sync::atomic::Ordering::Relaxed)),
        ),
    ]))
}

async fn import(rows: u64) -> anyhow::Result<Figures> {
    eprintln!("scale: importing a CSV of {rows} rows x 10 columns through the local stack ...");
    let dir = tempfile::tempdir()?;
    let csv = dir.path().join("rows.csv");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&csv)?);
        for r in 0..rows {
            writeln!(
                f,
                "row {r},{r},{},{:.2},item-{},{},{},note {r},{},{}",
                r * 3,
                r as f64 / 7.0,
                r % 97,
                r % 13,
                r * 11,
                r % 5,
                r + 1
            )?;
        }
    }
    let size = std::fs::metadata(&csv)?.len();
    // A Snapshot entry every 2 entries, so the one after the import is appended at once.
    let cfg = ApiConfig {
        snapshot_interval: 2,
        segment_max_entries: 10_000,
        ..ApiConfig::default()
    };
    let api = TestApi::start_with_pipeline("scale-import", cfg)
        .await?
        .context("the local stack")?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;

    let t = Instant::now();
    let u = begin_upload(&c, &api, &log, size).await?;
    crate::import::curl_put(&u, &csv)?;
    let upload_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let r = commit_upload(&c, &api, &log, &u).await?;
    anyhow::ensure!(r.status().is_success(), "commit: {}", r.status());
    let committed: Value = r.json().await?;
    let seq = committed["seq"].as_u64().context("no seq")?;
    let commit_s = t.elapsed().as_secs_f64();

    // One more edit, after which the API's trigger appends a Snapshot entry (interval 2); wait
    // until the newest completed snapshot covers the import.
    let t = Instant::now();
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .json(&json!({"type": "set", "body": {"cells": [{"ref": "L1", "value": "done"}]}}))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "append: {}", r.status());
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        let v: Value = c
            .get(api.url(&format!("/logs/{log}")))
            .send()
            .await?
            .json()
            .await?;
        if v["snapshot"]["seq"].as_u64().is_some_and(|s| s > seq + 1) {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "no snapshot after an hour: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let snapshot_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let last = rows.max(1);
    let r = c
        .get(api.url(&format!(
            "/logs/{log}/cells?range=A{}:J{}",
            last.saturating_sub(99).max(1),
            last
        )))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "range read: {}", r.status());
    let cells: Value = r.json().await?;
    let range_ms = t.elapsed().as_secs_f64() * 1000.0;
    Ok(Figures::from_iter([
        ("import_rows".into(), json!(rows)),
        ("import_cells".into(), json!(rows * 10)),
        ("import_csv_bytes".into(), json!(size)),
        ("import_upload_s".into(), json!(round1(upload_s))),
        ("import_commit_s".into(), json!(round1(commit_s))),
        ("import_snapshot_s".into(), json!(round1(snapshot_s))),
        ("import_first_range_read_ms".into(), json!(round1(range_ms))),
        (
            "import_range_rows".into(),
            json!(cells["values"].as_array().map_or(0, Vec::len)),
        ),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_args(entries: u64, segments: u64) -> ScaleArgs {
        ScaleArgs {
            json: true,
            log_entries: entries,
            segments,
            log_store: LogStoreKind::Memory,
            appends_per_writer: 1,
            pushes_per_writer: 1,
            import_rows: 1,
            snapshot_rows: 1,
            parts: vec!["log".into()],
            svg: None,
        }
    }

    fn figure(f: &Figures, key: &str) -> u64 {
        f.get(key)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{key} missing in {f:?}"))
    }

    /// The `log` part on the in-memory stores (the path `--log-store memory` takes for the
    /// million-entry run): everything written is read back, a load is the newest snapshot alone,
    /// and the cold reader pays one query per segment, not a walk from segment 0 for every page.
    #[tokio::test]
    async fn the_log_part_reads_back_every_entry_at_one_query_per_segment() {
        let f = scaled_log(&log_args(1_000, 10))
            .await
            .expect("the log part runs on the in-memory stores");
        assert_eq!(f["log_store"], "memory");
        let entries = figure(&f, "log_entries");
        // 10 segments of 100 numbers, plus the End Segment entry closing each of the first 9.
        assert_eq!(entries, 1_009);
        assert_eq!(figure(&f, "cold_read_entries"), entries);
        let pages = figure(&f, "cold_read_pages");
        assert_eq!(pages, 2);
        let requests = figure(&f, "cold_read_requests");
        assert!(
            requests <= 10 + pages,
            "{requests} requests for {pages} pages over 10 segments"
        );
        assert_eq!(figure(&f, "load_entries_after_snapshot"), 0);
        assert_eq!(figure(&f, "load_requests"), 2);
        // As of sequence 100: the 98 cells segment 0 set (A2..A99) and nothing later.
        assert_eq!(figure(&f, "history_read_at_seq"), 100);
        assert_eq!(figure(&f, "history_read_cells"), 98);
    }
}
