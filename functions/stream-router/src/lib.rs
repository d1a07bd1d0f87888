//! `sheetlog-stream-router`: consumes the Entry table's stream (already filtered by the event
//! source to inserted Snapshot entries and inserted entries with an external S3 object) and
//! starts each side effect: a snapshot job on the SQS queue, or the removal of a committed
//! payload's auto-delete tag. It does the minimum per record, so it keeps up with the stream.
//!
//! Layout:
//! - [`handler`] — records → actions → effects, with per-record batch item failures
//! - [`Settings`] — what it reads at start-up
//! - `main.rs`   — Lambda wiring
//! - `events/`   — sample stream events, used by the unit tests and `cargo lambda invoke`

pub mod handler;

pub use handler::{Action, AwsEffects, Effects, RouteReport, classify, handle, route};

use sheetlog_core::config::{ConfigError, Env, EnvVar, environment};

/// Everything the router reads at start-up: the stack gives it only what it needs, the queue
/// and the bucket.
#[derive(Debug, Clone)]
pub struct Settings {
    pub queue_url: String,
    pub bucket: String,
}

impl Settings {
    /// The router's declaration of the variables it reads (`sheetlog_core::config::Given`).
    pub fn environment() -> Vec<EnvVar> {
        environment(&[
            sheetlog_core::telemetry::LAMBDA_ENVIRONMENT,
            &[
                EnvVar::stack("SHEETLOG_SNAPSHOT_QUEUE_URL"),
                EnvVar::stack("SHEETLOG_BUCKET"),
            ],
        ])
    }

    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        Ok(Self {
            queue_url: env.required("SHEETLOG_SNAPSHOT_QUEUE_URL")?,
            bucket: env.required("SHEETLOG_BUCKET")?,
        })
    }
}
