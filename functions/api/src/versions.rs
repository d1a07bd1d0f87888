//! Acting on the log's history: restoring the sheet to an earlier version
//! (`POST /logs/{logId}/restore`, docs/api.md "Restore").

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use sheetlog_core::domain::{EntryType, NewEntry};
use sheetlog_core::log::IdempotencyKey;
use sheetlog_core::sheet::{Event, Restore};
use sheetlog_core::snapshot::BuildConfig;
use sheetlog_core::snapshot_input::restore_snapshot;
use tracing::info;

use crate::dto::{AppendResponse, ErrorResponse, RestoreRequest};
use crate::error::ApiError;
use crate::request::{parse_body, parse_log_id};
use crate::routes::ApiResult;
use crate::routes::{created, idempotency_key};
use crate::state::SharedState;

/// Makes the sheet what it was as of sequence `seq` with one `restore` entry. The state as of
/// `seq` is kept first, as a snapshot manifest that shares the chunks of the snapshot it was
/// built from; the entry then points at it, so a restore costs the same for a million cells as
/// for ten. Everything after `seq` stays in the log.
#[utoipa::path(post, path = "/logs/{logId}/restore",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("Idempotency-Key" = Option<String>, Header, description = "makes a retry safe (docs/api.md)")),
    request_body = RestoreRequest,
    responses(
        (status = 201, body = AppendResponse),
        (status = 400, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 410, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 416, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub async fn restore(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let log = parse_log_id(&log_id)?;
    let key = idempotency_key(&headers)?.map(IdempotencyKey::request);
    let req: RestoreRequest = parse_body(body, state.cfg.max_request_bytes)?;
    // Past the end, deleted history and a history too large to read all fail here, before the
    // log is written.
    let kept = restore_snapshot(
        &state.log,
        &state.bucket,
        &state.bucket,
        BuildConfig::default(),
        log,
        req.seq,
    )
    .await
    .map_err(|e| ApiError::from_input(&log_id, e))?;
    let (code, version, encoded) = Event::Restore(Restore { seq: req.seq }).encode();
    let entry = NewEntry::new(EntryType(code), version, encoded);
    let out = crate::append::append_and_trigger(
        &state,
        log,
        &log_id,
        entry,
        req.expected_seq,
        None,
        key.as_ref(),
    )
    .await?;
    info!(log = %log, to = req.seq, seq = out.body.seq, manifest = %kept, "sheet restored");
    Ok(created(out))
}
