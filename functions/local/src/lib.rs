//! The local stack, `sheetlog dev`: the runner and its stand-ins for the managed services in
//! front of the API (API Gateway, its authorizers, the user pool, the poke namespace's
//! handlers), with what the template defines read from its description. The `sheetlog` command
//! line runs it; the test harness (`sheetlog-tests`) and the benchmarks use the stand-ins
//! directly. The emulator's resources, Lambda's event sources and the AppSync Events stand-in
//! are `sheetlog-pipeline`'s.
//!
//! Layout:
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

pub mod dev;
pub mod local_appsync;
pub mod local_auth;
pub mod local_cognito;
pub mod local_gateway;
pub mod local_iam;
