//! The cells that differ between two versions of a sheet, a page at a time: what
//! `GET /logs/{logId}/diff` answers (docs/api.md, "Compare two versions").
//!
//! Each version is a snapshot and the entries after it (as every read takes them). The two are
//! compared a window of whole rows at a time: a window holds at most [`WINDOW_CELLS`] cells of the
//! wider of the two sheets, so memory stays one window of each. A page ends at a row boundary
//! once it holds `limit` changes or about `max_bytes` of them, or after [`SCAN_ROWS`] rows; its
//! `next_row` says where the next page starts. Cells are compared as stored: a formula's text,
//! not its value.

use std::cmp::Ordering;

use uuid::Uuid;

use super::SnapshotError;
use super::builder::LogEntry;
use super::format::Manifest;
use super::read::{ReadBudget, cell_json_bytes, extent, read_rows};
use super::store::{BlobStore, ImportSource};
use crate::{Cell, CellRef, Range, Row};

/// Cells one window of rows covers (rows × the wider sheet's columns), as an export block does.
pub const WINDOW_CELLS: u64 = 100_000;
/// Rows one page compares at most, whatever it finds.
pub const SCAN_ROWS: u32 = 200_000;

/// One version of the sheet: its snapshot (`None`: the empty sheet) and the entries after it.
#[derive(Debug, Clone, Copy)]
pub struct Version<'a> {
    pub base: Option<&'a Manifest>,
    pub entries: &'a [LogEntry],
}

/// One changed cell: what it held in the older version and in the newer (`None`: empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub at: CellRef,
    pub before: Option<Cell>,
    pub after: Option<Cell>,
}

/// One page of changes, in row then column order, and the row (0-based) the next page starts
/// at, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffPage {
    pub changes: Vec<Change>,
    pub next_row: Option<u32>,
}

/// Where a page stops: after `limit` changes or about `max_bytes` of them (as JSON), at a row
/// boundary.
#[derive(Debug, Clone, Copy)]
pub struct PageLimits {
    pub limit: usize,
    pub max_bytes: usize,
}

/// The changes from `old` to `new`, from row `start` (0-based) on, one page of them.
pub async fn diff_page(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    log_id: Uuid,
    (old, new): (Version<'_>, Version<'_>),
    start: u32,
    page: PageLimits,
) -> Result<DiffPage, SnapshotError> {
    let (rows, cols) = bounds(payloads, old, new).await?;
    let cols = cols.max(1);
    let mut changes = Vec::new();
    let mut bytes = 0usize;
    let mut row = start;
    let mut window = window_rows(cols);
    let full = |changes: &Vec<Change>, bytes: usize| {
        changes.len() >= page.limit || bytes >= page.max_bytes
    };
    while row < rows {
        if row - start >= SCAN_ROWS || full(&changes, bytes) {
            return Ok(DiffPage {
                changes,
                next_row: Some(row),
            });
        }
        let (last, range) = window_range(row, window, (rows, cols));
        let (Some(a), Some(b)) = (
            read(store, payloads, log_id, old, range).await?,
            read(store, payloads, log_id, new, range).await?,
        ) else {
            // Long texts: the window does not fit one read; halve it (one row always fits).
            if window == 1 {
                return Err(SnapshotError::Internal(format!(
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
        for change in found {
            let r = change.at.row;
            if full(&changes, bytes) && taken != Some(r) {
                return Ok(DiffPage {
                    changes,
                    next_row: Some(r),
                });
            }
            bytes += change_bytes(&change);
            changes.push(change);
            taken = Some(r);
        }
        row = last + 1;
    }
    Ok(DiffPage {
        changes,
        next_row: None,
    })
}

/// Rows of a window of [`WINDOW_CELLS`] cells of a sheet `cols` columns wide (at least one).
pub(super) fn window_rows(cols: u32) -> u32 {
    u32::try_from(WINDOW_CELLS / u64::from(cols.max(1)))
        .unwrap_or(u32::MAX)
        .max(1)
}

/// The window of up to `window` whole rows from `row` of a sheet of `rows` × `cols`: its last
/// row and its range.
pub(super) fn window_range(row: u32, window: u32, (rows, cols): (u32, u32)) -> (u32, Range) {
    let last = row.saturating_add(window - 1).min(rows - 1);
    let range = Range::new(
        CellRef { row, col: 0 },
        CellRef {
            row: last,
            col: cols.max(1) - 1,
        },
    );
    (last, range)
}

/// Rows and columns that cover both versions.
async fn bounds(
    payloads: &dyn ImportSource,
    a: Version<'_>,
    b: Version<'_>,
) -> Result<(u32, u32), SnapshotError> {
    let (x, y) = (
        extent(payloads, a.base, a.entries).await?,
        extent(payloads, b.base, b.entries).await?,
    );
    Ok((x.rows.max(y.rows), x.columns.max(y.columns)))
}

/// The non-empty cells of `range` in `v`, or `None` when they pass one read's budget.
async fn read(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    log_id: Uuid,
    v: Version<'_>,
    range: Range,
) -> Result<Option<Vec<Row>>, SnapshotError> {
    let budget = ReadBudget {
        cells: WINDOW_CELLS as usize,
        bytes: 64 * 1024 * 1024,
    };
    match read_rows(store, payloads, log_id, v.base, v.entries, range, budget).await {
        Ok((rows, _)) => Ok(Some(rows)),
        Err(SnapshotError::OverBudget { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// About the JSON bytes of a change: both cells and the reference.
fn change_bytes(c: &Change) -> usize {
    16 + c.before.as_ref().map_or(16, cell_json_bytes)
        + c.after.as_ref().map_or(16, cell_json_bytes)
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

/// The changed cells of two sparse row lists over the same range, in row then column order.
fn diff_rows(a: &[Row], b: &[Row], out: &mut Vec<Change>) {
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
fn diff_cells(row: u32, a: &[(u32, Cell)], b: &[(u32, Cell)], out: &mut Vec<Change>) {
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
            out.push(Change {
                at: CellRef { row, col },
                before: before.cloned(),
                after: after.cloned(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Value;

    fn row(index: u32, cells: &[(u32, &str)]) -> Row {
        Row {
            index,
            cells: cells
                .iter()
                .map(|(c, t)| (*c, Cell::new(Value::Text((*t).into()), None)))
                .collect(),
        }
    }

    #[test]
    fn rows_and_cells_on_either_side_only_are_changes_and_equal_ones_are_not() {
        let a = [row(0, &[(0, "x"), (2, "same")]), row(3, &[(1, "gone")])];
        let b = [row(0, &[(1, "new"), (2, "same")]), row(5, &[(0, "added")])];
        let mut out = Vec::new();
        diff_rows(&a, &b, &mut out);
        let got: Vec<(String, bool, bool)> = out
            .iter()
            .map(|c| (c.at.to_string(), c.before.is_some(), c.after.is_some()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("A1".into(), true, false),
                ("B1".into(), false, true),
                ("B4".into(), true, false),
                ("A6".into(), false, true),
            ]
        );
    }
}
