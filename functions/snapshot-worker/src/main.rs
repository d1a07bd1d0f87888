//! Lambda entry point: wiring only (tracing, config, SDK clients); [`Handler`] does the work.

// lambda_runtime's service stack around our handler nests deeper than rustc's default layout
// query limit.
#![recursion_limit = "256"]

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use sheetlog_core::aws::SqsJobQueue;
use sheetlog_core::config::Env;
use sheetlog_snapshot_worker::config::Settings;
use sheetlog_snapshot_worker::{Handler, Worker, handoff_at};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let env = Env::process();
    sheetlog_core::telemetry::init_lambda(&env);
    let settings = Settings::from_vars(&env)?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let reserve = settings.worker.handoff_reserve;
    let worker = Worker::from_sdk(&sdk, &settings.resources, settings.log, settings.worker)?;
    let queue = SqsJobQueue::new(aws_sdk_sqs::Client::new(&sdk), settings.queue_url);
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
