//! Rebasing: moving an edit made against an older view of the sheet onto the sheet as it is now,
//! so that it lands on the rows and columns its author meant.
//!
//! An author edits what they see: the sheet at some log position (the *base*) plus their own edits
//! the server has not confirmed yet. By the time the server applies the edit, other people may have
//! inserted or deleted rows and columns, or imported a file over the sheet. [`rebase`] takes the
//! edit and what was committed after its base, and returns the events that do what the author
//! meant on the current sheet:
//!
//! - a cell reference moves with its row and its column; a cell whose row or column was deleted is
//!   dropped (and a `set` with no cell left is rejected);
//! - an insert stays directly above the row (left of the column) it was made above; if that row was
//!   deleted, the insert lands where the deleted range started;
//! - a delete removes exactly the rows (columns) its author saw and that still exist: rows others
//!   inserted inside the range survive (the delete splits around them), rows someone else already
//!   deleted are not deleted twice, and a delete with nothing left is rejected;
//! - the values of an `insert-rows` follow their columns;
//! - an import or a restore committed after the base replaced everything the edit referred to:
//!   it is rejected.
//!
//! The author's own unconfirmed edits are part of the view they edited, so they are not "someone
//! else's change" to rebase through: [`Step::Own`] gives each one both as the author saw it and as
//! the server applied it, and references to rows the author's own insert created follow that
//! insert wherever the server put it.
//!
//! Everything here is pure and works on positions only, so the server, the snapshot engine's tests
//! and the clients share one set of rules (`docs/sync.md`, "Concurrent edits keep their intent").

use std::fmt;

use super::a1::{CellRef, Range, column_name};
use super::event::{
    ColumnName, DeleteColumns, DeleteRows, Event, InsertColumns, InsertRows, RowNumber, SetCells,
    StyleCells,
};
use super::formula::{self, Displace, Formula, TAB};
use super::layout::{ResizeColumns, ResizeRows};
use super::limits::{MAX_COLS, MAX_ROWS};
use super::value::Value;

/// One thing committed to the log after the edit's base, in log order.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// An event the author had not seen: someone else's edit, a direct append, an import.
    Other(&'a Event),
    /// One of the author's own earlier edits, which the author's view already held.
    Own {
        /// The edit as it stood in the author's view (empty if it did nothing there).
        seen: &'a [Event],
        /// What the server applied for it (empty if it was rejected).
        applied: &'a [Event],
    },
}

/// What to do with a rebased edit.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Apply these events in order. Equal to the edit itself when nothing it refers to moved.
    Apply(Vec<Event>),
    /// Nothing of the edit is left to apply; the reason is for a person.
    Reject(String),
}

/// Why a reference has no place in the current sheet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gone {
    /// Its row or column was deleted by an edit the author had not seen.
    Deleted,
    /// An import or a restore replaced the sheet after the edit was made.
    Replaced,
    /// Inserts pushed it past the last row or column of the sheet.
    PastEnd,
    /// It was a row or column the author's own earlier insert added, and that insert was rejected.
    NeverAdded,
}

impl fmt::Display for Gone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Gone::Deleted => "was deleted by an edit made at the same time",
            Gone::Replaced => "was replaced by an import or a restore made at the same time",
            Gone::PastEnd => {
                "was pushed past the end of the sheet by inserts made at the same time"
            }
            Gone::NeverAdded => "came from an earlier edit of the same author that was rejected",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Axis {
    Rows,
    Columns,
}

impl Axis {
    fn max(self) -> u64 {
        match self {
            Axis::Rows => u64::from(MAX_ROWS),
            Axis::Columns => u64::from(MAX_COLS),
        }
    }
}

/// What an event does to the positions on one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shift {
    Insert {
        at: u64,
        count: u64,
    },
    Delete {
        at: u64,
        count: u64,
    },
    /// The whole sheet is replaced (an import or a restore).
    Replace,
}

fn shift_of(event: &Event, axis: Axis) -> Option<Shift> {
    let insert = |at: u32, count: u32| Shift::Insert {
        at: u64::from(at),
        count: u64::from(count),
    };
    let delete = |at: u32, count: u32| Shift::Delete {
        at: u64::from(at),
        count: u64::from(count),
    };
    match (event, axis) {
        (Event::InsertRows(e), Axis::Rows) => Some(insert(e.at.0, e.count)),
        (Event::DeleteRows(e), Axis::Rows) => Some(delete(e.at.0, e.count)),
        (Event::InsertColumns(e), Axis::Columns) => Some(insert(e.at.0, e.count)),
        (Event::DeleteColumns(e), Axis::Columns) => Some(delete(e.at.0, e.count)),
        (Event::Import(_) | Event::Restore(_), _) => Some(Shift::Replace),
        _ => None,
    }
}

/// Where a run of rows (columns) comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// `start` is a position in the frame being walked.
    At,
    /// `start` is an offset into the rows the author's own step `j` inserted, not yet placed.
    New(usize),
}

/// A run of consecutive rows (columns): `start..start + len` of its origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    origin: Origin,
    start: u64,
    len: u64,
}

impl Run {
    fn at(start: u64, len: u64) -> Run {
        Run {
            origin: Origin::At,
            start,
            len,
        }
    }

    fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// Runs of references on one axis, walked from the author's view to the current sheet.
///
/// An *anchor* (the position an insert goes above) is a run of one that does not vanish with a
/// deleted range: it moves to the range's start.
struct Tracker {
    axis: Axis,
    anchor: bool,
    runs: Vec<Run>,
    gone: Option<Gone>,
}

impl Tracker {
    fn new(axis: Axis, anchor: bool, runs: Vec<Run>) -> Tracker {
        Tracker {
            axis,
            anchor,
            runs,
            gone: None,
        }
    }

    fn lose(&mut self, why: Gone) {
        self.gone.get_or_insert(why);
    }

    /// From the view after the author's own step `j` back to the view before it.
    fn back(&mut self, j: usize, shift: Shift) {
        let mut out = Vec::with_capacity(self.runs.len() + 1);
        for run in self.runs.drain(..) {
            if run.origin != Origin::At {
                out.push(run);
                continue;
            }
            match shift {
                Shift::Insert { at, count } => {
                    // Before the inserted rows: unchanged; inside: rows the step created; after:
                    // they were `count` higher up before it.
                    push_clipped(&mut out, run, 0, at, |s| Run::at(s, 0));
                    push_clipped(&mut out, run, at, at + count, |s| Run {
                        origin: Origin::New(j),
                        start: s - at,
                        len: 0,
                    });
                    push_clipped(&mut out, run, at + count, u64::MAX, |s| {
                        Run::at(s - count, 0)
                    });
                }
                Shift::Delete { at, count } => {
                    // The author never saw the deleted rows, so nothing they refer to is in them.
                    push_clipped(&mut out, run, 0, at, |s| Run::at(s, 0));
                    push_clipped(&mut out, run, at, u64::MAX, |s| Run::at(s + count, 0));
                }
                // Imports are never an author's own mutation; treat one as opaque.
                Shift::Replace => out.push(run),
            }
        }
        self.runs = out;
    }

    /// Through an event committed after the base.
    fn forward(&mut self, shift: Shift) {
        let max = self.axis.max();
        let mut out = Vec::with_capacity(self.runs.len() + 1);
        for run in std::mem::take(&mut self.runs) {
            if run.origin != Origin::At {
                out.push(run);
                continue;
            }
            match shift {
                Shift::Insert { at, count } => {
                    push_clipped(&mut out, run, 0, at, |s| Run::at(s, 0));
                    push_clipped(&mut out, run, at, u64::MAX, |s| Run::at(s + count, 0));
                }
                Shift::Delete { at, count } => {
                    push_clipped(&mut out, run, 0, at, |s| Run::at(s, 0));
                    if run.start < at + count && run.end() > at {
                        if self.anchor {
                            out.push(Run::at(at, run.len));
                        } else {
                            self.lose(Gone::Deleted);
                        }
                    }
                    push_clipped(&mut out, run, at + count, u64::MAX, |s| {
                        Run::at(s - count, 0)
                    });
                }
                Shift::Replace => self.lose(Gone::Replaced),
            }
        }
        // Inserts may push references off the end of the sheet.
        let before = out.len();
        out.retain(|r| r.origin != Origin::At || r.start < max);
        for r in &mut out {
            if r.origin == Origin::At && r.end() > max {
                r.len = max - r.start;
                self.lose(Gone::PastEnd);
            }
        }
        if out.len() != before {
            self.lose(Gone::PastEnd);
        }
        self.runs = out;
    }

    /// The author's own step `j` was applied as an insert at `at` of `count`: the rows it created
    /// now have positions.
    fn place(&mut self, j: usize, at: u64, count: u64) {
        let mut lost = false;
        for r in &mut self.runs {
            if r.origin == Origin::New(j) {
                let end = r.end().min(count);
                if r.start >= end {
                    r.len = 0;
                    lost = true;
                    continue;
                }
                if end < r.end() {
                    lost = true;
                }
                *r = Run::at(at + r.start, end - r.start);
            }
        }
        if lost {
            self.lose(Gone::PastEnd);
        }
        self.runs.retain(|r| r.len > 0);
    }

    /// Step `j` is over: rows it was to create and did not are gone.
    fn settle(&mut self, j: usize) {
        let before = self.runs.len();
        self.runs.retain(|r| r.origin != Origin::New(j));
        if self.runs.len() != before {
            self.lose(Gone::NeverAdded);
        }
    }

    fn walk(mut self, history: &[Step<'_>]) -> Tracker {
        // Back from the author's view to the base, undoing their own edits newest first.
        for (j, step) in history.iter().enumerate().rev() {
            if let Step::Own { seen, .. } = step {
                for e in seen.iter().rev() {
                    if let Some(shift) = shift_of(e, self.axis) {
                        self.back(j, shift);
                    }
                }
            }
        }
        // Forward through what the server committed.
        for (j, step) in history.iter().enumerate() {
            match step {
                Step::Other(e) => {
                    if let Some(shift) = shift_of(e, self.axis) {
                        self.forward(shift);
                    }
                }
                Step::Own { applied, .. } => {
                    for e in applied.iter() {
                        if let Some(shift) = shift_of(e, self.axis) {
                            self.forward(shift);
                            if let Shift::Insert { at, count } = shift {
                                self.place(j, at, count);
                            }
                        }
                    }
                    self.settle(j);
                }
            }
        }
        self
    }

    /// A single position the walk ended on, or why it has none.
    fn point(&self) -> Result<u64, Gone> {
        match self.runs.as_slice() {
            [r] if r.origin == Origin::At && r.len == 1 => Ok(r.start),
            _ => Err(self.gone.unwrap_or(Gone::Deleted)),
        }
    }
}

/// Pushes the part of `run` that lies in `lo..hi`, rebuilt by `make(start)` with its length.
fn push_clipped(out: &mut Vec<Run>, run: Run, lo: u64, hi: u64, make: impl Fn(u64) -> Run) {
    let s = run.start.max(lo);
    let e = run.end().min(hi);
    if s < e {
        let mut r = make(s);
        r.len = e - s;
        out.push(r);
    }
}

fn walk_point(axis: Axis, pos: u32, anchor: bool, history: &[Step<'_>]) -> Result<u32, Gone> {
    let t = Tracker::new(axis, anchor, vec![Run::at(u64::from(pos), 1)]).walk(history);
    let p = t.point()?;
    u32::try_from(p).map_err(|_| Gone::PastEnd)
}

/// Rebases `event`, made against the author's view, through `history`: everything committed
/// after the view's base, in order (see the module documentation for the rules).
pub fn rebase(event: &Event, history: &[Step<'_>]) -> Outcome {
    if !history.iter().any(moves_anything) {
        return Outcome::Apply(vec![event.clone()]);
    }
    match event {
        Event::Set(s) => rebase_set(s, history),
        Event::InsertRows(e) => rebase_insert_rows(e, history),
        Event::InsertColumns(e) => {
            match walk_point(Axis::Columns, e.at.0, true, history)
                .and_then(|at| fit(at, e.count, MAX_COLS))
            {
                Ok((at, count)) => Outcome::Apply(vec![Event::InsertColumns(InsertColumns {
                    at: ColumnName(at),
                    count,
                })]),
                Err(why) => Outcome::Reject(format!(
                    "insert-columns at {}: that column {why}",
                    column_name(e.at.0)
                )),
            }
        }
        Event::DeleteRows(e) => rebase_delete(Axis::Rows, e.at.0, e.count, history),
        Event::DeleteColumns(e) => rebase_delete(Axis::Columns, e.at.0, e.count, history),
        Event::Style(st) => rebase_style(st, history),
        Event::ResizeColumns(r) => rebase_resize(Axis::Columns, r.at.0, r.count, r.width, history),
        Event::ResizeRows(r) => rebase_resize(Axis::Rows, r.at.0, r.count, r.height, history),
        // A split is where the author put it, whatever moved since.
        Event::Import(_) | Event::Restore(_) | Event::Freeze(_) => {
            Outcome::Apply(vec![event.clone()])
        }
    }
}

/// Whether a step can move or remove anything a reference points at.
fn moves_anything(step: &Step<'_>) -> bool {
    let structural = Event::moves_cells;
    match step {
        Step::Other(e) => structural(e),
        Step::Own { seen, applied } => {
            seen != applied && (seen.iter().any(structural) || applied.iter().any(structural))
        }
    }
}

/// An insert of `count` at `at` that must end inside `max`: shortened if inserts before it pushed
/// it towards the end, gone if nothing of it fits.
fn fit(at: u32, count: u32, max: u32) -> Result<(u32, u32), Gone> {
    if at >= max {
        return Err(Gone::PastEnd);
    }
    Ok((at, count.min(max - at)))
}

fn rebase_set(s: &SetCells, history: &[Step<'_>]) -> Outcome {
    let mut cells = Vec::with_capacity(s.cells.len());
    let mut first_loss = None;
    for c in &s.cells {
        let row = walk_point(Axis::Rows, c.at.row, false, history);
        let col = walk_point(Axis::Columns, c.at.col, false, history);
        match (row, col) {
            (Ok(row), Ok(col)) => {
                let mut c = c.clone();
                c.at = CellRef { row, col };
                if let Value::Formula(f) = &mut c.value {
                    rebase_formula(f, history);
                }
                cells.push(c);
            }
            (Err(why), _) => {
                first_loss.get_or_insert((c.at, "row", why));
            }
            (_, Err(why)) => {
                first_loss.get_or_insert((c.at, "column", why));
            }
        }
    }
    if cells.is_empty() {
        let Some((at, what, why)) = first_loss else {
            return Outcome::Reject("set: no cells".into());
        };
        return Outcome::Reject(format!("set {}: its {what} {why}", a1(at)));
    }
    Outcome::Apply(vec![Event::Set(SetCells { cells })])
}

/// Moves a formula's references through what was committed after its author's view, as the
/// rows and columns they name moved: through each structural edit of someone else's, and, for
/// the author's own edits the server applied differently than the author saw them, back through
/// what the author saw and forward through what was applied. (A reference into rows the author's
/// own insert created, when the server placed that insert elsewhere, comes out `#REF!`.)
fn rebase_formula(f: &mut Formula, history: &[Step<'_>]) {
    let mut text = f.text.to_string();
    let mut step = |s: Displace| {
        if let Some(t) = formula::displace(&text, TAB, s) {
            text = t;
        }
    };
    for h in history {
        match h {
            Step::Other(e) => {
                if let Some(s) = Displace::of(e) {
                    step(s);
                }
            }
            Step::Own { seen, applied } if seen != applied => {
                for s in seen.iter().rev().filter_map(Displace::of) {
                    step(s.inverse());
                }
                for s in applied.iter().filter_map(Displace::of) {
                    step(s);
                }
            }
            Step::Own { .. } => {}
        }
    }
    if *f.text != *text {
        f.text = text.into();
        f.cached = None;
    }
}

fn rebase_insert_rows(e: &InsertRows, history: &[Step<'_>]) -> Outcome {
    let at = match walk_point(Axis::Rows, e.at.0, true, history)
        .and_then(|at| fit(at, e.count, MAX_ROWS))
    {
        Ok(v) => v,
        Err(why) => {
            return Outcome::Reject(format!("insert-rows at {}: that row {why}", e.at));
        }
    };
    // The values are columns from A as the author saw them; they follow their columns.
    let width = e.values.iter().map(Vec::len).max().unwrap_or(0);
    let mut columns = Vec::with_capacity(width);
    for j in 0..width as u32 {
        columns.push(walk_point(Axis::Columns, j, false, history).ok());
    }
    let (at, count) = at;
    let values = e
        .values
        .iter()
        .take(count as usize)
        .map(|row| {
            let mut out: Vec<Value> = Vec::new();
            for (v, to) in row.iter().zip(&columns) {
                if let Some(to) = to {
                    let to = *to as usize;
                    if out.len() <= to {
                        out.resize(to + 1, Value::Empty);
                    }
                    out[to] = v.clone();
                }
            }
            while out.last() == Some(&Value::Empty) {
                out.pop();
            }
            out
        })
        .collect::<Vec<_>>();
    let mut values = values;
    while values.last().is_some_and(Vec::is_empty) {
        values.pop();
    }
    Outcome::Apply(vec![Event::InsertRows(InsertRows {
        at: RowNumber(at),
        count,
        values,
    })])
}

/// Where the rows (columns) `at..at + count` the author saw are now: the runs of them that still
/// exist, sorted, as `start..end`, and why some are gone.
fn walk_span(
    axis: Axis,
    at: u32,
    count: u32,
    history: &[Step<'_>],
) -> (Vec<(u64, u64)>, Option<Gone>) {
    let t = Tracker::new(axis, false, vec![Run::at(u64::from(at), u64::from(count))]).walk(history);
    let mut runs: Vec<(u64, u64)> = t
        .runs
        .iter()
        .filter(|r| r.origin == Origin::At && r.len > 0)
        .map(|r| (r.start, r.end()))
        .collect();
    runs.sort_unstable();
    // Merge runs that touch: what was one range before an unrelated delete is one range again.
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for (s, e) in runs {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    (merged, t.gone)
}

/// A style moves with its cells: each range becomes the parts of its rows and columns that still
/// exist (a row inserted inside it by someone else splits it, and is not styled); a range whose
/// rows or columns are all gone goes, and a style with no range left is rejected.
fn rebase_style(st: &StyleCells, history: &[Step<'_>]) -> Outcome {
    let mut ranges = Vec::with_capacity(st.ranges.len());
    let mut first_loss = None;
    for r in &st.ranges {
        let (rows, rows_gone) = walk_span(Axis::Rows, r.start.row, r.rows(), history);
        let (cols, cols_gone) = walk_span(Axis::Columns, r.start.col, r.cols(), history);
        if rows.is_empty() || cols.is_empty() {
            let why = rows_gone.or(cols_gone).unwrap_or(Gone::Deleted);
            first_loss.get_or_insert((*r, why));
            continue;
        }
        for &(r0, r1) in &rows {
            for &(c0, c1) in &cols {
                // Positions stay inside the sheet: runs past the end were clipped by the walk.
                ranges.push(Range {
                    start: CellRef {
                        row: r0 as u32,
                        col: c0 as u32,
                    },
                    end: CellRef {
                        row: (r1 - 1) as u32,
                        col: (c1 - 1) as u32,
                    },
                });
            }
        }
    }
    if ranges.is_empty() {
        let Some((r, why)) = first_loss else {
            return Outcome::Reject("style: no ranges".into());
        };
        return Outcome::Reject(format!("style {r}: every cell of it {why}"));
    }
    Outcome::Apply(vec![Event::Style(StyleCells {
        ranges,
        style: st.style.clone(),
    })])
}

/// The parts of rows (columns) `at..at + count` the author saw that still exist, as `(start,
/// count)` in order; when none does, the rejection of the `kind` of entry (`delete`, `resize`)
/// that named them.
fn surviving(
    axis: Axis,
    (at, count): (u32, u32),
    history: &[Step<'_>],
    kind: &str,
) -> Result<Vec<(u32, u32)>, Outcome> {
    let (merged, gone) = walk_span(axis, at, count, history);
    if merged.is_empty() {
        let (what, name) = match axis {
            Axis::Rows => ("rows", RowNumber(at).to_string()),
            Axis::Columns => ("columns", format!("column {}", column_name(at))),
        };
        let why = gone.unwrap_or(Gone::Deleted);
        return Err(Outcome::Reject(format!(
            "{kind}-{what} from {name}: every one of those {what} {why}"
        )));
    }
    // Positions stay inside the sheet: runs past the end were clipped by the walk.
    Ok(merged
        .iter()
        .map(|&(s, e)| (s as u32, (e - s) as u32))
        .collect())
}

/// A resize moves with its rows (columns): the parts of them that still exist, each resized (a
/// row inserted inside by someone else splits it and keeps its size); a resize whose rows are
/// all gone is rejected.
fn rebase_resize(
    axis: Axis,
    at: u32,
    count: u32,
    size: Option<u16>,
    history: &[Step<'_>],
) -> Outcome {
    let spans = match surviving(axis, (at, count), history, "resize") {
        Ok(spans) => spans,
        Err(rejected) => return rejected,
    };
    Outcome::Apply(
        spans
            .into_iter()
            .map(|(at, count)| match axis {
                Axis::Rows => Event::ResizeRows(ResizeRows {
                    at: RowNumber(at),
                    count,
                    height: size,
                }),
                Axis::Columns => Event::ResizeColumns(ResizeColumns {
                    at: ColumnName(at),
                    count,
                    width: size,
                }),
            })
            .collect(),
    )
}

fn rebase_delete(axis: Axis, at: u32, count: u32, history: &[Step<'_>]) -> Outcome {
    let spans = match surviving(axis, (at, count), history, "delete") {
        Ok(spans) => spans,
        Err(rejected) => return rejected,
    };
    // Bottom-up, so each delete leaves the positions of the ones after it unchanged.
    Outcome::Apply(
        spans
            .into_iter()
            .rev()
            .map(|(at, count)| match axis {
                Axis::Rows => Event::DeleteRows(DeleteRows {
                    at: RowNumber(at),
                    count,
                }),
                Axis::Columns => Event::DeleteColumns(DeleteColumns {
                    at: ColumnName(at),
                    count,
                }),
            })
            .collect(),
    )
}

fn a1(at: CellRef) -> String {
    format!("{}{}", column_name(at.col), u64::from(at.row) + 1)
}

#[cfg(test)]
#[path = "rebase_tests.rs"]
mod tests;
