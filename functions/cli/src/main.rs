//! `sheetlog`: the command line. Today it runs the local stack: `sheetlog dev` creates the tables,
//! bucket and queues on the AWS endpoint named by `AWS_ENDPOINT_URL` (the emulator `scripts/dev`
//! starts), serves the same API router the Lambda function serves on loopback, and drives the
//! stream router and snapshot worker from the emulator's stream and queue (moto runs no Lambda
//! event-source mappings).
//!
//! Layout:
//! - `main.rs` — argument parsing and the `dev` runner

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use sheetlog_api::{ApiConfig, AppState};
use std::time::Duration;

use sheetlog_core::config::LogConfig;
use sheetlog_core::faults::{FaultProfile, Faults, FaultyLogStore, FaultyPayloadStore};
use sheetlog_pipeline::{LocalPipeline, LocalPipelineConfig, create_local_stack};
use tracing::info;

#[derive(Debug, Parser)]
#[command(
    name = "sheetlog",
    version,
    about = "sheetlog: an event-sourced spreadsheet backend"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the API locally against the AWS endpoint in AWS_ENDPOINT_URL (use ./scripts/dev).
    Dev(DevArgs),
}

#[derive(Debug, clap::Args)]
struct DevArgs {
    /// Port to serve the API on (loopback only).
    #[arg(long, env = "SHEETLOG_PORT", default_value_t = 8080)]
    port: u16,
    /// Prefix of the local table, bucket and queue names.
    #[arg(long, env = "SHEETLOG_LOCAL_PREFIX", default_value = "sheetlog-local")]
    prefix: String,
    /// Entries between Snapshot entries.
    #[arg(long, env = "SHEETLOG_SNAPSHOT_INTERVAL", default_value_t = 100)]
    snapshot_interval: u64,
    /// Entries after which a new segment starts (once its snapshot is complete).
    #[arg(long, env = "SHEETLOG_SEGMENT_MAX_ENTRIES", default_value_t = 10_000)]
    segment_max_entries: u64,
    /// Seconds each snapshot-worker invocation may run before it checkpoints and hands off
    /// (Lambda's is its timeout less a reserve); small values exercise hand-off locally.
    #[arg(
        long,
        env = "SHEETLOG_WORKER_TIME_BUDGET_SECS",
        default_value_t = 240.0
    )]
    worker_time_budget: f64,
    /// Serve the API over a hostile backend: `PROFILE` or `PROFILE:SEED`, one of none, stale,
    /// lossy, throttle, conflict, hostile (stale reads, lost responses, throttling, transaction
    /// conflicts, latency spikes, as AWS has them and the emulator does not).
    #[arg(long, env = "SHEETLOG_FAULTS")]
    faults: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    sheetlog_core::telemetry::init_cli("info,aws_config=warn,aws_smithy_runtime=warn");
    match Cli::parse().command {
        Command::Dev(args) => dev(args).await,
    }
}

async fn dev(args: DevArgs) -> anyhow::Result<()> {
    if std::env::var("AWS_ENDPOINT_URL")
        .map(|v| v.is_empty())
        .unwrap_or(true)
    {
        bail!(
            "AWS_ENDPOINT_URL is not set. `sheetlog dev` creates resources on that endpoint and is meant \
             for the local emulator: run ./scripts/dev, which starts one and sets it."
        );
    }
    let cfg = ApiConfig {
        snapshot_interval: args.snapshot_interval,
        segment_max_entries: args.segment_max_entries,
        ..ApiConfig::default()
    };
    cfg.validate()?;
    if !(args.worker_time_budget.is_finite() && args.worker_time_budget >= 0.0) {
        bail!("--worker-time-budget must be a non-negative number of seconds");
    }
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    info!(prefix = %args.prefix, "creating tables, bucket and queues");
    let stack = create_local_stack(&sdk, &args.prefix)
        .await
        .context("creating the local resources (is the emulator fresh?)")?;
    let faults = match &args.faults {
        Some(spec) => {
            let (profile, seed) = FaultProfile::parse(spec).map_err(anyhow::Error::msg)?;
            info!(profile = %profile.name, seed, "injecting faults into the API's stores");
            Some(Faults::new(profile, seed))
        }
        None => None,
    };
    let wrap_faults = faults.clone();
    let state = AppState::from_sdk_wrapped(
        &sdk,
        &stack.resources,
        LogConfig::from_env()?,
        cfg,
        move |store, payloads| match wrap_faults {
            Some(f) => (
                Arc::new(FaultyLogStore::new(store, f.clone())),
                Arc::new(FaultyPayloadStore::new(payloads, f)),
            ),
            None => (store, payloads),
        },
    )?;
    let app = sheetlog_api::router(Arc::new(state));
    let pipeline_cfg = LocalPipelineConfig {
        worker_time_budget: Duration::from_secs_f64(args.worker_time_budget),
        stream_failure_queue: Some(stack.stream_failure_queue.clone()),
        ..LocalPipelineConfig::default()
    };
    let pipeline = LocalPipeline::new(&sdk, &stack.resources, &stack.queues, pipeline_cfg)?;
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let pipeline_task = tokio::spawn(pipeline.run(async move {
        let _ = stop_rx.changed().await;
    }));

    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (choose another with --port or SHEETLOG_PORT)"))?;
    println!(
        "sheetlog API listening on http://{addr}  (stream router and snapshot worker running; Ctrl-C stops)"
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    let _ = stop_tx.send(true);
    let _ = pipeline_task.await;
    if let Some(f) = faults {
        let kinds: Vec<String> = f
            .counts
            .by_kind()
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        println!(
            "faults injected: {} ({})",
            f.counts.total(),
            kinds.join(", ")
        );
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM (what `scripts/dev` forwards).
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    info!("shutting down");
}
