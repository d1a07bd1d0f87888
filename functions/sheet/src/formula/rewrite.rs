//! References rewritten when rows or columns are inserted or deleted, as spreadsheets do:
//! inserting a row above `A5` makes `=A5` read `=A6`; a range grows when rows are inserted inside
//! it and shrinks when some of its rows are deleted; a reference whose every cell was deleted
//! becomes `#REF!`.
//!
//! The formula text is rewritten in place, token by token (IronCalc's lexer finds the
//! references), so everything else the person typed — spacing, case of function names — stays
//! as it was. Full-column references (`A:A`) do not move with row edits, nor full-row ones
//! (`1:1`) with column edits.
//!
//! [`offset`] moves references the other way spreadsheets do, as a formula copied to another
//! cell: relative parts move by the distance, absolute ones stay (how an XLSX shared formula is
//! spread over its cells on import).

use ironcalc_base::expressions::lexer::{Lexer, LexerMode};
use ironcalc_base::expressions::token::TokenType;
use ironcalc_base::expressions::types::ParsedReference;
use ironcalc_base::language::get_default_language;
use ironcalc_base::locale::get_default_locale;

use super::eval::TAB;
use crate::a1::column_name;
use crate::event::Event;
use crate::limits::{MAX_COLS, MAX_ROWS};
use crate::value::{Cell, Value};

/// A structural edit, in 0-based rows or columns: `count` inserted, or deleted, at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Displace {
    InsertRows { at: u32, count: u32 },
    DeleteRows { at: u32, count: u32 },
    InsertColumns { at: u32, count: u32 },
    DeleteColumns { at: u32, count: u32 },
}

impl Displace {
    fn on_rows(self) -> bool {
        matches!(
            self,
            Displace::InsertRows { .. } | Displace::DeleteRows { .. }
        )
    }

    /// Where the 1-based line (row or column) `n` goes, or `None` when it was deleted. Lines in
    /// the other direction are unchanged.
    fn line(self, n: i32) -> Option<i32> {
        let (at, count, insert) = match self {
            Displace::InsertRows { at, count } | Displace::InsertColumns { at, count } => {
                (at, count, true)
            }
            Displace::DeleteRows { at, count } | Displace::DeleteColumns { at, count } => {
                (at, count, false)
            }
        };
        let (at, count) = (at as i64 + 1, count as i64);
        let n = i64::from(n);
        let moved = if n < at {
            n
        } else if insert {
            n + count
        } else if n < at + count {
            return None;
        } else {
            n - count
        };
        let last = if self.on_rows() { MAX_ROWS } else { MAX_COLS };
        // A reference pushed past the sheet's edge is lost, as the cells there were.
        (moved <= i64::from(last)).then_some(moved as i32)
    }

    /// Where the 1-based span `first..=last` goes: each end moves as its line does; an end that
    /// was deleted moves to the nearest line kept inside the span; a span all deleted is gone, and
    /// so is one an insert pushed wholly past the sheet's edge (one pushed partly is cut there).
    fn span(self, first: i32, last: i32) -> Option<(i32, i32)> {
        let edge = if self.on_rows() { MAX_ROWS } else { MAX_COLS } as i32;
        match self {
            Displace::InsertRows { .. } | Displace::InsertColumns { .. } => {
                Some((self.line(first)?, self.line(last).unwrap_or(edge)))
            }
            Displace::DeleteRows { at, count } | Displace::DeleteColumns { at, count } => {
                let (d, count) = (at as i32 + 1, count as i32);
                let e = d + count;
                let a = if first < d {
                    first
                } else if first >= e {
                    first - count
                } else {
                    d
                };
                let b = if last < d {
                    last
                } else if last >= e {
                    last - count
                } else {
                    d - 1
                };
                (a <= b).then_some((a, b))
            }
        }
    }
}

/// `text` (a formula without `=`) with its references rewritten for `s`, or `None` when none
/// changes. An A1 reference names a cell whatever cell holds the formula, so the formula's own
/// position does not matter. `tab` is the name of the formula's tab: references to other tabs
/// are left alone.
pub fn displace(text: &str, tab: &str, s: Displace) -> Option<String> {
    rewrite_references(text, |sheet, found| {
        if !own(sheet, tab) {
            return None;
        }
        Some(match found {
            Found::Cell(r) => shift_cell(r, s).map_or_else(ref_error, |r| cell_text(&r)),
            Found::Range(l, r) => shift_range(l, r, s).unwrap_or_else(ref_error),
        })
    })
}

/// `text` (a formula without `=`) as it reads copied `rows` down and `cols` right (negative: up,
/// left), as a spreadsheet copies a formula and as an XLSX shared formula is spread over its
/// cells: relative rows and columns move, absolute ones (`$`) stay, on every tab; a reference
/// moved off the sheet becomes `#REF!`. `None` when nothing changes.
pub fn offset(text: &str, rows: i64, cols: i64) -> Option<String> {
    rewrite_references(text, |_, found| {
        Some(match found {
            Found::Cell(r) => offset_cell(r, rows, cols).map_or_else(ref_error, |r| cell_text(&r)),
            Found::Range(l, r) => match (offset_cell(l, rows, cols), offset_cell(r, rows, cols)) {
                (Some(nl), Some(nr)) => range_text(l, r, &nl, &nr),
                _ => ref_error(),
            },
        })
    })
}

/// A reference the lexer found: a cell, or a range's two corners.
enum Found<'t> {
    Cell(&'t ParsedReference),
    Range(&'t ParsedReference, &'t ParsedReference),
}

fn ref_error() -> String {
    "#REF!".to_owned()
}

/// `text` with each reference replaced by what `map` makes of it (given the tab it names, if
/// any); `None` from `map` keeps a reference, and a replacement that differs only in case is
/// not made. The rest of the text — spacing, case of function names — stays as it was. `None`
/// when nothing changes.
fn rewrite_references(
    text: &str,
    mut map: impl FnMut(Option<&str>, Found<'_>) -> Option<String>,
) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut lexer = Lexer::new(
        text,
        LexerMode::A1,
        get_default_locale(),
        get_default_language(),
    );
    let mut out = String::with_capacity(text.len() + 8);
    let mut copied = 0usize;
    let mut changed = false;
    loop {
        let start = lexer.get_position().max(0) as usize;
        let token = lexer.next_token();
        let end = lexer.get_position().max(0) as usize;
        let replacement = match &token {
            TokenType::EOF | TokenType::Illegal(_) => break,
            TokenType::Reference {
                sheet,
                row,
                column,
                absolute_column,
                absolute_row,
            } => {
                let r = ParsedReference {
                    row: *row,
                    column: *column,
                    absolute_row: *absolute_row,
                    absolute_column: *absolute_column,
                };
                map(sheet.as_deref(), Found::Cell(&r))
            }
            TokenType::Range { sheet, left, right } => {
                map(sheet.as_deref(), Found::Range(left, right))
            }
            _ => None,
        };
        let Some(new) = replacement else { continue };
        // The token's own text: after any whitespace the lexer skipped, after a sheet prefix.
        let slice: String = chars[start.min(chars.len())..end.min(chars.len())]
            .iter()
            .collect();
        let lead = slice.len() - slice.trim_start().len();
        let body = &slice[lead..];
        let prefix_len = body.rfind('!').map_or(0, |i| i + 1);
        let old = &body[prefix_len..];
        if new.eq_ignore_ascii_case(old) {
            continue;
        }
        changed = true;
        let from = start + slice[..lead + prefix_len].chars().count();
        out.extend(&chars[copied..from]);
        // A reference that is gone loses its sheet prefix too (`Sheet1!#REF!` reads as an error
        // either way; Excel writes `#REF!`).
        if new == "#REF!" && prefix_len > 0 {
            out.truncate(out.len() - body[..prefix_len].len());
        }
        out.push_str(&new);
        copied = end.min(chars.len());
    }
    if !changed {
        return None;
    }
    out.extend(&chars[copied..]);
    Some(out)
}

fn own(sheet: Option<&str>, tab: &str) -> bool {
    sheet.is_none_or(|s| s.eq_ignore_ascii_case(tab))
}

fn shift_cell(r: &ParsedReference, s: Displace) -> Option<ParsedReference> {
    let mut r = r.clone();
    if s.on_rows() {
        r.row = s.line(r.row)?;
    } else {
        r.column = s.line(r.column)?;
    }
    Some(r)
}

fn shift_range(left: &ParsedReference, right: &ParsedReference, s: Displace) -> Option<String> {
    let (full_rows, full_cols) = (full_rows(left, right), full_cols(left, right));
    let (mut l, mut r) = (left.clone(), right.clone());
    if s.on_rows() && !full_rows {
        (l.row, r.row) = ordered(
            s.span(left.row.min(right.row), left.row.max(right.row))?,
            left.row > right.row,
        );
    } else if !s.on_rows() && !full_cols {
        (l.column, r.column) = ordered(
            s.span(left.column.min(right.column), left.column.max(right.column))?,
            left.column > right.column,
        );
    }
    Some(range_text(left, right, &l, &r))
}

/// The text of the range `left:right` once its corners have become `l` and `r`: a full-column
/// range (`A:A`) stays one, as does a full-row range (`1:1`).
fn range_text(
    left: &ParsedReference,
    right: &ParsedReference,
    l: &ParsedReference,
    r: &ParsedReference,
) -> String {
    if full_rows(left, right) {
        format!("{}:{}", col_text(l), col_text(r))
    } else if full_cols(left, right) {
        format!("{}:{}", row_text(l), row_text(r))
    } else {
        format!("{}:{}", cell_text(l), cell_text(r))
    }
}

/// The range spans every row (a full-column range such as `A:A`).
fn full_rows(left: &ParsedReference, right: &ParsedReference) -> bool {
    left.absolute_row && right.absolute_row && left.row == 1 && right.row == MAX_ROWS as i32
}

/// The range spans every column (a full-row range such as `1:1`).
fn full_cols(left: &ParsedReference, right: &ParsedReference) -> bool {
    left.absolute_column
        && right.absolute_column
        && left.column == 1
        && right.column == MAX_COLS as i32
}

/// `r` moved `rows` down and `cols` right, its absolute parts kept; `None` off the sheet.
fn offset_cell(r: &ParsedReference, rows: i64, cols: i64) -> Option<ParsedReference> {
    let moved = |n: i32, by: i64, last: u32| {
        let m = i64::from(n) + by;
        (1..=i64::from(last)).contains(&m).then_some(m as i32)
    };
    let mut r = r.clone();
    if !r.absolute_row {
        r.row = moved(r.row, rows, MAX_ROWS)?;
    }
    if !r.absolute_column {
        r.column = moved(r.column, cols, MAX_COLS)?;
    }
    Some(r)
}

/// A span back in the order the range was written in (`A5:A1` stays bottom-first).
fn ordered((a, b): (i32, i32), reversed: bool) -> (i32, i32) {
    if reversed { (b, a) } else { (a, b) }
}

fn col_text(r: &ParsedReference) -> String {
    let name = column_name(r.column.max(1) as u32 - 1);
    if r.absolute_column {
        format!("${name}")
    } else {
        name
    }
}

fn row_text(r: &ParsedReference) -> String {
    if r.absolute_row {
        format!("${}", r.row)
    } else {
        r.row.to_string()
    }
}

fn cell_text(r: &ParsedReference) -> String {
    format!("{}{}", col_text(r), row_text(r))
}

impl Displace {
    /// The displacement that undoes this one's moves (a reference into deleted lines stays lost).
    pub fn inverse(self) -> Displace {
        match self {
            Displace::InsertRows { at, count } => Displace::DeleteRows { at, count },
            Displace::DeleteRows { at, count } => Displace::InsertRows { at, count },
            Displace::InsertColumns { at, count } => Displace::DeleteColumns { at, count },
            Displace::DeleteColumns { at, count } => Displace::InsertColumns { at, count },
        }
    }

    /// The displacement a structural event makes; `None` for events that move no cell.
    pub fn of(event: &Event) -> Option<Displace> {
        Some(match event {
            Event::InsertRows(e) => Displace::InsertRows {
                at: e.at.0,
                count: e.count,
            },
            Event::DeleteRows(e) => Displace::DeleteRows {
                at: e.at.0,
                count: e.count,
            },
            Event::InsertColumns(e) => Displace::InsertColumns {
                at: e.at.0,
                count: e.count,
            },
            Event::DeleteColumns(e) => Displace::DeleteColumns {
                at: e.at.0,
                count: e.count,
            },
            Event::Set(_)
            | Event::Style(_)
            | Event::Import(_)
            | Event::Restore(_)
            | Event::ResizeColumns(_)
            | Event::ResizeRows(_)
            | Event::Freeze(_) => return None,
        })
    }
}

/// Rewrites the references of every formula among `cells` for `s` (on the sheet's one tab).
pub fn displace_cells(cells: &mut [(u32, Cell)], s: Displace) {
    for (_, cell) in cells {
        if let Value::Formula(f) = &mut cell.value
            && let Some(text) = displace(&f.text, TAB, s)
        {
            f.text = text.into();
            // The value it cached was read from cells that have moved; it is computed again.
            f.cached = None;
        }
    }
}
