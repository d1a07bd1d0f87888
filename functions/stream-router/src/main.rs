//! Lambda entry point: wiring only (tracing, config, SDK clients); [`handle`] does the work.

use std::sync::Arc;

use aws_lambda_events::event::dynamodb::Event;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use sheetlog_core::aws::{S3Bucket, SqsJobQueue, s3_client};
use sheetlog_core::config::Env;
use sheetlog_stream_router::{AwsEffects, Settings, handle};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let env = Env::process();
    sheetlog_core::telemetry::init_lambda(&env);
    let Settings { queue_url, bucket } = Settings::from_vars(&env)?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let effects = Arc::new(AwsEffects::new(
        SqsJobQueue::new(aws_sdk_sqs::Client::new(&sdk), queue_url),
        S3Bucket::new(s3_client(&sdk), bucket),
    ));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| {
        let effects = effects.clone();
        async move { Ok::<_, Error>(handle(effects.as_ref(), event.payload).await) }
    }))
    .await
}
