//! The `pipeline` benchmark: the side-effect pipeline on the local stack.
//!
//! - Snapshot job latency: on a fresh emulator with the stack `sheetlog dev` creates
//!   ([`create_local_stack`]) and both local drivers running continuously ([`LocalPipeline::run`]
//!   in a task, as `sheetlog dev` runs them), the time from appending a Snapshot entry to its
//!   root being readable on the entry: Entry stream → stream router → SQS → worker → completion.
//! - Snapshot chain lag: a burst of Snapshot entries appended back to back (5 edits each) on the
//!   same running stack; for each, the time from its append to its completion. Each snapshot
//!   must wait for the one before it, so this measures how fast the chain moves (a completed
//!   snapshot starts the next at once) rather than one build.
//! - Worker peak memory: a 1M-cell CSV imported into a log on a second fresh emulator, then the
//!   snapshot job run to completion by the worker in a child process (this binary re-executed
//!   with a hidden subcommand), whose VmHWM is the figure. The emulator is a separate process, and
//!   the parent does all the setup (CSV, upload, appends), so the child's memory is the worker's:
//!   the runtime, the SDK clients and the build.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sheetlog_core::aws::items::entry_attr;
use sheetlog_core::aws::{DynamoLogStore, S3Bucket};
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::{EntryType, LogId, NewEntry, SnapshotJob, segment_id};
use sheetlog_core::log::{AppendOptions, EventLog};
use sheetlog_core::ports::PayloadStore;
use sheetlog_core::sheet::Event;
use sheetlog_core::snapshot::Manifest;
use sheetlog_pipeline::{LocalPipeline, LocalPipelineConfig, LocalStack, create_local_stack};
use sheetlog_sheet::sample::{SAMPLE_COLS, sample_fields, write_sample_csv};
use sheetlog_snapshot_worker::{Outcome, Worker, WorkerConfig};
use sheetlog_tests::Emulator;
use sheetlog_tests::emulator::{EMULATOR_URL_VAR, unique_prefix};
use sheetlog_tests::fixtures::{set_entry, snapshot_entry};

use crate::snapshot::peak_rss_mb;

type AwsLog = EventLog<DynamoLogStore, S3Bucket>;

/// Rows of the 1M-cell sheet (times [`SAMPLE_COLS`] columns).
const ROWS_1M: u64 = 100_000;
/// How long one snapshot may take before the benchmark gives up on it.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the benchmark looks for the root on the Snapshot entry: the resolution of the
/// latency figures, small against the drivers' poll interval.
const COMPLETION_POLL: Duration = Duration::from_millis(10);

#[derive(Debug, clap::Args)]
pub struct PipelineArgs {
    /// Print one JSON object of the figures instead of a table.
    #[arg(long)]
    json: bool,
    /// Snapshots to time.
    #[arg(long, default_value_t = 20)]
    snapshots: u32,
    /// `set` entries (one 10-cell row each) appended before each Snapshot entry; 100 is the
    /// stack's snapshot interval.
    #[arg(long, default_value_t = 100)]
    edits: u32,
    /// Snapshot entries in the burst (each after 5 edits), appended back to back.
    #[arg(long, default_value_t = 20)]
    burst: u32,
    /// The stream driver's idle poll interval in milliseconds (default: what `sheetlog dev` uses;
    /// the queue drivers long-poll).
    #[arg(long)]
    poll_ms: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub struct WorkerChildArgs {
    /// Prefix of the local stack's resource names (the emulator is in SHEETLOG_EMULATOR_URL).
    #[arg(long)]
    prefix: String,
    /// The snapshot job, in its queue-message JSON form.
    #[arg(long)]
    job: String,
    /// Each invocation's time before it hands off, in seconds (Lambda: timeout less reserve).
    #[arg(long)]
    budget_secs: f64,
}

/// What the worker child reports on stdout.
#[derive(Debug, Serialize, Deserialize)]
struct WorkerReport {
    seconds: f64,
    invocations: u32,
    /// VmRSS with the runtime and SDK clients set up, before the job.
    baseline_rss_mb: f64,
    /// VmHWM after the job.
    peak_rss_mb: f64,
    root: String,
}

#[derive(Debug, Serialize)]
struct Figures {
    poll_interval_ms: u64,
    snapshots: u32,
    edits_per_snapshot: u32,
    cells_per_edit: u32,
    snapshot_latency_ms_p50: f64,
    snapshot_latency_ms_p90: f64,
    snapshot_latency_ms_max: f64,
    snapshot_latency_ms_min: f64,
    burst_snapshots: u32,
    snapshot_chain_lag_ms_p50: f64,
    snapshot_chain_lag_ms_p99: f64,
    /// From the burst's last append until every snapshot of it was complete.
    snapshot_burst_all_complete_s: f64,
    worker_cells_1m: u64,
    worker_csv_bytes_1m: u64,
    worker_build_seconds_1m: f64,
    worker_invocations_1m: u32,
    worker_baseline_rss_mb: f64,
    worker_peak_rss_mb_1m: f64,
}

fn say(s: &str) {
    eprintln!("[bench pipeline] {s}");
}

pub fn run(args: PipelineArgs) -> anyhow::Result<()> {
    if args.snapshots == 0 {
        bail!("--snapshots must be at least 1");
    }
    let poll = args
        .poll_ms
        .map(Duration::from_millis)
        .unwrap_or(LocalPipelineConfig::default().poll_interval);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (mut latencies, mut lags, all_done) =
        rt.block_on(latency(args.snapshots, args.edits, args.burst, poll))?;
    latencies.sort_by(f64::total_cmp);
    lags.sort_by(f64::total_cmp);

    let (csv_bytes, worker) = rt.block_on(worker_memory())?;

    let f = Figures {
        poll_interval_ms: u64::try_from(poll.as_millis()).unwrap_or(u64::MAX),
        snapshots: args.snapshots,
        edits_per_snapshot: args.edits,
        cells_per_edit: SAMPLE_COLS,
        snapshot_latency_ms_p50: round1(percentile(&latencies, 0.5)),
        snapshot_latency_ms_p90: round1(percentile(&latencies, 0.9)),
        snapshot_latency_ms_max: round1(latencies.last().copied().unwrap_or(0.0)),
        snapshot_latency_ms_min: round1(latencies.first().copied().unwrap_or(0.0)),
        burst_snapshots: args.burst,
        snapshot_chain_lag_ms_p50: round1(percentile(&lags, 0.5) * 1000.0),
        snapshot_chain_lag_ms_p99: round1(percentile(&lags, 0.99) * 1000.0),
        snapshot_burst_all_complete_s: round1(all_done),
        worker_cells_1m: ROWS_1M * u64::from(SAMPLE_COLS),
        worker_csv_bytes_1m: csv_bytes,
        worker_build_seconds_1m: round1(worker.seconds),
        worker_invocations_1m: worker.invocations,
        worker_baseline_rss_mb: round1(worker.baseline_rss_mb),
        worker_peak_rss_mb_1m: round1(worker.peak_rss_mb),
    };
    if args.json {
        println!("{}", serde_json::to_string(&f)?);
    } else {
        print_table(&f);
    }
    Ok(())
}

/// To one decimal: the figures are not more precise than that.
pub(crate) fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The event log over a local stack's tables and bucket.
async fn event_log(emu: &Emulator, stack: &LocalStack) -> anyhow::Result<AwsLog> {
    let r = &stack.resources;
    Ok(EventLog::new(
        DynamoLogStore::new(emu.dynamodb().await, &r.entry_table, &r.segment_table),
        S3Bucket::new(emu.s3().await, &r.bucket),
        LogConfig::default(),
    )?)
}

/// A `set` entry writing one 10-cell sample row at `row` (1-based).
fn row_edit(row: u64) -> NewEntry {
    let cells: Vec<(String, serde_json::Value)> = sample_fields(row)
        .into_iter()
        .zip('A'..)
        .map(|(v, col)| (format!("{col}{row}"), serde_json::Value::String(v)))
        .collect();
    set_entry(&cells)
}

/// The root recorded on a Snapshot entry, if it is complete. One strongly consistent GetItem:
/// unlike a Query, its cost on the emulator does not grow with the log, so looking every few
/// milliseconds does not slow down the pipeline being measured.
async fn snapshot_root(
    dynamo: &aws_sdk_dynamodb::Client,
    entry_table: &str,
    job: &SnapshotJob,
) -> anyhow::Result<Option<String>> {
    let item = dynamo
        .get_item()
        .table_name(entry_table)
        .key(
            entry_attr::SEGMENT_ID,
            AttributeValue::B(Blob::new(segment_id(job.log_id, job.segment))),
        )
        .key(entry_attr::NUM, AttributeValue::N(job.entry.to_string()))
        .projection_expression(entry_attr::ROOT)
        .consistent_read(true)
        .send()
        .await
        .context("GetItem on the Snapshot entry")?
        .item;
    Ok(item
        .as_ref()
        .and_then(|i| i.get(entry_attr::ROOT))
        .and_then(|v| v.as_s().ok())
        .cloned())
}

/// Times `snapshots` snapshots through the running local pipeline (milliseconds each), then a
/// burst of `burst` snapshots (seconds from each append to its completion, and from the last
/// append until all were complete).
async fn latency(
    snapshots: u32,
    edits: u32,
    burst: u32,
    poll: Duration,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, f64)> {
    say("starting an emulator and creating the local stack (create_local_stack)");
    let emu = Emulator::start()?;
    let sdk = emu.sdk_config().await;
    let stack = create_local_stack(&sdk, &unique_prefix("bench-pipeline")).await?;
    let mut timing = Timing {
        log_store: event_log(&emu, &stack).await?,
        dynamo: emu.dynamodb().await,
        entry_table: &stack.resources.entry_table,
        row: 1,
    };
    let (stop, running) = start_pipeline(&sdk, &stack, poll)?;

    let result = async {
        let out = timing.snapshots(snapshots, edits, poll).await?;
        let (lags, all_done) = timing.burst(burst).await?;
        anyhow::Ok((out, lags, all_done))
    }
    .await;

    let _ = stop.send(());
    running.await?;
    result
}

/// Starts the local pipeline's drivers in a task, as `sheetlog dev` runs them (but for the poll
/// interval). They stop when the sender is sent to or dropped.
fn start_pipeline(
    sdk: &aws_config::SdkConfig,
    stack: &LocalStack,
    poll: Duration,
) -> anyhow::Result<(
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
)> {
    // The same settings `sheetlog dev` runs with, but for the poll interval when one is given.
    let cfg = LocalPipelineConfig {
        poll_interval: poll,
        stream_failure_queue: Some(stack.stream_failure_queue.clone()),
        ..LocalPipelineConfig::default()
    };
    let pipeline = LocalPipeline::new(
        &sheetlog_pipeline::Roles::shared(sdk),
        &stack.resources,
        &stack.queues,
        cfg,
    )?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(pipeline.run(async {
        let _ = stopped.await;
    }));
    Ok((stop, running))
}

/// The log the timed snapshots are appended to, and where their completion is looked for.
struct Timing<'a> {
    log_store: AwsLog,
    dynamo: aws_sdk_dynamodb::Client,
    entry_table: &'a str,
    /// The sample row the next edit writes.
    row: u64,
}

impl Timing<'_> {
    /// Appends `n` edits, one sample row each.
    async fn edit(&mut self, log: LogId, n: u32) -> anyhow::Result<()> {
        for _ in 0..n {
            self.log_store
                .append(log, row_edit(self.row), AppendOptions::default())
                .await?;
            self.row += 1;
        }
        Ok(())
    }

    /// `snapshots` snapshots on a new log, each after `edits` edits: milliseconds from each
    /// Snapshot entry's append to its completion.
    async fn snapshots(
        &mut self,
        snapshots: u32,
        edits: u32,
        poll: Duration,
    ) -> anyhow::Result<Vec<f64>> {
        let log = self.log_store.create().await?.log;
        let mut out = Vec::with_capacity(snapshots as usize);
        say(&format!(
            "timing {snapshots} snapshots, each after {edits} set entries (the stream driver polls every {} ms)",
            poll.as_millis()
        ));
        for i in 0..snapshots {
            self.edit(log, edits).await?;
            let started = Instant::now();
            let a = self
                .log_store
                .append(log, snapshot_entry(), AppendOptions::default())
                .await?;
            let job = SnapshotJob::new(log, a.segment, a.entry);
            wait_complete(&self.dynamo, self.entry_table, &job, started).await?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            say(&format!("snapshot {}/{snapshots}: {ms:.0} ms", i + 1));
            out.push(ms);
        }
        Ok(out)
    }

    /// `burst` Snapshot entries on a new log, 5 edits apart, appended back to back: seconds from
    /// each append to its completion, and from the last append until all were complete. The
    /// completions are watched while the burst is still being appended (the chain completes in
    /// order, so one read of the oldest snapshot not yet complete per tick), so a snapshot that
    /// completes mid-burst counts the time it took, not the time until the burst ended.
    async fn burst(&mut self, burst: u32) -> anyhow::Result<(Vec<f64>, f64)> {
        say(&format!(
            "a burst of {burst} snapshots, 5 edits apart, appended back to back"
        ));
        let log = self.log_store.create().await?.log;
        let appended: std::sync::Mutex<Vec<(SnapshotJob, Instant)>> = Default::default();
        let last: std::sync::Mutex<Option<Instant>> = Default::default();
        let (dynamo, entry_table) = (self.dynamo.clone(), self.entry_table);
        let append = async {
            for _ in 0..burst {
                self.edit(log, 5).await?;
                let a = self
                    .log_store
                    .append(log, snapshot_entry(), AppendOptions::default())
                    .await?;
                let job = SnapshotJob::new(log, a.segment, a.entry);
                lock(&appended)?.push((job, Instant::now()));
            }
            *lock(&last)? = Some(Instant::now());
            anyhow::Ok(())
        };
        let watch = async {
            let mut lags = Vec::with_capacity(burst as usize);
            let started = Instant::now();
            while lags.len() < burst as usize {
                if started.elapsed() > SNAPSHOT_TIMEOUT * 5 {
                    bail!(
                        "the burst did not complete within {} s",
                        (SNAPSHOT_TIMEOUT * 5).as_secs()
                    );
                }
                let next = lock(&appended)?.get(lags.len()).cloned();
                match next {
                    Some((job, at))
                        if snapshot_root(&dynamo, entry_table, &job).await?.is_some() =>
                    {
                        lags.push(at.elapsed().as_secs_f64());
                        continue;
                    }
                    _ => tokio::time::sleep(COMPLETION_POLL).await,
                }
            }
            anyhow::Ok(lags)
        };
        let ((), lags) = tokio::try_join!(append, watch)?;
        let all_done = lock(&last)?.map_or(0.0, |l| l.elapsed().as_secs_f64());
        say(&format!(
            "lag of each snapshot, append -> complete (s): {}",
            lags.iter()
                .map(|l| format!("{l:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
        say(&format!(
            "burst complete {all_done:.1} s after its last append"
        ));
        Ok((lags, all_done))
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> anyhow::Result<std::sync::MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| anyhow::anyhow!("a burst task panicked"))
}

async fn wait_complete(
    dynamo: &aws_sdk_dynamodb::Client,
    entry_table: &str,
    job: &SnapshotJob,
    started: Instant,
) -> anyhow::Result<()> {
    while started.elapsed() < SNAPSHOT_TIMEOUT {
        if snapshot_root(dynamo, entry_table, job).await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(COMPLETION_POLL).await;
    }
    bail!(
        "snapshot {job:?} did not complete within {} s",
        SNAPSHOT_TIMEOUT.as_secs()
    )
}

/// Sets up a 1M-cell import and its Snapshot entry on a fresh emulator, then runs the job in a
/// worker child. Returns the CSV's size and the child's report.
async fn worker_memory() -> anyhow::Result<(u64, WorkerReport)> {
    say("starting a second emulator for the worker's memory measurement");
    let emu = Emulator::start()?;
    let sdk = emu.sdk_config().await;
    let prefix = unique_prefix("bench-worker");
    let stack = create_local_stack(&sdk, &prefix).await?;
    let log_store = event_log(&emu, &stack).await?;
    let log: LogId = log_store.create().await?.log;

    say(&format!(
        "uploading a 1M-cell CSV ({ROWS_1M} rows x {SAMPLE_COLS} columns) and appending its import"
    ));
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, ROWS_1M)?;
    let csv_bytes = csv.len() as u64;
    let key = format!("payloads/{log}/uploads/bench-1m");
    log_store
        .payloads()
        .put_discardable(&key, Bytes::from(csv))
        .await?;
    let import = Event::from_parts("import", serde_json::json!({"format": "csv"}))
        .map_err(|e| anyhow::anyhow!("import event: {e}"))?;
    let (code, version, body) = import.encode();
    log_store
        .append(
            log,
            NewEntry::new(EntryType(code), version, body).with_payload(&key),
            AppendOptions::default(),
        )
        .await?;
    let a = log_store
        .append(log, snapshot_entry(), AppendOptions::default())
        .await?;
    let job = SnapshotJob::new(log, a.segment, a.entry);

    say("running the snapshot worker on the job (child process)");
    // Lambda's budget: the function timeout less the hand-off reserve, as `sheetlog dev` uses.
    let budget = LocalPipelineConfig::default().worker_time_budget;
    let out = Command::new(std::env::current_exe()?)
        .arg("worker-child")
        .arg("--prefix")
        .arg(&prefix)
        .arg("--job")
        .arg(job.to_json())
        .arg("--budget-secs")
        .arg(budget.as_secs_f64().to_string())
        .env(EMULATOR_URL_VAR, emu.endpoint())
        .output()
        .context("running the worker child")?;
    if !out.status.success() {
        bail!(
            "worker child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let report: WorkerReport = serde_json::from_slice(&out.stdout)?;
    // The child's own word is not enough: the completion must be on the entry.
    let root = snapshot_root(&emu.dynamodb().await, &stack.resources.entry_table, &job).await?;
    if root.as_deref() != Some(report.root.as_str()) {
        bail!(
            "the worker reported root {} but the entry has {root:?}",
            report.root
        );
    }
    let blobs = S3Bucket::new(emu.s3().await, &stack.resources.bucket);
    let manifest = blobs
        .get_object(&report.root)
        .await?
        .with_context(|| format!("manifest {} is missing", report.root))?;
    let manifest = Manifest::from_bytes(&report.root, &manifest)?;
    let want = ROWS_1M * u64::from(SAMPLE_COLS);
    if manifest.cells != want {
        bail!("the snapshot holds {} cells, not {want}", manifest.cells);
    }
    Ok((csv_bytes, report))
}

/// Runs in the child: one snapshot job, invocation after invocation until it is final.
pub fn worker_child(args: WorkerChildArgs) -> anyhow::Result<()> {
    let job = SnapshotJob::from_json(&args.job).context("--job")?;
    let budget = Duration::try_from_secs_f64(args.budget_secs).context("--budget-secs")?;
    // Lambda's Rust runtime is multi-threaded tokio, as here.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(async {
        // Connects to the parent's emulator (SHEETLOG_EMULATOR_URL) rather than starting one.
        let emu = Emulator::start()?;
        let sdk = emu.sdk_config().await;
        let resources = sheetlog_core::config::Resources::with_prefix(&args.prefix);
        let worker = Worker::from_sdk(
            &sdk,
            &resources,
            LogConfig::default(),
            WorkerConfig::default(),
        )?;
        let baseline_rss_mb = current_rss_mb()?;
        let started = Instant::now();
        let mut invocations = 0u32;
        let root = loop {
            invocations += 1;
            match worker.run(&job, Instant::now() + budget).await? {
                Outcome::Completed { root } => break root,
                Outcome::HandedOff { .. } => {}
                other => bail!("the job ended with {other:?}, not a completed snapshot"),
            }
            if invocations >= 100 {
                bail!("the job did not complete in {invocations} invocations");
            }
        };
        anyhow::Ok(WorkerReport {
            seconds: started.elapsed().as_secs_f64(),
            invocations,
            baseline_rss_mb,
            peak_rss_mb: peak_rss_mb()?,
            root,
        })
    })?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// This process's resident set size now (VmRSS), in MiB.
fn current_rss_mb() -> anyhow::Result<f64> {
    crate::snapshot::status_kb("VmRSS:").map(|kb| kb / 1024.0)
}

fn print_table(f: &Figures) {
    println!(
        "side-effect pipeline on the local stack (the stream driver polls every {} ms)",
        f.poll_interval_ms
    );
    println!(
        "  snapshot job latency, append -> root on the entry, {} snapshots each after {} set entries of {} cells:",
        f.snapshots, f.edits_per_snapshot, f.cells_per_edit
    );
    println!(
        "    p50 {:.0} ms, p90 {:.0} ms, max {:.0} ms (min {:.0} ms)",
        f.snapshot_latency_ms_p50,
        f.snapshot_latency_ms_p90,
        f.snapshot_latency_ms_max,
        f.snapshot_latency_ms_min
    );
    println!(
        "  burst of {} snapshots appended back to back: chain lag (append -> complete) p50 {:.0} ms, p99 {:.0} ms; all complete {:.1} s after the last append",
        f.burst_snapshots,
        f.snapshot_chain_lag_ms_p50,
        f.snapshot_chain_lag_ms_p99,
        f.snapshot_burst_all_complete_s
    );
    println!(
        "  worker on a {}-cell import ({} bytes of CSV): built in {:.1} s over {} invocation(s), peak RSS {:.1} MB (baseline {:.1} MB)",
        f.worker_cells_1m,
        f.worker_csv_bytes_1m,
        f.worker_build_seconds_1m,
        f.worker_invocations_1m,
        f.worker_peak_rss_mb_1m,
        f.worker_baseline_rss_mb
    );
}
