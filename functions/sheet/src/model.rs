//! The spreadsheet state machine: rows of cells, and what each event does to them.
//!
//! [`Sheet`] is the whole sheet in memory — the reference semantics, used for small sheets, for
//! replaying a few entries, and as the oracle the chunked snapshot engine is tested against. The
//! row-level transforms (`shift`, column edits, `apply_set_to_row`) are shared with the streaming
//! engine in `snapshot/`, so both implement one set of rules.

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::ControlFlow;

use super::a1::{CellRef, Range};
use super::event::{Event, ImportFormat, InsertRows};
use super::formula::{Displace, displace_cells};
use super::import::{self, ImportError, ImportPos, Mode, ReadSeek};
use super::layout::Layout;
use super::limits::{MAX_COLS, MAX_ROWS};
use super::style::{StyleMemo, StylePatch};
pub use super::value::Row;
use super::value::{Cell, Value};

/// Why an event could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("an import entry needs its payload file, and none was given")]
    MissingPayload,
    #[error("import: {0}")]
    Import(#[from] ImportError),
    /// A `restore` makes the sheet what it was at an earlier sequence, which one sheet's state
    /// does not hold: replay the log up to that sequence and take that sheet instead.
    #[error("a restore to sequence {0} needs the sheet as of that sequence")]
    NeedsHistory(u64),
}

/// Applies `insert-columns` to one row's cells: columns at or after `at` move right by `count`;
/// cells pushed past the last column are dropped.
pub fn insert_columns(cells: &mut Vec<(u32, Cell)>, at: u32, count: u32) {
    for (c, _) in cells.iter_mut() {
        if *c >= at {
            *c += count;
        }
    }
    cells.retain(|(c, _)| *c < MAX_COLS);
}

/// Applies `delete-columns` to one row's cells.
pub fn delete_columns(cells: &mut Vec<(u32, Cell)>, at: u32, count: u32) {
    let end = at + count;
    cells.retain(|(c, _)| *c < at || *c >= end);
    for (c, _) in cells.iter_mut() {
        if *c >= end {
            *c -= count;
        }
    }
}

/// Merges `edits` (sorted by column; a blank cell means clear) into a row's sorted cells.
pub fn apply_set_to_row<'a>(
    cells: &mut Vec<(u32, Cell)>,
    edits: impl IntoIterator<Item = (u32, &'a Cell)>,
) {
    let old = std::mem::take(cells);
    let mut old = old.into_iter().peekable();
    for (col, cell) in edits {
        while let Some((c, _)) = old.peek() {
            if *c >= col {
                break;
            }
            if let Some(kept) = old.next() {
                cells.push(kept);
            }
        }
        let cell = match old.next_if(|(c, _)| *c == col) {
            Some((_, was)) => was.edited(cell),
            None => cell.clone(),
        };
        if !cell.is_blank() {
            cells.push((col, cell));
        }
    }
    cells.extend(old);
}

/// Applies a style patch to the columns `spans` (sorted, disjoint, inclusive) of one row's sorted
/// cells: cells there are restyled, empty places become styled empty cells, and a cell left blank
/// goes.
pub fn apply_style_to_row(
    cells: &mut Vec<(u32, Cell)>,
    spans: &[(u32, u32)],
    patch: &StylePatch,
    memo: &mut StyleMemo,
) {
    if spans.is_empty() {
        return;
    }
    let old = std::mem::take(cells);
    let mut old = old.into_iter().peekable();
    for &(a, b) in spans {
        while let Some(kept) = old.next_if(|(c, _)| *c < a) {
            cells.push(kept);
        }
        for col in a..=b {
            let mut cell = match old.next_if(|(c, _)| *c == col) {
                Some((_, cell)) => cell,
                None => Cell::default(),
            };
            cell.restyle(patch, memo);
            if !cell.is_blank() {
                cells.push((col, cell));
            }
        }
    }
    cells.extend(old);
}

/// The non-empty new rows an `insert-rows` carries, with their final 0-based indices.
pub fn inserted_rows(e: &InsertRows) -> impl Iterator<Item = Row> + '_ {
    e.values.iter().enumerate().filter_map(move |(i, values)| {
        let cells: Vec<(u32, Cell)> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .map(|(c, v)| (c as u32, Cell::new(v.clone(), None)))
            .collect();
        (!cells.is_empty()).then(|| Row {
            index: e.at.0 + i as u32,
            cells,
        })
    })
}

/// A whole sheet in memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sheet {
    rows: BTreeMap<u32, Vec<(u32, Cell)>>,
    layout: Layout,
}

impl Sheet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a sheet from rows (each non-empty, cells sorted); later rows with the same index win.
    pub fn from_rows(rows: impl IntoIterator<Item = Row>) -> Self {
        Sheet {
            rows: rows
                .into_iter()
                .filter(|r| !r.cells.is_empty())
                .map(|r| (r.index, r.cells))
                .collect(),
            layout: Layout::default(),
        }
    }

    /// Column widths, row heights and the frozen panes (`layout.rs`).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The same sheet laid out as `layout` says.
    pub fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Applies one event. `payload` is the import file for `import` events and ignored otherwise.
    pub fn apply(
        &mut self,
        event: &Event,
        payload: Option<Box<dyn ReadSeek>>,
    ) -> Result<(), ApplyError> {
        // References move before the cells do: a formula names cells of the sheet as it was.
        if let Some(s) = Displace::of(event) {
            for cells in self.rows.values_mut() {
                displace_cells(cells, s);
            }
        }
        if let Event::Restore(r) = event {
            return Err(ApplyError::NeedsHistory(r.seq));
        }
        self.layout.apply(event);
        match event {
            Event::ResizeColumns(_) | Event::ResizeRows(_) | Event::Freeze(_) => {}
            Event::Set(s) => {
                let edits = s.sorted_edits();
                let mut it = edits.iter().peekable();
                while let Some((first, _)) = it.peek() {
                    let row = first.row;
                    let mut in_row = Vec::new();
                    while let Some((r, c)) = it.next_if(|(r, _)| r.row == row) {
                        in_row.push((r.col, c));
                    }
                    let cells = self.rows.entry(row).or_default();
                    apply_set_to_row(cells, in_row);
                    if cells.is_empty() {
                        self.rows.remove(&row);
                    }
                }
            }
            Event::InsertRows(e) => {
                let moved = self.rows.split_off(&e.at.0);
                for (r, cells) in moved {
                    let to = u64::from(r) + u64::from(e.count);
                    if to < u64::from(MAX_ROWS) {
                        self.rows.insert(to as u32, cells);
                    }
                }
                for row in inserted_rows(e) {
                    self.rows.insert(row.index, row.cells);
                }
            }
            Event::DeleteRows(e) => {
                let mut tail = self.rows.split_off(&e.at.0);
                let kept = tail.split_off(&(e.at.0 + e.count));
                for (r, cells) in kept {
                    self.rows.insert(r - e.count, cells);
                }
            }
            Event::InsertColumns(e) => {
                self.map_rows(|cells| insert_columns(cells, e.at.0, e.count))
            }
            Event::DeleteColumns(e) => {
                self.map_rows(|cells| delete_columns(cells, e.at.0, e.count))
            }
            Event::Restore(r) => return Err(ApplyError::NeedsHistory(r.seq)),
            Event::Style(st) => {
                let mut memo = StyleMemo::default();
                let mut row = st.next_row_from(0);
                while let Some(r) = row {
                    let cells = self.rows.entry(r).or_default();
                    apply_style_to_row(cells, &st.columns_in(r), &st.style, &mut memo);
                    if cells.is_empty() {
                        self.rows.remove(&r);
                    }
                    row = r.checked_add(1).and_then(|n| st.next_row_from(n));
                }
            }
            Event::Import(i) => {
                let payload = payload.ok_or(ApplyError::MissingPayload)?;
                self.rows.clear();
                let rows = &mut self.rows;
                import::read_rows(
                    i.format,
                    payload,
                    ImportPos::default(),
                    Mode::Lenient,
                    &mut |row, _| {
                        rows.insert(row.index, row.cells);
                        Ok(ControlFlow::Continue(()))
                    },
                )?;
            }
        }
        Ok(())
    }

    /// Convenience for tests and tools: apply an import from any reader holding the whole file.
    pub fn import_bytes(
        &mut self,
        format: ImportFormat,
        mut r: impl Read,
    ) -> Result<(), ApplyError> {
        let mut bytes = Vec::new();
        r.read_to_end(&mut bytes).map_err(ImportError::Io)?;
        self.apply(
            &Event::Import(super::event::Import {
                format,
                group: None,
                layout: None,
            }),
            Some(Box::new(std::io::Cursor::new(bytes))),
        )
    }

    fn map_rows(&mut self, mut f: impl FnMut(&mut Vec<(u32, Cell)>)) {
        self.rows.retain(|_, cells| {
            f(cells);
            !cells.is_empty()
        });
    }

    pub fn get(&self, at: CellRef) -> Option<&Cell> {
        let cells = self.rows.get(&at.row)?;
        cells
            .binary_search_by_key(&at.col, |(c, _)| *c)
            .ok()
            .map(|i| &cells[i].1)
    }

    /// The values of a range, row by row; `Value::Empty` where there is no cell.
    pub fn read_range(&self, range: Range) -> Vec<Vec<Value>> {
        let mut out = vec![vec![Value::Empty; range.cols() as usize]; range.rows() as usize];
        for (r, cells) in self.rows.range(range.start.row..=range.end.row) {
            let line = &mut out[(r - range.start.row) as usize];
            for (c, cell) in cells {
                if (range.start.col..=range.end.col).contains(c) {
                    line[(c - range.start.col) as usize] = cell.value.clone();
                }
            }
        }
        out
    }

    /// All non-empty rows in order.
    pub fn rows(&self) -> impl Iterator<Item = Row> + '_ {
        self.rows.iter().map(|(i, c)| Row {
            index: *i,
            cells: c.clone(),
        })
    }

    pub fn row_count(&self) -> usize {
        self.rows.len()
    }

    pub fn cell_count(&self) -> usize {
        self.rows.values().map(Vec::len).sum()
    }
}
