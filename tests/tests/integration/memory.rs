//! Memory per request (`docs/operations.md`, "Memory per request"): about 1,000 entries near the
//! entry limit on the emulator, then each read (a load, an entries page, an incremental pull's
//! read, a read as of a past sequence, the snapshot worker's build over 1,000 such entries) in a
//! fresh child process (`src/bin/read-peak.rs`), whose peak RSS must stay within the documented
//! bound for the configured settings over its baseline.
//!
//! The settings are scaled down to keep the data CI-friendly (moto holds it all in memory):
//! entries of up to 128 KiB, a read budget of 8 MiB, 4 KiB inline bodies. A read that held every
//! entry it could reach would hold 30 to 125 MiB here; the bound is about 13 MiB.

use std::process::Command;

use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::{LogId, NewEntry};
use sheetlog_core::log::AppendOptions;
use sheetlog_tests::TestStack;
use sheetlog_tests::emulator::EMULATOR_URL_VAR;
use sheetlog_tests::fixtures::{set_entry, snapshot_entry};
use sheetlog_tests::stack::AwsLog;

const MAX_ENTRY: usize = 128 * 1024;
const BUDGET: usize = 8 * 1024 * 1024;
const INLINE_MAX: usize = 4 * 1024;
/// The most entries one DynamoDB page of a read holds (`LogConfig::page_size`).
const PAGE: usize = 1000;

/// The documented bound on the bodies a read holds: the budget, the offloaded bodies in flight
/// when it stops, and the inline bodies of one page.
fn bound_bytes() -> usize {
    BUDGET + sheetlog_core::log::RESOLVE_CONCURRENCY * MAX_ENTRY + PAGE * INLINE_MAX
}

/// The documented bound on what the snapshot worker holds: one page of entries as a read holds
/// it, the same page decoded, and the builder's chunks (the base chunk being rewritten and the
/// chunk being assembled, each at most four times the 256 KiB target, raw and compressed).
fn worker_bound_bytes() -> usize {
    2 * bound_bytes() + 4 * 4 * 256 * 1024
}

/// A `set` of four cells of 32,000 characters (the text limit is 32,767): about 128 KB, near
/// the 128 KiB entry limit.
fn big_set(i: u64) -> NewEntry {
    big_set_in(i, i + 1)
}

/// As [`big_set`], in row `row`.
fn big_set_in(i: u64, row: u64) -> NewEntry {
    let cells: Vec<_> = ["A", "B", "C", "D"]
        .iter()
        .map(|column| {
            let value = format!("{i:08}").repeat(4000);
            (format!("{column}{row}"), serde_json::json!(value))
        })
        .collect();
    let entry = set_entry(&cells);
    assert!(entry.body.len() <= MAX_ENTRY && entry.body.len() > MAX_ENTRY - 4096);
    entry
}

async fn append_sets(log: &AwsLog, id: LogId, from: u64, n: u64) -> anyhow::Result<()> {
    for i in from..from + n {
        log.append(id, big_set(i), AppendOptions::default()).await?;
    }
    Ok(())
}

/// Appends a Snapshot entry and marks it complete (its root is never read here).
async fn completed_snapshot(log: &AwsLog, id: LogId) -> anyhow::Result<u64> {
    let a = log
        .append(id, snapshot_entry(), AppendOptions::default())
        .await?;
    log.complete_snapshot(id, a.segment, a.entry, &format!("root-{}", a.seq))
        .await?;
    Ok(a.seq)
}

fn read_in_child(
    stack: &TestStack,
    id: LogId,
    op: &str,
    arg: Option<u64>,
) -> anyhow::Result<serde_json::Value> {
    read_in_child_with(stack, id, op, arg.as_slice())
}

fn read_in_child_with(
    stack: &TestStack,
    id: LogId,
    op: &str,
    args: &[u64],
) -> anyhow::Result<serde_json::Value> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_read-peak"));
    cmd.arg(stack.resources.entry_table.trim_end_matches("-entry"))
        .arg(id.to_string())
        .arg(op)
        .env(EMULATOR_URL_VAR, stack.emulator.endpoint())
        .env("SHEETLOG_MAX_ENTRY_BYTES", MAX_ENTRY.to_string())
        .env("SHEETLOG_READ_BUDGET_BYTES", BUDGET.to_string())
        .env("SHEETLOG_INLINE_BODY_MAX_BYTES", INLINE_MAX.to_string());
    for a in args {
        cmd.arg(a.to_string());
    }
    let out = cmd.output()?;
    anyhow::ensure!(
        out.status.success(),
        "read-peak {op} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Every read of a log of large entries, each in a process of its own, stays within the bound.
#[tokio::test]
async fn reads_of_large_entries_stay_within_the_memory_bound() -> anyhow::Result<()> {
    let _slot = sheetlog_tests::heavy_test_slot().await;
    let stack = TestStack::new("memory").await?;
    let log = stack.log_with(LogConfig {
        max_body_bytes: MAX_ENTRY,
        read_budget_bytes: BUDGET,
        inline_body_max_bytes: INLINE_MAX,
        ..LogConfig::default()
    })?;
    let id = log.create().await?.log;
    // 1 .. 250: entries; a completed snapshot; 350 entries; the segment's Last Snapshot; 400
    // entries. A load reads from the Last Snapshot (400 entries of 128 KB, 50 MB); a read as of
    // a sequence just after the first snapshot must search the segment for it.
    append_sets(&log, id, 0, 250).await?;
    let first = completed_snapshot(&log, id).await?;
    append_sets(&log, id, 250, 350).await?;
    let last = completed_snapshot(&log, id).await?;
    append_sets(&log, id, 600, 400).await?;
    let bound_kib = (bound_bytes() / 1024) as u64;
    let reads: [(&str, Option<u64>, &str); 6] = [
        ("load", None, "ok"),
        ("entries", Some(1), "ok"),
        ("pull", Some(1), "ok"),
        // 30 entries after the first snapshot: a search of the segment, then 3.8 MB of entries.
        ("history", Some(first + 31), "ok"),
        // From the log's start: 250 entries, past the budget.
        ("history", Some(first - 1), "history-too-large"),
        // From the Last Snapshot: 399 entries, past the budget.
        ("history", Some(last + 400), "history-too-large"),
    ];
    println!(
        "bound: {bound_kib} KiB over the baseline (budget {BUDGET}, max entry {MAX_ENTRY}, inline {INLINE_MAX})"
    );
    let mut failures = Vec::new();
    for (op, arg, outcome) in reads {
        let r = read_in_child(&stack, id, op, arg)?;
        let baseline = r["baselineKib"].as_u64().unwrap_or(u64::MAX);
        let peak = r["peakKib"].as_u64().unwrap_or(u64::MAX);
        let grew = peak.saturating_sub(baseline);
        println!(
            "{op} {arg:?}: peak RSS {peak} KiB, baseline {baseline} KiB, grew {grew} KiB; {} entries, {} body bytes, {}",
            r["entries"], r["bodyBytes"], r["outcome"]
        );
        if r["outcome"] != outcome {
            failures.push(format!("{op} {arg:?}: expected {outcome}, got {r}"));
        }
        if grew > bound_kib {
            failures.push(format!(
                "{op} {arg:?}: grew {grew} KiB, over the {bound_kib} KiB bound"
            ));
        }
        if outcome == "ok" {
            let held = r["bodyBytes"].as_u64().unwrap_or(u64::MAX);
            assert!(
                held <= (BUDGET + sheetlog_core::log::RESOLVE_CONCURRENCY * MAX_ENTRY) as u64,
                "{op} {arg:?} held {held} bytes of bodies"
            );
        }
    }

    // The snapshot worker: a snapshot over 1,000 such entries since the log's first (the empty
    // sheet), all rewriting one row, so the sheet itself stays small and what the worker holds
    // is the entries. Built by the worker itself in a child, its pending item in memory.
    let sheet = log.create().await?.log;
    for i in 0..1000 {
        log.append(sheet, big_set_in(i, 1), AppendOptions::default())
            .await?;
    }
    let target = log
        .append(sheet, snapshot_entry(), AppendOptions::default())
        .await?;
    let r = read_in_child_with(&stack, sheet, "snapshot", &[target.segment, target.entry])?;
    let baseline = r["baselineKib"].as_u64().unwrap_or(u64::MAX);
    let peak = r["peakKib"].as_u64().unwrap_or(u64::MAX);
    let grew = peak.saturating_sub(baseline);
    let worker_kib = (worker_bound_bytes() / 1024) as u64;
    println!(
        "snapshot worker over 1000 entries: peak RSS {peak} KiB, baseline {baseline} KiB, grew {grew} KiB (bound {worker_kib} KiB); {}",
        r["outcome"]
    );
    if r["outcome"] != "ok" {
        failures.push(format!("snapshot: {r}"));
    }
    if grew > worker_kib {
        failures.push(format!(
            "snapshot: grew {grew} KiB, over the {worker_kib} KiB bound"
        ));
    }
    // The snapshot is right: the row holds the last entry's values.
    let root = r["root"].as_str().unwrap_or_default();
    let bytes = stack
        .s3
        .get_object()
        .bucket(&stack.resources.bucket)
        .key(root)
        .send()
        .await?
        .body
        .collect()
        .await?
        .into_bytes();
    let manifest = sheetlog_core::snapshot::Manifest::from_bytes(root, &bytes)?;
    assert_eq!(manifest.seq, target.seq);
    let bucket = sheetlog_core::aws::S3Bucket::new(stack.s3.clone(), &stack.resources.bucket);
    let (values, _) = sheetlog_core::snapshot::read_range(
        &bucket,
        &bucket,
        *sheet.as_uuid(),
        Some(&manifest),
        &[],
        "A1:D1".parse()?,
    )
    .await?;
    let last = sheetlog_core::sheet::Value::Text(format!("{:08}", 999).repeat(4000));
    assert_eq!(
        values,
        vec![vec![last; 4]],
        "the snapshot holds the last entry's row"
    );
    assert!(failures.is_empty(), "{failures:#?}");
    Ok(())
}
