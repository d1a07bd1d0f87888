//! Lambda entry point: wiring only (tracing, config, SDK clients); [`handle`] does the work.

use std::sync::Arc;

use aws_lambda_events::event::dynamodb::Event;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use sheetlog_core::aws::{S3PayloadStore, SqsJobQueue};
use sheetlog_core::config::env_required;
use sheetlog_stream_router::{AwsEffects, handle};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_current_span(false)
        .without_time() // CloudWatch stamps every line
        .init();
    // The stack gives the router only what it needs: the queue and the bucket.
    let queue_url = env_required("SHEETLOG_SNAPSHOT_QUEUE_URL")?;
    let bucket = env_required("SHEETLOG_BUCKET")?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    let effects = Arc::new(AwsEffects::new(
        SqsJobQueue::new(aws_sdk_sqs::Client::new(&sdk), queue_url),
        S3PayloadStore::new(s3, bucket),
    ));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| {
        let effects = effects.clone();
        async move { Ok::<_, Error>(handle(effects.as_ref(), event.payload).await) }
    }))
    .await
}
