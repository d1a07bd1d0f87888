//! The `sheetlog` command line as a library: the API client and the commands the binary runs,
//! and the SigV4 signer the black-box tests share.
//!
//! Layout:
//! - `api.rs` — the HTTP client: authorization (none, bearer token, SigV4), retries on 503, the
//!   API's errors as [`api::CliError`] with exit codes
//! - `commands.rs` — what the commands do: cell assignments, appends, the upload flow with
//!   progress, paging through the log
//! - `dev.rs` — `sheetlog dev`: the local stack, its stand-ins and drivers, in one process
//! - `local_appsync.rs` — the poke namespace's onSubscribe handler from the template, run under
//!   Node with its GetItem on the emulator (`sheetlog dev --auth jwt|cognito`)
//! - `local_auth.rs` — the local stack's JWT issuer and API Gateway JWT authorizer stand-in
//!   (`sheetlog dev --auth jwt`, `sheetlog dev-token`)
//! - `local_cognito.rs` — the local stack's user pool on the emulator (`sheetlog dev --auth cognito`)
//! - `local_iam.rs` — the local stack's stand-in for API Gateway's IAM authorization: SigV4
//!   signatures checked with the local users' secrets (`sheetlog dev --auth iam`)
//! - `local_gateway.rs` — the local stack's API Gateway stand-in: the stage's throttle, joined
//!   duplicate headers, Lambda's request size limit and the function's timeout, from the template
//! - `login.rs` — `sheetlog login`/`logout`: Cognito sign-in, the stored refresh token
//! - `private_file.rs` — writing a file readable by its owner only (the issuer's key, the
//!   stored sign-in)
//! - `sigv4.rs` — SigV4 signing for an API with IAM authorization
//! - `watch.rs` — `sheetlog watch`: the sheet's pokes over the AppSync Events real-time
//!   protocol, entries read on each poke, polling while there is no channel
//!
//! The binary (`main.rs`) parses the arguments and runs the commands.

pub mod api;
pub mod commands;
pub mod dev;
pub mod local_appsync;
pub mod local_auth;
pub mod local_cognito;
pub mod local_gateway;
pub mod local_iam;
pub mod login;
pub mod private_file;
pub mod sigv4;
pub mod watch;
