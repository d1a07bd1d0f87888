//! Every integration test of the workspace, in one test binary: against the emulator (real AWS
//! wire protocol), the HTTP API over real HTTP, and the local stack against the CDK template. One
//! binary links the AWS SDK once instead of six times.
//!
//! Run one group with a filter: `cargo test -p sheetlog-tests --test integration event_log::`.

mod api_access;
mod api_blackbox;
mod api_cognito;
mod api_snapshots;
mod archive;
mod catalog;
mod chaos;
mod dedupe;
mod event_log;
mod export;
mod formulas;
mod function_environment;
mod lambda_runtime;
mod layout;
mod local_gateway;
mod local_stack_matches_template;
mod log_delete;
mod memory;
mod pipeline;
mod pokes;
mod rebase;
mod rebuild;
mod snapshot_s3;
mod styles;
mod sync;
mod sync_queue;
mod undo;
mod versions;
