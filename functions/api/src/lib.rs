//! `sheetlog-api`: the HTTP API. One axum [`router`] serves both deployments: `main.rs` hands it
//! to `lambda_http` behind API Gateway, and the local stack (`sheetlog dev`) serves it with a
//! plain HTTP server. Every error is a JSON body `{"error": {"code", "message", ...}}`.
//!
//! Layout:
//! - `routes.rs`  — the handlers (validation first, then one linchpin write)
//! - `trigger.rs` — append plus the snapshot / new-segment trigger that runs after it
//! - `cells.rs`   — range reads from the newest completed snapshot at or before `at`, plus the entries after it
//! - `dto.rs`     — request and response shapes with their OpenAPI schemas
//! - `error.rs`   — [`ApiError`]: status, code and message of every failure
//! - `state.rs`   — shared state: event log, bucket, config, segment-hint cache
//! - `config.rs`  — settings from the environment

pub mod cells;
pub mod config;
pub mod dto;
pub mod error;
pub mod routes;
pub mod state;
pub mod trigger;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::routing::{get, post};
use utoipa::OpenApi;

pub use config::ApiConfig;
pub use error::ApiError;
pub use state::{AppState, SharedState};

#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "sheetlog",
        description = "Event-sourced spreadsheet backend: an ordered, gapless log of edits per sheet."
    ),
    paths(
        routes::health,
        routes::create_log,
        routes::append_entry,
        routes::create_upload,
        routes::commit_upload,
        routes::read_entries,
        routes::load_log,
        routes::list_segments,
        routes::read_cells,
    )
)]
pub struct ApiDoc;

/// The OpenAPI document, generated from the handler annotations.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

async fn openapi_json() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(openapi())
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::RouteNotFound {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

async fn method_not_allowed(method: Method) -> ApiError {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
    }
}

pub fn router(state: SharedState) -> Router {
    let limit = state.cfg.max_request_bytes;
    Router::new()
        .route("/health", get(routes::health))
        .route("/openapi.json", get(openapi_json))
        .route("/logs", post(routes::create_log))
        .route("/logs/{log_id}", get(routes::load_log))
        .route(
            "/logs/{log_id}/entries",
            post(routes::append_entry).get(routes::read_entries),
        )
        .route("/logs/{log_id}/uploads", post(routes::create_upload))
        .route(
            "/logs/{log_id}/uploads/{upload_id}/commit",
            post(routes::commit_upload),
        )
        .route("/logs/{log_id}/segments", get(routes::list_segments))
        .route("/logs/{log_id}/cells", get(routes::read_cells))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}
