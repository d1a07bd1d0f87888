//! Appending, then the snapshot trigger that runs after every append
//! ([`EventLog::snapshot_if_due`](sheetlog_core::log::EventLog::snapshot_if_due), shared with the
//! sync writer).

use sheetlog_core::LogError;
use sheetlog_core::domain::{LogId, NewEntry};
use sheetlog_core::log::{AppendOnce, AppendOptions, Appended, IdempotencyKey, SnapshotTrigger};
use tracing::{info, warn};

use crate::dto::AppendResponse;
use crate::error::ApiError;
use crate::state::SharedState;

/// What an append request answers: the entry's place, and whether it was appended by an
/// earlier request with the same idempotency key (a replay; nothing was written this time).
#[derive(Debug)]
pub struct AppendResult {
    pub body: AppendResponse,
    pub replayed: bool,
}

pub async fn append_and_trigger(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    entry: NewEntry,
    expected_seq: Option<u64>,
    base_seq: Option<u64>,
    key: Option<&IdempotencyKey>,
) -> Result<AppendResult, ApiError> {
    let opts = AppendOptions {
        expected_seq,
        segment_hint: state.hint(log),
    };
    let mut applied_as = None;
    let outcome = match (base_seq, key) {
        (Some(base), key) => state
            .log
            .append_rebased(log, entry, base, opts, key)
            .await
            .map(|r| {
                applied_as = r.applied_as;
                r.outcome
            }),
        (None, Some(key)) => state.log.append_once(log, entry, opts, key).await,
        (None, None) => state
            .log
            .append(log, entry, opts)
            .await
            .map(AppendOnce::Appended),
    }
    .map_err(|e| ApiError::from_log(log_id, e))?;
    let a = match outcome {
        AppendOnce::Appended(a) => a,
        // Nothing was appended, so no snapshot can be due because of this request.
        AppendOnce::Duplicate { seq, .. } => return replay(state, log, log_id, seq).await,
    };
    let next_seq = after_append(state, log, &a).await;
    Ok(AppendResult {
        body: AppendResponse {
            seq: a.seq,
            segment: a.segment,
            entry: a.entry,
            next_seq,
            applied_as: applied_as.and_then(|e| serde_json::to_value(e).ok()),
        },
        replayed: false,
    })
}

/// The answer to a retried request whose key says it appended `seq`: the entry's segment and
/// number are read back (the Dedupe table keeps only the sequence, see `docs/storage.md`), and
/// `nextSeq` is the log's next sequence now.
pub async fn replay(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    seq: u64,
) -> Result<AppendResult, ApiError> {
    let page = match state.log.read_since(log, seq, 1).await {
        Ok(p) => p,
        Err(LogError::ReloadRequired { .. } | LogError::OutOfRange { .. }) => {
            return Err(ApiError::ReplayUnavailable { seq });
        }
        Err(e) => return Err(ApiError::from_log(log_id, e)),
    };
    let Some(e) = page.entries.first().filter(|e| e.seq == seq) else {
        return Err(ApiError::ReplayUnavailable { seq });
    };
    let (next_seq, _) = state
        .log
        .next_seq(log)
        .await
        .map_err(|e| ApiError::from_log(log_id, e))?;
    info!(log = %log, seq, "idempotent replay: appended earlier under the same key");
    Ok(AppendResult {
        body: AppendResponse {
            seq,
            segment: e.segment,
            entry: e.num,
            next_seq,
            applied_as: None,
        },
        replayed: true,
    })
}

/// Remembers the segment hint, runs the snapshot trigger after an append and pokes the sheet's
/// channel; returns the log's next sequence after whatever the trigger wrote.
pub async fn after_append(state: &SharedState, log: LogId, a: &Appended) -> u64 {
    state.remember_hint(log, a.hint);
    let next = match maybe_snapshot(state, log, a).await {
        Ok(next) => next,
        Err(e) => {
            // The append itself succeeded; a failed trigger is retried by the next append.
            warn!(log = %log, error = %e, "snapshot trigger failed");
            a.next_seq
        }
    };
    // Awaited, not spawned: Lambda freezes the process once the response is out.
    state.poke(log, next).await;
    next
}

/// Returns the log's next sequence after whatever the trigger wrote.
async fn maybe_snapshot(state: &SharedState, log: LogId, a: &Appended) -> Result<u64, LogError> {
    let trigger = SnapshotTrigger {
        interval: state.cfg.snapshot_interval,
        segment_max_entries: state.cfg.segment_max_entries,
    };
    let t = state.log.snapshot_if_due(log, a, trigger).await?;
    if let Some(hint) = t.hint {
        state.remember_hint(log, hint);
    }
    Ok(t.next_seq)
}
