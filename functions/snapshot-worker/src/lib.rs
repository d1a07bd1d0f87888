//! `sheetlog-snapshot-worker`: the SQS consumer that builds snapshots, running the Pending
//! Snapshots protocol so that snapshots are built in log order, exactly once in effect, across
//! duplicates, crashes and Lambda's time limit.
//!
//! Layout:
//! - [`protocol`] — [`Worker`]: the protocol for one job (ordering, claims, checkpoints,
//!   hand-off, completion) returning an [`Outcome`]
//! - [`handler`]  — [`Handler`]: an SQS batch → outcomes → queue actions and batch item failures
//! - [`hooks`]    — named step boundaries and the [`StepHook`] the fault-injection tests use
//! - [`config`]   — [`WorkerConfig`], from the environment
//! - `main.rs`    — Lambda wiring

pub mod config;
pub mod handler;
pub mod hooks;
pub mod protocol;

pub use config::WorkerConfig;
pub use handler::{Handler, MessageResult};
pub use hooks::{NoHooks, Step, StepHook};
pub use protocol::{DeferReason, Outcome, Worker, WorkerError};

use std::time::{Duration, Instant, SystemTime};

/// When an invocation with the given deadline must hand off: `reserve` before it.
pub fn handoff_at(deadline: SystemTime, reserve: Duration) -> Instant {
    let left = deadline
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    Instant::now() + left.saturating_sub(reserve)
}
