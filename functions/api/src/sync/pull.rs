//! Replicache pull: the fast read since the cookie or the head check, then the patch within the
//! response limit (`docs/sync.md`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sheetlog_core::LogError;
use sheetlog_core::domain::LogId;
use sheetlog_core::log::{EntriesPage, SegmentHint};
use tracing::warn;

use super::view::{View, view};
use super::{check, check_group_owner, replicache_error, shape, unsupported_version};
use crate::access::Caller;
use crate::dto::ErrorResponse;
use crate::error::ApiError;
use crate::request::{ApiResult, parse_body, parse_log_id, reject_unknown_params};
use crate::state::SharedState;

/// The most entries since the cookie that a pull reads in its one Query; further behind, it
/// checks the head first (`pull`).
const FAST_PULL_ENTRIES: usize = 100;

#[derive(Debug, Deserialize)]
struct PullRequest {
    #[serde(rename = "clientGroupID")]
    client_group_id: String,
    #[serde(default)]
    cookie: Value,
}

/// Replicache pull (protocol version 1): the cookie is the log's next sequence; the patch puts
/// `cell/<A1>` keys (`{"value", "format"?}`) and `meta/seq`.
#[utoipa::path(post, path = "/logs/{logId}/replicache/pull",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("view" = Option<String>, Query, description = "`cells` (default): the patch carries the sheet's cells; `none`: only `meta/seq`, for a client that reads cells by range and keeps only its pending edits in Replicache")),
    request_body(content = Object, description = "a Replicache PullRequest (pullVersion 1)"),
    responses((status = 200, body = Object, description = "a PullResponse (cookie, lastMutationIDChanges, patch), or a Replicache error"),
        (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse, description = "under JWT authorization: no read grant on this log, or the client group belongs to another user (`client-group-forbidden`)"),
        (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse, description = "the client view exceeds the 6 MB response limit (`view-too-large`), or the entries since the last completed snapshot pass the read budget (`history-too-large`)"),
        (status = 503, body = ErrorResponse)))]
pub async fn pull(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    caller: Option<axum::Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let log = parse_log_id(&log_id)?;
    reject_unknown_params(&q, &["view"])?;
    let with_cells = with_cells(&q)?;
    let req: Value = parse_body(body, state.cfg.max_request_bytes)?;
    if let Some(resp) = unsupported_version(&req, "pullVersion", "pull") {
        return Ok(resp);
    }
    let req: PullRequest = shape(req)?;
    check("clientGroupID", &req.client_group_id)?;
    check_group_owner(
        &state,
        log,
        &log_id,
        &req.client_group_id,
        caller.as_deref(),
    )
    .await?;
    let cookie = cookie(&req.cookie)?;
    let (next_seq, at, since) = head(&state, log, &log_id, cookie).await?;
    if cookie.is_some_and(|c| c > next_seq) {
        // The client has seen entries this log does not have: the server lost state.
        warn!(log = %log, ?cookie, next_seq, "pull with a cookie past the end of the log");
        return Ok(replicache_error("ClientStateNotFound", None));
    }
    let group = req.client_group_id.as_str();
    let view = view(
        &state,
        (log, &log_id, at),
        group,
        (cookie, since),
        next_seq,
        with_cells,
    )
    .await?;
    answer(&state, next_seq, view)
}

/// The `view` parameter: `cells` (the default) or `none`.
fn with_cells(q: &HashMap<String, String>) -> ApiResult<bool> {
    match q.get("view").map(String::as_str) {
        None | Some("cells") => Ok(true),
        Some("none") => Ok(false),
        Some(other) => Err(ApiError::InvalidQuery(format!(
            "view={other:?} is not a view (expected cells or none)"
        ))),
    }
}

/// The request's cookie: null, or a sequence this server gave out.
fn cookie(cookie: &Value) -> ApiResult<Option<u64>> {
    match cookie {
        Value::Null => Ok(None),
        v => Ok(Some(v.as_u64().ok_or_else(|| {
            ApiError::InvalidEntry(format!(
                "cookie: {v} is not a cookie this server gave out (a whole number or null)"
            ))
        })?)),
    }
}

/// The log's head for this pull (its next sequence and segment) and, when the fast path read
/// them, the entries since the cookie; a log with something new for the client is checked not
/// to be deleted.
async fn head(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    cookie: Option<u64>,
) -> ApiResult<(u64, SegmentHint, Option<Arc<EntriesPage>>)> {
    let (next_seq, at, since) = match fast_read(state, log, cookie).await {
        Some((page, hint)) => (page.next_seq, hint, Some(page)),
        None => {
            let (next_seq, at) = head_check(state, log, log_id, cookie).await?;
            (next_seq, at, None)
        }
    };
    // The shared read has checked it already when it found something new.
    let live_checked = since.is_some();
    if cookie != Some(next_seq) && !live_checked {
        // Not skipped for a deleted log by the router, so that an unchanged pull costs only its
        // head check: an answer that carries nothing new tells nothing of a deleted log, and
        // once the purge is done the head check finds no log (then the tombstone is read).
        sheetlog_core::log::purge::check_live(&*state.purge, log)
            .await
            .map_err(|e| ApiError::from_log(log_id, e))?;
    }
    Ok((next_seq, at, since))
}

/// With a cookie and a hint, one Query answers most pulls: the entries since the cookie, read
/// from the entry before it (`EventLog::pull_since`), plus the tombstone check when there is
/// something new; pulls of the same cookie that arrive together share both reads (`gather.rs`).
/// Anything it cannot decide (a new segment, a long way behind, a cookie it does not find, a
/// deleted log, an error) is `None`, for the head check, whose answers are the authority.
async fn fast_read(
    state: &SharedState,
    log: LogId,
    cookie: Option<u64>,
) -> Option<(Arc<EntriesPage>, SegmentHint)> {
    let (Some(c), Some(hint)) = (cookie, state.hint(log)) else {
        return None;
    };
    state
        .pull_gather
        .since(log, c, || async {
            let page = state
                .log
                .pull_since(log, c, FAST_PULL_ENTRIES, hint)
                .await
                .ok()
                .flatten()?;
            // Something new: the log must not be deleted (below), checked once for all
            // (trusting this instance's finding of the last second, `LIVE_FOR`).
            if !page.entries.is_empty() {
                state.check_live_recent(log).await.ok()?;
            }
            Some(page)
        })
        .await
        .map(|page| (page, hint))
}

/// A pull's head check: the log's next sequence as an eventually consistent read shows it (0.5
/// RRU with a hint). Most pulls find nothing new, and a stale head only makes the pull answer an
/// older cookie, never a cookie past what it serves (docs/sync.md, "What an unchanged pull
/// costs"). Also the hint for the entries' read.
async fn head_check(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    cookie: Option<u64>,
) -> ApiResult<(u64, SegmentHint)> {
    let from_log = |e| ApiError::from_log(log_id, e);
    let (mut next_seq, at, _) = match state.log.peek_next_seq(log, state.hint(log)).await {
        Ok(head) => head,
        Err(e @ LogError::LogNotFound(_)) => {
            // A deleted log's items may be gone already: its tombstone makes that a 410.
            sheetlog_core::log::purge::check_live(&*state.purge, log)
                .await
                .map_err(from_log)?;
            return Err(from_log(e));
        }
        Err(e) => return Err(from_log(e)),
    };
    state.remember_hint(log, at);
    if cookie.is_some_and(|c| c > next_seq) {
        // An eventually consistent read can lag the one that gave out this cookie: ask strongly
        // before telling the client its state is lost.
        (next_seq, _) = state
            .log
            .next_seq_from(log, Some(at))
            .await
            .map_err(from_log)?;
    }
    Ok((next_seq, at))
}

/// The PullResponse, refused when it would not fit the function's response limit.
fn answer(state: &SharedState, next_seq: u64, view: View) -> ApiResult<Response> {
    let body = json!({
        "cookie": next_seq,
        "lastMutationIDChanges": view.last_ids,
        "patch": view.patch,
    });
    let bytes = serde_json::to_vec(&body).map_err(|e| ApiError::Internal(e.to_string()))?;
    let payload = crate::lambda_limit::lambda_payload_len(&bytes);
    if payload > state.cfg.max_response_bytes {
        return Err(ApiError::ViewTooLarge {
            size: payload,
            limit: state.cfg.max_response_bytes,
        });
    }
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response())
}
