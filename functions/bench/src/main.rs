//! `sheetlog-bench`: measured figures for the README and docs, run through `./scripts/bench`.
//!
//! Layout:
//! - `main.rs` — the command line (one subcommand per benchmark).
//! - `snapshot.rs` — `snapshot`: snapshot build rate and peak memory, incremental write
//!   amplification, CSV import rate. Each measured build runs in a child process (this binary
//!   re-executed with a hidden subcommand) so its peak resident memory is its own.
//!
//! Benchmarks print numbers; they never assert on timings.

mod snapshot;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "sheetlog-bench", about = "Measure sheetlog")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Snapshot engine: build rate and peak memory (1M and 10M cells), incremental write
    /// amplification, CSV import rate for a 100 MB file.
    Snapshot {
        /// Print one JSON object of the figures instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Internal: one measured build in this process (run by `snapshot` as a child).
    #[command(hide = true)]
    BuildChild(snapshot::ChildArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Snapshot { json } => snapshot::run(json),
        Command::BuildChild(args) => snapshot::child(args),
    }
}
