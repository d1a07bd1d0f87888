//! `GET /logs/{logId}/diff?from=&to=`: the cells that differ between two versions of a sheet, a
//! page at a time (docs/api.md, "Compare two versions"). Both versions are read once per request;
//! the comparison is `snapshot::diff` (windows of whole rows, pages that end at a row).

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use serde_json::{Value, json};
use sheetlog_core::LogId;
use sheetlog_core::sheet::Cell;
use sheetlog_core::sheet::limits::MAX_ROWS;
use sheetlog_core::snapshot::diff::{Change, PageLimits, Version, diff_page};
use sheetlog_core::snapshot::{LogEntry, Manifest};

use crate::cells::base_and_entries;
use crate::dto::{DiffResponse, ErrorResponse};
use crate::error::ApiError;
use crate::request::{parse_log_id, reject_unknown_params};
use crate::routes::{ApiResult, query_u64};
use crate::state::SharedState;

/// About the JSON one page of changes may hold, well inside Lambda's 6 MB response.
pub const PAGE_BYTES: usize = 2 * 1024 * 1024;
/// Changes per page: the default and the most a request may ask for.
pub const MAX_LIMIT: u64 = 1_000;

/// One version of the sheet, read once.
struct Read {
    base: Option<Manifest>,
    entries: Vec<LogEntry>,
}

impl Read {
    fn view(&self) -> Version<'_> {
        Version {
            base: self.base.as_ref(),
            entries: &self.entries,
        }
    }
}

/// The cells that differ between the sheet as of `from` and as of `to`.
#[utoipa::path(get, path = "/logs/{logId}/diff",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("from" = u64, Query, description = "the older version: the sheet as of every entry before it"),
        ("to" = Option<u64>, Query, description = "the newer version (default: the whole log)"),
        ("row" = Option<u32>, Query, description = "the first row to compare, from 1 (a page's `nextRow`)"),
        ("limit" = Option<u64>, Query, description = "changes per page, 1 to 1000 (1000)")),
    responses((status = 200, body = DiffResponse), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 410, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 416, body = ErrorResponse)))]
pub async fn diff(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<DiffResponse>> {
    let log = parse_log_id(&log_id)?;
    reject_unknown_params(&q, &["from", "to", "row", "limit"])?;
    let from = query_u64(&q, "from")?
        .ok_or_else(|| ApiError::InvalidQuery("from is required, e.g. from=10".into()))?;
    let to = match query_u64(&q, "to")? {
        Some(to) => to,
        None => {
            state
                .log
                .next_seq(log)
                .await
                .map_err(|e| ApiError::from_log(&log_id, e))?
                .0
        }
    };
    let limit = query_u64(&q, "limit")?.unwrap_or(MAX_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::InvalidQuery(format!(
            "limit={limit}: from 1 to {MAX_LIMIT}"
        )));
    }
    let row = match query_u64(&q, "row")? {
        None => 0,
        Some(r) if (1..=u64::from(MAX_ROWS)).contains(&r) => (r - 1) as u32,
        Some(r) => {
            return Err(ApiError::InvalidQuery(format!(
                "row={r}: from 1 to {MAX_ROWS}"
            )));
        }
    };
    let old = version(&state, log, &log_id, from).await?;
    let new = version(&state, log, &log_id, to).await?;
    let page = diff_page(
        &state.bucket,
        &state.bucket,
        *log.as_uuid(),
        (old.view(), new.view()),
        row,
        PageLimits {
            limit: limit as usize,
            max_bytes: PAGE_BYTES,
        },
    )
    .await
    .map_err(|e| ApiError::Internal(format!("comparing versions {from} and {to}: {e}")))?;
    Ok(Json(DiffResponse {
        from,
        to,
        changes: page.changes.iter().map(change_json).collect(),
        next_row: page.next_row.map(|r| r + 1),
        complete: page.next_row.is_none(),
    }))
}

async fn version(state: &SharedState, log: LogId, log_id: &str, at: u64) -> Result<Read, ApiError> {
    let (base, entries) = base_and_entries(state, log, log_id, at).await?;
    Ok(Read { base, entries })
}

fn change_json(c: &Change) -> Value {
    json!({"ref": c.at.to_string(), "before": cell_json(c.before.as_ref()), "after": cell_json(c.after.as_ref())})
}

/// A cell as a `set` writes it (`entry_json::cell_json`); an empty cell is `{"value": null}`.
fn cell_json(c: Option<&Cell>) -> Value {
    c.map_or_else(|| json!({"value": null}), crate::entry_json::cell_json)
}
