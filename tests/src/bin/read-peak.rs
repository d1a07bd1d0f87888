//! One read of a log on the emulator, in a process of its own, reporting the process's peak
//! resident memory: the child of the `memory` integration test (`docs/operations.md`, "Memory
//! per request").
//!
//! `read-peak <prefix> <log-id> <op> [<arg>]`, with the emulator in `SHEETLOG_EMULATOR_URL` and the
//! log's settings in the usual `SHEETLOG_*` variables (`LogConfig::from_env`). `op` is one of
//! `load`, `entries <from>` (one page as `GET /logs/{logId}/entries` reads it), `pull <from>` (an
//! incremental Replicache pull's read), `history <at>` (the entries of a read as of `at`,
//! decoded as the read path takes them) and `snapshot <segment> <entry>` (the snapshot worker
//! builds the snapshot of that Snapshot entry, its pending item in memory). Prints one JSON line: the peak RSS before the read (the
//! baseline: the runtime and SDK clients, after one request) and after it, in KiB, and what the
//! read held.

use anyhow::{Context, bail};
use sheetlog_core::config::{LogConfig, Resources};
use sheetlog_core::domain::LogId;
use sheetlog_core::snapshot_input::{InputError, as_of, into_log_entries};
use sheetlog_tests::Emulator;
use sheetlog_tests::stack::AwsLog;

/// `VmHWM` of this process (peak resident set), in KiB.
fn peak_rss_kib() -> anyhow::Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .context("no VmHWM in /proc/self/status")?;
    line.split_whitespace()
        .nth(1)
        .context("VmHWM has no value")?
        .parse()
        .context("VmHWM is not a number")
}

fn arg_u64(args: &[String], i: usize, what: &str) -> anyhow::Result<u64> {
    args.get(i)
        .with_context(|| format!("{what} is required"))?
        .parse()
        .with_context(|| format!("{what} is not a number"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(prefix), Some(log_id), Some(op)) = (args.get(1), args.get(2), args.get(3)) else {
        bail!(
            "usage: read-peak <prefix> <log-id> load|entries <from>|pull <from>|history <at>|snapshot <segment> <entry>"
        );
    };
    let id: LogId = log_id.parse().context("log id")?;
    let cfg = LogConfig::from_env()?;
    let emulator = Emulator::start()?;
    let resources = Resources::with_prefix(prefix);
    let store = sheetlog_core::aws::DynamoLogStore::new(
        emulator.dynamodb().await,
        &resources.entry_table,
        &resources.segment_table,
    );
    let bucket = sheetlog_core::aws::S3Bucket::new(emulator.s3().await, &resources.bucket);
    let log: AwsLog = sheetlog_core::log::EventLog::new(store, bucket.clone(), cfg)?;
    if op == "snapshot" {
        return snapshot(&args, op, id, log, bucket).await;
    }
    // One request first, so the baseline includes the runtime, the clients and a connection.
    log.next_seq(id).await?;
    let baseline = peak_rss_kib()?;
    let (entries, body_bytes, complete, outcome) = read(&args, op, id, &log).await?;
    let peak = peak_rss_kib()?;
    println!(
        "{}",
        serde_json::json!({
            "op": op,
            "baselineKib": baseline,
            "peakKib": peak,
            "entries": entries,
            "bodyBytes": body_bytes,
            "complete": complete,
            "outcome": outcome,
        })
    );
    Ok(())
}

/// `snapshot <segment> <entry>`: builds that Snapshot entry's snapshot in a worker and prints
/// the peak memory before and after, and the root.
async fn snapshot(
    args: &[String],
    op: &str,
    id: LogId,
    log: AwsLog,
    bucket: sheetlog_core::aws::S3Bucket,
) -> anyhow::Result<()> {
    let job = sheetlog_core::domain::SnapshotJob::new(
        id,
        arg_u64(args, 4, "segment")?,
        arg_u64(args, 5, "entry")?,
    );
    let bucket = std::sync::Arc::new(bucket);
    let worker = sheetlog_snapshot_worker::Worker::new(
        log,
        std::sync::Arc::new(sheetlog_core::memory::MemPendingStore::new()),
        bucket.clone(),
        bucket,
        sheetlog_snapshot_worker::WorkerConfig::default(),
    );
    worker.log().next_seq(id).await?;
    let baseline = peak_rss_kib()?;
    let outcome = worker
        .run(
            &job,
            std::time::Instant::now() + std::time::Duration::from_secs(3600),
        )
        .await?;
    let peak = peak_rss_kib()?;
    let sheetlog_snapshot_worker::Outcome::Completed { root } = outcome else {
        bail!("the snapshot was not built: {outcome:?}");
    };
    println!(
        "{}",
        serde_json::json!({
            "op": op,
            "baselineKib": baseline,
            "peakKib": peak,
            "outcome": "ok",
            "root": root,
        })
    );
    Ok(())
}

/// The read `op` names: the entries it returned, their body bytes, whether it was complete, and
/// its outcome (`ok`, or `history-too-large`).
async fn read(
    args: &[String],
    op: &str,
    id: LogId,
    log: &AwsLog,
) -> anyhow::Result<(usize, usize, bool, &'static str)> {
    Ok(match op {
        "load" => {
            let l = log.load(id).await?;
            let bytes: usize = l.entries.iter().map(|e| e.body.len()).sum();
            (l.entries.len(), bytes, l.complete, "ok")
        }
        "entries" | "pull" => {
            // The API's page limit for an entries page, and the entries an incremental pull
            // reads before it falls back to a reset.
            let limit = if op == "entries" { 1000 } else { 5000 };
            let p = log.read_since(id, arg_u64(args, 4, "from")?, limit).await?;
            let bytes: usize = p.entries.iter().map(|e| e.body.len()).sum();
            (p.entries.len(), bytes, p.complete, "ok")
        }
        "history" => match as_of(log, id, arg_u64(args, 4, "at")?).await {
            Ok(a) => {
                let bytes: usize = a.entries.iter().map(|e| e.body.len()).sum();
                let decoded = into_log_entries(a.entries)?;
                (decoded.len(), bytes, true, "ok")
            }
            Err(InputError::TooLarge { .. }) => (0, 0, false, "history-too-large"),
            Err(e) => return Err(e.into()),
        },
        other => bail!("unknown read {other:?}"),
    })
}
