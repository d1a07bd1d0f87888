//! Lambda entry point: wiring only (tracing, config, SDK clients); [`Handler`] does the work.

// lambda_runtime's service stack around our handler nests deeper than rustc's default layout
// query limit.
#![recursion_limit = "256"]

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use sheetlog_core::config::{LogConfig, Resources};
use sheetlog_core::poke::{PokeConfig, Poker};
use sheetlog_sync_writer::{Handler, WriterConfig};

#[tokio::main]
async fn main() -> Result<(), Error> {
    sheetlog_core::telemetry::init_lambda();
    let resources = Resources::from_env()?;
    let cfg = WriterConfig::from_env()?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let mut handler = Handler::from_sdk(&sdk, &resources, LogConfig::from_env()?, cfg)?;
    if let Some(pokes) = PokeConfig::from_env()? {
        handler = handler.with_poker(Arc::new(Poker::from_sdk(&sdk, &pokes)?));
    }
    let handler = Arc::new(handler);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let handler = handler.clone();
        async move { Ok::<_, Error>(handler.handle(event.payload).await) }
    }))
    .await
}
