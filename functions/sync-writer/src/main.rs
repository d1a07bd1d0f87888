//! Lambda entry point: wiring only (tracing, config, SDK clients); [`Handler`] does the work.

// lambda_runtime's service stack around our handler nests deeper than rustc's default layout
// query limit.
#![recursion_limit = "256"]

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use sheetlog_core::config::Env;
use sheetlog_core::poke::Poker;
use sheetlog_sync_writer::config::Settings;
use sheetlog_sync_writer::{EarlyDelete, Handler, SqsDelete};
use tokio::sync::OnceCell;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let env = Env::process();
    sheetlog_core::telemetry::init_lambda(&env);
    let settings = Settings::from_vars(&env)?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let mut handler = Handler::from_sdk(&sdk, &settings.resources, settings.log, settings.writer)?;
    if let Some(pokes) = &settings.pokes {
        handler = handler.with_poker(Arc::new(Poker::from_sdk(&sdk, pokes)?));
    }
    let handler = Arc::new(handler);
    // The queue the event source reads, for deleting a batch's messages as soon as they are
    // committed (`early_delete.rs`); looked up from the first event's source ARN, once per process.
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let early: Arc<OnceCell<Option<SqsDelete>>> = Arc::new(OnceCell::new());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let (handler, sqs, early) = (handler.clone(), sqs.clone(), early.clone());
        async move {
            let arn = event
                .payload
                .records
                .iter()
                .find_map(|r| r.event_source_arn.clone());
            let delete = match arn {
                Some(arn) => early
                    .get_or_init(|| async move {
                        SqsDelete::from_arn(sqs, &arn)
                            .await
                            .inspect_err(|e| {
                                tracing::warn!(error = %e, "no early delete: the event source deletes")
                            })
                            .ok()
                    })
                    .await
                    .as_ref(),
                None => None,
            };
            let delete = delete.map(|d| d as &dyn EarlyDelete);
            Ok::<_, Error>(handler.handle_with(event.payload, delete).await)
        }
    }))
    .await
}
