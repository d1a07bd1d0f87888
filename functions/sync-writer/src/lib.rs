//! `sheetlog-sync-writer`: the one writer of each sheet's queued Replicache pushes
//! (`docs/sync.md`, "Queued pushes"). Lambda's SQS FIFO event source hands it batches of up to
//! ten messages, in order within each log's message group; it applies each log's pushes with a
//! group commit ([`EventLog::push_batch`](sheetlog_core::log::EventLog::push_batch)) and reports
//! the messages it could not apply yet as batch item failures.
//!
//! Layout:
//! - [`handler`] — [`Handler`]: an SQS batch → per-log group commits → batch item failures
//! - [`config`]  — [`WriterConfig`] and the function's [`config::Settings`], from the environment
//! - [`early_delete`] — [`EarlyDelete`]: a committed batch's messages deleted before its poke
//! - `main.rs`   — Lambda wiring

pub mod config;
pub mod early_delete;
pub mod handler;

pub use config::WriterConfig;
pub use early_delete::{EarlyDelete, SqsDelete};
pub use handler::{Handler, MessageOutcome, MessageResult, WriterLog};

#[cfg(test)]
mod handler_tests;
#[cfg(test)]
mod poke_tests;
