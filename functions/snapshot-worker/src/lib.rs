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
#[cfg(test)]
mod protocol_tests;

pub use config::WorkerConfig;
pub use handler::{Handler, MessageResult};
pub use hooks::{NoHooks, Step, StepHook};
pub use protocol::{DeferReason, Outcome, Worker, WorkerError, deferral_delay};

use std::time::{Duration, Instant, SystemTime};

/// When an invocation with the given deadline must hand off: `reserve` before it.
pub fn handoff_at(deadline: SystemTime, reserve: Duration) -> Instant {
    let left = deadline
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    Instant::now() + left.saturating_sub(reserve)
}

#[cfg(test)]
mod tests {
    use aws_lambda_events::event::sqs::SqsEvent;
    use sheetlog_core::domain::SnapshotJob;

    use super::*;

    fn load(name: &str) -> SqsEvent {
        let path = format!("{}/events/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn sample_events_carry_jobs_in_the_wire_form() {
        let first = load("snapshot-job.json");
        let job = first.records[0].body.as_deref().map(SnapshotJob::from_json);
        assert!(matches!(job, Some(Ok(j)) if j.segment == 0 && j.entry == 100 && j.deferrals == 0));
        let deferred = load("deferred-job.json");
        let job = deferred.records[0]
            .body
            .as_deref()
            .map(SnapshotJob::from_json);
        assert!(matches!(job, Some(Ok(j)) if j.segment == 1 && j.entry == 0 && j.deferrals == 3));
        let poison = load("poison.json");
        assert_eq!(poison.records.len(), 1);
        let job = poison.records[0]
            .body
            .as_deref()
            .map(SnapshotJob::from_json);
        assert!(matches!(job, Some(Err(_))));
    }

    #[test]
    fn hand_off_leaves_the_reserve_before_the_deadline() {
        let now = std::time::Instant::now();
        let deadline = SystemTime::now() + Duration::from_secs(300);
        let at = handoff_at(deadline, Duration::from_secs(60));
        let left = at.saturating_duration_since(now);
        assert!(left <= Duration::from_secs(241) && left >= Duration::from_secs(238));
        // A deadline already past (or inside the reserve) means: hand off after the first chunk.
        let at = handoff_at(SystemTime::now(), Duration::from_secs(60));
        assert!(at <= std::time::Instant::now());
    }
}
