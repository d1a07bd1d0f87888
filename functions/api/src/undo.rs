//! Per-person undo and redo (`POST /logs/{logId}/undo`, `/redo`; docs/api.md "Undo and redo").
//!
//! A client group's stacks are derived from the log's last entries ([`undo_plan::stacks`]); the
//! top step's inverse is worked out against the sheet just before it and moved onto the sheet as
//! it is now ([`undo_plan::settle`]), the cells someone else changed since are dropped, and the
//! result is appended as one `undo` entry, conditional on the head it was worked out at. A lost
//! race works it out again.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sheetlog_core::LogError;
use sheetlog_core::domain::{EntryType, LogId, NewEntry};
use sheetlog_core::log::{IdempotencyKey, MAX_REBASE_ENTRIES};
use sheetlog_core::sheet::entry::EntryBody;
use sheetlog_core::sheet::undo::Undo;
use sheetlog_core::sheet::undo_plan::{
    self, Stacks, Step, drop_overwritten, inverse, needs, settle, written_range,
};
use sheetlog_core::sheet::{Event, Range, Row};
use sheetlog_core::snapshot::{LogEntry, Manifest, ReadBudget, SnapshotError, read_rows};
use tracing::info;

use crate::access::Caller;
use crate::dto::{ErrorResponse, UndoRequest, UndoResponse};
use crate::error::ApiError;
use crate::request::{parse_body, parse_log_id};
use crate::routes::ApiResult;
use crate::state::SharedState;

/// Entries read first when looking for the group's last step; four times more on each miss, up
/// to [`MAX_REBASE_ENTRIES`] (a step further back is past what an edit can be rebased through).
const FIRST_WINDOW: u64 = 250;
/// Times an undo is worked out again after losing the race for the head.
const ATTEMPTS: u32 = 6;
/// Most bytes of cells one undo reads to restore a deleted range.
const MAX_READ_BYTES: usize = 64 * 1024 * 1024;
/// Cells named in the answer's `changed`.
const MAX_CHANGED_LISTED: usize = 100;

/// Undoes the client group's own last step.
#[utoipa::path(post, path = "/logs/{logId}/undo",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("Idempotency-Key" = Option<String>, Header, description = "makes a retry safe: a retry answers the undo already made (docs/api.md)")),
    request_body = UndoRequest,
    responses(
        (status = 201, body = UndoResponse),
        (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse, description = "no write grant, or the client group belongs to another user (`client-group-forbidden`)"),
        (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse, description = "nothing to undo (`nothing-to-undo`)"),
        (status = 413, body = ErrorResponse, description = "the undo would not fit one entry (`undo-too-large`)"),
        (status = 503, body = ErrorResponse)))]
pub async fn undo(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    act(state, log_id, caller, &headers, body, false).await
}

/// Redoes what the client group's last undo took back.
#[utoipa::path(post, path = "/logs/{logId}/redo",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("Idempotency-Key" = Option<String>, Header, description = "makes a retry safe: a retry answers the undo already made (docs/api.md)")),
    request_body = UndoRequest,
    responses(
        (status = 201, body = UndoResponse),
        (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse, description = "nothing to redo (`nothing-to-redo`)"),
        (status = 413, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub async fn redo(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    act(state, log_id, caller, &headers, body, true).await
}

async fn act(
    state: SharedState,
    log_id: String,
    caller: Option<axum::Extension<Caller>>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    redo: bool,
) -> ApiResult<Response> {
    let log = parse_log_id(&log_id)?;
    let req: UndoRequest = parse_body(body, state.cfg.max_request_bytes)?;
    // The key stands for the request: a retry works the undo out again against a stack the first
    // attempt already changed, so its entry would differ.
    let what: &[u8] = if redo { b"redo" } else { b"undo" };
    let key = crate::routes::idempotency_key(headers)?
        .map(|k| IdempotencyKey::for_request(k, &[what, req.client_group_id.as_bytes()]));
    crate::sync::check("clientGroupId", &req.client_group_id)?;
    let group = req.client_group_id;
    crate::sync::check_group_owner(&state, log, &log_id, &group, caller.as_deref()).await?;
    for attempt in 1..=ATTEMPTS {
        let head = state
            .log
            .next_seq(log)
            .await
            .map_err(|e| ApiError::from_log(&log_id, e))?
            .0;
        let (step, later) = last_step(&state, log, &log_id, &group, redo, head).await?;
        let u = work_out(&state, log, &log_id, &group, redo, &step, &later, head).await?;
        match append(&state, log, &log_id, &u.0, head, key.as_ref()).await {
            Ok(Appended::New(seq, next_seq)) => {
                info!(log = %log, seq, redo, target = u.0.target.seq, skipped = u.0.skipped, "undo appended");
                let body = response(seq, next_seq, u)?;
                return Ok((StatusCode::CREATED, Json(body)).into_response());
            }
            Ok(Appended::Earlier(seq, next_seq)) => {
                let body = earlier(&state, log, &log_id, seq, next_seq).await?;
                let mut resp = (StatusCode::CREATED, Json(body)).into_response();
                resp.headers_mut().insert(
                    crate::routes::IDEMPOTENT_REPLAYED,
                    axum::http::HeaderValue::from_static("true"),
                );
                return Ok(resp);
            }
            Err(ApiError::Conflict { .. }) if attempt < ATTEMPTS => continue,
            Err(ApiError::Conflict { .. }) => return Err(ApiError::Busy),
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::Busy)
}

fn response(seq: u64, next_seq: u64, (u, changed): (Undo, Vec<String>)) -> ApiResult<UndoResponse> {
    let mut target = json!({ "seq": u.target.seq });
    if u.target.is_mutation() {
        target["clientId"] = json!(u.target.client);
        target["mutationId"] = json!(u.target.id);
    }
    let events = u
        .events
        .iter()
        .map(|e| Ok(json!({"type": e.type_name(), "body": crate::entry_json::event_body(e)?})))
        .collect::<ApiResult<Vec<Value>>>()?;
    Ok(UndoResponse {
        seq,
        next_seq,
        redo: u.redo,
        target,
        events,
        skipped: u.skipped,
        changed,
    })
}

/// The entries of `from..head`, decoded, in order.
async fn entries(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    mut from: u64,
    head: u64,
) -> ApiResult<(u64, Vec<(u64, EntryBody)>)> {
    let mut out = Vec::new();
    let mut tries = 0;
    let start = loop {
        match state.log.read_since(log, from, 1).await {
            Err(LogError::ReloadRequired { first_retained, .. }) if first_retained > from => {
                from = first_retained;
            }
            Err(LogError::OutOfRange { .. }) => break from,
            Err(e) => return Err(ApiError::from_log(log_id, e)),
            Ok(_) => break from,
        }
    };
    let mut at = start;
    while at < head {
        let page = state
            .log
            .read_since(log, at, (head - at).min(1000) as usize)
            .await
            .map_err(|e| ApiError::from_log(log_id, e))?;
        let before = at;
        for e in &page.entries {
            if e.seq != at || e.seq >= head {
                break;
            }
            let body = EntryBody::decode(e.kind.0, e.version, &e.body).map_err(|err| {
                ApiError::Internal(format!("entry {} does not decode: {err}", e.seq))
            })?;
            out.push((e.seq, body));
            at += 1;
        }
        if at == before {
            // The head was read strongly; an entries query may not show the newest yet.
            tries += 1;
            if tries > 20 {
                return Err(ApiError::Busy);
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }
    Ok((start, out))
}

/// The group's step to act on, and the entries after it (up to `head`).
async fn last_step(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    group: &str,
    redo: bool,
    head: u64,
) -> ApiResult<(Step, Vec<(u64, EntryBody)>)> {
    let mut window = FIRST_WINDOW;
    loop {
        let want = head.saturating_sub(window);
        let (from, read) = entries(state, log, log_id, want, head).await?;
        let Stacks {
            mut undo,
            redo: mut redos,
        } = undo_plan::stacks(read.iter().map(|(s, b)| (*s, b)), group);
        // Whatever the window leaves out lies under the steps it holds: a step found is the top.
        let found = if redo { redos.pop() } else { undo.pop() };
        if let Some(step) = found {
            let later = read
                .into_iter()
                .filter(|(s, _)| *s > step.target.seq)
                .collect();
            return Ok((step, later));
        }
        if from == 0 || from > want || window >= MAX_REBASE_ENTRIES {
            return Err(ApiError::NothingToUndo {
                what: if redo { "redo" } else { "undo" },
                window: head - from,
            });
        }
        window = (window * 4).min(MAX_REBASE_ENTRIES);
    }
}

/// The `undo` entry for `step` (and the cells it skipped because someone else changed them),
/// worked out against the log up to `head`.
#[allow(clippy::too_many_arguments)]
async fn work_out(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    group: &str,
    redo: bool,
    step: &Step,
    later: &[(u64, EntryBody)],
    head: u64,
) -> ApiResult<(Undo, Vec<String>)> {
    let mut history = step.suffix.clone();
    history.extend(undo_plan::history_after(later.iter().map(|(s, b)| (*s, b))));
    if undo_plan::replaces(step) {
        let (events, skipped) = undo_plan::undo_replace(step, &history);
        if !events.is_empty() {
            // As `POST …/restore` does: the state the restore points at is kept first.
            crate::versions::keep_state(state, log, log_id, step.target.seq).await?;
        }
        let target = step.target.clone();
        let u = Undo {
            group: group.to_owned(),
            redo,
            target,
            events,
            skipped,
        };
        return Ok((u, Vec::new()));
    }
    // The sheet just before each of the step's events: the entries before its own, then the
    // events of its entry before it (earlier runs of a batch), then its own earlier events.
    let (base, mut before) =
        crate::cells::base_and_entries(state, log, log_id, step.target.seq).await?;
    let mut prior = step.prefix.clone();
    // The layout before each event, for the inverse of a resize or a freeze.
    let mut layout = sheetlog_core::snapshot::layout_at(base.as_ref(), &before);
    for e in &prior {
        layout.apply(e);
    }
    let mut inverses = Vec::with_capacity(step.events.len());
    for e in &step.events {
        let rows = match needs(e) {
            Some(range) => {
                before.push(LogEntry {
                    seq: step.target.seq,
                    entry: EntryBody::Undo(Undo {
                        group: group.to_owned(),
                        redo,
                        target: step.target.clone(),
                        events: prior.clone(),
                        skipped: 0,
                    }),
                    payload: None,
                });
                let rows = read(state, log, base.as_ref(), &before, range).await;
                before.pop();
                rows?
            }
            None => Vec::new(),
        };
        inverses
            .push(inverse(e, &rows, &layout).map_err(|e| ApiError::UndoTooLarge(e.to_string()))?);
        layout.apply(e);
        prior.push(e.clone());
    }
    let inverse: Vec<Event> = inverses.into_iter().rev().flatten().collect();
    let settled = settle(step, &inverse, &history);
    let now = match written_range(&settled) {
        Some(range) => {
            let (base, entries) = crate::cells::base_and_entries(state, log, log_id, head).await?;
            read(state, log, base.as_ref(), &entries, range).await?
        }
        None => Vec::new(),
    };
    let (events, changed, skipped) = drop_overwritten(settled, &now);
    let u = Undo {
        group: group.to_owned(),
        redo,
        target: step.target.clone(),
        events,
        skipped,
    };
    let changed = changed
        .iter()
        .take(MAX_CHANGED_LISTED)
        .map(ToString::to_string)
        .collect();
    Ok((u, changed))
}

/// The cells of `range` in the sheet `base` plus `entries` make.
async fn read(
    state: &SharedState,
    log: LogId,
    base: Option<&Manifest>,
    entries: &[LogEntry],
    range: Range,
) -> ApiResult<Vec<Row>> {
    let budget = ReadBudget {
        cells: sheetlog_core::sheet::limits::MAX_CELLS_PER_SET,
        bytes: MAX_READ_BYTES,
    };
    match read_rows(
        &state.bucket,
        &state.bucket,
        *log.as_uuid(),
        base,
        entries,
        range,
        budget,
    )
    .await
    {
        Ok((rows, _)) => Ok(rows),
        Err(SnapshotError::OverBudget { cells, bytes }) => Err(ApiError::UndoTooLarge(format!(
            "undoing this step would restore more than {cells} cells or {bytes} bytes; restore an earlier version instead"
        ))),
        Err(e) => Err(ApiError::Internal(format!("reading the sheet: {e}"))),
    }
}

enum Appended {
    /// Appended now: its sequence and the log's next one.
    New(u64, u64),
    /// A retry: the request's key appended this undo earlier.
    Earlier(u64, u64),
}

/// Appends `u` as the entry at `head` exactly.
async fn append(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    u: &Undo,
    head: u64,
    key: Option<&IdempotencyKey>,
) -> ApiResult<Appended> {
    // A body over the log's entry limit is refused by the append (`413 entry-too-large`).
    let (code, version, body) = u.encode();
    let entry = NewEntry::new(EntryType(code), version, body);
    let out =
        crate::append::append_and_trigger(state, log, log_id, entry, Some(head), None, key).await?;
    Ok(if out.replayed {
        Appended::Earlier(out.body.seq, out.body.next_seq)
    } else {
        Appended::New(out.body.seq, out.body.next_seq)
    })
}

/// The answer to a retry: the undo the first request appended, read back (without the list of
/// changed cells, which the entry does not keep).
async fn earlier(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    seq: u64,
    next_seq: u64,
) -> ApiResult<UndoResponse> {
    let page = state
        .log
        .read_since(log, seq, 1)
        .await
        .map_err(|e| ApiError::from_log(log_id, e))?;
    let e = page
        .entries
        .first()
        .filter(|e| e.seq == seq)
        .ok_or(ApiError::ReplayUnavailable { seq })?;
    match EntryBody::decode(e.kind.0, e.version, &e.body) {
        Ok(EntryBody::Undo(u)) => response(seq, next_seq, (u, Vec::new())),
        // The key was used for another kind of request.
        _ => Err(ApiError::KeyReused { seq }),
    }
}
