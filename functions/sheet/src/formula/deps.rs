//! What a formula reads, and the area a read must load to evaluate a range.
//!
//! A read evaluates the formulas in its range from the cells they read, and those from theirs:
//! the dependency closure. The reader loads a rectangle, looks at the references of the formulas
//! inside it, and while some point outside it grows the rectangle to cover them — at least
//! doubling the side that grew, so a chain of a million formulas each reading the row above is
//! closed in about twenty rounds, not a million ([`closure_area`]).

use ironcalc_base::expressions::token::TokenType;

use super::text::tokens;
use crate::a1::{CellRef, Range};
use crate::limits::{MAX_COLS, MAX_ROWS};
use crate::value::{Row, Value};

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

/// The area to load next so that every formula in `rows` (the cells of `area`) can be
/// evaluated, or `None` when `area` already holds every cell they read. The new area covers
/// `area` and every reference; a side that grows at least doubles `area`'s extent that way.
pub fn closure_area(rows: &[Row], area: Range, tab: &str) -> Option<Range> {
    let mut need = area;
    for row in rows {
        for (col, c) in &row.cells {
            let Value::Formula(f) = &c.value else {
                continue;
            };
            if !area.contains(CellRef {
                row: row.index,
                col: *col,
            }) {
                continue;
            }
            for r in references(&f.text, tab) {
                need = union(need, r);
            }
        }
    }
    (need != area).then(|| grow(area, need))
}

/// The cells to evaluate the formulas of `range` from: `rows` (the cells of `range`) and, while
/// [`closure_area`] asks for more, the rows `read` gives for the grown area. Returns `rows` itself
/// when they hold no formula.
pub async fn load_closure<E, F, Fut>(
    rows: Vec<Row>,
    range: Range,
    tab: &str,
    mut read: F,
) -> Result<Vec<Row>, E>
where
    F: FnMut(Range) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Row>, E>>,
{
    let mut area = range;
    let mut loaded = rows;
    while let Some(next) = closure_area(&loaded, area, tab) {
        area = next;
        loaded = read(area).await?;
    }
    Ok(loaded)
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
