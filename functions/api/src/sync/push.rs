//! Replicache push: queued for the sync writer, or applied directly (`docs/sync.md`).

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sheetlog_core::LogError;
use sheetlog_core::domain::LogId;
use sheetlog_core::domain::clients::ClientRange;
use sheetlog_core::log::{PushedMutation, Rejected, RunOutcome, RunSource, RunState};
use sheetlog_core::sync_queue::{
    MAX_MESSAGE_BYTES, MESSAGE_VERSION, QueuedMutation, QueuedPush, StoredPush, check_push_limits,
};
use tracing::{info, warn};

use super::{check, check_group_owner, replicache_error, shape, unsupported_version};
use crate::access::Caller;
use crate::dto::ErrorResponse;
use crate::error::ApiError;
use crate::request::{ApiResult, parse_body, parse_log_id};
use crate::state::SharedState;
#[derive(Debug, Deserialize)]
struct PushRequest {
    #[serde(rename = "clientGroupID")]
    client_group_id: String,
    mutations: Vec<QueuedMutation>,
}

/// Replicache push (protocol version 1): apply a client group's mutations, each exactly once and
/// in order per client. Mutator names are entry types and `args` entry bodies. Errors Replicache
/// understands (`VersionNotSupported`, `ClientStateNotFound`) are answered 200 with `{"error"}`.
/// With queued writes the push is enqueued for the log's sync writer and answered
/// `{"queued": <mutations>}`; pull tells the client when they are applied.
#[utoipa::path(post, path = "/logs/{logId}/replicache/push",
    params(("logId" = String, Path, description = "the log's UUID")),
    request_body(content = Object, description = "a Replicache PushRequest (pushVersion 1)"),
    responses((status = 200, body = Object, description = "applied count, rejected mutations with their errors, and each client's last mutation id (direct writes); the number of mutations queued (queued writes); or a Replicache error"),
        (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse, description = "under JWT authorization: no write grant on this log, or the client group belongs to another user (`client-group-forbidden`)"),
        (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse, description = "a mutation id past the next one expected (`mutation-gap`)"),
        (status = 413, body = ErrorResponse, description = "the body is over the request limit (`request-too-large`), or the push carries more than 10,000 mutations or mutations of more than 100 clients (`push-too-large`): split it into several pushes, in order"),
        (status = 503, body = ErrorResponse)))]
pub async fn push(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    caller: Option<axum::Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let log = parse_log_id(&log_id)?;
    let req: Value = parse_body(body, state.cfg.max_request_bytes)?;
    if let Some(resp) = unsupported_version(&req, "pushVersion", "push") {
        return Ok(resp);
    }
    let req: PushRequest = shape(req)?;
    check("clientGroupID", &req.client_group_id)?;
    for m in &req.mutations {
        check("clientID", &m.client_id)?;
    }
    // Bounded work per push (`docs/sync.md`, "Push limits"): refused before the group is claimed
    // or anything is enqueued or written.
    check_push_limits(req.mutations.iter().map(|m| m.client_id.as_str()))
        .map_err(ApiError::PushTooLarge)?;
    check_group_owner(
        &state,
        log,
        &log_id,
        &req.client_group_id,
        caller.as_deref(),
    )
    .await?;
    if let Some(queue) = &state.push_queue {
        let subject = caller.and_then(|axum::Extension(c)| c.subject);
        return enqueue(&state, queue.as_ref(), log, &log_id, req, subject).await;
    }
    let group = req.client_group_id.as_str();
    // The push's mutations in runs of one client each, in the order sent.
    let mut runs: Vec<(String, Vec<PushedMutation>)> = Vec::new();
    for m in req.mutations {
        let pushed = PushedMutation::from_args(m.id, &m.name, m.args);
        match runs.last_mut() {
            Some((client, ms)) if *client == m.client_id => ms.push(pushed),
            _ => runs.push((m.client_id, vec![pushed])),
        }
    }
    let mut applied = 0u64;
    let mut rejected = Vec::new();
    let mut last_ids = BTreeMap::new();
    for (client, mutations) in &runs {
        let (ranges, reasons, last) =
            match apply_client(&state, log, group, client, mutations, RunSource::Push).await {
                Ok(done) => done,
                // The log has no record of a client that is past its first mutation: its state
                // here was lost (Replicache then starts the client afresh).
                Err(LogError::ClientUnknown { client, got }) => {
                    warn!(log = %log, client, got, "push from a client this log does not know");
                    return Ok(replicache_error("ClientStateNotFound", None));
                }
                Err(e) => return Err(ApiError::from_log(&log_id, e)),
            };
        for m in mutations
            .iter()
            .filter(|m| ranges.iter().any(|r| r.contains(m.id)))
        {
            match reasons.iter().find(|r| r.id == m.id) {
                None => applied += 1,
                Some(Rejected { reason: error, .. }) => {
                    warn!(log = %log, client, id = m.id, error, "mutation rejected");
                    rejected.push(json!({"clientID": client, "id": m.id, "error": error}));
                }
            }
        }
        last_ids.insert(client.clone(), last);
    }
    info!(log = %log, group, applied, rejected = rejected.len(), "push");
    Ok(Json(json!({
        "applied": applied,
        "rejected": rejected,
        "lastMutationIDs": last_ids,
    }))
    .into_response())
}

/// A queued push (`docs/sync.md`, "Queued pushes"): checked against what the log knows of its
/// clients, then enqueued in the log's message group with a deduplication id from its content
/// (through the bucket when it is larger than one message). The push is durable once this
/// answers; the sync writer applies it.
async fn enqueue(
    state: &SharedState,
    queue: &dyn sheetlog_core::ports::PushQueue,
    log: LogId,
    log_id: &str,
    req: PushRequest,
    subject: Option<String>,
) -> ApiResult<Response> {
    let from_log = |e| ApiError::from_log(log_id, e);
    // A missing log is a 404 now rather than a push the writer drops. A log this process has
    // already found (it holds a segment hint for it) is not looked up again: logs do not come
    // back from deletion, a deleted one is refused before this handler runs (its tombstone),
    // and one deleted in the meantime makes the writer drop the message, as it drops a push to
    // a log that does not exist. That saves every queued push but a process's first its head
    // read, the only DynamoDB request of a queued push.
    if state.hint(log).is_none() {
        let (_, at) = state.log.next_seq_from(log, None).await.map_err(from_log)?;
        state.remember_hint(log, at);
    }
    let push = QueuedPush {
        v: MESSAGE_VERSION,
        log,
        group: req.client_group_id,
        mutations: req.mutations,
        received: time::OffsetDateTime::now_utc().unix_timestamp() * 1000,
        subject,
    };
    if push.mutations.is_empty() {
        return Ok(Json(json!({ "queued": 0 })).into_response());
    }
    // What the log knows of each client: another group's client is refused as a direct push
    // would be, and a client the log has no record of that starts past its first mutation has
    // lost its state here (Replicache starts it afresh). A client that pushes from its oldest
    // pending mutation, as Replicache does, never races its own queued push in this check.
    for (client, (first, _)) in push.id_ranges() {
        if first <= 1 {
            continue;
        }
        let known = match state.known_client_group(log, client) {
            Some(group) => Some(group),
            None => {
                let group = state
                    .log
                    .client_group(log, client)
                    .await
                    .map_err(from_log)?;
                if let Some(g) = &group {
                    state.remember_client_group(log, client, g);
                }
                group
            }
        };
        match known {
            Some(group) if group != push.group => {
                return Err(from_log(LogError::ClientGroupMismatch {
                    client: client.to_owned(),
                    group,
                    claimed: push.group.clone(),
                }));
            }
            Some(_) => {}
            None => {
                warn!(log = %log, client, got = first, "push from a client this log does not know");
                return Ok(replicache_error("ClientStateNotFound", None));
            }
        }
    }
    let dedupe_id = push.dedupe_id();
    let mut body = push.to_json();
    if body.len() > MAX_MESSAGE_BYTES {
        let key = push.stored_key();
        state
            .bucket
            .put_object(&key, Bytes::from(body), true)
            .await
            .map_err(ApiError::from_store)?;
        let stored = StoredPush {
            v: MESSAGE_VERSION,
            log,
            s3: key,
        };
        body = serde_json::to_string(&stored).map_err(|e| ApiError::Internal(e.to_string()))?;
    }
    queue
        .send(&log.to_string(), &dedupe_id, body)
        .await
        .map_err(ApiError::from_store)?;
    let queued = push.mutations.len();
    info!(log = %log, group = push.group, queued, "push queued");
    Ok(Json(json!({ "queued": queued })).into_response())
}

/// Pushes one client's mutations until every one of them is applied, one `mutations` entry per
/// run with the snapshot trigger after each: the ranges this call wrote, the mutations they
/// rejected and why (bad arguments, or over the entry-size rule), and the client's last applied
/// mutation id afterwards.
pub(crate) async fn apply_client(
    state: &SharedState,
    log: LogId,
    group: &str,
    client: &str,
    mutations: &[PushedMutation],
    source: RunSource,
) -> Result<(Vec<ClientRange>, Vec<Rejected>, u64), LogError> {
    let mut ranges = Vec::new();
    let mut reasons = Vec::new();
    // The history read for rebasing, kept from run to run: read once per push.
    let mut run_state = RunState::default();
    loop {
        match state
            .log
            .push_run_with(
                log,
                group,
                client,
                mutations,
                state.hint(log),
                source,
                &mut run_state,
            )
            .await?
        {
            RunOutcome::Applied {
                range,
                appended,
                rejected,
            } => {
                crate::append::after_append(state, log, &appended).await;
                let last = range.last;
                ranges.push(range);
                reasons.extend(rejected);
                // The run reached the last mutation given: nothing is left to push, and asking
                // again would only read the client back (the head, the index mark, its range).
                if mutations
                    .iter()
                    .map(|m| m.id)
                    .max()
                    .is_some_and(|m| m <= last)
                {
                    return Ok((ranges, reasons, last));
                }
            }
            RunOutcome::AlreadyApplied { newest, .. } => {
                return Ok((ranges, reasons, newest.last));
            }
        }
    }
}
