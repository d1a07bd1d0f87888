//! Lambda entry point: wiring only (tracing, config, SDK clients); the router does the work.

use std::sync::Arc;

use sheetlog_api::config::Settings;
use sheetlog_api::{AppState, router};
use sheetlog_core::config::Env;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let env = Env::process();
    sheetlog_core::telemetry::init_lambda(&env);
    let settings = Settings::from_vars(&env)?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let state = AppState::from_sdk(&sdk, &settings.resources, settings.log, settings.api)
        .map_err(|e| lambda_http::Error::from(e.to_string()))?;
    lambda_http::run(router(Arc::new(state))).await
}
