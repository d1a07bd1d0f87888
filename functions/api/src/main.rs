//! Lambda entry point: wiring only (tracing, config, SDK clients); the router does the work.

use std::sync::Arc;

use sheetlog_api::{ApiConfig, AppState, router};
use sheetlog_core::config::{LogConfig, Resources};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    sheetlog_core::telemetry::init_lambda();
    let resources = Resources::from_env()?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let state = AppState::from_sdk(
        &sdk,
        &resources,
        LogConfig::from_env()?,
        ApiConfig::from_env()?,
    )
    .map_err(|e| lambda_http::Error::from(e.to_string()))?;
    lambda_http::run(router(Arc::new(state))).await
}
