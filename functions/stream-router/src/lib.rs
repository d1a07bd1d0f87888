//! `sheetlog-stream-router`: consumes the Entry table's stream (already filtered by the event
//! source to inserted Snapshot entries and inserted entries with an external S3 object) and
//! starts each side effect: a snapshot job on the SQS queue, or the removal of a committed
//! payload's auto-delete tag. It does the minimum per record, so it keeps up with the stream.
//!
//! Layout:
//! - [`handler`] — records → actions → effects, with per-record batch item failures
//! - `main.rs`   — Lambda wiring
//! - `events/`   — sample stream events, used by the unit tests and `cargo lambda invoke`

pub mod handler;

pub use handler::{Action, AwsEffects, Effects, RouteReport, classify, handle, route};
