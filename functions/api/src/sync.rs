//! Sync clients (`docs/sync.md`): Replicache's push and pull (protocol version 1) over a log, and
//! the client queries.
//!
//! - Push, queued (`SHEETLOG_SYNC_WRITES=queued`): the push is checked and enqueued on the sync
//!   FIFO queue in its log's message group ([`enqueue`]); the sync writer applies it with a group
//!   commit. Clients learn what was applied from pull's `lastMutationIDChanges`.
//! - Push, direct: each client's mutations become `mutations` entries through [`EventLog::push_run`],
//!   which applies every mutation exactly once and in order. Mutator names are the entry types,
//!   `args` the entry body in the API's JSON form. A mutation whose args are invalid is recorded
//!   as rejected (processed, with no effect), and the error is returned in the push response.
//! - Pull: the cookie is the log's next sequence. A null cookie gets `clear` and every non-empty
//!   cell; a cookie `c` gets the cells that entries `c..next` set (`put`, or `del` when cleared),
//!   or a full reset when one of those entries moved cells around (rows, columns, an import).
//!   `lastMutationIDChanges` comes from the `mutations` entries since the cookie (every run of a
//!   batch entry), or from the Clients table for a null cookie.
//!
//! [`EventLog::push_run`]: sheetlog_core::log::EventLog::push_run

use std::collections::{BTreeMap, BTreeSet, HashMap};

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sheetlog_core::LogError;
use sheetlog_core::domain::LogId;
use sheetlog_core::domain::clients::ClientRange;
use sheetlog_core::log::{PushedMutation, Rejected, RunOutcome, RunSource, RunState, SegmentHint};
use sheetlog_core::sheet::limits::{MAX_COLS, MAX_ROWS};
use sheetlog_core::sheet::mutations::check_id;
use sheetlog_core::sheet::{CellRef, EntryBody, Event, Range, Row};
use sheetlog_core::snapshot::ReadBudget;
use sheetlog_core::sync_queue::{
    MAX_MESSAGE_BYTES, MESSAGE_VERSION, QueuedMutation, QueuedPush, StoredPush, check_push_limits,
};
use tracing::{info, warn};

use crate::access::{Access, Caller};
use crate::cells::{Bounded, rows_at};
use crate::dto::ErrorResponse;
use crate::error::ApiError;
use crate::request::{ApiResult, parse_body, parse_log_id, reject_unknown_params};
use crate::state::SharedState;

/// The push and pull protocol version spoken here.
const PROTOCOL_VERSION: u64 = 1;
/// Schema versions accepted from clients: none set, or "1".
const SCHEMA_VERSIONS: [&str; 2] = ["", "1"];
/// A `put` of a cell is at least this many bytes of JSON, which bounds the cells worth reading.
const MIN_PUT_BYTES: usize = 40;
/// Past this many entries since the cookie, a full reset is cheaper than reading them.
const MAX_INCREMENTAL_ENTRIES: u64 = 5_000;
/// The most entries since the cookie that a pull reads in its one Query; further behind, it
/// checks the head first (`pull`).
const FAST_PULL_ENTRIES: usize = 100;

/// A Replicache error answer: HTTP 200 with `{"error": ...}`, as the client expects.
fn replicache_error(error: &str, version_type: Option<&str>) -> Response {
    let mut body = json!({ "error": error });
    if let Some(t) = version_type {
        body["versionType"] = json!(t);
    }
    Json(body).into_response()
}

/// `VersionNotSupported` for a request of another protocol or schema version.
fn unsupported_version(req: &Value, field: &str, kind: &str) -> Option<Response> {
    if req.get(field).and_then(Value::as_u64) != Some(PROTOCOL_VERSION) {
        return Some(replicache_error("VersionNotSupported", Some(kind)));
    }
    let schema = req
        .get("schemaVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !SCHEMA_VERSIONS.contains(&schema) {
        return Some(replicache_error("VersionNotSupported", Some("schema")));
    }
    None
}

fn shape<T: serde::de::DeserializeOwned>(req: Value) -> ApiResult<T> {
    serde_json::from_value(req).map_err(|e| ApiError::InvalidEntry(e.to_string()))
}

pub(crate) fn check(what: &str, id: &str) -> ApiResult<()> {
    check_id(what, id).map_err(|e| ApiError::InvalidEntry(e.to_string()))
}

/// A client group belongs to the subject that first pushed or pulled it (Replicache's advice:
/// check that a group belongs to the authenticated user). Without that, anyone who can write the
/// log could push ids as another user's client (client ids are readable by every reader) and make
/// that client's real mutations count as already applied. With no proven subject (the local
/// stack without `--auth jwt`) there is no one to tell apart; a token without a `sub` claim is
/// refused. Checked before anything is written, so a refused push changes nothing. A replay
/// credits mutations to clients too, and checks every group of its range here the same way
/// (`sync_clients.rs`).
pub(crate) async fn check_group_owner(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    group: &str,
    caller: Option<&Caller>,
) -> ApiResult<()> {
    let Some(caller) = caller else {
        return Ok(());
    };
    let subject = match (&caller.subject, &caller.access) {
        (Some(s), _) => s,
        (None, Access::Unrestricted) => return Ok(()),
        (None, Access::Token { .. } | Access::Member) => {
            return Err(ApiError::GroupForbidden(
                "the token has no sub claim, so it cannot own a sync client group".into(),
            ));
        }
    };
    let owner = match state.known_group_owner(log, group) {
        Some(owner) => owner,
        None => {
            // A missing log is its 404, not a group claimed in a log that does not exist; nor
            // in a deleted one (a pull skips the router's check of that).
            sheetlog_core::log::purge::check_live(&*state.purge, log)
                .await
                .map_err(|e| ApiError::from_log(log_id, e))?;
            state
                .log
                .next_seq(log)
                .await
                .map_err(|e| ApiError::from_log(log_id, e))?;
            state
                .claim_group(log, group, subject)
                .await
                .map_err(ApiError::from_store)?
        }
    };
    // A group claimed before callers were identified by their role (an assumed role's session
    // ARN) still belongs to that role.
    if owner != *subject && crate::access::iam_principal(&owner) != *subject {
        warn!(log = %log, group, "sync request for a client group another subject owns");
        return Err(ApiError::GroupForbidden(format!(
            "client group {group:?} belongs to another user; a client group is used by the user who first pushed or pulled it"
        )));
    }
    Ok(())
}

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
    let with_cells = match q.get("view").map(String::as_str) {
        None | Some("cells") => true,
        Some("none") => false,
        Some(other) => {
            return Err(ApiError::InvalidQuery(format!(
                "view={other:?} is not a view (expected cells or none)"
            )));
        }
    };
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
    let cookie = match &req.cookie {
        Value::Null => None,
        v => Some(v.as_u64().ok_or_else(|| {
            ApiError::InvalidEntry(format!(
                "cookie: {v} is not a cookie this server gave out (a whole number or null)"
            ))
        })?),
    };
    let from_log = |e| ApiError::from_log(&log_id, e);
    // With a cookie and a hint, one Query answers most pulls: the entries since the cookie,
    // read from the entry before it (`EventLog::pull_since`), plus the tombstone check when
    // there is something new; pulls of the same cookie that arrive together share both reads
    // (`pull_gather.rs`). Anything it cannot decide (a new segment, a long way behind, a cookie
    // it does not find, a deleted log, an error) takes the head check below, whose answers are
    // the authority.
    let fast = match (cookie, state.hint(log)) {
        (Some(c), Some(hint)) => state
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
            .map(|page| (page, hint)),
        _ => None,
    };
    let (next_seq, at, since) = match fast {
        Some((page, hint)) => (page.next_seq, hint, Some(page)),
        None => {
            let (next_seq, at) = head_check(&state, log, &log_id, cookie).await?;
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
            .map_err(from_log)?;
    }
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

struct View {
    patch: Vec<Value>,
    last_ids: BTreeMap<String, u64>,
}

/// What changed between the cookie and `next_seq`, as a patch and the group's clients whose last
/// mutation id moved.
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

async fn view(
    state: &SharedState,
    // The log, as named in the request, and the segment its head check found (the entries
    // since the cookie are read from there, without a Segment table read).
    (log, log_id, at): (LogId, &str, SegmentHint),
    group: &str,
    // The cookie, and the entries since it when the pull has read them already.
    (cookie, since): (
        Option<u64>,
        Option<std::sync::Arc<sheetlog_core::log::EntriesPage>>,
    ),
    next_seq: u64,
    with_cells: bool,
) -> ApiResult<View> {
    let from_log = |e| ApiError::from_log(log_id, e);
    if cookie == Some(next_seq) {
        return Ok(View {
            patch: Vec::new(),
            last_ids: BTreeMap::new(),
        });
    }
    // The entries since the cookie: which cells they set, whether they moved cells around, and
    // the group's clients they advanced.
    let mut touched: Option<BTreeSet<CellRef>> = None;
    let mut last_ids = BTreeMap::new();
    let mut moves = Vec::new();
    if let Some(c) = cookie.filter(|c| next_seq - c <= MAX_INCREMENTAL_ENTRIES) {
        let page = match since {
            Some(page) => Ok(page),
            None => state
                .log
                .read_since_at(log, c, (next_seq - c) as usize, Some(at))
                .await
                .map(std::sync::Arc::new),
        };
        match page {
            // An eventually consistent read may not show the newest entries yet: a patch from it
            // would miss their cells while the cookie moved past them. Reset instead (its reads
            // check their counts).
            Ok(page)
                if page.entries.iter().filter(|e| e.seq < next_seq).count() as u64
                    != next_seq - c =>
            {
                warn!(log = %log, cookie = c, next_seq, got = page.entries.len(), "short read since the cookie; full reset");
            }
            Ok(page) => {
                let mut cells = BTreeSet::new();
                let mut reset = false;
                for e in page.entries.iter().filter(|e| e.seq < next_seq) {
                    let body = EntryBody::decode(e.kind.0, e.version, &e.body).map_err(|err| {
                        ApiError::Internal(format!("entry {} does not decode: {err}", e.seq))
                    })?;
                    for m in body.runs() {
                        // Every client's group, learnt as its runs go by: a queued push of a
                        // client past its first mutation then needs no read to check it, even
                        // before its range item is written (`docs/sync.md`).
                        if m.first == 1 {
                            state.remember_client_group(log, &m.client, &m.group);
                        }
                        if m.group == group {
                            let last = last_ids.entry(m.client.clone()).or_insert(0);
                            *last = m.last.max(*last);
                        }
                    }
                    for ev in body.events() {
                        match ev {
                            Event::Set(s) => cells.extend(s.cells.iter().map(|c| c.at)),
                            _ => reset = true,
                        }
                    }
                    if !with_cells {
                        moves.extend(move_puts(e.seq, &body));
                    }
                }
                // Without cells there is nothing to reset: the store holds no cells, and the
                // row and column changes travel as `move/` keys instead.
                if !reset || !with_cells {
                    touched = Some(cells);
                }
            }
            // Too far behind for the retained segments: a full reset below.
            Err(LogError::ReloadRequired { .. }) => {}
            Err(e) => return Err(from_log(e)),
        }
    }
    if touched.is_none() {
        // A full reset: every client of the group, as of this view.
        last_ids = state
            .log
            .group_last_mutations_before(log, group, next_seq)
            .await
            .map_err(from_log)?
            .into_iter()
            .collect();
    }
    let range = match &touched {
        Some(cells) if cells.is_empty() => None,
        Some(cells) => Some(bounding_range(cells)),
        None => Some(Range {
            start: CellRef { row: 0, col: 0 },
            end: CellRef {
                row: MAX_ROWS - 1,
                col: MAX_COLS - 1,
            },
        }),
    };
    let rows = match range {
        Some(range) if with_cells => read_at(state, log, log_id, next_seq, range).await?,
        _ => Vec::new(),
    };
    let mut patch = Vec::new();
    let mut present = BTreeSet::new();
    if touched.is_none() {
        patch.push(json!({"op": "clear"}));
    }
    for row in rows {
        for (col, cell) in row.cells {
            let at = CellRef {
                row: row.index,
                col,
            };
            if touched.as_ref().is_some_and(|t| !t.contains(&at)) {
                continue;
            }
            present.insert(at);
            let mut value = json!({ "value": cell.value });
            if let Some(f) = &cell.format {
                value["format"] = json!(f);
            }
            patch.push(json!({"op": "put", "key": format!("cell/{at}"), "value": value}));
        }
    }
    if let Some(cells) = touched.as_ref().filter(|_| with_cells) {
        for at in cells.difference(&present) {
            patch.push(json!({"op": "del", "key": format!("cell/{at}")}));
        }
    }
    if touched.is_some() {
        patch.extend(moves);
    }
    patch.push(json!({"op": "put", "key": "meta/seq", "value": next_seq}));
    Ok(View { patch, last_ids })
}

/// The row and column changes of one entry as `move/<seq>/<n>` puts, for a `view=none` client
/// to rebase its pending cell edits the way the server will (`docs/web.md`): each holds the
/// change as applied and, for a client's mutation, its `client` and `id` and, when rebasing
/// changed it, `seen` (as sent). A mutation that only set cells moves nothing and is left out.
fn move_puts(seq: u64, body: &EntryBody) -> Vec<Value> {
    let mut out = Vec::new();
    let mut put = |value: Value| {
        let key = format!("move/{seq:012}/{:05}", out.len());
        out.push(json!({"op": "put", "key": key, "value": value}));
    };
    match body {
        EntryBody::Event(e) => {
            if let Some(m) = shape_json(e) {
                put(json!({"seq": seq, "applied": [m]}));
            }
        }
        EntryBody::Mutations(_) | EntryBody::Batch(_) => {
            for run in body.runs() {
                for (id, events, sent) in run.by_id() {
                    let done: Vec<Value> = events.into_iter().filter_map(shape_json).collect();
                    let sent = sent.and_then(shape_json);
                    if done.is_empty() && sent.is_none() {
                        continue;
                    }
                    let mut v =
                        json!({"seq": seq, "client": run.client, "id": id, "applied": done});
                    if let Some(sent) = sent {
                        v["seen"] = json!([sent]);
                    }
                    put(v);
                }
            }
        }
        EntryBody::Snapshot | EntryBody::EndSegment => {}
    }
    out
}

/// A row or column change as the web client's overlay holds it (`ShapeOp` in `web/src/model.ts`,
/// 0-based `at`); an import is `{"op": "replace"}`.
fn shape_json(event: &Event) -> Option<Value> {
    let (axis, op, at, count) = match event {
        Event::Set(_) => return None,
        Event::Import(_) => return Some(json!({"op": "replace"})),
        Event::InsertRows(e) => ("rows", "insert", e.at.0, e.count),
        Event::DeleteRows(e) => ("rows", "delete", e.at.0, e.count),
        Event::InsertColumns(e) => ("columns", "insert", e.at.0, e.count),
        Event::DeleteColumns(e) => ("columns", "delete", e.at.0, e.count),
    };
    Some(json!({"axis": axis, "op": op, "at": at, "count": count}))
}

fn bounding_range(cells: &BTreeSet<CellRef>) -> Range {
    let (mut r0, mut c0, mut r1, mut c1) = (u32::MAX, u32::MAX, 0, 0);
    for c in cells {
        r0 = r0.min(c.row);
        r1 = r1.max(c.row);
        c0 = c0.min(c.col);
        c1 = c1.max(c.col);
    }
    Range {
        start: CellRef { row: r0, col: c0 },
        end: CellRef { row: r1, col: c1 },
    }
}

/// The non-empty cells of `range` as of `seq`, bounded by what fits in one response.
async fn read_at(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    seq: u64,
    range: Range,
) -> ApiResult<Vec<Row>> {
    let limit = state.cfg.max_response_bytes;
    let budget = ReadBudget {
        cells: limit / MIN_PUT_BYTES,
        bytes: limit,
    };
    match rows_at(state, log, log_id, seq, range, budget).await? {
        Bounded::Rows(rows) => Ok(rows),
        Bounded::OverBudget { cells, bytes } => Err(ApiError::ViewTooLarge {
            size: bytes.max(cells * MIN_PUT_BYTES),
            limit,
        }),
    }
}
