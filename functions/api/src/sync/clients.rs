//! The sync client queries (`docs/sync.md`): a client's last applied mutation, where a mutation
//! landed, and replaying a range of one log's mutations onto another (a rebase).

use std::collections::BTreeSet;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};
use sheetlog_core::domain::LogId;
use sheetlog_core::log::{PushedMutation, RunSource};
use sheetlog_core::sheet::EntryBody;
use sheetlog_core::sheet::mutations::Mutations;
use tracing::{info, warn};

use super::push::apply_client;
use super::{check, check_group_owner};
use crate::dto::ErrorResponse;
use crate::error::ApiError;
use crate::request::{ApiResult, parse_body, parse_log_id};
use crate::state::SharedState;

/// A sync client's last applied mutation and the sequence of the entry that holds it.
#[utoipa::path(get, path = "/logs/{logId}/clients/{clientId}",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("clientId" = String, Path, description = "the client's id")),
    responses((status = 200, body = Object, description = "clientId, clientGroupId, lastMutationId, seq"),
        (status = 400, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub async fn client(
    State(state): State<SharedState>,
    Path((log_id, client)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let log = parse_log_id(&log_id)?;
    check("clientID", &client)?;
    let from_log = |e| ApiError::from_log(&log_id, e);
    match state
        .log
        .last_mutation(log, &client)
        .await
        .map_err(from_log)?
    {
        Some(r) => Ok(Json(json!({
            "clientId": r.client,
            "clientGroupId": r.group,
            "lastMutationId": r.last,
            "seq": r.seq,
        }))),
        None => {
            // Tell a missing log from a client that never pushed to it.
            state.log.next_seq(log).await.map_err(from_log)?;
            Err(ApiError::ClientNotFound { client })
        }
    }
}

/// Where a client's mutation landed: the sequence of its entry, and whether it was applied or
/// rejected.
#[utoipa::path(get, path = "/logs/{logId}/clients/{clientId}/mutations/{id}",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("clientId" = String, Path, description = "the client's id"),
        ("id" = String, Path, description = "the mutation id (a positive whole number)")),
    responses((status = 200, body = Object, description = "clientId, clientGroupId, mutationId, seq, status"),
        (status = 400, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub async fn mutation(
    State(state): State<SharedState>,
    Path((log_id, client, id)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let log = parse_log_id(&log_id)?;
    check("clientID", &client)?;
    let id: u64 = id.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
        ApiError::InvalidQuery(format!("mutation id {id:?} is not a positive whole number"))
    })?;
    let from_log = |e| ApiError::from_log(&log_id, e);
    match state
        .log
        .find_mutation(log, &client, id)
        .await
        .map_err(from_log)?
    {
        Some(r) => Ok(Json(json!({
            "clientId": r.client,
            "clientGroupId": r.group,
            "mutationId": id,
            "seq": r.seq,
            "status": if r.rejected.contains(&id) { "rejected" } else { "applied" },
        }))),
        None => {
            state.log.next_seq(log).await.map_err(from_log)?;
            Err(ApiError::MutationNotFound { client, id })
        }
    }
}

/// The client groups of the runs in entries `[from, to)` of `source` (a replay's range).
async fn replayed_groups(
    state: &SharedState,
    source: LogId,
    raw: &str,
    from: u64,
    to: u64,
) -> ApiResult<BTreeSet<String>> {
    let mut groups = BTreeSet::new();
    let mut at = from;
    while at < to {
        let page = state
            .log
            .read_since(source, at, (to - at).min(REPLAY_PAGE) as usize)
            .await
            .map_err(|e| ApiError::from_log(raw, e))?;
        let Some(last) = page.entries.last() else {
            warn!(%source, at, to, "replay read came back short; retry");
            return Err(ApiError::Busy);
        };
        at = last.seq + 1;
        for e in page.entries.iter().filter(|e| e.seq < to) {
            let body = EntryBody::decode(e.kind.0, e.version, &e.body).map_err(|err| {
                ApiError::Internal(format!("source entry {} does not decode: {err}", e.seq))
            })?;
            groups.extend(body.runs().iter().map(|m| m.group.clone()));
        }
    }
    Ok(groups)
}

/// Source entries a replay reads per request to the log.
const REPLAY_PAGE: u64 = 1000;

/// Most source entries one replay request reads.
pub const MAX_REPLAY_ENTRIES: u64 = 10_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayRequest {
    source: String,
    from: u64,
    to: u64,
}

/// Replay a range of another log's client mutations onto this log (a rebase): each `mutations`
/// entry in `[from, to)` of the source is pushed here with its client and mutation ids, so a
/// mutation already here is skipped and replaying twice appends nothing. Other entries (plain
/// appends, imports, snapshots) are not client mutations and are left out. Every client group
/// of the range must be the caller's in this log, as for a push, or nothing is replayed.
#[utoipa::path(post, path = "/logs/{logId}/replay",
    params(("logId" = String, Path, description = "the log to replay onto")),
    request_body(content = Object, description = "{\"source\": <log UUID>, \"from\": <seq>, \"to\": <seq, exclusive>}"),
    responses((status = 200, body = Object, description = "entries read, mutations applied and skipped, the target's nextSeq"),
        (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse, description = "under JWT authorization: no write grant on this log, or no read grant on the source (the same answer whether or not the source exists); or a client group of the range belongs to another user in this log (`client-group-forbidden`, nothing replayed)"),
        (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse, description = "a client's replayed mutations do not follow its last one here (`mutation-gap`)"),
        (status = 410, body = ErrorResponse), (status = 416, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub async fn replay(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    caller: Option<axum::Extension<crate::access::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let log = parse_log_id(&log_id)?;
    let req: ReplayRequest = parse_body(body, state.cfg.max_request_bytes)?;
    let source = parse_log_id(&req.source)?;
    // The access layer checked write on the log in the URL only; replay also reads the source,
    // so the caller needs read access to it, checked before anything touches storage so a log
    // the caller may not read answers the same 403 whether or not it exists.
    if let Some(axum::Extension(caller)) = &caller {
        crate::access::check(
            &state,
            caller,
            crate::access::Need::Read,
            Some(*source.as_uuid()),
        )
        .await?;
    }
    if source == log {
        return Err(ApiError::InvalidEntry(
            "source: a log cannot be replayed onto itself".into(),
        ));
    }
    if req.to < req.from || req.to - req.from > MAX_REPLAY_ENTRIES {
        return Err(ApiError::InvalidEntry(format!(
            "from..to must be a range of at most {MAX_REPLAY_ENTRIES} entries (got {}..{})",
            req.from, req.to
        )));
    }
    // The target must exist before anything is read from the source.
    state
        .log
        .next_seq(log)
        .await
        .map_err(|e| ApiError::from_log(&log_id, e))?;
    crate::routes::check_source(&state, source, &req.source, req.to).await?;
    // Every client group the range replays must be the caller's in this log, as for a push
    // (`check_group_owner`): otherwise an editor could push mutations as another member's client
    // on a scratch log of their own and replay them here, crediting them to that client so its
    // real mutations would count as applied and be dropped. Checked for the whole range before
    // anything is written, so a refused replay appends nothing.
    for group in replayed_groups(&state, source, &req.source, req.from, req.to).await? {
        check_group_owner(&state, log, &log_id, &group, caller.as_deref()).await?;
    }
    let (mut read, mut applied, mut skipped, mut appended) = (0u64, 0u64, 0u64, 0u64);
    let mut at = req.from;
    while at < req.to {
        let page = state
            .log
            .read_since(source, at, (req.to - at).min(REPLAY_PAGE) as usize)
            .await
            .map_err(|e| ApiError::from_log(&req.source, e))?;
        let Some(last) = page.entries.last() else {
            // The source said it holds `to` entries, but a read does not show them yet.
            warn!(%source, at, to = req.to, "replay read came back short; retry");
            return Err(ApiError::Busy);
        };
        at = last.seq + 1;
        for e in page.entries.iter().filter(|e| e.seq < req.to) {
            read += 1;
            let body = EntryBody::decode(e.kind.0, e.version, &e.body).map_err(|err| {
                ApiError::Internal(format!("source entry {} does not decode: {err}", e.seq))
            })?;
            for m in body.runs() {
                let mutations = as_pushed(m, source, e.seq);
                let (ranges, _, _) = apply_client(
                    &state,
                    log,
                    &m.group,
                    &m.client,
                    &mutations,
                    RunSource::Replay,
                )
                .await
                .map_err(|e| ApiError::from_log(&log_id, e))?;
                let done: u64 = ranges.iter().map(|r| r.last - r.first + 1).sum();
                appended += ranges.len() as u64;
                applied += done;
                skipped += (m.last - m.first + 1) - done;
            }
        }
    }
    let (next_seq, _) = state
        .log
        .next_seq(log)
        .await
        .map_err(|e| ApiError::from_log(&log_id, e))?;
    info!(log = %log, %source, read, applied, skipped, "replay");
    Ok(Json(json!({
        "entriesRead": read,
        "mutationsApplied": applied,
        "mutationsSkipped": skipped,
        "entriesAppended": appended,
        "nextSeq": next_seq,
    })))
}

/// A source run's mutations as a push of them: each id from `first` to `last` with the events it
/// applied (a split delete recorded several under its id: all replay), or, for an id the run
/// rejected, a rejection that says where.
fn as_pushed(run: &Mutations, source: LogId, seq: u64) -> Vec<PushedMutation> {
    let mut events = run.applied.iter().peekable();
    (run.first..=run.last)
        .map(|id| match events.next_if(|a| a.id == id) {
            Some(a) => PushedMutation {
                id,
                event: Ok(a.event.clone()),
                base: None,
                then: std::iter::from_fn(|| events.next_if(|b| b.id == id))
                    .map(|b| b.event.clone())
                    .collect(),
            },
            None => PushedMutation {
                id,
                event: Err(format!("rejected in log {source} at sequence {seq}")),
                base: None,
                then: Vec::new(),
            },
        })
        .collect()
}
