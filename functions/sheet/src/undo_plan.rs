//! Undo and redo, worked out from the log (`docs/sync.md`, "Undo and redo"): a client group's
//! stacks ([`stacks`]), the inverse of a step ([`needs`], [`inverse`]), and that inverse moved
//! onto the sheet as it is now, without the cells someone else changed since ([`settle`],
//! [`drop_overwritten`]). Pure: the API reads the cells these functions ask for and appends the
//! `undo` entry they produce.
//!
//! The rules, as spreadsheets have them:
//! - a group undoes only its own steps, newest first; a step is one mutation (a typed cell, a
//!   pasted range, a row or column change), an edit appended directly for the group (the
//!   CLI's, `crate::authored`), or an earlier undo or redo;
//! - the inverse of a step is worked out against the sheet just before it, then rebased through
//!   everything committed after it ([`crate::rebase`]), so a row inserted above by someone else
//!   does not make the undo land on the wrong cells;
//! - a cell the step wrote that someone else has changed or deleted since is left alone (skipped,
//!   and counted); a row or column change whose rows are gone is skipped too;
//! - redo is the inverse of the undo it takes back; a new step of the group empties the redo
//!   stack;
//! - an import or a restore the group made is a step too, undone by restoring the sheet before
//!   it, but only while nothing came after it ([`undo_replace`]).

use std::collections::BTreeMap;

use super::a1::{CellRef, Range};
use super::entry::EntryBody;
use super::event::{
    CellEdit, ColumnName, DeleteColumns, DeleteRows, Event, InsertColumns, InsertRows, RowNumber,
    SetCells, StyleCells,
};
use super::layout::{Layout, ResizeColumns, ResizeRows};
use super::limits::{MAX_CELLS_PER_SET, MAX_COLS, MAX_ROWS};
use super::rebase::{Outcome, Step as RebaseStep, rebase};
use super::style::StylePatch;
use super::undo::{Target, Undo};
use super::value::{Cell, Row, Value};

/// A step of a group's history an undo (or redo) can act on, with where its events stand in
/// their entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub target: Target,
    /// Events of the same entry applied before the step's (earlier runs of a batch).
    pub prefix: Vec<Event>,
    /// What the step applied.
    pub events: Vec<Event>,
    /// Events of the same entry applied after the step's.
    pub suffix: Vec<Event>,
}

/// A group's undo and redo stacks, as far as the entries read show them. Entries before the
/// first one read can only add steps *under* these (undo is last in, first out), so the top of a
/// stack that is not empty is the group's real top.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stacks {
    /// Newest last.
    pub undo: Vec<Step>,
    pub redo: Vec<Step>,
}

/// The group's stacks after `entries` (consecutive, in log order).
pub fn stacks<'a>(entries: impl IntoIterator<Item = (u64, &'a EntryBody)>, group: &str) -> Stacks {
    let mut s = Stacks::default();
    for (seq, body) in entries {
        match body {
            EntryBody::Mutations(_) | EntryBody::Batch(_) => {
                let all: Vec<&Event> = body.events().collect();
                let mut at = 0;
                for run in body.runs() {
                    for (id, events, _) in run.by_id() {
                        let n = events.len();
                        if run.group == group && n > 0 {
                            s.redo.clear();
                            s.undo.push(Step {
                                target: Target {
                                    seq,
                                    client: run.client.clone(),
                                    id,
                                },
                                prefix: all[..at].iter().map(|e| (*e).clone()).collect(),
                                events: events.into_iter().cloned().collect(),
                                suffix: all[at + n..].iter().map(|e| (*e).clone()).collect(),
                            });
                        }
                        at += n;
                    }
                }
            }
            EntryBody::Undo(u) if u.group == group => s.record(seq, u),
            EntryBody::Authored(a) if a.group == group => s.whole(seq, &a.event),
            EntryBody::Event(e) if replaced_by(e) == Some(group) => s.whole(seq, e),
            _ => {}
        }
    }
    s
}

/// The client group that made an import or a restore, when it named one: the step is then that
/// group's.
fn replaced_by(e: &Event) -> Option<&str> {
    match e {
        Event::Import(i) => i.group.as_deref(),
        Event::Restore(r) => r.group.as_deref(),
        _ => None,
    }
}

impl Stacks {
    /// A new step of the group that is a whole entry of one event.
    fn whole(&mut self, seq: u64, event: &Event) {
        self.redo.clear();
        self.undo.push(Step {
            target: Target::entry(seq),
            prefix: Vec::new(),
            events: vec![event.clone()],
            suffix: Vec::new(),
        });
    }

    fn record(&mut self, seq: u64, u: &Undo) {
        let (from, to) = if u.redo {
            (&mut self.redo, &mut self.undo)
        } else {
            (&mut self.undo, &mut self.redo)
        };
        // The target is the top (the API appends on the head it read); a step older than the
        // entries read is not on the stack at all.
        if let Some(i) = from.iter().rposition(|s| s.target == u.target) {
            from.remove(i);
        }
        // An undo that changed nothing (everything skipped) leaves nothing to redo.
        if !u.events.is_empty() {
            to.push(Step {
                target: Target::entry(seq),
                prefix: Vec::new(),
                events: u.events.clone(),
                suffix: Vec::new(),
            });
        }
    }
}

/// Why a step cannot be undone at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UndoError {
    #[error("the step is an import or a restore, which undo does not take back")]
    NotUndoable,
    #[error(
        "undoing it would restore {0} cells in one step; the limit is {MAX_CELLS_PER_SET} (restore an earlier version instead)"
    )]
    TooLarge(usize),
}

/// The part of the sheet, as it stood just before `event`, that its inverse is made from: a
/// set's cells, a deleted range's rows or columns. `None` for an insert, whose inverse needs
/// nothing read.
pub fn needs(event: &Event) -> Option<Range> {
    let corner = |row, col| CellRef { row, col };
    match event {
        Event::Set(s) => {
            let (mut lo, mut hi) = (s.cells.first()?.at, s.cells.first()?.at);
            for c in &s.cells {
                lo = corner(lo.row.min(c.at.row), lo.col.min(c.at.col));
                hi = corner(hi.row.max(c.at.row), hi.col.max(c.at.col));
            }
            Some(Range::new(lo, hi))
        }
        Event::DeleteRows(d) => Some(Range::new(
            corner(d.at.0, 0),
            corner(d.at.0 + d.count - 1, MAX_COLS - 1),
        )),
        Event::DeleteColumns(d) => Some(Range::new(
            corner(0, d.at.0),
            corner(MAX_ROWS - 1, d.at.0 + d.count - 1),
        )),
        Event::Style(st) => {
            let (lo, hi) = st.row_bounds()?;
            let left = st.ranges.iter().map(|r| r.start.col).min()?;
            let right = st.ranges.iter().map(|r| r.end.col).max()?;
            Some(Range::new(corner(lo, left), corner(hi, right)))
        }
        _ => None,
    }
}

/// The events that take back `event`, given the cells of [`needs`] and the layout as they stood
/// before it.
pub fn inverse(event: &Event, before: &[Row], layout: &Layout) -> Result<Vec<Event>, UndoError> {
    let cells = by_ref(before);
    let old = |at: &CellRef| -> CellEdit {
        match cells.get(at) {
            Some(c) => CellEdit {
                at: *at,
                value: c.value.clone(),
                format: c.format.as_deref().map(str::to_owned),
            },
            None => CellEdit {
                at: *at,
                value: Value::Empty,
                format: None,
            },
        }
    };
    let all_cells = || -> Result<Vec<Event>, UndoError> {
        if cells.len() > MAX_CELLS_PER_SET {
            return Err(UndoError::TooLarge(cells.len()));
        }
        let edits: Vec<CellEdit> = cells.keys().map(old).collect();
        Ok(if edits.is_empty() {
            Vec::new()
        } else {
            let mut out = vec![Event::Set(SetCells { cells: edits })];
            // A set keeps styles, so the cells it puts back get theirs again separately.
            out.extend(restyle(cells.iter().filter_map(|(at, c)| {
                c.style
                    .as_deref()
                    .map(|st| (*at, StylePatch::replacing(Some(st), c.format.as_deref())))
            })));
            out
        })
    };
    Ok(match event {
        Event::Set(s) => {
            // One edit per cell, the first time it is named: the value before the whole set.
            let mut seen = std::collections::BTreeSet::new();
            let edits: Vec<CellEdit> = s
                .cells
                .iter()
                .filter(|c| seen.insert(c.at))
                .map(|c| old(&c.at))
                .collect();
            vec![Event::Set(SetCells { cells: edits })]
        }
        Event::InsertRows(i) => vec![Event::DeleteRows(DeleteRows {
            at: i.at,
            count: i.count.min(MAX_ROWS - i.at.0),
        })],
        Event::InsertColumns(i) => vec![Event::DeleteColumns(DeleteColumns {
            at: i.at,
            count: i.count.min(MAX_COLS - i.at.0),
        })],
        Event::DeleteRows(d) => {
            let mut out = vec![Event::InsertRows(InsertRows {
                at: RowNumber(d.at.0),
                count: d.count,
                values: Vec::new(),
            })];
            out.extend(all_cells()?);
            out
        }
        Event::DeleteColumns(d) => {
            let mut out = vec![Event::InsertColumns(InsertColumns {
                at: ColumnName(d.at.0),
                count: d.count,
            })];
            out.extend(all_cells()?);
            out
        }
        Event::Style(st) => {
            // Every cell of the ranges gets back the fields the step changed, as they were.
            let mut places = Vec::new();
            let mut r = st.next_row_from(0);
            while let Some(row) = r {
                for (a, b) in st.columns_in(row) {
                    for col in a..=b {
                        let at = CellRef { row, col };
                        let was = cells.get(&at);
                        let back = StylePatch::replacing(
                            was.and_then(|c| c.style.as_deref()),
                            was.and_then(|c| c.format.as_deref()),
                        )
                        .restricted_to(&st.style);
                        places.push((at, back));
                    }
                }
                r = row.checked_add(1).and_then(|n| st.next_row_from(n));
            }
            restyle(places)
        }
        Event::ResizeColumns(_) | Event::ResizeRows(_) | Event::Freeze(_) => {
            layout_inverse(event, layout)
        }
        Event::Import(_) | Event::Restore(_) => return Err(UndoError::NotUndoable),
    })
}

/// The inverse of a layout entry, given the layout before it: each part of a resized span gets
/// back the size it had (the default where it had none); a split goes back where it was.
fn layout_inverse(event: &Event, layout: &Layout) -> Vec<Event> {
    match event {
        Event::ResizeColumns(r) => layout
            .columns
            .spans(r.at.0, r.count)
            .into_iter()
            .map(|(at, count, width)| {
                Event::ResizeColumns(ResizeColumns {
                    at: ColumnName(at),
                    count,
                    width,
                })
            })
            .collect(),
        Event::ResizeRows(r) => layout
            .rows
            .spans(r.at.0, r.count)
            .into_iter()
            .map(|(at, count, height)| {
                Event::ResizeRows(ResizeRows {
                    at: RowNumber(at),
                    count,
                    height,
                })
            })
            .collect(),
        Event::Freeze(_) => vec![Event::Freeze(layout.freeze)],
        _ => Vec::new(),
    }
}

/// `style` events that give each cell its patch: the cells sharing a patch in one event, runs of
/// them along a row as one range. `places` come in row-major order.
fn restyle(places: impl IntoIterator<Item = (CellRef, StylePatch)>) -> Vec<Event> {
    let mut groups: Vec<(StylePatch, Vec<Range>)> = Vec::new();
    for (at, patch) in places {
        let i = match groups.iter().position(|(p, _)| *p == patch) {
            Some(i) => i,
            None => {
                groups.push((patch, Vec::new()));
                groups.len() - 1
            }
        };
        let ranges = &mut groups[i].1;
        match ranges.last_mut() {
            Some(r) if r.end.row == at.row && r.end.col + 1 == at.col => r.end.col = at.col,
            _ => ranges.push(Range::new(at, at)),
        }
    }
    groups
        .into_iter()
        .map(|(style, ranges)| Event::Style(StyleCells { ranges, style }))
        .collect()
}

fn by_ref(rows: &[Row]) -> BTreeMap<CellRef, &Cell> {
    rows.iter()
        .flat_map(|r| {
            r.cells.iter().map(move |(col, c)| {
                (
                    CellRef {
                        row: r.index,
                        col: *col,
                    },
                    c,
                )
            })
        })
        .filter(|(_, c)| !c.is_blank())
        .collect()
}

/// Whether the step replaced the whole sheet: an import or a restore, or an undo or redo of one. Its inverse
/// is not worked out cell by cell but is a restore of the sheet just before it ([`undo_replace`]).
pub fn replaces(step: &Step) -> bool {
    step.events
        .iter()
        .any(|e| matches!(e, Event::Import(_) | Event::Restore(_)))
}

/// The undo of a step that replaced the sheet: a restore of the sheet as of the step's sequence
/// (everything before it), when nothing was committed after it. Otherwise nothing, and the step
/// counts as skipped: a restore would drop the edits made since, and they cannot be moved onto the
/// sheet before an import (they were made against the file's rows).
pub fn undo_replace(step: &Step, history: &[Event]) -> (Vec<Event>, u64) {
    if history.is_empty() {
        (
            vec![Event::Restore(super::event::Restore {
                seq: step.target.seq,
                group: None,
            })],
            0,
        )
    } else {
        (Vec::new(), 1)
    }
}

/// What was committed after a step, as the events its undo is moved through: the `later`
/// entries' events in order, except that a step and an undo (or redo) that takes it back, both
/// among them, cancel out. Without that, undoing a column delete and then the edit before it would
/// move the edit's cells through "column deleted" (losing them) and "a new column inserted".
pub fn history_after<'a>(later: impl IntoIterator<Item = (u64, &'a EntryBody)>) -> Vec<Event> {
    let mut steps: Vec<(Target, Option<Target>, Vec<Event>)> = Vec::new();
    for (seq, body) in later {
        match body {
            EntryBody::Mutations(_) | EntryBody::Batch(_) => {
                for run in body.runs() {
                    for (id, events, _) in run.by_id() {
                        let target = Target {
                            seq,
                            client: run.client.clone(),
                            id,
                        };
                        steps.push((target, None, events.into_iter().cloned().collect()));
                    }
                }
            }
            EntryBody::Undo(u) => {
                let undone = Some(u.target.clone());
                steps.push((Target::entry(seq), undone, u.events.clone()));
            }
            other => steps.push((Target::entry(seq), None, other.events().cloned().collect())),
        }
    }
    let mut live = vec![true; steps.len()];
    for i in 0..steps.len() {
        let Some(undone) = &steps[i].1 else { continue };
        if let Some(j) = (0..i).rev().find(|&j| live[j] && steps[j].0 == *undone) {
            live[i] = false;
            live[j] = false;
        }
    }
    steps
        .into_iter()
        .zip(live)
        .filter(|(_, l)| *l)
        .flat_map(|((_, _, events), _)| events)
        .collect()
}

/// An undo moved onto the sheet as it is now.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The inverse, rebased; cells still to be checked against the sheet ([`drop_overwritten`]).
    pub events: Vec<Event>,
    /// The cells the step wrote, where they are now: a cell of the inverse at one of these is
    /// undone only if it still holds what the step wrote.
    pub written: BTreeMap<CellRef, CellEdit>,
    /// Cells and row or column changes of the inverse that have no place any more.
    pub skipped: u64,
}

/// Moves `inverse` (made against the sheet just after the step) through `history`, what was
/// committed after the step, in order (the rest of its entry, then later entries).
pub fn settle(step: &Step, inverse: &[Event], history: &[Event]) -> Settled {
    let others: Vec<RebaseStep<'_>> = history.iter().map(RebaseStep::Other).collect();
    let mut applied: Vec<Vec<Event>> = Vec::with_capacity(inverse.len());
    let mut skipped = 0;
    for (j, e) in inverse.iter().enumerate() {
        let mut steps = others.clone();
        steps.extend((0..j).map(|k| RebaseStep::Own {
            seen: std::slice::from_ref(&inverse[k]),
            applied: &applied[k],
        }));
        match rebase(e, &steps) {
            Outcome::Apply(v) => {
                skipped += lost_cells(e, &v);
                applied.push(v);
            }
            Outcome::Reject(_) => {
                skipped += weight(e);
                applied.push(Vec::new());
            }
        }
    }
    Settled {
        events: applied.into_iter().flatten().collect(),
        written: written_now(step, history),
        skipped,
    }
}

/// What the step's sets wrote, moved through the step's own later events and `history`.
fn written_now(step: &Step, history: &[Event]) -> BTreeMap<CellRef, CellEdit> {
    let mut out = BTreeMap::new();
    for (i, e) in step.events.iter().enumerate() {
        if !matches!(e, Event::Set(_)) {
            continue;
        }
        let later: Vec<RebaseStep<'_>> = step.events[i + 1..]
            .iter()
            .chain(history)
            .map(RebaseStep::Other)
            .collect();
        if let Outcome::Apply(v) = rebase(e, &later) {
            for ev in v {
                if let Event::Set(s) = ev {
                    out.extend(s.cells.into_iter().map(|c| (c.at, c)));
                }
            }
        }
    }
    out
}

fn weight(e: &Event) -> u64 {
    match e {
        Event::Set(s) => s.cells.len() as u64,
        _ => 1,
    }
}

fn lost_cells(sent: &Event, applied: &[Event]) -> u64 {
    match sent {
        Event::Set(s) => {
            let kept: usize = applied
                .iter()
                .map(|e| match e {
                    Event::Set(a) => a.cells.len(),
                    _ => 0,
                })
                .sum();
            s.cells.len().saturating_sub(kept) as u64
        }
        _ => 0,
    }
}

/// The range to read, as the sheet is now, to check the written cells ([`drop_overwritten`]).
pub fn written_range(s: &Settled) -> Option<Range> {
    let first = *s.written.keys().next()?;
    let (mut lo, mut hi) = (first, first);
    for at in s.written.keys() {
        lo = CellRef {
            row: lo.row.min(at.row),
            col: lo.col.min(at.col),
        };
        hi = CellRef {
            row: hi.row.max(at.row),
            col: hi.col.max(at.col),
        };
    }
    Some(Range::new(lo, hi))
}

/// The undo's events without the cells someone else changed since the step wrote them (`now`:
/// the cells of [`written_range`] as the sheet is now), and the number of cells skipped in all.
/// Only cells set by the same event the checks apply to: the cells an inverse restores into rows
/// it re-inserts were not written by the step.
pub fn drop_overwritten(s: Settled, now: &[Row]) -> (Vec<Event>, Vec<CellRef>, u64) {
    let now = by_ref(now);
    let mut skipped = s.skipped;
    let mut changed = Vec::new();
    let mut events = Vec::with_capacity(s.events.len());
    let mut restored_rows = false;
    for e in s.events {
        match e {
            Event::Set(set) if !restored_rows => {
                let cells: Vec<CellEdit> = set
                    .cells
                    .into_iter()
                    .filter(|c| match s.written.get(&c.at) {
                        Some(w) if !same(now.get(&c.at).copied(), w) => {
                            changed.push(c.at);
                            false
                        }
                        _ => true,
                    })
                    .collect();
                if !cells.is_empty() {
                    events.push(Event::Set(SetCells { cells }));
                }
            }
            other => {
                restored_rows |= matches!(other, Event::InsertRows(_) | Event::InsertColumns(_));
                events.push(other);
            }
        }
    }
    skipped += changed.len() as u64;
    (events, changed, skipped)
}

/// Whether a cell holds what an edit wrote.
fn same(cell: Option<&Cell>, edit: &CellEdit) -> bool {
    match cell {
        None => edit.value.is_empty() && edit.format.is_none(),
        Some(c) => c.value == edit.value && c.format.as_deref() == edit.format.as_deref(),
    }
}

#[cfg(test)]
#[path = "undo_plan_tests.rs"]
mod tests;
