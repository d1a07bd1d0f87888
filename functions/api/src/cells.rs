//! `GET /logs/{logId}/cells`: the values of a range as of a sequence, read from the newest
//! completed snapshot at or before it plus the entries after that snapshot. Only the snapshot
//! chunks that overlap the range (and that the replayed entries touch) are loaded.

use serde_json::Value;
use sheetlog_core::LogId;
use std::collections::BTreeMap;

use sheetlog_core::sheet::formula::MAX_EVAL_CELLS;
use sheetlog_core::sheet::value::Shown;
use sheetlog_core::sheet::{Cell, CellRef, Range, Row, Value as SheetValue};
use sheetlog_core::snapshot::{
    LogEntry, Manifest, ReadBudget, ShownError, SnapshotError, grid, read_rows, shown_rows,
};
use sheetlog_core::snapshot_input;

use crate::dto::CellsResponse;
use crate::error::ApiError;
use crate::state::SharedState;

/// Largest range one request may read.
pub const MAX_RANGE_CELLS: u64 = 100_000;

pub async fn read(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    raw_range: &str,
    at: Option<u64>,
) -> Result<CellsResponse, ApiError> {
    let range: Range = raw_range
        .parse()
        .map_err(|e| ApiError::InvalidQuery(format!("range={raw_range:?}: {e}")))?;
    let cells = u64::from(range.rows()) * u64::from(range.cols());
    if cells > MAX_RANGE_CELLS {
        return Err(ApiError::InvalidQuery(format!(
            "range {raw_range} holds {cells} cells; at most {MAX_RANGE_CELLS} per request"
        )));
    }
    let at = seq_or_next(state, log, log_id, at).await?;
    // Every empty cell still costs a `null` in the answer; the rest of the response limit is for
    // the values, and the read stops once they pass it (long texts can make a range of 100,000
    // cells gigabytes).
    let limit = state.cfg.max_response_bytes;
    let budget = ReadBudget {
        cells: usize::MAX,
        bytes: limit.saturating_sub(cells as usize * 5 + 1024),
    };
    let (base, entries) = base_and_entries(state, log, log_id, at).await?;
    let sheet = Sheet {
        state,
        log,
        base: base.as_ref(),
        entries: &entries,
    };
    let rows = match sheet.rows(range, budget).await? {
        Bounded::Rows(rows) => rows,
        Bounded::OverBudget { bytes, .. } => {
            return Err(ApiError::RangeTooLarge {
                size: bytes + cells as usize * 5,
                limit,
            });
        }
    };
    let formats = by_ref(&rows, |cell| cell.format.as_ref().map(ToString::to_string));
    let styles = by_ref(&rows, |cell| cell.style.as_deref().cloned());
    let formulas = by_ref(&rows, |cell| match &cell.value {
        SheetValue::Formula(f) => Some(f.typed()),
        _ => None,
    });
    let rows = if formulas.is_empty() {
        rows
    } else {
        sheet.shown(range, rows).await?
    };
    let values = grid(rows, range)
        .into_iter()
        .map(|row| {
            row.iter()
                .map(|v| serde_json::to_value(Shown(v)).unwrap_or(Value::Null))
                .collect()
        })
        .collect();
    let out = CellsResponse {
        seq: at,
        range: raw_range.to_owned(),
        values,
        formats,
        styles,
        formulas,
    };
    // The budget above counts the values' bytes; what Lambda counts is the whole answer escaped
    // into its payload (quotes inside texts double), so check that too.
    let payload = crate::lambda_limit::lambda_payload_len(
        &serde_json::to_vec(&out).map_err(|e| ApiError::Internal(e.to_string()))?,
    );
    if payload > limit {
        return Err(ApiError::RangeTooLarge {
            size: payload,
            limit,
        });
    }
    Ok(out)
}

/// `at`, or the log's next sequence when absent (the whole log).
async fn seq_or_next(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    at: Option<u64>,
) -> Result<u64, ApiError> {
    match at {
        Some(at) => Ok(at),
        None => Ok(state
            .log
            .next_seq(log)
            .await
            .map_err(|e| ApiError::from_log(log_id, e))?
            .0),
    }
}

/// The newest completed snapshot at or before `at` (its manifest; `None` for the empty sheet)
/// and the entries after it, before `at`.
pub(crate) async fn base_and_entries(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    at: u64,
) -> Result<
    (
        Option<sheetlog_core::snapshot::Manifest>,
        Vec<sheetlog_core::snapshot::LogEntry>,
    ),
    ApiError,
> {
    let sheet = snapshot_input::sheet_as_of(&state.log, &state.bucket, log, at)
        .await
        .map_err(|e| ApiError::from_input(log_id, e))?;
    Ok((sheet.base, sheet.entries))
}

/// The sheet's extent as of sequence `at` (default: the whole log): from the newest completed
/// snapshot's manifest and the entries after it, without reading its chunks.
pub async fn extent(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    at: Option<u64>,
) -> Result<crate::dto::ExtentResponse, ApiError> {
    let at = seq_or_next(state, log, log_id, at).await?;
    let (base, entries) = base_and_entries(state, log, log_id, at).await?;
    let e = sheetlog_core::snapshot::extent(&state.bucket, base.as_ref(), &entries)
        .await
        .map_err(|e| ApiError::Internal(format!("sizing the sheet: {e}")))?;
    let range = (e.rows > 0).then(|| {
        format!(
            "A1:{}",
            sheetlog_core::sheet::CellRef {
                row: e.rows - 1,
                col: e.columns - 1
            }
        )
    });
    let layout = sheetlog_core::snapshot::layout_at(base.as_ref(), &entries);
    Ok(crate::dto::ExtentResponse {
        seq: at,
        rows: e.rows,
        columns: e.columns,
        range,
        layout: (!layout.is_default()).then_some(layout),
    })
}

/// What a bounded read found: the rows, or how far it got before its budget ran out.
#[derive(Debug)]
pub enum Bounded {
    Rows(Vec<Row>),
    OverBudget { cells: usize, bytes: usize },
}

/// The non-empty cells of `range` as of sequence `at` (the newest completed snapshot at or before
/// it plus the entries after it), as sparse rows, stopping once they pass `budget`.
pub async fn rows_at(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    at: u64,
    range: Range,
    budget: ReadBudget,
) -> Result<Bounded, ApiError> {
    let (base, entries) = base_and_entries(state, log, log_id, at).await?;
    Sheet {
        state,
        log,
        base: base.as_ref(),
        entries: &entries,
    }
    .rows(range, budget)
    .await
}

/// The sheet as of one sequence: its newest snapshot at or before it and the entries after that,
/// read once for every range a request reads.
struct Sheet<'a> {
    state: &'a SharedState,
    log: LogId,
    base: Option<&'a Manifest>,
    entries: &'a [LogEntry],
}

impl Sheet<'_> {
    async fn rows(&self, range: Range, budget: ReadBudget) -> Result<Bounded, ApiError> {
        match read_rows(
            &self.state.bucket,
            &self.state.bucket,
            *self.log.as_uuid(),
            self.base,
            self.entries,
            range,
            budget,
        )
        .await
        {
            Ok((rows, _stats)) => Ok(Bounded::Rows(rows)),
            Err(SnapshotError::OverBudget { cells, bytes }) => {
                Ok(Bounded::OverBudget { cells, bytes })
            }
            Err(e) => Err(ApiError::Internal(format!("reading the sheet: {e}"))),
        }
    }

    /// `rows` (the cells of `range`, some of them formulas) as shown: each formula replaced by
    /// its value, kept beside the snapshot or computed (`snapshot::shown_rows`), loading at most
    /// [`MAX_EVAL_CELLS`] cells and `MAX_EVAL_BYTES` of them.
    async fn shown(&self, range: Range, rows: Vec<Row>) -> Result<Vec<Row>, ApiError> {
        shown_rows(
            &self.state.bucket,
            &self.state.bucket,
            *self.log.as_uuid(),
            self.base,
            self.entries,
            range,
            rows,
        )
        .await
        .map_err(|e| match e {
            ShownError::TooManyCells { cells } => ApiError::FormulasTooLarge {
                cells,
                limit: MAX_EVAL_CELLS,
            },
            e => ApiError::Internal(format!("evaluating formulas: {e}")),
        })
    }
}

/// Something of each cell of `rows` that has it, by A1 reference.
fn by_ref<T>(rows: &[Row], of: impl Fn(&Cell) -> Option<T>) -> BTreeMap<String, T> {
    rows.iter()
        .flat_map(|r| {
            r.cells.iter().filter_map(|(c, cell)| {
                Some((
                    CellRef {
                        row: r.index,
                        col: *c,
                    }
                    .to_string(),
                    of(cell)?,
                ))
            })
        })
        .collect()
}
