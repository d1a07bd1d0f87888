//! `sheetlog-maintenance`: operator commands. Resource names come from flags or the same
//! environment variables the functions read (the stack's outputs name them).
//!
//! ```text
//! sheetlog-maintenance reprocess --since 2026-11-20T00:00:00Z [--dry-run]
//! sheetlog-maintenance archive [--mode archive|delete] [--keep-segments 3] [--after-days 90] [--dry-run]
//! sheetlog-maintenance rebuild-snapshots [--log ID] [--dry-run] [--verify]
//! sheetlog-maintenance index-clients [--dry-run]
//! ```
//! Progress goes to stderr, the final report (JSON) to stdout.

use anyhow::Context;
use clap::{Parser, Subcommand};
use sheetlog_core::aws::{S3Bucket, SqsJobQueue, s3_client};
use sheetlog_maintenance::{
    Mode, Policy, RebuildOptions, RebuildTables, Rebuilder, ReprocessOptions, Reprocessor,
    Retention, RunOptions, parse_since,
};

#[derive(Debug, Parser)]
#[command(
    name = "sheetlog-maintenance",
    version,
    about = "sheetlog operator tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Re-enqueue a job for every unfinished snapshot (any segment, any state, including jobs in
    /// the Pending Snapshots table) and re-run payload un-tagging for entries written since a
    /// date. Safe to run any number of times.
    Reprocess(ReprocessArgs),
    /// Move old segments out of the Entry table: archive them to S3 (readers then read the
    /// archive), or delete them. Only history behind a completed snapshot, never the two newest
    /// segments. Safe to run again, and to interrupt.
    Archive(ArchiveArgs),
    /// Build again, from the log, every completed snapshot with an object missing (one log, or
    /// all) and write what is missing; a fork's lost first snapshot is built from the source its
    /// entry 0 records. Builds are deterministic, so nothing present is changed. Safe to run
    /// again, and to interrupt: a rerun passes over snapshots already whole.
    RebuildSnapshots(RebuildArgs),
    /// Give the Clients items written before the upgrade that added the `byLog` index the
    /// attribute it is keyed on (each client's first range item, each group item and index
    /// mark), so deleting their sheet finds them. One Scan of the Clients table. Safe to run
    /// again, and to interrupt.
    IndexClients(IndexClientsArgs),
}

#[derive(Debug, clap::Args)]
struct IndexClientsArgs {
    /// Count what would be updated, change nothing.
    #[arg(long)]
    dry_run: bool,
    #[arg(long, env = "SHEETLOG_CLIENTS_TABLE")]
    clients_table: String,
}

#[derive(Debug, clap::Args)]
struct RebuildArgs {
    /// Only this log (its UUID).
    #[arg(long, value_parser = parse_log)]
    log: Option<sheetlog_core::domain::LogId>,
    /// Report what would be written, change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Build every snapshot, even those whose objects are all present, and check the roots on
    /// the log against the builds (after a change of the builder).
    #[arg(long)]
    verify: bool,
    #[command(flatten)]
    stack: StackArgs,
    /// The Clients table: it holds the logs' metadata items, whose tombstones mark deleted logs.
    #[arg(long, env = "SHEETLOG_CLIENTS_TABLE")]
    clients_table: String,
}

fn parse_log(raw: &str) -> Result<sheetlog_core::domain::LogId, String> {
    raw.parse::<sheetlog_core::domain::LogId>()
        .map_err(|e| format!("{raw:?} is not a log id (a UUID): {e}"))
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    Archive,
    Delete,
}

#[derive(Debug, clap::Args)]
struct ArchiveArgs {
    #[arg(long, value_enum, default_value = "archive")]
    mode: ModeArg,
    /// Segments kept in DynamoDB, newest first (at least 2).
    #[arg(long, default_value_t = 3)]
    keep_segments: u64,
    /// Also move segments that ended more than this many days ago.
    #[arg(long)]
    after_days: Option<u64>,
    /// Report what would be moved, change nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    stack: StackArgs,
}

/// The tables and bucket every command works on (flags, or the variables the functions read).
#[derive(Debug, clap::Args)]
struct StackArgs {
    #[arg(long, env = "SHEETLOG_ENTRY_TABLE")]
    entry_table: String,
    #[arg(long, env = "SHEETLOG_SEGMENT_TABLE")]
    segment_table: String,
    #[arg(long, env = "SHEETLOG_BUCKET")]
    bucket: String,
}

#[derive(Debug, clap::Args)]
struct ReprocessArgs {
    /// RFC 3339 date-time; entries created at or after it are reprocessed.
    #[arg(long, value_parser = parse_since)]
    since: i64,
    /// Report what would be done, change nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[arg(long, env = "SHEETLOG_PENDING_TABLE")]
    pending_table: String,
    #[arg(long, env = "SHEETLOG_SNAPSHOT_QUEUE_URL")]
    queue_url: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    sheetlog_core::telemetry::init_cli("warn");
    match Cli::parse().command {
        Command::Reprocess(args) => reprocess(args).await,
        Command::Archive(args) => archive(args).await,
        Command::RebuildSnapshots(args) => rebuild(args).await,
        Command::IndexClients(args) => index_clients(args).await,
    }
}

async fn index_clients(args: IndexClientsArgs) -> anyhow::Result<()> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let verb = if args.dry_run {
        "would index"
    } else {
        "indexed"
    };
    let report = sheetlog_maintenance::index_clients::index_clients(
        &aws_sdk_dynamodb::Client::new(&sdk),
        &args.clients_table,
        args.dry_run,
        &mut |r| {
            eprintln!(
                "{} items without the index attribute; {verb} {}, {} gone meanwhile",
                r.scanned, r.indexed, r.gone
            );
        },
    )
    .await
    .context("indexing the Clients table")?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

async fn rebuild(args: RebuildArgs) -> anyhow::Result<()> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let tables = RebuildTables {
        entry_table: args.stack.entry_table.clone(),
        segment_table: args.stack.segment_table.clone(),
        clients_table: args.clients_table.clone(),
    };
    let tool = Rebuilder::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        &tables,
        S3Bucket::new(s3_client(&sdk), &args.stack.bucket),
    )?;
    let opts = RebuildOptions {
        log: args.log,
        dry_run: args.dry_run,
        verify: args.verify,
        ..RebuildOptions::default()
    };
    let verb = if args.dry_run { "would write" } else { "wrote" };
    let report = tool
        .run(opts, &mut |log, r| {
            eprintln!(
                "log {log}: {} logs ({} deleted, skipped), {} entries read, {} snapshots rebuilt, {} intact; {verb} {} objects, {} already present, {} roots fixed, {} fork bases rebuilt, {} missing",
                r.logs, r.logs_deleted, r.entries_read, r.snapshots_rebuilt, r.snapshots_intact, r.objects_written, r.objects_present, r.roots_fixed, r.fork_bases_rebuilt, r.fork_bases_missing
            );
        })
        .await
        .context("rebuilding snapshots")?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

async fn archive(args: ArchiveArgs) -> anyhow::Result<()> {
    let policy = Policy {
        mode: match args.mode {
            ModeArg::Archive => Mode::Archive,
            ModeArg::Delete => Mode::Delete,
        },
        keep_segments: args.keep_segments,
        after_days: args.after_days,
    };
    policy.validate().map_err(anyhow::Error::msg)?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let tool = Retention::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        &args.stack.entry_table,
        &args.stack.segment_table,
        S3Bucket::new(s3_client(&sdk), &args.stack.bucket),
        policy,
    );
    let opts = RunOptions {
        now: sheetlog_core::domain::now_secs(),
        dry_run: args.dry_run,
        deadline: None,
    };
    let verb = if args.dry_run { "would move" } else { "moved" };
    let report = tool
        .run(opts, &mut |log, r| {
            eprintln!(
                "log {log}: {} logs; {verb} {} segments ({} archived, {} deleted), {} entry items removed, {} archive bytes",
                r.logs, r.segments_selected, r.segments_archived, r.segments_deleted, r.entries_removed, r.archive_bytes
            );
        })
        .await
        .context("applying the retention policy")?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

async fn reprocess(args: ReprocessArgs) -> anyhow::Result<()> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let tool = Reprocessor::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        &args.stack.entry_table,
        &args.stack.segment_table,
        &args.pending_table,
        S3Bucket::new(s3_client(&sdk), &args.stack.bucket),
        SqsJobQueue::new(aws_sdk_sqs::Client::new(&sdk), &args.queue_url),
    );
    let opts = ReprocessOptions {
        since: args.since,
        dry_run: args.dry_run,
    };
    let verb = if args.dry_run {
        "would enqueue"
    } else {
        "enqueued"
    };
    let report = tool
        .run(opts, &mut |log, r| {
            eprintln!(
                "log {log}: {} logs, {} entries read; {verb} {} jobs ({} not started, {} pending, {} completion cut short), {} payloads untagged, {} missing",
                r.logs,
                r.entries_read,
                r.jobs_enqueued,
                r.snapshots_not_started,
                r.snapshots_pending,
                r.snapshots_completion_cut_short,
                r.payloads_untagged,
                r.payloads_missing
            );
        })
        .await
        .context("reprocessing")?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
