//! What a formula reads, and the area a read must load to evaluate a range.
//!
//! A read evaluates the formulas in its range from the cells they read, and those from theirs:
//! the dependency closure. The reader loads a rectangle, looks at the references of the formulas
//! inside it, and while some point outside it grows the rectangle to cover them — at least
//! doubling the side that grew, so a chain of a million formulas each reading the row above is
//! closed in about twenty rounds, not a million ([`closure_area`]).

use std::collections::{BTreeMap, HashSet};

use ironcalc_base::expressions::token::TokenType;

use super::text::tokens;
use crate::a1::{CellRef, Range};
use crate::limits::{MAX_COLS, MAX_ROWS};
use crate::value::{Cell, Row, Value};

/// The areas `text` (a formula without `=`, on the tab named `tab`) reads, 0-based. References to
/// other tabs are not included; a reference outside the sheet is left out (it evaluates to an
/// error without reading anything).
pub fn references(text: &str, tab: &str) -> Vec<Range> {
    let mut out = Vec::new();
    for token in tokens(text) {
        match token {
            TokenType::Reference {
                sheet, row, column, ..
            } if own(sheet.as_deref(), tab) => {
                if let Some(c) = cell(row, column) {
                    out.push(Range::new(c, c));
                }
            }
            TokenType::Range { sheet, left, right } if own(sheet.as_deref(), tab) => {
                if let (Some(a), Some(b)) =
                    (cell(left.row, left.column), cell(right.row, right.column))
                {
                    out.push(Range::new(a, b));
                }
            }
            _ => {}
        }
    }
    out
}

fn own(sheet: Option<&str>, tab: &str) -> bool {
    sheet.is_none_or(|s| s.eq_ignore_ascii_case(tab))
}

fn cell(row: i32, column: i32) -> Option<CellRef> {
    let (row, col) = (u32::try_from(row).ok()?, u32::try_from(column).ok()?);
    ((1..=MAX_ROWS).contains(&row) && (1..=MAX_COLS).contains(&col)).then(|| CellRef {
        row: row - 1,
        col: col - 1,
    })
}

/// What evaluating the formulas of a range needs, as far as the loaded cells tell.
#[derive(Debug, Clone, PartialEq)]
pub struct Reach {
    /// The loaded cells the range's formulas read, directly or through other formulas, and the
    /// cells of the range itself: what to evaluate. Rows ascending, cells by column.
    pub rows: Vec<Row>,
    /// The smallest rectangle covering every cell they read, loaded or not.
    pub bounds: Range,
}

/// Follows the references of the formulas in `range` through `loaded` (the cells of an area
/// that covers `range`): every formula reached adds the areas it reads. Only formulas reached
/// count, so a loaded area larger than needed does not pull in what nothing reads.
pub fn reach(loaded: &[Row], range: Range, tab: &str) -> Reach {
    let mut todo = vec![range];
    let mut seen_areas: HashSet<Range> = HashSet::from([range]);
    let mut cells: BTreeMap<(u32, u32), &Cell> = BTreeMap::new();
    let mut bounds = range;
    while let Some(area) = todo.pop() {
        for (at, cell) in cells_in(loaded, area) {
            if cells.insert((at.row, at.col), cell).is_some() {
                continue;
            }
            if let Value::Formula(f) = &cell.value {
                for r in references(&f.text, tab) {
                    bounds = union(bounds, r);
                    if seen_areas.insert(r) {
                        todo.push(r);
                    }
                }
            }
        }
    }
    let mut rows: Vec<Row> = Vec::new();
    for ((row, col), cell) in cells {
        match rows.last_mut() {
            Some(r) if r.index == row => r.cells.push((col, cell.clone())),
            _ => rows.push(Row {
                index: row,
                cells: vec![(col, cell.clone())],
            }),
        }
    }
    Reach { rows, bounds }
}

/// The cells of `rows` (sorted) inside `area`.
fn cells_in(rows: &[Row], area: Range) -> impl Iterator<Item = (CellRef, &Cell)> {
    let first = rows.partition_point(|r| r.index < area.start.row);
    rows[first..]
        .iter()
        .take_while(move |r| r.index <= area.end.row)
        .flat_map(move |r| {
            let from = r.cells.partition_point(|(c, _)| *c < area.start.col);
            r.cells[from..]
                .iter()
                .take_while(move |(c, _)| *c <= area.end.col)
                .map(move |(c, cell)| {
                    (
                        CellRef {
                            row: r.index,
                            col: *c,
                        },
                        cell,
                    )
                })
        })
}

/// The area to load next so that the formulas of `range` can be evaluated from the cells of
/// `area` (`rows`), or `None` when `area` holds every cell they reach. The new area covers
/// everything reached so far; a side that grows at least doubles `area`'s extent that way.
pub fn closure_area(rows: &[Row], range: Range, area: Range, tab: &str) -> Option<Range> {
    let need = union(area, reach(rows, range, tab).bounds);
    (need != area).then(|| grow(area, need))
}

/// The cells to evaluate the formulas of `range` from: the cells of `range` (`rows`) and, while
/// [`closure_area`] asks for more, of the grown area `read` gives; of those, only what the
/// formulas reach ([`reach`]).
pub async fn load_closure<E, F, Fut>(
    rows: Vec<Row>,
    range: Range,
    tab: &str,
    read: F,
) -> Result<Vec<Row>, E>
where
    F: FnMut(Range) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Row>, E>>,
{
    Ok(load_reach(rows, range, tab, read).await?.rows)
}

/// As [`load_closure`], with the rectangle the reached cells read ([`Reach::bounds`]).
pub async fn load_reach<E, F, Fut>(
    rows: Vec<Row>,
    range: Range,
    tab: &str,
    mut read: F,
) -> Result<Reach, E>
where
    F: FnMut(Range) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Row>, E>>,
{
    let mut area = range;
    let mut loaded = rows;
    loop {
        let reached = reach(&loaded, range, tab);
        let need = union(area, reached.bounds);
        if need == area {
            return Ok(reached);
        }
        area = grow(area, need);
        loaded = read(area).await?;
    }
}

fn union(a: Range, b: Range) -> Range {
    Range {
        start: CellRef {
            row: a.start.row.min(b.start.row),
            col: a.start.col.min(b.start.col),
        },
        end: CellRef {
            row: a.end.row.max(b.end.row),
            col: a.end.col.max(b.end.col),
        },
    }
}

/// `need` (which covers `area`), with each side that moved pushed out at least as far as
/// `area`'s extent in that direction, within the sheet.
fn grow(area: Range, need: Range) -> Range {
    let (h, w) = (area.rows(), area.cols());
    let start_row = if need.start.row < area.start.row {
        need.start.row.min(area.start.row.saturating_sub(h))
    } else {
        need.start.row
    };
    let start_col = if need.start.col < area.start.col {
        need.start.col.min(area.start.col.saturating_sub(w))
    } else {
        need.start.col
    };
    let end_row = if need.end.row > area.end.row {
        need.end
            .row
            .max(area.end.row.saturating_add(h))
            .min(MAX_ROWS - 1)
    } else {
        need.end.row
    };
    let end_col = if need.end.col > area.end.col {
        need.end
            .col
            .max(area.end.col.saturating_add(w))
            .min(MAX_COLS - 1)
    } else {
        need.end.col
    };
    Range {
        start: CellRef {
            row: start_row,
            col: start_col,
        },
        end: CellRef {
            row: end_row,
            col: end_col,
        },
    }
}
