//! Sync clients (`docs/sync.md`): Replicache's push and pull (protocol version 1) over a log, and
//! the client queries.
//!
//! Layout:
//! - `mod.rs`     — what push and pull share: protocol versions, Replicache's error answers, the
//!   check that a client group belongs to its caller
//! - `push.rs`    — push: queued (`SHEETLOG_SYNC_WRITES=queued`: checked, then enqueued on the
//!   sync FIFO queue in the log's message group for the sync writer's group commit) or direct
//!   (each client's mutations a `mutations` entry through [`EventLog::push_run`], every mutation
//!   exactly once and in order; invalid args are recorded as rejected)
//! - `pull.rs`    — pull: the cookie is the log's next sequence; the fast read since the cookie
//!   or the head check, then the answer within the response limit
//! - `view.rs`    — what a pull's patch holds: the cells the entries since the cookie set (`put`,
//!   `del`), or a full reset when one of them moved cells around; the group's
//!   `lastMutationIDChanges`
//! - `gather.rs`  — pulls of one sheet that arrive together share one read
//! - `clients.rs` — the client queries: a client's last mutation, where a mutation landed, replay
//!
//! [`EventLog::push_run`]: sheetlog_core::log::EventLog::push_run

pub mod clients;
pub mod gather;
pub mod pull;
pub mod push;
mod view;

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sheetlog_core::domain::LogId;
use sheetlog_core::sheet::mutations::check_id;
use tracing::warn;

use crate::access::{Access, Caller};
use crate::error::ApiError;
use crate::request::ApiResult;
use crate::state::SharedState;

/// The push and pull protocol version spoken here.
const PROTOCOL_VERSION: u64 = 1;
/// Schema versions accepted from clients: none set, or "1".
const SCHEMA_VERSIONS: [&str; 2] = ["", "1"];

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
/// (`clients.rs`).
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
