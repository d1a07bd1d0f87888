//! Lambda entry point of the scheduled retention run: wiring only. An EventBridge schedule
//! invokes it (the event's content is not used); it applies the stack's policy to every log
//! with [`sheetlog_maintenance::Retention`], the same code as `sheetlog-maintenance archive`,
//! stopping a minute before the invocation's deadline (the next run carries on), and answers
//! the run's report.

use std::time::{Duration, Instant};

use lambda_runtime::{Error, LambdaEvent, service_fn};
use sheetlog_archiver::Settings;
use sheetlog_core::aws::{S3Bucket, s3_client};
use sheetlog_core::config::Env;
use sheetlog_maintenance::{Retention, RunOptions};

/// Left for the run in progress to finish its segment and answer.
const RESERVE: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() -> Result<(), Error> {
    let env = Env::process();
    sheetlog_core::telemetry::init_lambda(&env);
    let settings = Settings::from_vars(&env)?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let retention = Retention::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        &settings.entry_table,
        &settings.segment_table,
        S3Bucket::new(s3_client(&sdk), settings.bucket),
        settings.policy,
    );
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let retention = retention.clone();
        async move {
            let left = event
                .context
                .deadline()
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            let opts = RunOptions {
                now: sheetlog_core::domain::now_secs(),
                dry_run: false,
                deadline: Some(Instant::now() + left.saturating_sub(RESERVE)),
            };
            let report = retention
                .run(opts, &mut |log, r| {
                    tracing::info!(log = %log, moved = r.segments_archived + r.segments_deleted, "log done");
                })
                .await?;
            tracing::info!(report = ?report, "retention run finished");
            Ok::<_, Error>(serde_json::to_value(report)?)
        }
    }))
    .await
}
