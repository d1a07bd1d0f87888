//! `sheetlog-api`: the HTTP API. One axum [`router`] serves both deployments: `main.rs` hands it
//! to `lambda_http` behind API Gateway, and the local stack (`sheetlog dev`) serves it with a
//! plain HTTP server. Every error is a JSON body `{"error": {"code", "message", ...}}`.
//!
//! Layout:
//! - `routes.rs`  — the handlers (validation first, then one linchpin write)
//! - `uploads.rs` — large entries: presigned upload URLs and the commit that appends them
//! - `append.rs` — an append through the API (idempotency key, replay), then the snapshot /
//!   new-segment trigger that runs after it
//! - `sync/`      — Replicache push and pull, pulls that share a read, and the client queries
//!   (`docs/sync.md`)
//! - `lambda_limit.rs` — Lambda's 6 MB response limit, kept on every stack
//! - `web.rs`     — the web spreadsheet's embedded bundle, served on the API's origin
//! - `versions.rs` — acting on history: restoring an earlier version, named versions
//! - `diff.rs`    — the cells that differ between two versions, a page at a time
//! - `export.rs`  — a version as an XLSX workbook, downloaded from S3
//! - `undo.rs`    — per-person undo and redo of a sync client group's own steps
//! - `cells.rs`   — range reads from the newest completed snapshot at or before `at`, plus the entries after it
//! - `request.rs` — request parsing shared by routes and sync (log ids, bodies, JSON, queries)
//! - `entry_json.rs` — the JSON form of stored entry bodies (events, `mutations` entries)
//! - `dto.rs`     — request and response shapes with their OpenAPI schemas
//! - `error.rs`   — [`ApiError`]: status, code and message of every failure
//! - `state.rs`   — shared state: event log, bucket, config, segment-hint cache
//! - `config.rs`  — settings from the environment
//! - `access.rs`  — which logs a caller may read or write (checked on every route)
//! - `open_routes.rs` — the routes without an authorizer (`open_routes.json`, shared with the CDK app)
//! - `sheets.rs`  — the catalog routes: `/config.json`, `/me`, `/sheets`, rename, members
//! - `invitations.rs` — shares by email: invitations, claimed by listing sheets or opening one

pub mod access;
pub mod append;
pub mod cells;
pub mod config;
pub mod diff;
pub mod dto;
pub mod entry_json;
pub mod error;
pub mod export;
pub mod invitations;
pub mod lambda_limit;
pub mod open_routes;
pub mod request;
pub mod routes;
pub mod sheets;
pub mod state;
pub mod sync;
pub mod undo;
pub mod uploads;
pub mod versions;
pub mod web;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method, Response, StatusCode, Uri, header};
use axum::response::IntoResponse;
use axum::routing::{delete, get, post, put};
use serde_json::json;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa::OpenApi;

pub use config::{ApiConfig, SyncWrites};
pub use error::ApiError;
pub use lambda_limit::lambda_payload_len;
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
        uploads::create_upload,
        uploads::commit_upload,
        routes::read_entries,
        routes::load_log,
        routes::delete_log,
        routes::list_segments,
        routes::read_cells,
        routes::read_extent,
        versions::restore,
        undo::undo,
        undo::redo,
        versions::list_versions,
        versions::name_version,
        versions::rename_version,
        versions::delete_version,
        diff::diff,
        export::export,
        sync::push::push,
        sync::pull::pull,
        sync::clients::client,
        sync::clients::mutation,
        sync::clients::replay,
        sheets::config_json,
        sheets::me,
        sheets::list_sheets,
        sheets::rename,
        sheets::members,
        sheets::add_member,
        sheets::set_role,
        sheets::remove_member,
        invitations::remove_invitation,
    )
)]
pub struct ApiDoc;

/// The OpenAPI document, generated from the handler annotations, plus the 403 every log route
/// may answer under JWT authorization (`access.rs`).
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa::openapi::{RefOr, ResponseBuilder};
    let mut doc = ApiDoc::openapi();
    for (path, item) in doc.paths.paths.iter_mut() {
        if !path.starts_with("/logs") {
            continue;
        }
        let of_a_log = path.starts_with("/logs/{logId}");
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.put,
        ]
        .into_iter()
        .flatten()
        {
            let Some(RefOr::T(bad)) = op.responses.responses.get("400").cloned() else {
                continue;
            };
            if of_a_log && !op.responses.responses.contains_key("410") {
                let gone = ResponseBuilder::from(bad.clone())
                    .description("the log was deleted (`log-deleted`), or another code for data that is gone")
                    .build();
                op.responses.responses.insert("410".into(), RefOr::T(gone));
            }
            let forbidden = ResponseBuilder::from(bad)
                .description(
                    "with JWT authorization: the token's access claim does not grant this; \
                     with Cognito authorization: the caller is no member of the sheet or its \
                     role is too small (`forbidden`; the same whether or not the log exists)",
                )
                .build();
            op.responses
                .responses
                .insert("403".into(), RefOr::T(forbidden));
        }
        // A DELETE of a deleted log succeeds again rather than answering 410 (only the log's
        // own DELETE: removing a member of a deleted sheet is 410 like any other route).
        if path == "/logs/{logId}"
            && let Some(delete) = &mut item.delete
        {
            delete.responses.responses.remove("410");
        }
    }
    doc
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

/// A panic in a handler is a bug, but the caller still gets an answer: a JSON 500 with a request
/// id to quote, and nothing internal. The panic message goes to the log under the same id.
fn panic_response(payload: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    let detail = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    let request_id = uuid::Uuid::new_v4().to_string();
    tracing::error!(request_id = %request_id, panic = %detail, "handler panicked");
    let body = json!({"error": {
        "code": "internal",
        "message": "internal error",
        "requestId": request_id,
    }});
    (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response()
}

/// axum answers a path or query it cannot decode (bad percent-encoding, a path parameter that is
/// not UTF-8) in plain text; every error of this API is JSON, so rewrite those.
async fn json_rejections(resp: Response<Body>) -> Response<Body> {
    let plain = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
    if !(resp.status().is_client_error() && plain) {
        return resp;
    }
    let status = resp.status();
    let text = match axum::body::to_bytes(resp.into_body(), 64 * 1024).await {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => String::new(),
    };
    let body = json!({"error": {"code": "invalid-request", "message": text}});
    let mut out = (status, axum::Json(body)).into_response();
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    out
}

pub fn router(state: SharedState) -> Router {
    let limit = state.cfg.max_request_bytes;
    let response_limit = state.cfg.max_response_bytes;
    Router::new()
        .route("/", web::with_headers(get(web::page)))
        .route("/sheets/{log_id}", web::with_headers(get(web::sheet_page)))
        .route("/app/{*path}", web::with_headers(get(web::asset)))
        .route("/health", get(routes::health))
        .route("/openapi.json", get(openapi_json))
        .route("/config.json", get(sheets::config_json))
        .route("/me", get(sheets::me))
        .route("/sheets", get(sheets::list_sheets))
        .route("/logs", post(routes::create_log))
        .route(
            "/logs/{log_id}",
            get(routes::load_log)
                .delete(routes::delete_log)
                .patch(sheets::rename),
        )
        .route(
            access::MEMBERS_ROUTE,
            get(sheets::members).post(sheets::add_member),
        )
        .route(
            access::MEMBER_ROUTE,
            put(sheets::set_role).delete(sheets::remove_member),
        )
        .route(
            invitations::INVITATION_ROUTE,
            delete(invitations::remove_invitation),
        )
        .route(
            "/logs/{log_id}/entries",
            post(routes::append_entry).get(routes::read_entries),
        )
        .route("/logs/{log_id}/uploads", post(uploads::create_upload))
        .route(
            "/logs/{log_id}/uploads/{upload_id}/commit",
            post(uploads::commit_upload),
        )
        .route("/logs/{log_id}/segments", get(routes::list_segments))
        .route("/logs/{log_id}/cells", get(routes::read_cells))
        .route("/logs/{log_id}/extent", get(routes::read_extent))
        .route("/logs/{log_id}/restore", post(versions::restore))
        .route("/logs/{log_id}/undo", post(undo::undo))
        .route("/logs/{log_id}/redo", post(undo::redo))
        .route(
            "/logs/{log_id}/versions",
            get(versions::list_versions).post(versions::name_version),
        )
        .route(
            "/logs/{log_id}/versions/{seq}",
            put(versions::rename_version).delete(versions::delete_version),
        )
        .route("/logs/{log_id}/diff", get(diff::diff))
        .route("/logs/{log_id}/export", get(export::export))
        .route(access::PUSH_ROUTE, post(sync::push::push))
        .route("/logs/{log_id}/replay", post(sync::clients::replay))
        .route("/logs/{log_id}/replicache/pull", post(sync::pull::pull))
        .route(
            "/logs/{log_id}/clients/{client_id}",
            get(sync::clients::client),
        )
        .route(
            "/logs/{log_id}/clients/{client_id}/mutations/{id}",
            get(sync::clients::mutation),
        )
        // After routing (so an unknown path stays a 404 `not-found`), before any handler.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            access::enforce,
        ))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::map_response_with_state(
            response_limit,
            lambda_limit::lambda_response_limit,
        ))
        .layer(axum::middleware::map_response(json_rejections))
        .layer(CatchPanicLayer::custom(panic_response))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn json_of(resp: Response<Body>) -> serde_json::Value {
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .expect("body");
        serde_json::from_slice(&bytes).expect("a JSON body")
    }

    async fn boom() -> &'static str {
        panic!("secret detail")
    }

    #[tokio::test]
    async fn an_answer_over_the_lambda_limit_is_a_json_500_locally() {
        let app = Router::new()
            .route("/big", get(|| async { "x".repeat(100) }))
            .route("/small", get(|| async { "x".repeat(48) }))
            .layer(axum::middleware::map_response_with_state(
                50usize,
                lambda_limit::lambda_response_limit,
            ));
        let resp = app
            .clone()
            .oneshot(Request::get("/small").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let resp = app
            .oneshot(Request::get("/big").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let v = json_of(resp).await;
        assert_eq!(v["error"]["code"], "response-too-large");
        assert_eq!(
            (v["error"]["size"].clone(), v["error"]["limit"].clone()),
            (json!(100), json!(50))
        );
    }

    #[tokio::test]
    async fn the_limit_counts_the_body_as_lambda_escapes_it() {
        // 40 quotes are 40 bytes on the wire and 82 in the Lambda payload.
        assert_eq!(lambda_payload_len(&[b'"'; 40]), 82);
        assert_eq!(lambda_payload_len(b"ab\n\x01"), 4 + 1 + 5 + 2);
        let app = Router::new()
            .route("/quotes", get(|| async { "\"".repeat(40) }))
            .layer(axum::middleware::map_response_with_state(
                60usize,
                lambda_limit::lambda_response_limit,
            ));
        let resp = app
            .oneshot(Request::get("/quotes").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(json_of(resp).await["error"]["size"], 82);
    }

    #[test]
    fn the_document_lists_every_status_of_a_delete_and_410_on_every_log_route() {
        let doc = serde_json::to_value(openapi()).unwrap_or_default();
        let delete = &doc["paths"]["/logs/{logId}"]["delete"]["responses"];
        for status in ["200", "202", "400", "403", "404", "503"] {
            assert!(delete.get(status).is_some(), "DELETE lacks {status}");
        }
        assert!(
            delete.get("410").is_none(),
            "deleting again is 200, not 410"
        );
        let paths = doc["paths"].as_object().cloned().unwrap_or_default();
        let mut checked = 0;
        for (path, item) in &paths {
            if !path.starts_with("/logs/{logId}") {
                continue;
            }
            for method in ["get", "post", "put", "patch", "delete"] {
                if method == "delete" && path == "/logs/{logId}" {
                    continue;
                }
                if let Some(op) = item.get(method) {
                    assert!(op["responses"].get("410").is_some(), "{method} {path}");
                    checked += 1;
                }
            }
        }
        assert!(checked >= 10, "{checked}");
        assert!(paths["/logs"]["post"]["responses"].get("410").is_some());
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_a_json_500_with_a_request_id() {
        let app: Router = Router::new()
            .route("/boom", get(boom))
            .layer(CatchPanicLayer::custom(panic_response));
        let resp = app
            .oneshot(Request::get("/boom").body(Body::empty()).expect("request"))
            .await
            .expect("a response, not a dropped connection");
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let v = json_of(resp).await;
        assert_eq!(v["error"]["code"], "internal");
        assert!(
            v["error"]["requestId"]
                .as_str()
                .is_some_and(|s| s.len() == 36)
        );
        assert!(
            !v.to_string().contains("secret"),
            "nothing internal leaks: {v}"
        );
    }

    #[tokio::test]
    async fn undecodable_paths_answer_json() {
        let app: Router = Router::new()
            .route(
                "/logs/{id}",
                get(|axum::extract::Path(id): axum::extract::Path<String>| async move { id }),
            )
            .layer(axum::middleware::map_response(json_rejections));
        let resp = app
            .oneshot(
                Request::get("/logs/%FF%FE")
                    .body(Body::empty())
                    .expect("request"),
            )
            .await
            .expect("response");
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let v = json_of(resp).await;
        assert_eq!(v["error"]["code"], "invalid-request");
    }

    #[test]
    fn throttling_is_a_503_with_retry_after() {
        let e = ApiError::from_log(
            "x",
            sheetlog_core::LogError::Store(sheetlog_core::StoreError::Throttled {
                service: "DynamoDB",
                operation: "PutItem",
            }),
        );
        assert_eq!(e.code(), "throttled");
        let resp = e.into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            resp.headers().get("retry-after").map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        let e = ApiError::from_store(sheetlog_core::StoreError::TimedOut {
            service: "S3",
            operation: "GetObject",
        });
        assert_eq!(e.code(), "timed-out");
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
