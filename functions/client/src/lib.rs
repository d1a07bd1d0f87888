//! The client of a sheetlog API, as a library: what the `sheetlog` command line runs, and what
//! the test harness (`sheetlog-tests`) shares with it (the SigV4 signer, Cognito's SRP sign-in,
//! the HTTP client).
//!
//! Layout:
//! - `api.rs` — the HTTP client: authorization (none, bearer token, SigV4), retries on 503, the
//!   API's errors as [`api::CliError`] with exit codes
//! - `commands.rs` — what the commands do: cell assignments, appends, the upload flow with
//!   progress, paging through the log
//! - `groups.rs` — the CLI's own sync client group per API, which its edits name so that
//!   `sheetlog undo` takes them back
//! - `login.rs` — `sheetlog login`/`logout`: Cognito sign-in, the stored refresh token
//! - `private_file.rs` — writing a file readable by its owner only (the stored sign-in, and the
//!   local stack's issuer key)
//! - `sigv4.rs` — SigV4 signing for an API with IAM authorization
//! - `watch.rs` — `sheetlog watch`: the sheet's pokes over the AppSync Events real-time
//!   protocol, entries read on each poke, polling while there is no channel
//!
//! The binary (`functions/cli`, `sheetlog`) parses the arguments and runs the commands; the
//! local stack (`sheetlog dev`) is `sheetlog-local`.

pub mod api;
pub mod commands;
pub mod groups;
pub mod login;
pub mod private_file;
pub mod sigv4;
pub mod watch;
