//! `sheetlog-bench`: measured figures for the README and docs, run through `./scripts/bench`.
//!
//! Layout:
//! - `main.rs` — the command line (one subcommand per benchmark).
//! - `log`: request units and item bytes per event-log operation, on the emulator
//!   (`sheetlog_tests::bench_log`).
//! - `snapshot.rs` — `snapshot`: snapshot build rate and peak memory, incremental write
//!   amplification, CSV import rate. Each measured build runs in a child process (this binary
//!   re-executed with a hidden subcommand) so its peak resident memory is its own.
//! - `pipeline.rs` — `pipeline`: snapshot job latency through the running local pipeline, and the
//!   snapshot worker's peak memory on a 1M-cell import (in a child process, the same way).
//!
//! Benchmarks print numbers; they never assert on timings.

mod pipeline;
mod snapshot;

use bytes::Bytes;
use sheetlog_core::domain::EntryType;
use sheetlog_core::sheet::Event;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "sheetlog-bench", about = "Measure sheetlog")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Event log: DynamoDB request units and item bytes per operation, measured on the emulator.
    Log {
        /// Print one JSON object of the figures instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Snapshot engine: build rate and peak memory (1M and 10M cells), incremental write
    /// amplification, CSV import rate for a 100 MB file.
    Snapshot {
        /// Print one JSON object of the figures instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Side-effect pipeline on the local stack: snapshot job latency (append -> snapshot
    /// complete) and the snapshot worker's peak memory for a 1M-cell sheet.
    Pipeline(pipeline::PipelineArgs),
    /// Internal: one measured build in this process (run by `snapshot` as a child).
    #[command(hide = true)]
    BuildChild(snapshot::ChildArgs),
    /// Internal: one snapshot job run by the worker in this process (run by `pipeline`).
    #[command(hide = true)]
    WorkerChild(pipeline::WorkerChildArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Log { json } => log_bench(json),
        Command::Snapshot { json } => snapshot::run(json),
        Command::Pipeline(args) => pipeline::run(args),
        Command::BuildChild(args) => snapshot::child(args),
        Command::WorkerChild(args) => pipeline::worker_child(args),
    }
}

/// The log benchmark, with a one-cell `set` event (`B3 = 42.5`) in its real stored encoding.
fn log_bench(json: bool) -> anyhow::Result<()> {
    let event = Event::from_parts(
        "set",
        serde_json::json!({"cells": [{"ref": "B3", "value": 42.5}]}),
    )
    .map_err(|e| anyhow::anyhow!("sample event: {e}"))?;
    let (code, _version, body) = event.encode();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(sheetlog_tests::bench_log::run(
        EntryType(code),
        Bytes::from(body),
    ))?;
    sheetlog_tests::bench_log::print(&result, json)
}
