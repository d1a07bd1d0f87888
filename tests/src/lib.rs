//! `sheetlog-tests`: the helpers integration tests and benchmarks use to run sheetlog against a
//! local AWS emulator over the real wire protocol, plus the tests themselves (in `tests/`).
//!
//! Layout:
//! - [`api`]      — the API under test: in-process over loopback HTTP, or a deployment by URL
//! - [`bench_dedupe`] — the Dedupe table's figures in `./scripts/bench log`
//! - [`bench_log`] — the `./scripts/bench log` measurements
//! - [`bench_archive`] — what an archived segment costs: bytes, and requests per 1,000 entries read
//! - [`bench_max_push`] — its maximal push through the queue and the sync writer
//! - [`chaos`]    — the history checker: concurrent writers and readers over the fault adapter
//! - [`emulator`] — start (or reuse) a moto server, SDK configuration pointed at it
//! - [`fixtures`] — the entries, events and request bodies tests build (a `set` in each form)
//! - [`lambda_watch`] — the functions' built binaries under a Lambda runtime (`cargo lambda watch`)
//! - [`pipeline`] — the stack plus snapshot queues; workers, drivers and snapshot checks
//! - [`sigv4`]    — SigV4 request signing for deployed stacks with IAM authorization
//! - [`stack`]    — create a uniquely named set of tables and bucket and an `EventLog` over them
//! - [`wire`]     — a proxy before the emulator that counts requests and request units on the wire
//! - `tests/integration/` — the integration tests, one binary, one module per area

pub mod api;
pub mod bench_archive;
pub mod bench_dedupe;
pub mod bench_log;
pub mod bench_max_push;
pub mod chaos;
pub mod emulator;
pub mod fixtures;
pub mod lambda_watch;
pub mod pipeline;
/// SigV4 signing lives with the API's client (`sheetlog-client`), which signs for deployed
/// stacks too.
pub use sheetlog_client::sigv4;
pub mod stack;
pub mod wire;

pub use emulator::Emulator;
pub use stack::TestStack;

/// Held by the tests that load the machine on purpose (many writers racing for one log): all
/// integration tests share one binary, and two such tests at once on a 2-core machine slow every
/// round trip so much that writers exhaust their attempts, which measures the machine, not the
/// log. The other tests still run beside them.
pub async fn heavy_test_slot() -> tokio::sync::MutexGuard<'static, ()> {
    static SLOT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SLOT.lock().await
}
