//! `sheetlog-core`: everything the sheetlog functions share — the domain types, the event-log
//! algorithms, the ports they are written against and the AWS adapters that implement them.
//! With the `engine` feature it also re-exports the sheet model and snapshot engine
//! (`sheetlog-sheet`) and joins them to the log.
//!
//! Layout:
//! - [`domain`] — ids, entries, segments, pending snapshots, key layout, request-unit arithmetic (no SDK types)
//! - [`log`]    — the event log: create, append, start segment, load, read since
//! - [`ports`]  — narrow async traits for the stores
//! - [`layer`]  — the one way to decorate a port (the fault adapter, request counting)
//! - [`aws`]    — DynamoDB, S3 and SQS adapters, the shared stream filter
//! - [`memory`] — in-memory stores behind the same ports, for fast tests (feature `memory`)
//! - [`faults`] — a seeded fault-injecting adapter modelling AWS's failure modes (feature `faults`)
//! - [`sheet`], [`snapshot`] — re-exports of `sheetlog-sheet` (feature `engine`)
//! - [`snapshot_input`] — a snapshot's input found in the log: previous snapshot, entries since (feature `engine`)
//! - [`catalog`] — the catalog of sheets: names, members and roles (Cognito authorization)
//! - [`poke`]   — pokes: a sheet's next sequence published on AppSync Events after a commit
//! - [`sync_queue`] — the queued push message (the sync FIFO queue)
//! - [`config`] — typed configuration from the environment
//! - [`error`]  — error types at each boundary
//! - [`users`]   — who is in the Cognito user pool (share by email)
//! - [`sigv4`]   — SigV4 signing for the AWS HTTP APIs called without an SDK client
//! - [`telemetry`] — tracing set-up for the binaries
//!
//! The algorithms and invariants are written up in `docs/design.md`.

pub mod aws;
pub mod catalog;
pub mod config;
pub mod domain;
pub mod error;
#[cfg(any(test, feature = "faults"))]
pub mod faults;
pub mod layer;
pub mod log;
#[cfg(any(test, feature = "memory"))]
pub mod memory;
pub mod poke;
pub mod ports;
pub mod sigv4;
#[cfg(feature = "engine")]
pub mod snapshot_input;
pub mod sync_queue;
pub mod telemetry;
pub mod users;

#[cfg(feature = "engine")]
pub use sheetlog_sheet as sheet;
#[cfg(feature = "engine")]
pub use sheetlog_sheet::snapshot;

pub use domain::{Entry, EntryRecord, EntryType, LogId, NewEntry, RequestUnits, SegmentRecord};
pub use error::{LogError, StoreError};
pub use log::{AppendOptions, EventLog, SegmentHint};
