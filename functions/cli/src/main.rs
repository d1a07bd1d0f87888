//! `sheetlog`: the command line. Today it runs the local stack: `sheetlog dev` creates the tables
//! and bucket on the AWS endpoint named by `AWS_ENDPOINT_URL` (the emulator `scripts/dev` starts)
//! and serves the same API router the Lambda function serves, on loopback.
//!
//! Layout:
//! - `main.rs` — argument parsing and the `dev` runner

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use sheetlog_api::{ApiConfig, AppState};
use sheetlog_core::aws::schema;
use sheetlog_core::config::{LogConfig, Resources};
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,aws_config=warn,aws_smithy_runtime=warn".into()),
        )
        .with_target(false)
        .init();
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
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let resources = Resources::with_prefix(&args.prefix);
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    info!(prefix = %args.prefix, "creating tables and bucket");
    schema::create_all(&dynamo, &s3, &resources)
        .await
        .context("creating the local tables and bucket (is the emulator fresh?)")?;
    let state = AppState::from_sdk(&sdk, &resources, LogConfig::from_env()?, cfg)?;
    let app = sheetlog_api::router(Arc::new(state));

    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (choose another with --port or SHEETLOG_PORT)"))?;
    println!("sheetlog API listening on http://{addr}  (Ctrl-C stops)");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
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
