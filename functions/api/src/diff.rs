//! `GET /logs/{logId}/diff?from=&to=`: the cells that differ between two versions of a sheet, a
//! page at a time (docs/api.md, "Compare two versions").
//!
//! Both versions are read once per request (each its newest completed snapshot at or before it
//! plus the entries after that), then compared a window of whole rows at a time: a window holds
//! at most [`WINDOW_CELLS`] cells of the wider of the two sheets, so memory stays a window of
//! each. A page ends at a row boundary once it holds `limit` changes, about
//! [`PAGE_BYTES`] of them, or [`SCAN_ROWS`] rows have been compared; `nextRow` then says where
//! the next page starts. Cells are compared as stored: a formula's text, not its value.

use std::cmp::Ordering;
use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use serde_json::{Value, json};
use sheetlog_core::LogId;
use sheetlog_core::sheet::limits::MAX_ROWS;
use sheetlog_core::sheet::{Cell, CellRef, Range, Row};
use sheetlog_core::snapshot::{LogEntry, Manifest, ReadBudget, SnapshotError, extent, read_rows};

use crate::cells::base_and_entries;
use crate::dto::{DiffResponse, ErrorResponse};
use crate::error::ApiError;
use crate::request::{parse_log_id, reject_unknown_params};
use crate::routes::{ApiResult, query_u64};
use crate::state::SharedState;

/// Cells one window of rows covers (rows × the wider sheet's columns), as an export block does.
pub const WINDOW_CELLS: u64 = 100_000;
/// Rows one request compares at most, whatever it finds.
pub const SCAN_ROWS: u32 = 200_000;
/// About the JSON one page of changes may hold, well inside Lambda's 6 MB response.
pub const PAGE_BYTES: usize = 2 * 1024 * 1024;
/// Changes per page: the default and the most a request may ask for.
pub const MAX_LIMIT: u64 = 1_000;

/// One version of the sheet, read once.
struct Version {
    at: u64,
    base: Option<Manifest>,
    entries: Vec<LogEntry>,
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
    let (rows, cols) = bounds(&state, &old, &new).await?;
    let page = compare(&state, log, (&old, &new), (row, rows, cols), limit as usize).await?;
    Ok(Json(DiffResponse {
        from,
        to,
        changes: page.changes,
        next_row: page.next_row.map(|r| r + 1),
        complete: page.next_row.is_none(),
    }))
}

async fn version(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    at: u64,
) -> Result<Version, ApiError> {
    let (base, entries) = base_and_entries(state, log, log_id, at).await?;
    Ok(Version { at, base, entries })
}

/// Rows and columns that cover both versions.
async fn bounds(state: &SharedState, a: &Version, b: &Version) -> Result<(u32, u32), ApiError> {
    let mut rows = 0;
    let mut cols = 0;
    for v in [a, b] {
        let e = extent(&state.bucket, v.base.as_ref(), &v.entries)
            .await
            .map_err(|e| ApiError::Internal(format!("sizing the sheet at {}: {e}", v.at)))?;
        rows = rows.max(e.rows);
        cols = cols.max(e.columns);
    }
    Ok((rows, cols))
}

/// One page of changes, and the row (0-based) the next page starts at, if any.
struct Page {
    changes: Vec<Value>,
    next_row: Option<u32>,
}

/// Compares rows `start..rows` of the two versions, a window at a time, until the page is full.
async fn compare(
    state: &SharedState,
    log: LogId,
    (old, new): (&Version, &Version),
    (start, rows, cols): (u32, u32, u32),
    limit: usize,
) -> Result<Page, ApiError> {
    let mut changes = Vec::new();
    let mut bytes = 0usize;
    let mut row = start;
    let mut window = u32::try_from(WINDOW_CELLS / u64::from(cols.max(1)))
        .unwrap_or(u32::MAX)
        .max(1);
    while row < rows {
        if row - start >= SCAN_ROWS || changes.len() >= limit || bytes >= PAGE_BYTES {
            return Ok(Page {
                changes,
                next_row: Some(row),
            });
        }
        let last = row.saturating_add(window - 1).min(rows - 1);
        let range = Range::new(
            CellRef { row, col: 0 },
            CellRef {
                row: last,
                col: cols.max(1) - 1,
            },
        );
        let (Some(a), Some(b)) = (
            read(state, log, old, range).await?,
            read(state, log, new, range).await?,
        ) else {
            // Long texts: the window does not fit one read; halve it (a row always fits, as
            // a row of a range read does).
            if window == 1 {
                return Err(ApiError::Internal(format!(
                    "row {} does not fit one read",
                    row + 1
                )));
            }
            window = window.div_ceil(2);
            continue;
        };
        let mut found = Vec::new();
        diff_rows(&a, &b, &mut found);
        // Whole rows only: a full page still takes the rest of the row it is in.
        let mut taken = None;
        for (r, change) in found {
            if (changes.len() >= limit || bytes >= PAGE_BYTES) && taken != Some(r) {
                return Ok(Page {
                    changes,
                    next_row: Some(r),
                });
            }
            bytes += change.to_string().len();
            changes.push(change);
            taken = Some(r);
        }
        row = last + 1;
    }
    Ok(Page {
        changes,
        next_row: None,
    })
}

/// The non-empty cells of `range` in `v`, or `None` when they pass one read's budget.
async fn read(
    state: &SharedState,
    log: LogId,
    v: &Version,
    range: Range,
) -> Result<Option<Vec<Row>>, ApiError> {
    let budget = ReadBudget {
        cells: WINDOW_CELLS as usize,
        bytes: state.cfg.max_response_bytes,
    };
    match read_rows(
        &state.bucket,
        &state.bucket,
        *log.as_uuid(),
        v.base.as_ref(),
        &v.entries,
        range,
        budget,
    )
    .await
    {
        Ok((rows, _)) => Ok(Some(rows)),
        Err(SnapshotError::OverBudget { .. }) => Ok(None),
        Err(e) => Err(ApiError::Internal(format!(
            "reading the sheet at {}: {e}",
            v.at
        ))),
    }
}

/// Which of two sorted sequences' heads comes first: `Less` for `a`'s, `Greater` for `b`'s,
/// `Equal` for both; `None` once both are done.
fn first(a: Option<u32>, b: Option<u32>) -> Option<Ordering> {
    match (a, b) {
        (None, None) => None,
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        (Some(_), None) => Some(Ordering::Less),
        (None, Some(_)) => Some(Ordering::Greater),
    }
}

/// The changed cells of two sparse row lists over the same range, in row then column order,
/// each with its row.
fn diff_rows(a: &[Row], b: &[Row], out: &mut Vec<(u32, Value)>) {
    let (mut i, mut j) = (0, 0);
    while let Some(o) = first(a.get(i).map(|r| r.index), b.get(j).map(|r| r.index)) {
        match o {
            Ordering::Equal => {
                diff_cells(a[i].index, &a[i].cells, &b[j].cells, out);
                i += 1;
                j += 1;
            }
            Ordering::Less => {
                diff_cells(a[i].index, &a[i].cells, &[], out);
                i += 1;
            }
            Ordering::Greater => {
                diff_cells(b[j].index, &[], &b[j].cells, out);
                j += 1;
            }
        }
    }
}

/// The changed cells of one row, by column.
fn diff_cells(row: u32, a: &[(u32, Cell)], b: &[(u32, Cell)], out: &mut Vec<(u32, Value)>) {
    let (mut i, mut j) = (0, 0);
    while let Some(o) = first(a.get(i).map(|c| c.0), b.get(j).map(|c| c.0)) {
        let (col, before, after) = match o {
            Ordering::Equal => {
                i += 1;
                j += 1;
                (a[i - 1].0, Some(&a[i - 1].1), Some(&b[j - 1].1))
            }
            Ordering::Less => {
                i += 1;
                (a[i - 1].0, Some(&a[i - 1].1), None)
            }
            Ordering::Greater => {
                j += 1;
                (b[j - 1].0, None, Some(&b[j - 1].1))
            }
        };
        if before != after {
            let at = CellRef { row, col };
            out.push((
                row,
                json!({"ref": at.to_string(), "before": cell_json(before), "after": cell_json(after)}),
            ));
        }
    }
}

/// A cell as an entry writes it: `{"value"}` plus `"format"` when it has one; an empty cell is
/// `{"value": null}`.
fn cell_json(c: Option<&Cell>) -> Value {
    match c {
        None => json!({"value": null}),
        Some(c) => {
            let mut v = json!({"value": c.value});
            if let Some(f) = &c.format {
                v["format"] = json!(f);
            }
            v
        }
    }
}
