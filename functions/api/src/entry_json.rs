//! The API's JSON form of stored entry bodies: an event's `body`, and `mutations` entries (one
//! client's run, or a group commit's runs) and `undo` entries as `GET /logs/{logId}/entries`
//! shows them.

use serde_json::{Value, json};
use sheetlog_core::sheet::mutations::Mutations;
use sheetlog_core::sheet::undo::Undo;
use sheetlog_core::sheet::{Cell, Event};

use crate::error::ApiError;
use crate::request::ApiResult;

/// A stored cell as a `set` writes it: `{"value"}`, plus `"format"` when it has one (the pull's
/// cell values and the diff's before and after).
pub(crate) fn cell_json(cell: &Cell) -> Value {
    let mut v = json!({ "value": cell.value });
    if let Some(f) = &cell.format {
        v["format"] = json!(f);
    }
    if let Some(s) = &cell.style {
        v["style"] = json!(s.as_ref());
    }
    v
}

/// An event's `body` in the API's JSON form (what a client sent as `body`, or as a mutation's
/// `args`).
pub(crate) fn event_body(event: &Event) -> ApiResult<Value> {
    let mut v = serde_json::to_value(event).map_err(|err| ApiError::Internal(err.to_string()))?;
    Ok(v.get_mut("body").map(Value::take).unwrap_or(Value::Null))
}

/// The JSON body of a batch `mutations` entry (body version 2) in `GET /logs/{logId}/entries`:
/// `{"runs": [...]}`, each run as a single-client entry reads.
pub fn batch_json(runs: &[Mutations]) -> ApiResult<Value> {
    let runs = runs
        .iter()
        .map(mutations_json)
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(json!({ "runs": runs }))
}

/// The JSON body of a `mutations` entry in `GET /logs/{logId}/entries`.
pub fn mutations_json(m: &Mutations) -> ApiResult<Value> {
    let mut applied = Vec::with_capacity(m.applied.len());
    for mu in &m.applied {
        applied.push(json!({
            "id": mu.id,
            "name": mu.event.type_name(),
            "args": event_body(&mu.event)?,
        }));
    }
    Ok(json!({
        "clientGroupID": m.group,
        "clientID": m.client,
        "firstMutationID": m.first,
        "lastMutationID": m.last,
        "mutations": applied,
        "rejected": m.rejected(),
    }))
}

/// The JSON body of an `undo` entry in `GET /logs/{logId}/entries`: the group, whether it is a
/// redo, the step it acts on (a mutation, or an earlier undo entry by its sequence), the events
/// it applied and the cells it skipped.
pub fn undo_json(u: &Undo) -> ApiResult<Value> {
    let mut target = json!({ "seq": u.target.seq });
    if u.target.is_mutation() {
        target["clientID"] = json!(u.target.client);
        target["mutationID"] = json!(u.target.id);
    }
    let events = u
        .events
        .iter()
        .map(|e| Ok(json!({"type": e.type_name(), "body": event_body(e)?})))
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(json!({
        "clientGroupID": u.group,
        "redo": u.redo,
        "target": target,
        "events": events,
        "skipped": u.skipped,
    }))
}
