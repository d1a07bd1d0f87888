//! Acting on the log's history: restoring the sheet to an earlier version
//! (`POST /logs/{logId}/restore`, docs/api.md "Restore") and naming versions
//! (`/logs/{logId}/versions`, docs/api.md "Named versions").

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sheetlog_core::domain::versions::{MAX_NAMED_VERSIONS, NamedVersion, clean_version_name};
use sheetlog_core::domain::{EntryType, LogId, NewEntry, RequestUnits};
use sheetlog_core::log::IdempotencyKey;
use sheetlog_core::sheet::{Event, Restore};
use sheetlog_core::snapshot::BuildConfig;
use sheetlog_core::snapshot_input::restore_snapshot;
use tracing::info;

use crate::access::Caller;
use crate::dto::{
    AppendResponse, ErrorResponse, NameVersionRequest, RenameVersionRequest, RestoreRequest,
    VersionsResponse,
};
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
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let log = parse_log_id(&log_id)?;
    let key = idempotency_key(&headers)?.map(IdempotencyKey::request);
    let req: RestoreRequest = parse_body(body, state.cfg.max_request_bytes)?;
    if let Some(group) = &req.client_group_id {
        crate::sync::check("clientGroupId", group)?;
        crate::sync::check_group_owner(&state, log, &log_id, group, caller.as_deref()).await?;
    }
    // Past the end, deleted history and a history too large to read all fail here, before the
    // log is written.
    let kept = keep_state(&state, log, &log_id, req.seq).await?;
    let (code, version, encoded) = Event::Restore(Restore {
        seq: req.seq,
        group: req.client_group_id.clone(),
    })
    .encode();
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

/// A sheet's named versions, newest first.
#[utoipa::path(get, path = "/logs/{logId}/versions",
    params(("logId" = String, Path, description = "the log's UUID")),
    responses((status = 200, body = VersionsResponse), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub async fn list_versions(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
) -> ApiResult<Json<VersionsResponse>> {
    let log = parse_log_id(&log_id)?;
    let mut versions = named(&state, log).await?;
    versions.reverse();
    Ok(Json(VersionsResponse {
        versions: versions.iter().map(version_json).collect(),
    }))
}

/// Names version `seq`, after keeping its state: the sheet as of `seq` is written where a
/// restore finds it, so the version stays readable and restorable whatever the retention policy
/// later removes. Naming a named version again renames it.
#[utoipa::path(post, path = "/logs/{logId}/versions",
    params(("logId" = String, Path, description = "the log's UUID")),
    request_body = NameVersionRequest,
    responses((status = 201, body = Object), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 410, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 416, body = ErrorResponse)))]
pub async fn name_version(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    caller: Option<axum::Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let log = parse_log_id(&log_id)?;
    let req: NameVersionRequest = parse_body(body, state.cfg.max_request_bytes)?;
    let name =
        clean_version_name(&req.name).map_err(|e| ApiError::InvalidEntry(format!("name: {e}")))?;
    let existing = named(&state, log).await?;
    if existing.len() >= MAX_NAMED_VERSIONS && !existing.iter().any(|v| v.seq == req.seq) {
        return Err(ApiError::TooManyVersions {
            limit: MAX_NAMED_VERSIONS,
        });
    }
    // Past the end, history already deleted and a history too large to read all fail here,
    // before anything is named.
    keep_state(&state, log, &log_id, req.seq).await?;
    let by = caller.as_ref().and_then(|c| c.subject.clone());
    let v = keep_name(&state, log, req.seq, &name, by.as_deref()).await?;
    info!(log = %log, seq = req.seq, "version named");
    Ok((StatusCode::CREATED, Json(version_json(&v))).into_response())
}

/// Renames a named version.
#[utoipa::path(put, path = "/logs/{logId}/versions/{seq}",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("seq" = u64, Path, description = "the named version")),
    request_body = RenameVersionRequest,
    responses((status = 200, body = Object), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub async fn rename_version(
    State(state): State<SharedState>,
    Path((log_id, seq)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<serde_json::Value>> {
    let log = parse_log_id(&log_id)?;
    let seq = parse_seq(&seq)?;
    let req: RenameVersionRequest = parse_body(body, state.cfg.max_request_bytes)?;
    let name =
        clean_version_name(&req.name).map_err(|e| ApiError::InvalidEntry(format!("name: {e}")))?;
    if !named(&state, log).await?.iter().any(|v| v.seq == seq) {
        return Err(ApiError::VersionNotFound(seq));
    }
    let v = keep_name(&state, log, seq, &name, None).await?;
    Ok(Json(version_json(&v)))
}

/// Forgets a version's name. Its kept state stays: a `restore` entry may point at it.
#[utoipa::path(delete, path = "/logs/{logId}/versions/{seq}",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("seq" = u64, Path, description = "the named version")),
    responses((status = 204), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub async fn delete_version(
    State(state): State<SharedState>,
    Path((log_id, seq)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let log = parse_log_id(&log_id)?;
    let seq = parse_seq(&seq)?;
    check_exists(&state, log, &log_id).await?;
    let mut units = RequestUnits::default();
    let gone = state
        .versions
        .delete_version(log, seq, &mut units)
        .await
        .map_err(ApiError::from_store)?;
    if !gone {
        return Err(ApiError::VersionNotFound(seq));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Keeps the state as of `seq` where a restore finds it (`restore_snapshot`); its key.
pub(crate) async fn keep_state(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    seq: u64,
) -> ApiResult<String> {
    restore_snapshot(
        &state.log,
        &state.bucket,
        &state.bucket,
        BuildConfig::default(),
        log,
        seq,
    )
    .await
    .map_err(|e| ApiError::from_input(log_id, e))
}

fn parse_seq(raw: &str) -> ApiResult<u64> {
    raw.parse()
        .map_err(|_| ApiError::InvalidQuery(format!("{raw:?} is not a sequence number")))
}

/// `404 log-not-found` for a log that does not exist (the versions partition of a log that never
/// existed is simply empty).
async fn check_exists(state: &SharedState, log: LogId, log_id: &str) -> ApiResult<()> {
    state
        .log
        .next_seq(log)
        .await
        .map(|_| ())
        .map_err(|e| ApiError::from_log(log_id, e))
}

/// The log's named versions by sequence, after checking the log exists.
async fn named(state: &SharedState, log: LogId) -> ApiResult<Vec<NamedVersion>> {
    check_exists(state, log, &log.to_string()).await?;
    let mut units = RequestUnits::default();
    state
        .versions
        .list_versions(log, &mut units)
        .await
        .map_err(ApiError::from_store)
}

async fn keep_name(
    state: &SharedState,
    log: LogId,
    seq: u64,
    name: &str,
    by: Option<&str>,
) -> ApiResult<NamedVersion> {
    let mut units = RequestUnits::default();
    let now = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
    state
        .versions
        .name_version(log, seq, name, by, now, &mut units)
        .await
        .map_err(ApiError::from_store)
}

/// A version as the API answers it: `createdAt` as RFC 3339, as the sheet list gives times.
fn version_json(v: &NamedVersion) -> serde_json::Value {
    let mut out = serde_json::json!({
        "seq": v.seq,
        "name": v.name,
        "createdAt": crate::sheets::rfc3339(v.created_at),
    });
    if let Some(by) = &v.by {
        out["by"] = serde_json::json!(by);
    }
    out
}
