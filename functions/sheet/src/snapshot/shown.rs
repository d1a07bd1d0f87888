//! A range as a reader sees it: each formula replaced by its value.
//!
//! A formula whose value the snapshot kept, and which nothing after the snapshot can have changed,
//! shows that value ([`KeptValues`]). The others are evaluated from the cells they reach: the area
//! read grows until it holds them all ([`formula::load_closure`]), and the formulas met on the way
//! whose values are kept count as those values, so the closure stops at them. One read loads at
//! most [`MAX_EVAL_CELLS`] cells and about [`MAX_EVAL_BYTES`] bytes; the engine runs on a blocking
//! thread.

use uuid::Uuid;

use super::SnapshotError;
use super::builder::LogEntry;
use super::format::Manifest;
use super::read::{ReadBudget, read_rows};
use super::store::{BlobStore, ImportSource};
use super::values::KeptValues;
use crate::formula::{self, EvalError, MAX_EVAL_BYTES, MAX_EVAL_CELLS, TAB};
use crate::{Range, Row, Value};

/// Why a range's values could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum ShownError {
    #[error(
        "evaluating these formulas needs {cells} cells, more than the {MAX_EVAL_CELLS} one read may load"
    )]
    TooManyCells { cells: usize },
    #[error(transparent)]
    Snapshot(SnapshotError),
    #[error("the formula engine failed: {0}")]
    Engine(String),
}

impl From<SnapshotError> for ShownError {
    fn from(e: SnapshotError) -> Self {
        match e {
            SnapshotError::OverBudget { cells, .. } => ShownError::TooManyCells { cells },
            e => ShownError::Snapshot(e),
        }
    }
}

fn has_formulas(rows: &[Row]) -> bool {
    rows.iter()
        .flat_map(|r| &r.cells)
        .any(|(_, c)| matches!(c.value, Value::Formula(_)))
}

/// `rows` (the cells of `range` at `base` plus `entries`) with every formula replaced by its
/// value; formats kept. Rows without formulas come back as they are, at no cost.
#[allow(clippy::too_many_arguments)]
pub async fn shown_rows(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    log_id: Uuid,
    base: Option<&Manifest>,
    entries: &[LogEntry],
    range: Range,
    rows: Vec<Row>,
) -> Result<Vec<Row>, ShownError> {
    if !has_formulas(&rows) {
        return Ok(rows);
    }
    let kept = KeptValues::open(store, base, entries).await?;
    let rows = kept.apply(store, rows).await?;
    if !has_formulas(&rows) {
        return Ok(rows);
    }
    let budget = ReadBudget {
        cells: MAX_EVAL_CELLS,
        bytes: MAX_EVAL_BYTES,
    };
    let kept = &kept;
    let loaded = formula::load_closure(rows.clone(), range, TAB, |area| async move {
        let (read, _) = read_rows(store, payloads, log_id, base, entries, area, budget).await?;
        Ok::<_, ShownError>(kept.apply(store, read).await?)
    })
    .await?;
    let evaluated = tokio::task::spawn_blocking(move || formula::evaluate(&loaded))
        .await
        .map_err(|e| ShownError::Engine(e.to_string()))?
        .map_err(|e| match e {
            EvalError::TooManyCells { cells } => ShownError::TooManyCells { cells },
            EvalError::Engine(e) => ShownError::Engine(e),
        })?;
    Ok(evaluated.shown_rows(&rows))
}
