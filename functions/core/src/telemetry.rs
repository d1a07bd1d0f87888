//! Tracing set-up, in one place for every binary.

/// For a Lambda function: one JSON object per line (CloudWatch Logs Insights reads the fields),
/// no timestamp (CloudWatch stamps every line), filtered by `RUST_LOG` (default: info).
pub fn init_lambda() {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter("info"))
        .with_current_span(false)
        .without_time()
        .init();
}

/// For a command-line tool: human-readable lines on standard error (so standard output stays
/// for results), filtered by `RUST_LOG`, else `default_filter`.
pub fn init_cli(default_filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(filter(default_filter))
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

fn filter(default: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into())
}
