//! `sheetlog-bench`: measured figures for `docs/measured.md` and the other docs, run through `./scripts/bench`.
//!
//! Layout:
//! - `main.rs` — the command line (one subcommand per benchmark).
//! - `log`: request units and item bytes per event-log operation, on the emulator
//!   (`sheetlog_tests::bench_log`).
//! - `versions.rs` — `log --versions-only`: restoring and comparing versions of a 1M-cell sheet
//! - `snapshot.rs` — `snapshot`: snapshot build rate and peak memory, incremental write
//!   amplification, CSV import rate. Each measured build runs in a child process (this binary
//!   re-executed with a hidden subcommand) so its peak resident memory is its own.
//! - `styles.rs` — for `snapshot`: the snapshot bytes of a sheet whose cells share ten styles
//!   against the same sheet plain (`--styles-only` runs it alone).
//! - `export.rs` — `export`: a 10M-cell sheet written as XLSX (rate, peak memory, file size),
//!   in a child process for its peak memory.
//! - `pipeline.rs` — `pipeline`: snapshot job latency through the running local pipeline, and the
//!   snapshot worker's peak memory on a 1M-cell import (in a child process, the same way).
//!
//! - `formulas.rs` — `formulas`: a 1M-cell sheet with 100,000 formulas in memory: snapshot
//!   build, an evaluated range read, one edit then its chain re-read, the whole sheet evaluated
//!   (in a child process, for its peak memory).
//! - `import.rs` — `import`: the API's memory while it validates a 256 MB CSV upload, and the
//!   time and memory to refuse an XLSX zip bomb (each in a child process).
//! - `lambda.rs` — `lambda`: each function's release binary under `cargo lambda watch`: zip
//!   size, init-to-ready time, the API's peak memory after its largest allowed requests.
//! - `scale.rs` — `scale`: a log of many segments, concurrent writers and pushes, a large
//!   import end to end, snapshot bytes against edits; sizes are flags.
//! - `hot_client.rs` — `hot`'s simulated Replicache client (pushes, pulls, backoff)
//! - `hot_model.rs` — `hot --model`: one sheet of 100 to 10,000 editors predicted for AWS, a
//!   seeded discrete-event simulation of the measured local costs against AWS's documented
//!   limits (no network, no emulator).
//! - `hot.rs` — `hot`: many simulated Replicache clients pushing to one sheet through the local
//!   stack's API, in each write mode (`syncWrites`); every mutation checked in the read-back log.
//! - `sheetlog_tests::wire` — a proxy in front of the emulator that counts DynamoDB request units
//!   on the wire (shared with the integration tests).
//! - `api_costs.rs` — part of `log`: a push of one mutation and an unchanged pull through the
//!   HTTP API, units counted on the wire.
//! - `chart.rs` — log-log SVG charts (plotters) for the docs, also used by `examples/peers.rs`.
//! - `chaos`: the history checker (`sheetlog_tests::chaos`) over the fault adapter, every fault
//!   profile, 100,000 operations each by default.
//!
//! Benchmarks print numbers; they never assert on timings.

mod api_costs;
mod chart;
mod export;
mod formulas;
mod hot;
mod hot_client;
mod hot_model;
mod import;
mod lambda;
mod pipeline;
mod scale;
mod snapshot;
mod styles;
mod versions;

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
        /// Only the request units counted on the wire through the HTTP API (the `api_*`,
        /// `idle_pull_*`, `list_sheets_rru`, `access_check_rru` and
        /// `delete_clients_rru_other_logs` keys): deterministic, so a
        /// debug build gives the same figures in a fraction of the full run's time.
        #[arg(long)]
        api_only: bool,
        /// Only the push limits' worst case (the `max_push_*` keys): a maximal push applied by
        /// the sync writer on the local stack, and another editor's wait behind it.
        #[arg(long, conflicts_with = "api_only")]
        max_push_only: bool,
        /// Only restoring and comparing versions of a million-cell sheet, in memory (the
        /// `restore_1m_*`, `diff_1000_*` and `versions_*` keys).
        #[arg(long, conflicts_with_all = ["api_only", "max_push_only"])]
        versions_only: bool,
    },
    /// Snapshot engine: build rate and peak memory (1M and 10M cells), incremental write
    /// amplification, CSV import rate for a 100 MB file.
    Snapshot {
        /// Print one JSON object of the figures instead of a table.
        #[arg(long)]
        json: bool,
        /// Also build a sheet of this many cells from scratch and report it as
        /// `build_*_<N>m` (100000000 gives `build_cells_per_s_100m`; minutes, not in CI).
        #[arg(long)]
        cells: Option<u64>,
        /// Instead of the full run: for each chunk target (KiB), the 1M-cell figures in memory
        /// (chunks, bytes, manifest bytes, bytes written by the clustered edits and the row
        /// insert, the 1,000-row read), e.g. `--chunk-targets 16,32,64,128,256`.
        #[arg(long, value_delimiter = ',')]
        chunk_targets: Option<Vec<u32>>,
        /// Instead of the full run: the 1M-cell sheet plain and with every cell in one of ten
        /// styles, in memory (`styled_snapshot_bytes_ratio`; the full run reports it too).
        #[arg(long)]
        styles_only: bool,
    },
    /// XLSX export: a sheet of 10M cells (the snapshot benchmark's sample) written as a
    /// workbook from its snapshot, as the API writes one: cells/s, peak memory, file size.
    Export(export::ExportArgs),
    /// Internal: one measured export in this process (run by `export`).
    #[command(hide = true)]
    ExportChild(export::ExportChildArgs),
    /// Side-effect pipeline on the local stack: snapshot job latency (append -> snapshot
    /// complete) and the snapshot worker's peak memory for a 1M-cell sheet.
    Pipeline(pipeline::PipelineArgs),
    /// History checker: concurrent writers and readers over the fault-injecting adapter; counts
    /// anomalies, lost and duplicated acknowledged appends, skipped reads.
    Chaos(ChaosArgs),
    /// Upload validation in the API function: peak memory committing a 256 MB CSV, and how fast
    /// an XLSX zip bomb is refused.
    Import(import::ImportArgs),
    /// Each function's release binary under a Lambda runtime (cargo lambda watch): zip size,
    /// init-to-ready time, and the API's peak memory after its largest allowed requests.
    Lambda(lambda::LambdaArgs),
    /// Scale: a log of many segments (load, cold catch-up, history read), 8 and 32 concurrent
    /// writers (appends and 100-mutation pushes), a large CSV imported end to end, snapshot
    /// bytes written against edits.
    Scale(scale::ScaleArgs),
    /// Many editors on one sheet: C Replicache clients pushing one mutation each every 1/R s
    /// through the local stack's API, queued and direct; refusals, duplicates and reorders
    /// (checked in the read-back log), write units and appends per mutation, push -> visible.
    Hot(hot::HotArgs),
    /// Formulas: a 1M-cell sheet with 100,000 formulas in memory; snapshot build rate, a
    /// 1,000-row range read evaluated, one input edited then its chain re-read, the whole sheet
    /// evaluated (time and peak memory).
    Formulas(formulas::FormulasArgs),
    /// Internal: the whole formula sheet evaluated in this process (run by `formulas`).
    #[command(hide = true)]
    FormulaEvalChild(formulas::EvalChildArgs),
    /// Internal: one measured import case in this process (run by `import`).
    #[command(hide = true)]
    ImportChild(import::ImportChildArgs),
    /// Internal: one measured build in this process (run by `snapshot` as a child).
    #[command(hide = true)]
    BuildChild(snapshot::ChildArgs),
    /// Internal: writes the CSV the snapshot benchmark builds from (to profile one build alone).
    #[command(hide = true)]
    SampleCsv(snapshot::SampleCsvArgs),
    /// Internal: one snapshot job run by the worker in this process (run by `pipeline`).
    #[command(hide = true)]
    WorkerChild(pipeline::WorkerChildArgs),
}

fn main() -> anyhow::Result<()> {
    // The stack's own logs (the sync writer's batch timings, say) on stderr, only when asked
    // for with RUST_LOG: the figures go to stdout either way.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    match Cli::parse().command {
        Command::Log {
            json,
            api_only,
            max_push_only,
            versions_only,
        } => log_bench(json, api_only, max_push_only, versions_only),
        Command::Snapshot {
            json,
            cells,
            chunk_targets,
            styles_only,
        } => snapshot::run(json, cells, chunk_targets, styles_only),
        Command::Export(args) => export::run(args),
        Command::ExportChild(args) => export::child(args),
        Command::Pipeline(args) => pipeline::run(args),
        Command::Chaos(args) => chaos(args),
        Command::Import(args) => import::run(args),
        Command::Lambda(args) => lambda::run(args),
        Command::Scale(args) => scale::run(args),
        Command::Hot(args) => hot::run(args),
        Command::Formulas(args) => formulas::run(args),
        Command::FormulaEvalChild(args) => formulas::eval_child(args),
        Command::ImportChild(args) => import::child(args),
        Command::BuildChild(args) => snapshot::child(args),
        Command::SampleCsv(args) => snapshot::sample_csv(args),
        Command::WorkerChild(args) => pipeline::worker_child(args),
    }
}

#[derive(Debug, clap::Args)]
struct ChaosArgs {
    /// Operations (appends and reads) per profile.
    #[arg(long, default_value_t = 100_000)]
    ops: u64,
    /// One profile (none, stale, lossy, throttle, conflict, hostile); default: every one.
    #[arg(long)]
    profile: Option<String>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

fn chaos(args: ChaosArgs) -> anyhow::Result<()> {
    use sheetlog_core::faults::FaultProfile;
    use sheetlog_tests::chaos::{ChaosConfig, run};
    let names: Vec<String> = match &args.profile {
        Some(p) => vec![p.clone()],
        None => FaultProfile::NAMES
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut reports = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let profile = FaultProfile::named(name)
            .ok_or_else(|| anyhow::anyhow!("unknown fault profile {name:?}"))?;
        eprintln!("chaos: profile {name}, {} operations ...", args.ops);
        let r = rt.block_on(run(ChaosConfig::new(
            profile,
            args.seed + i as u64,
            args.ops,
        )))?;
        eprintln!(
            "chaos: {name}: {} acknowledged, {} faults, {} anomalies in {:.1} s",
            r.acknowledged, r.faults_injected, r.anomalies, r.elapsed_s
        );
        reports.push(r);
    }
    let sum =
        |f: fn(&sheetlog_tests::chaos::ChaosReport) -> u64| reports.iter().map(f).sum::<u64>();
    let mut by_kind = std::collections::BTreeMap::<String, u64>::new();
    for r in &reports {
        for (k, n) in &r.faults_by_kind {
            *by_kind.entry(k.clone()).or_default() += n;
        }
    }
    let out = serde_json::json!({
        "ops": sum(|r| r.ops),
        "appends": sum(|r| r.appends),
        "acknowledged": sum(|r| r.acknowledged),
        "reads": sum(|r| r.reads),
        "faults_injected": sum(|r| r.faults_injected),
        "faults_by_kind": by_kind,
        "anomalies": sum(|r| r.anomalies),
        "acknowledged_lost": sum(|r| r.acknowledged_lost),
        "duplicates": sum(|r| r.duplicates),
        "skipped_reads": sum(|r| r.skipped_reads),
        "changed_reads": sum(|r| r.changed_reads),
        "stale_expected_landed": sum(|r| r.stale_expected_landed),
        "cells_mismatched": sum(|r| r.cells_mismatched),
        "snapshots_completed": sum(|r| r.snapshots_completed),
        "profiles": reports,
    });
    if args.json {
        println!("{out}");
    } else {
        println!(
            "{:<10} {:>8} {:>12} {:>8} {:>9} {:>6} {:>5} {:>8} {:>8}",
            "profile",
            "ops",
            "acknowledged",
            "reads",
            "faults",
            "anom.",
            "lost",
            "dupl.",
            "skipped"
        );
        for r in &reports {
            println!(
                "{:<10} {:>8} {:>12} {:>8} {:>9} {:>6} {:>5} {:>8} {:>8}",
                r.profile,
                r.ops,
                r.acknowledged,
                r.reads,
                r.faults_injected,
                r.anomalies,
                r.acknowledged_lost,
                r.duplicates,
                r.skipped_reads
            );
        }
    }
    Ok(())
}

/// The log benchmark, with a one-cell `set` event (`B3 = 42.5`) in its real stored encoding.
fn log_bench(
    json: bool,
    api_only: bool,
    max_push_only: bool,
    versions_only: bool,
) -> anyhow::Result<()> {
    if versions_only {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let v = rt.block_on(versions::run())?;
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if max_push_only {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let max_push = rt.block_on(sheetlog_tests::bench_max_push::run())?;
        println!("{}", serde_json::to_string_pretty(&max_push)?);
        return Ok(());
    }
    if api_only {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let api = rt.block_on(api_costs::run())?;
        println!("{}", serde_json::to_string_pretty(&api)?);
        return Ok(());
    }
    let event = Event::from_parts(
        "set",
        serde_json::json!({"cells": [{"ref": "B3", "value": 42.5}]}),
    )
    .map_err(|e| anyhow::anyhow!("sample event: {e}"))?;
    let (code, _version, body) = event.encode();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut result = rt.block_on(sheetlog_tests::bench_log::run(
        EntryType(code),
        Bytes::from(body),
    ))?;
    eprintln!("a push and an unchanged pull through the HTTP API…");
    result.api = rt.block_on(api_costs::run())?;
    eprintln!("restoring and comparing versions of a million-cell sheet…");
    let v = rt.block_on(versions::run())?;
    if json {
        // One object: the log's figures and the versions' side by side.
        let mut all = serde_json::to_value(&result)?;
        if let (Some(all), serde_json::Value::Object(more)) =
            (all.as_object_mut(), serde_json::to_value(&v)?)
        {
            all.extend(more);
        }
        println!("{all}");
        return Ok(());
    }
    sheetlog_tests::bench_log::print(&result, json)?;
    println!(
        "versions of a {}-cell sheet, in memory: restore {} ms ({} chunks written), diff of 1,000 cells {} ms",
        v.versions_sheet_cells,
        v.restore_1m_cells_ms,
        v.restore_1m_chunks_written,
        v.diff_1000_cells_ms
    );
    Ok(())
}
