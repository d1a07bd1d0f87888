//! How a sheet is laid out apart from its cells: column widths, row heights and frozen panes.
//!
//! Three entry types change it, each separate from the cells' entries so a resize never races a
//! value edit:
//! - `resize-columns` `{"at": "B", "count": 3, "width": 120}`: the width of columns B:D in
//!   pixels; `"width": null` (or no width) gives them back the default width;
//! - `resize-rows` `{"at": 3, "count": 2, "height": 40}`: the same for rows 3:4;
//! - `freeze` `{"rows": 1, "columns": 2}`: the rows above and the columns left of the split stay in
//!   view; zero for none.
//!
//! A [`Layout`] is what they leave, kept in each snapshot's manifest and folded over the entries
//! after it by reads ([`Layout::apply`]). Sizes move with their rows and columns: an insert
//! shifts them (the new rows and columns have the default size), a delete takes its own away, and
//! a frozen split moves with the rows or columns inserted or deleted above (left of) it. An import
//! replaces the sheet and its layout.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{ColumnName, Event, RowNumber};
use crate::limits::{MAX_COLS, MAX_ROWS};
pub use crate::resize::{
    Freeze, LayoutRuns, MAX_FROZEN_COLUMNS, MAX_FROZEN_ROWS, MAX_RESIZE_SPAN, MAX_SIZE_PX,
    ResizeColumns, ResizeRows, TYPE_FREEZE, TYPE_RESIZE_COLUMNS, TYPE_RESIZE_ROWS,
};

/// Sizes along one axis: runs of positions `start..end` with one size each, disjoint and
/// sorted, touching runs of one size merged; a position no run covers has the default size. A
/// resize adds at most one run and splits at most two, so the runs stay as few as the resizes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sizes(BTreeMap<u32, (u32, u16)>);

impl Sizes {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The runs, as `(start, end, size)` with `end` exclusive.
    pub fn runs(&self) -> impl Iterator<Item = (u32, u32, u16)> + '_ {
        self.0.iter().map(|(&s, &(e, z))| (s, e, z))
    }

    /// The size at `at`, if it is not the default.
    pub fn get(&self, at: u32) -> Option<u16> {
        self.0
            .range(..=at)
            .next_back()
            .filter(|(_, (end, _))| at < *end)
            .map(|(_, (_, size))| *size)
    }

    /// The sizes of `at..at + count` as `(start, count, size)` pieces, in order, `None` where
    /// the size is the default.
    pub fn spans(&self, at: u32, count: u32) -> Vec<(u32, u32, Option<u16>)> {
        let end = at.saturating_add(count);
        let mut out = Vec::new();
        let mut p = at;
        let first = self.0.range(..=at).next_back().map_or(at, |(s, _)| *s);
        for (s, e, z) in self.0.range(first..end).map(|(&s, &(e, z))| (s, e, z)) {
            if e <= p {
                continue;
            }
            if s > p {
                out.push((p, s - p, None));
            }
            let (a, b) = (s.max(p), e.min(end));
            out.push((a, b - a, Some(z)));
            p = b;
        }
        if p < end {
            out.push((p, end - p, None));
        }
        out
    }

    /// Positions `at..at + count` get `size` (`None`: the default).
    pub fn set(&mut self, at: u32, count: u32, size: Option<u16>) {
        let end = at.saturating_add(count);
        self.cut(at);
        self.cut(end);
        let inside: Vec<u32> = self.0.range(at..end).map(|(k, _)| *k).collect();
        for k in inside {
            self.0.remove(&k);
        }
        if let Some(s) = size {
            self.0.insert(at, (end, s));
        }
        self.merge_at(end);
        self.merge_at(at);
    }

    /// `count` default-sized positions inserted at `at`: runs from `at` on move by `count`, and
    /// what moves past `max` goes.
    pub fn insert(&mut self, at: u32, count: u32, max: u32) {
        self.cut(at);
        let moved = self.0.split_off(&at);
        for (s, (e, z)) in moved {
            let s = s.saturating_add(count);
            if s < max {
                self.0.insert(s, (e.saturating_add(count).min(max), z));
            }
        }
    }

    /// Positions `at..at + count` deleted: their sizes go, and the runs after them move up.
    pub fn delete(&mut self, at: u32, count: u32) {
        let end = at.saturating_add(count);
        self.cut(at);
        self.cut(end);
        let mut tail = self.0.split_off(&at);
        let after = tail.split_off(&end);
        for (s, (e, z)) in after {
            self.0.insert(s - count, (e - count, z));
        }
        self.merge_at(at);
    }

    /// Splits the run that covers `p` (if it starts before `p`) into two at `p`.
    fn cut(&mut self, p: u32) {
        if let Some((&s, &(e, z))) = self.0.range(..p).next_back()
            && e > p
        {
            self.0.insert(s, (p, z));
            self.0.insert(p, (e, z));
        }
    }

    /// Merges the run starting at `p` into the one ending there, when they have one size.
    fn merge_at(&mut self, p: u32) {
        let Some(&(e, z)) = self.0.get(&p) else {
            return;
        };
        if let Some((&s, &(pe, pz))) = self.0.range(..p).next_back()
            && pe == p
            && pz == z
        {
            self.0.remove(&p);
            self.0.insert(s, (e, z));
        }
    }
}

/// The layout of a sheet: what the `resize-*` and `freeze` entries left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    pub columns: Sizes,
    pub rows: Sizes,
    pub freeze: Freeze,
}

impl Layout {
    /// Nothing resized and nothing frozen: what a sheet starts with.
    pub fn is_default(&self) -> bool {
        self.columns.is_empty() && self.rows.is_empty() && self.freeze.is_none()
    }

    /// The layout after `event`.
    pub fn apply(&mut self, event: &Event) {
        let shrink = |frozen: &mut u32, at: u32, count: u32| {
            let gone = frozen.saturating_sub(at).min(count);
            *frozen -= gone;
        };
        match event {
            Event::ResizeColumns(r) => self.columns.set(r.at.0, r.count, r.width),
            Event::ResizeRows(r) => self.rows.set(r.at.0, r.count, r.height),
            Event::Freeze(f) => self.freeze = *f,
            Event::InsertRows(e) => {
                self.rows.insert(e.at.0, e.count, MAX_ROWS);
                if e.at.0 < self.freeze.rows {
                    self.freeze.rows = (self.freeze.rows + e.count).min(MAX_FROZEN_ROWS);
                }
            }
            Event::DeleteRows(e) => {
                self.rows.delete(e.at.0, e.count);
                shrink(&mut self.freeze.rows, e.at.0, e.count);
            }
            Event::InsertColumns(e) => {
                self.columns.insert(e.at.0, e.count, MAX_COLS);
                if e.at.0 < self.freeze.columns {
                    self.freeze.columns = (self.freeze.columns + e.count).min(MAX_FROZEN_COLUMNS);
                }
            }
            Event::DeleteColumns(e) => {
                self.columns.delete(e.at.0, e.count);
                shrink(&mut self.freeze.columns, e.at.0, e.count);
            }
            // The file's layout (an XLSX file's, when its import carried one), or none.
            Event::Import(i) => {
                *self = i.layout.as_ref().map(Layout::from_runs).unwrap_or_default();
            }
            // A restore's layout is the restored state's (`snapshot::resolve_restores`).
            Event::Set(_) | Event::Style(_) | Event::Restore(_) => {}
        }
    }

    /// The entries that make a default layout into this one, columns, then rows, then the
    /// freeze; a run longer than [`MAX_RESIZE_SPAN`] takes more than one.
    pub fn events(&self) -> Vec<Event> {
        let mut out = Vec::new();
        for (s, e, z) in self.columns.runs() {
            for (at, count) in pieces(s, e) {
                out.push(Event::ResizeColumns(ResizeColumns {
                    at: ColumnName(at),
                    count,
                    width: Some(z),
                }));
            }
        }
        for (s, e, z) in self.rows.runs() {
            for (at, count) in pieces(s, e) {
                out.push(Event::ResizeRows(ResizeRows {
                    at: RowNumber(at),
                    count,
                    height: Some(z),
                }));
            }
        }
        if !self.freeze.is_none() {
            out.push(Event::Freeze(self.freeze));
        }
        out
    }
}

/// `start..end` cut into spans of at most [`MAX_RESIZE_SPAN`], as `(at, count)`.
fn pieces(start: u32, end: u32) -> impl Iterator<Item = (u32, u32)> {
    (start..end)
        .step_by(MAX_RESIZE_SPAN as usize)
        .map(move |at| (at, (end - at).min(MAX_RESIZE_SPAN)))
}

impl Layout {
    /// The layout as runs (its JSON form, and what an XLSX import carries).
    pub fn to_runs(&self) -> LayoutRuns {
        LayoutRuns {
            columns: self
                .columns
                .runs()
                .map(|(s, e, z)| ResizeColumns {
                    at: ColumnName(s),
                    count: e - s,
                    width: Some(z),
                })
                .collect(),
            rows: self
                .rows
                .runs()
                .map(|(s, e, z)| ResizeRows {
                    at: RowNumber(s),
                    count: e - s,
                    height: Some(z),
                })
                .collect(),
            freeze: self.freeze,
        }
    }

    /// The layout runs (checked when they were read) describe.
    pub fn from_runs(runs: &LayoutRuns) -> Layout {
        let mut layout = Layout {
            freeze: runs.freeze,
            ..Layout::default()
        };
        for r in &runs.columns {
            layout.columns.set(r.at.0, r.count, r.width);
        }
        for r in &runs.rows {
            layout.rows.set(r.at.0, r.count, r.height);
        }
        layout
    }
}

/// JSON: `{"columns": [{"at", "count", "width"}], "rows": [{"at", "count", "height"}],
/// "freeze": {"rows", "columns"}}`, empty parts left out ([`LayoutRuns`]).
impl Serialize for Layout {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_runs().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Layout {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Layout::from_runs(&LayoutRuns::deserialize(d)?))
    }
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
