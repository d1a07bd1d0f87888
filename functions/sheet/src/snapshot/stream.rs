//! Events as streaming transforms over a sheet's rows.
//!
//! The engine never holds a sheet. It streams the rows of the previous snapshot (or of an import
//! file) in order through one [`Stage`] per event, each a small state machine that rewrites rows
//! as they pass and inserts the rows its event creates. A chunk of the previous snapshot that an
//! event does not touch travels as a [`Span`] — its position and size, not its rows — so it is
//! never loaded; [`Stage::map_span`] says where a span lands or that the stage must see its rows.
//!
//! Every stage's state is a function of how far its input has gone (`skip_to`), which is what
//! makes a build resumable from a small checkpoint.

use std::collections::BTreeMap;

use super::SnapshotError;
use crate::event::{Event, InsertRows, StyleCells};
use crate::formula::{Displace, displace_cells};
use crate::limits::MAX_ROWS;
use crate::model::{
    apply_set_to_row, apply_style_to_row, delete_columns, insert_columns, inserted_rows,
};
use crate::style::StyleMemo;
use crate::{Cell, CellRef, Row};

/// A chunk of the base snapshot that no stage so far needed to look into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Index of the chunk in the base manifest.
    pub chunk: usize,
    /// First covered row, in the coordinates of the stream it is in.
    pub start: u32,
    pub rows: u32,
    pub max_col: u32,
    /// The chunk holds formulas, whose references a structural edit may rewrite.
    pub formulas: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Row(Row),
    Span(Span),
}

#[derive(Debug)]
pub enum Stage {
    Set {
        /// Edits grouped by row, rows ascending, cells ascending; a blank cell clears.
        rows: Vec<(u32, Vec<(u32, Cell)>)>,
        next: usize,
    },
    InsertRows {
        at: u32,
        count: u32,
        rows: Vec<Row>,
        emitted: bool,
    },
    DeleteRows {
        at: u32,
        count: u32,
    },
    InsertColumns {
        at: u32,
        count: u32,
    },
    DeleteColumns {
        at: u32,
        count: u32,
    },
    Style {
        cells: StyleCells,
        /// Rows below this are done: restyled as they passed, or made as new styled rows.
        next: u32,
        memo: StyleMemo,
    },
}

impl Stage {
    /// The stage for an event; `None` for `import` and `restore`, which are not transforms but a
    /// new source, and for the layout's entries, which leave the cells alone.
    pub fn new(event: &Event) -> Option<Stage> {
        Some(match event {
            Event::Set(s) => {
                let mut rows: Vec<(u32, Vec<(u32, Cell)>)> = Vec::new();
                let edits: BTreeMap<CellRef, Cell> = s.sorted_edits();
                for (at, cell) in edits {
                    match rows.last_mut() {
                        Some((r, cells)) if *r == at.row => cells.push((at.col, cell)),
                        _ => rows.push((at.row, vec![(at.col, cell)])),
                    }
                }
                Stage::Set { rows, next: 0 }
            }
            Event::InsertRows(e) => insert_stage(e),
            Event::DeleteRows(e) => Stage::DeleteRows {
                at: e.at.0,
                count: e.count,
            },
            Event::InsertColumns(e) => Stage::InsertColumns {
                at: e.at.0,
                count: e.count,
            },
            Event::DeleteColumns(e) => Stage::DeleteColumns {
                at: e.at.0,
                count: e.count,
            },
            Event::Style(st) => Stage::Style {
                cells: st.clone(),
                next: 0,
                memo: StyleMemo::default(),
            },
            // Not a transform of the cells: an import or a restore is a new source, and the
            // layout entries change only the manifest's layout (`layout.rs`).
            Event::Import(_)
            | Event::Restore(_)
            | Event::ResizeColumns(_)
            | Event::ResizeRows(_)
            | Event::Freeze(_) => return None,
        })
    }

    /// Where a span starting at `s.start` in this stage's input starts in its output, or `None`
    /// when the stage would change the span's contents (so its rows must be streamed instead).
    pub fn map_span(&self, s: &Span) -> Option<u32> {
        if s.formulas && self.displace().is_some() {
            return None;
        }
        let end = u64::from(s.start) + u64::from(s.rows);
        match self {
            Stage::Set { rows, .. } => {
                let i = rows.partition_point(|(r, _)| *r < s.start);
                match rows.get(i) {
                    Some((r, _)) if u64::from(*r) < end => None,
                    _ => Some(s.start),
                }
            }
            Stage::InsertRows { at, count, .. } => {
                if end <= u64::from(*at) {
                    Some(s.start)
                } else if s.start > *at && end + u64::from(*count) <= u64::from(MAX_ROWS) {
                    Some(s.start + count)
                } else {
                    None
                }
            }
            Stage::DeleteRows { at, count } => {
                let del_end = at + count;
                if end <= u64::from(*at) {
                    Some(s.start)
                } else if s.start >= del_end {
                    Some(s.start - count)
                } else {
                    None
                }
            }
            Stage::InsertColumns { at, .. } | Stage::DeleteColumns { at, .. } => {
                (s.max_col < *at).then_some(s.start)
            }
            Stage::Style { cells, .. } => match cells.next_row_from(s.start) {
                Some(r) if u64::from(r) < end => None,
                _ => Some(s.start),
            },
        }
    }

    /// The references a row or column edit moves; `None` for a `set`.
    fn displace(&self) -> Option<Displace> {
        Some(match self {
            Stage::Set { .. } | Stage::Style { .. } => return None,
            Stage::InsertRows { at, count, .. } => Displace::InsertRows {
                at: *at,
                count: *count,
            },
            Stage::DeleteRows { at, count } => Displace::DeleteRows {
                at: *at,
                count: *count,
            },
            Stage::InsertColumns { at, count } => Displace::InsertColumns {
                at: *at,
                count: *count,
            },
            Stage::DeleteColumns { at, count } => Displace::DeleteColumns {
                at: *at,
                count: *count,
            },
        })
    }

    /// Where an input row index lands in the output, `None` if the stage removes the row.
    pub fn map_row(&self, index: u32) -> Option<u32> {
        match self {
            Stage::InsertRows { at, count, .. } if index >= *at => {
                let to = u64::from(index) + u64::from(*count);
                (to < u64::from(MAX_ROWS)).then_some(to as u32)
            }
            Stage::DeleteRows { at, count } if index >= *at => {
                (index >= at + count).then(|| index - count)
            }
            _ => Some(index),
        }
    }

    /// The output bound matching an input bound: once the input has delivered every row below
    /// `b`, the output has delivered every row below the returned value.
    pub fn map_bound(&self, b: u32) -> u32 {
        match self {
            Stage::InsertRows { at, count, .. } if b > *at => {
                (u64::from(b) + u64::from(*count)).min(u64::from(MAX_ROWS)) as u32
            }
            Stage::DeleteRows { at, count } if b > *at => b.saturating_sub(*count).max(*at),
            _ => b,
        }
    }

    /// The input rows an output row range `[lo, hi)` comes from, as ranges (rows the stage made
    /// itself have no input).
    pub fn unmap_range(&self, lo: u32, hi: u32, out: &mut Vec<(u32, u32)>) {
        match self {
            Stage::InsertRows { at, count, .. } => {
                if lo < *at {
                    out.push((lo, hi.min(*at)));
                }
                let new_end = at + count;
                if hi > new_end {
                    out.push((lo.max(new_end) - count, hi - count));
                }
            }
            Stage::DeleteRows { at, count } => {
                if lo < *at {
                    out.push((lo, hi.min(*at)));
                }
                if hi > *at {
                    let a = u64::from(lo.max(*at)) + u64::from(*count);
                    let b = (u64::from(hi) + u64::from(*count)).min(u64::from(MAX_ROWS));
                    if a < b {
                        out.push((a as u32, b as u32));
                    }
                }
            }
            _ => out.push((lo, hi)),
        }
    }

    /// Emits what the stage owes once its input has delivered every row below `b`: the set rows
    /// below `b` that no input row carried, or the inserted rows once `b` is past `at`. Without
    /// this they wait for the next input row, and a checkpoint taken in between would record
    /// them as done ([`Stage::skip_to`] assumes this has run).
    pub fn advance(&mut self, b: u32, out: &mut Vec<Item>) {
        match self {
            Stage::Set { rows, next } => emit_set_rows_before(rows, next, b, out),
            Stage::InsertRows {
                at, rows, emitted, ..
            } if b > *at && !*emitted => {
                out.extend(rows.iter().cloned().map(Item::Row));
                *emitted = true;
            }
            Stage::Style { cells, next, memo } => emit_style_rows_before(cells, next, memo, b, out),
            _ => {}
        }
    }

    /// Puts the stage in the state it has after its input delivered every row below `b` (and
    /// [`Stage::advance`] ran there).
    pub fn skip_to(&mut self, b: u32) {
        match self {
            Stage::Set { rows, next } => *next = rows.partition_point(|(r, _)| *r < b),
            Stage::InsertRows { at, emitted, .. } => *emitted = b > *at,
            Stage::Style { next, .. } => *next = b,
            _ => {}
        }
    }

    /// Feeds one item through; what comes out is appended to `out`, in order.
    pub fn push(&mut self, item: Item, out: &mut Vec<Item>) -> Result<(), SnapshotError> {
        match item {
            Item::Row(mut row) => {
                let to = self.map_row(row.index);
                // Rows of the input name cells as they were; the stage's own new rows do not.
                if let Some(s) = self.displace() {
                    displace_cells(&mut row.cells, s);
                }
                match self {
                    Stage::Set { rows, next } => {
                        emit_set_rows_before(rows, next, row.index, out);
                        if let Some((r, edits)) = rows.get(*next)
                            && *r == row.index
                        {
                            apply_set_to_row(&mut row.cells, edits.iter().map(|(c, v)| (*c, v)));
                            *next += 1;
                        }
                        if !row.cells.is_empty() {
                            out.push(Item::Row(row));
                        }
                    }
                    Stage::InsertRows {
                        at, rows, emitted, ..
                    } => {
                        if row.index >= *at && !*emitted {
                            out.extend(rows.iter().cloned().map(Item::Row));
                            *emitted = true;
                        }
                        if let Some(to) = to {
                            row.index = to;
                            out.push(Item::Row(row));
                        }
                    }
                    Stage::DeleteRows { .. } => {
                        if let Some(to) = to {
                            row.index = to;
                            out.push(Item::Row(row));
                        }
                    }
                    Stage::InsertColumns { at, count } => {
                        insert_columns(&mut row.cells, *at, *count);
                        if !row.cells.is_empty() {
                            out.push(Item::Row(row));
                        }
                    }
                    Stage::DeleteColumns { at, count } => {
                        delete_columns(&mut row.cells, *at, *count);
                        if !row.cells.is_empty() {
                            out.push(Item::Row(row));
                        }
                    }
                    Stage::Style { cells, next, memo } => {
                        emit_style_rows_before(cells, next, memo, row.index, out);
                        // Most rows are outside every range: they pass without a span list made.
                        if cells.next_row_from(row.index) == Some(row.index) {
                            let spans = cells.columns_in(row.index);
                            apply_style_to_row(&mut row.cells, &spans, &cells.style, memo);
                        }
                        *next = row.index + 1;
                        if !row.cells.is_empty() {
                            out.push(Item::Row(row));
                        }
                    }
                }
            }
            Item::Span(mut span) => {
                let to = self.map_span(&span).ok_or_else(|| {
                    SnapshotError::Internal(format!(
                        "chunk {} reached a stage that changes it without being opened",
                        span.chunk
                    ))
                })?;
                match self {
                    Stage::Set { rows, next } => emit_set_rows_before(rows, next, span.start, out),
                    Stage::Style { cells, next, memo } => {
                        emit_style_rows_before(cells, next, memo, span.start, out)
                    }
                    Stage::InsertRows {
                        at, rows, emitted, ..
                    } if span.start >= *at && !*emitted => {
                        out.extend(rows.iter().cloned().map(Item::Row));
                        *emitted = true;
                    }
                    _ => {}
                }
                span.start = to;
                out.push(Item::Span(span));
            }
        }
        Ok(())
    }

    /// End of input: emits whatever the stage still holds.
    pub fn finish(&mut self, out: &mut Vec<Item>) {
        match self {
            Stage::Set { rows, next } => emit_set_rows_before(rows, next, u32::MAX, out),
            Stage::Style { cells, next, memo } => {
                emit_style_rows_before(cells, next, memo, u32::MAX, out)
            }
            Stage::InsertRows { rows, emitted, .. } if !*emitted => {
                out.extend(rows.iter().cloned().map(Item::Row));
                *emitted = true;
            }
            _ => {}
        }
    }
}

fn insert_stage(e: &InsertRows) -> Stage {
    Stage::InsertRows {
        at: e.at.0,
        count: e.count,
        rows: inserted_rows(e).collect(),
        emitted: false,
    }
}

/// Emits the rows that exist only because of the edits (rows the input has no row for) below
/// `bound`.
fn emit_set_rows_before(
    rows: &[(u32, Vec<(u32, Cell)>)],
    next: &mut usize,
    bound: u32,
    out: &mut Vec<Item>,
) {
    while let Some((r, edits)) = rows.get(*next) {
        if *r >= bound {
            break;
        }
        let cells: Vec<(u32, Cell)> = edits
            .iter()
            .filter(|(_, c)| !c.is_blank())
            .cloned()
            .collect();
        if !cells.is_empty() {
            out.push(Item::Row(Row { index: *r, cells }));
        }
        *next += 1;
    }
}

/// Emits the rows a style makes where the input has none (empty cells given a style), below
/// `bound` and from `next` on.
fn emit_style_rows_before(
    cells: &StyleCells,
    next: &mut u32,
    memo: &mut StyleMemo,
    bound: u32,
    out: &mut Vec<Item>,
) {
    while let Some(r) = cells.next_row_from(*next).filter(|r| *r < bound) {
        let mut made = Vec::new();
        apply_style_to_row(&mut made, &cells.columns_in(r), &cells.style, memo);
        if !made.is_empty() {
            out.push(Item::Row(Row {
                index: r,
                cells: made,
            }));
        }
        *next = r + 1;
    }
    *next = (*next).max(bound.min(MAX_ROWS));
}

/// The stages of a list of events, in order.
#[derive(Debug, Default)]
pub struct Pipeline {
    pub stages: Vec<Stage>,
    a: Vec<Item>,
    b: Vec<Item>,
}

impl Pipeline {
    pub fn new(stages: Vec<Stage>) -> Self {
        Pipeline {
            stages,
            a: Vec::new(),
            b: Vec::new(),
        }
    }

    /// True when no stage changes the span (so it can travel unopened).
    pub fn span_is_clean(&self, span: &Span) -> bool {
        let mut s = *span;
        for st in &self.stages {
            match st.map_span(&s) {
                Some(to) => s.start = to,
                None => return false,
            }
        }
        true
    }

    /// Pushes one source item through every stage; the results are appended to `out`.
    pub fn push(&mut self, item: Item, out: &mut Vec<Item>) -> Result<(), SnapshotError> {
        self.a.clear();
        self.a.push(item);
        for st in &mut self.stages {
            self.b.clear();
            for it in self.a.drain(..) {
                st.push(it, &mut self.b)?;
            }
            std::mem::swap(&mut self.a, &mut self.b);
        }
        out.append(&mut self.a);
        Ok(())
    }

    /// Ends the input: each stage flushes, and what it flushes still goes through the later ones.
    pub fn finish(&mut self, out: &mut Vec<Item>) -> Result<(), SnapshotError> {
        let mut carried: Vec<Item> = Vec::new();
        for i in 0..self.stages.len() {
            let mut next = Vec::new();
            for it in carried.drain(..) {
                self.stages[i].push(it, &mut next)?;
            }
            self.stages[i].finish(&mut next);
            carried = next;
        }
        out.append(&mut carried);
        Ok(())
    }

    /// Brings every stage up to the source bound `b` (the source has delivered every row below
    /// it): each emits what it owes below its own bound, and that passes through the later
    /// stages. After this the pipeline is in the state [`Pipeline::skip_to`] restores.
    pub fn advance(&mut self, mut b: u32, out: &mut Vec<Item>) -> Result<(), SnapshotError> {
        let mut carried: Vec<Item> = Vec::new();
        for st in &mut self.stages {
            let mut next = Vec::new();
            for it in carried.drain(..) {
                st.push(it, &mut next)?;
            }
            st.advance(b, &mut next);
            b = st.map_bound(b);
            carried = next;
        }
        out.append(&mut carried);
        Ok(())
    }

    /// Restores every stage to where it is once the source has delivered every row below `b`.
    pub fn skip_to(&mut self, mut b: u32) {
        for st in &mut self.stages {
            st.skip_to(b);
            b = st.map_bound(b);
        }
    }

    /// The source row ranges that the output rows `[lo, hi)` can come from, sorted and merged.
    pub fn source_ranges(&self, lo: u32, hi: u32) -> Vec<(u32, u32)> {
        let mut ranges = vec![(lo, hi)];
        for st in self.stages.iter().rev() {
            let mut next = Vec::new();
            for (a, b) in ranges {
                if a < b {
                    st.unmap_range(a, b, &mut next);
                }
            }
            ranges = next;
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for (a, b) in ranges {
            match merged.last_mut() {
                Some((_, e)) if a <= *e => *e = (*e).max(b),
                _ => merged.push((a, b)),
            }
        }
        merged
    }
}
