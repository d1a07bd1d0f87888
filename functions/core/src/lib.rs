//! `sheetlog-core`: everything the sheetlog functions share — the domain types, the event-log
//! algorithms, the ports they are written against and the AWS adapters that implement them.
//!
//! Layout:
//! - [`domain`] — ids, entries, segments, request-unit arithmetic (no SDK types)
//! - [`log`]    — the event log: create, append, start segment, load, read since
//! - [`ports`]  — narrow async traits for the stores
//! - [`aws`]    — DynamoDB and S3 adapters, table schema, the shared stream filter
//! - [`sheet`]  — the spreadsheet model: events, validation, binary codec, state machine, import
//! - [`snapshot`] — chunked, content-addressed snapshots: format, incremental builder, read path
//! - [`config`] — typed configuration from the environment
//! - [`error`]  — error types at each boundary

pub mod aws;
pub mod config;
pub mod domain;
pub mod error;
pub mod log;
pub mod ports;
pub mod sheet;
pub mod snapshot;

pub use domain::{Entry, EntryRecord, EntryType, LogId, NewEntry, RequestUnits, SegmentRecord};
pub use error::{LogError, StoreError};
pub use log::{AppendOptions, EventLog, SegmentHint};
