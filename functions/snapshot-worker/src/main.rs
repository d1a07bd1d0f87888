//! Lambda entry point: wiring only (tracing, config, SDK clients); [`Handler`] does the work.

// lambda_runtime's service stack around our handler nests deeper than rustc's default layout
// query limit.
#![recursion_limit = "256"]

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use sheetlog_core::aws::SqsJobQueue;
use sheetlog_core::config::{LogConfig, Resources, env_required};
use sheetlog_snapshot_worker::{Handler, Worker, WorkerConfig, handoff_at};

#[tokio::main]
async fn main() -> Result<(), Error> {
    sheetlog_core::telemetry::init_lambda();
    let resources = Resources::from_env()?;
    let cfg = WorkerConfig::from_env()?;
    let queue_url = env_required("SHEETLOG_SNAPSHOT_QUEUE_URL")?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let reserve = cfg.handoff_reserve;
    let worker = Worker::from_sdk(&sdk, &resources, LogConfig::from_env()?, cfg)?;
    let queue = SqsJobQueue::new(aws_sdk_sqs::Client::new(&sdk), queue_url);
    let handler = Arc::new(Handler::new(worker, queue));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let handler = handler.clone();
        async move {
            let at = handoff_at(event.context.deadline(), reserve);
            Ok::<_, Error>(handler.handle(event.payload, at).await)
        }
    }))
    .await
}
