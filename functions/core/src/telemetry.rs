//! Tracing set-up, in one place for every binary.

use crate::config::{Env, EnvVar};

/// What a Lambda function's logging reads.
pub const LAMBDA_ENVIRONMENT: &[EnvVar] = &[EnvVar::optional("RUST_LOG")];

/// For a Lambda function: one JSON object per line (CloudWatch Logs Insights reads the fields),
/// no timestamp (CloudWatch stamps every line), filtered by `RUST_LOG` (default: info).
pub fn init_lambda(env: &Env) {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(lambda_filter(env))
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

/// The filter [`init_lambda`] logs with: `RUST_LOG`, or `info` when it is unset or invalid.
pub fn lambda_filter(env: &Env) -> tracing_subscriber::EnvFilter {
    env.text("RUST_LOG")
        .ok()
        .flatten()
        .and_then(|v| tracing_subscriber::EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| "info".into())
}

fn filter(default: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into())
}

/// The CloudWatch namespace of the metrics sheetlog publishes itself.
pub const METRIC_NAMESPACE: &str = "Sheetlog";

/// One CloudWatch metric value. In Lambda: a line in the embedded metric format on standard
/// output, which Lambda's log pipeline turns into a metric (no API call, no extra permission),
/// with one dimension, `FunctionName`, so the stack's alarms can select their own function's
/// values. Elsewhere (the local stack, tests, benchmarks): a debug-level log event, so standard
/// output stays the program's own.
pub fn metric(name: &str, value: f64, unit: &str) {
    match std::env::var("AWS_LAMBDA_FUNCTION_NAME") {
        Ok(function) => println!("{}", emf_line(name, value, unit, &function, now_millis())),
        Err(_) => tracing::debug!(metric = name, value, unit, "metric"),
    }
}

fn now_millis() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

fn emf_line(name: &str, value: f64, unit: &str, function: &str, millis: u128) -> String {
    serde_json::json!({
        "_aws": {
            "Timestamp": millis as u64,
            "CloudWatchMetrics": [{
                "Namespace": METRIC_NAMESPACE,
                "Dimensions": [["FunctionName"]],
                "Metrics": [{"Name": name, "Unit": unit}],
            }],
        },
        "FunctionName": function,
        name: value,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn metric_lines_follow_the_embedded_metric_format() {
        let line = super::emf_line(
            "SnapshotJobsParked",
            1.0,
            "Count",
            "fn-1",
            1_700_000_000_000,
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["_aws"]["Timestamp"], 1_700_000_000_000u64);
        let m = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(m["Namespace"], "Sheetlog");
        assert_eq!(m["Dimensions"], serde_json::json!([["FunctionName"]]));
        assert_eq!(m["Metrics"][0]["Name"], "SnapshotJobsParked");
        assert_eq!(v["FunctionName"], "fn-1");
        assert_eq!(v["SnapshotJobsParked"], 1.0);
        assert!(!line.contains('\n'));
    }
}
