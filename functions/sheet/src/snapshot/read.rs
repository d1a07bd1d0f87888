//! The read path: any range at any sequence, from the newest snapshot at or before it plus the
//! entries after it, loading only the chunks the range needs.
//!
//! The requested rows are mapped back through the entries (an inserted row has no source; a row
//! below a deletion came from further down) to the rows of the snapshot they come from; only
//! chunks covering those rows are fetched. The rows then stream through the same stages the
//! builder uses, so reads and snapshots share one implementation of every event.

use uuid::Uuid;

use super::SnapshotError;
use super::builder::{LogEntry, load_chunk, plan};
use super::format::{Manifest, manifest_key};
use super::import_reader::{ImportMsg, spawn_import};
use super::store::{BlobStore, ImportSource};
use super::stream::{Item, Pipeline};
use crate::import::ImportPos;
use crate::layout::Layout;
use crate::{Range, Row, Sheet, Value};

/// Loads the manifest of the snapshot at `seq`, if it has been written.
pub async fn load_manifest(
    store: &dyn BlobStore,
    log_id: Uuid,
    seq: u64,
) -> Result<Option<Manifest>, SnapshotError> {
    let key = manifest_key(log_id, seq);
    match store.get(&key).await? {
        Some(b) => Ok(Some(Manifest::from_bytes(&key, &b)?)),
        None => Ok(None),
    }
}

/// What a read fetched, for callers that want to show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadStats {
    pub chunks_loaded: u64,
    pub rows_streamed: u64,
}

/// The values of `range` after applying `entries` (which must start at `base.seq`, or 0 without a
/// base, and run without gaps) to `base`. Rows in order; `Value::Empty` for an empty cell.
pub async fn read_range(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    log_id: Uuid,
    base: Option<&Manifest>,
    entries: &[LogEntry],
    range: Range,
) -> Result<(Vec<Vec<Value>>, ReadStats), SnapshotError> {
    let (rows, stats) = read_rows(
        store,
        payloads,
        log_id,
        base,
        entries,
        range,
        ReadBudget::UNLIMITED,
    )
    .await?;
    Ok((grid(rows, range), stats))
}

/// Sparse rows of `range` (from [`read_rows`]) as the dense grid [`read_range`] returns.
pub fn grid(rows: Vec<Row>, range: Range) -> Vec<Vec<Value>> {
    let mut values = vec![vec![Value::Empty; range.cols() as usize]; range.rows() as usize];
    for r in rows {
        let Some(line) = values.get_mut(r.index.wrapping_sub(range.start.row) as usize) else {
            continue;
        };
        for (c, cell) in r.cells {
            if let Some(v) = line.get_mut(c.wrapping_sub(range.start.col) as usize) {
                *v = cell.value;
            }
        }
    }
    values
}

/// How much a read may collect before it stops with [`SnapshotError::OverBudget`]: a caller
/// whose answer has a size limit (a Lambda response) never holds more than that in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadBudget {
    /// Non-empty cells.
    pub cells: usize,
    /// About the bytes of JSON the cells make: text and format lengths plus a small overhead
    /// per cell.
    pub bytes: usize,
}

impl ReadBudget {
    pub const UNLIMITED: ReadBudget = ReadBudget {
        cells: usize::MAX,
        bytes: usize::MAX,
    };
}

/// About the bytes a cell takes in a JSON answer.
pub(super) fn cell_json_bytes(cell: &crate::Cell) -> usize {
    let text = match &cell.value {
        Value::Text(t) => t.len(),
        _ => 0,
    };
    16 + text
        + cell.format.as_ref().map_or(0, |f| f.len() + 12)
        + cell.style.as_ref().map_or(0, |s| s.json_bytes_bound())
}

/// The layout (column widths, row heights, frozen panes) as of the end of `entries`: the base
/// snapshot's, through the entries after it. Reads nothing: the base's is in its manifest.
pub fn layout_at(base: Option<&Manifest>, entries: &[LogEntry]) -> Layout {
    let mut layout = base.map(|b| b.layout.clone()).unwrap_or_default();
    for e in entries {
        for ev in e.entry.events() {
            layout.apply(ev);
        }
    }
    layout
}

/// As [`read_range`], but the non-empty cells with their formats, as sparse rows in order (rows
/// with no cell in the range are left out). Stops with [`SnapshotError::OverBudget`] once the
/// cells found exceed `budget`, so a caller with a size limit never holds a whole large sheet in
/// memory.
pub async fn read_rows(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    log_id: Uuid,
    base: Option<&Manifest>,
    entries: &[LogEntry],
    range: Range,
    budget: ReadBudget,
) -> Result<(Vec<Row>, ReadStats), SnapshotError> {
    let from = base.map_or(0, |b| b.seq);
    let (stages, import) = plan(
        from,
        from + entries.len() as u64,
        entries,
        &mut Layout::default(),
    )?;
    let mut pipeline = Pipeline::new(stages);
    let needed = pipeline.source_ranges(range.start.row, range.end.row + 1);
    let wanted = |i: u32| needed.iter().any(|(a, b)| (*a..*b).contains(&i));
    let last_needed = needed.last().map_or(0, |(_, b)| *b);
    let mut out = Collector::new(range, budget);
    let mut stats = ReadStats::default();
    let mut items = Vec::new();

    if let Some((key, format)) = import {
        let reader = payloads.open(&key).await?;
        let mut rx = spawn_import(format, reader, ImportPos::default());
        while let Some(msg) = rx.recv().await {
            match msg {
                ImportMsg::Row(r, _) => {
                    if r.index >= last_needed {
                        break; // dropping `rx` stops the reader thread
                    }
                    if wanted(r.index) {
                        stats.rows_streamed += 1;
                        pipeline.push(Item::Row(r), &mut items)?;
                        out.take(&mut items)?;
                    }
                }
                ImportMsg::Failed(message) => return Err(SnapshotError::Import { key, message }),
            }
        }
    } else if let Some(base) = base {
        if base.log_id != log_id {
            return Err(SnapshotError::BadInput(
                "base snapshot belongs to another log".into(),
            ));
        }
        for (chunk, start) in base.chunks.iter().zip(base.chunk_starts()) {
            let end = start + chunk.rows;
            if !needed.iter().any(|(a, b)| *a < end && start < *b) {
                continue;
            }
            stats.chunks_loaded += 1;
            let mut rows = load_chunk(store, base, chunk, start).await?;
            while let Some(r) = rows.next_row().map_err(|e| SnapshotError::Corrupt {
                key: chunk.hash.to_string(),
                reason: e.to_string(),
            })? {
                if wanted(r.index) {
                    stats.rows_streamed += 1;
                    pipeline.push(Item::Row(r), &mut items)?;
                    out.take(&mut items)?;
                }
            }
        }
    }
    pipeline.finish(&mut items)?;
    out.take(&mut items)?;
    Ok((out.rows, stats))
}

/// Every row of a snapshot, as an in-memory sheet (for tests and small sheets).
pub async fn materialize(
    store: &dyn BlobStore,
    manifest: &Manifest,
) -> Result<Sheet, SnapshotError> {
    let mut rows: Vec<Row> = Vec::new();
    for (chunk, start) in manifest.chunks.iter().zip(manifest.chunk_starts()) {
        let mut it = load_chunk(store, manifest, chunk, start).await?;
        while let Some(r) = it.next_row().map_err(|e| SnapshotError::Corrupt {
            key: chunk.hash.to_string(),
            reason: e.to_string(),
        })? {
            rows.push(r);
        }
    }
    Ok(Sheet::from_rows(rows).with_layout(manifest.layout.clone()))
}

struct Collector {
    range: Range,
    rows: Vec<Row>,
    cells: usize,
    bytes: usize,
    budget: ReadBudget,
}

impl Collector {
    fn new(range: Range, budget: ReadBudget) -> Self {
        Collector {
            range,
            rows: Vec::new(),
            cells: 0,
            bytes: 0,
            budget,
        }
    }

    fn take(&mut self, items: &mut Vec<Item>) -> Result<(), SnapshotError> {
        for it in items.drain(..) {
            let Item::Row(mut r) = it else { continue };
            if !(self.range.start.row..=self.range.end.row).contains(&r.index) {
                continue;
            }
            r.cells.retain(|(c, cell)| {
                (self.range.start.col..=self.range.end.col).contains(c) && !cell.is_blank()
            });
            if !r.cells.is_empty() {
                self.cells += r.cells.len();
                self.bytes = r
                    .cells
                    .iter()
                    .fold(self.bytes, |b, (_, c)| b.saturating_add(cell_json_bytes(c)));
                if self.cells > self.budget.cells || self.bytes > self.budget.bytes {
                    return Err(SnapshotError::OverBudget {
                        cells: self.cells,
                        bytes: self.bytes,
                    });
                }
                self.rows.push(r);
            }
        }
        Ok(())
    }
}

/// The area a sheet's cells lie in: every non-empty cell is in a row below `rows` and a column
/// left of `columns` (0-based counts, so `A1:{columns}{rows}` covers the sheet). An upper bound:
/// a cell cleared at the edge, or a row deleted from a sheet whose last rows were already empty,
/// can leave it larger than the cells now need; it never leaves it smaller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Extent {
    pub rows: u32,
    pub columns: u32,
}

/// The [`Extent`] of the sheet a snapshot (`base`) and the entries after it make, without
/// reading the snapshot's chunks: the manifest records its rows and each chunk's highest column,
/// and each event moves the bounds as it moves cells. An `import` among the entries is streamed
/// once, counting (memory stays a row), since its size is known only from the file.
pub async fn extent(
    payloads: &dyn ImportSource,
    base: Option<&Manifest>,
    entries: &[LogEntry],
) -> Result<Extent, SnapshotError> {
    use super::stream::Stage;
    use crate::limits::{MAX_COLS, MAX_ROWS};
    let from = base.map_or(0, |b| b.seq);
    let (stages, import) = plan(
        from,
        from + entries.len() as u64,
        entries,
        &mut Layout::default(),
    )?;
    let widest = |cells: &[(u32, crate::Cell)]| cells.iter().map(|(c, _)| c + 1).max();
    let mut e = match import {
        Some((key, format)) => {
            let reader = payloads.open(&key).await?;
            let mut rx = spawn_import(format, reader, ImportPos::default());
            let mut e = Extent {
                rows: 0,
                columns: 0,
            };
            while let Some(msg) = rx.recv().await {
                match msg {
                    ImportMsg::Row(r, _) => {
                        e.rows = e.rows.max(r.index + 1);
                        e.columns = e.columns.max(widest(&r.cells).unwrap_or(0));
                    }
                    ImportMsg::Failed(message) => {
                        return Err(SnapshotError::Import { key, message });
                    }
                }
            }
            e
        }
        None => base.map_or(
            Extent {
                rows: 0,
                columns: 0,
            },
            |m| Extent {
                rows: m.rows,
                columns: m.chunks.iter().map(|c| c.max_col + 1).max().unwrap_or(0),
            },
        ),
    };
    for stage in &stages {
        match stage {
            Stage::Set { rows, .. } => {
                for (r, cells) in rows {
                    e.rows = e.rows.max(r + 1);
                    e.columns = e.columns.max(widest(cells).unwrap_or(0));
                }
            }
            Stage::InsertRows { rows, .. } => {
                e.rows = stage.map_bound(e.rows);
                for r in rows {
                    if let Some(w) = widest(&r.cells) {
                        e.rows = e.rows.max(r.index + 1);
                        e.columns = e.columns.max(w);
                    }
                }
            }
            Stage::DeleteRows { .. } => e.rows = stage.map_bound(e.rows),
            Stage::InsertColumns { at, count } if e.columns > *at => {
                e.columns =
                    (u64::from(e.columns) + u64::from(*count)).min(u64::from(MAX_COLS)) as u32;
            }
            Stage::DeleteColumns { at, count } if e.columns > *at => {
                e.columns = e.columns.saturating_sub(*count).max(*at);
            }
            Stage::InsertColumns { .. } | Stage::DeleteColumns { .. } => {}
            // An upper bound: a patch that clears a style may leave some of them empty.
            Stage::Style { cells, .. } => {
                for r in &cells.ranges {
                    e.rows = e.rows.max(r.end.row + 1);
                    e.columns = e.columns.max(r.end.col + 1);
                }
            }
        }
    }
    e.rows = e.rows.min(MAX_ROWS);
    if e.rows == 0 || e.columns == 0 {
        e = Extent {
            rows: 0,
            columns: 0,
        };
    }
    Ok(e)
}
