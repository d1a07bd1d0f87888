//! Formula values kept beside a snapshot.
//!
//! A snapshot stores formulas as their text. After it is built, the values pass
//! ([`compute_values`]) evaluates the formulas of each chunk that has some, as a read of that
//! chunk's rows would, and keeps two things per chunk: each formula's value (a small blob) and
//! the *area*, the rectangle of every cell those formulas read, directly or through other
//! formulas, the chunk's own rows included. An index lists them:
//!
//! | object | key |
//! |---|---|
//! | index | `snapshots/<log>/values/<seq, 20 digits>.json` |
//! | values of one chunk | `snapshots/<log>/values/blobs/<sha-256 of the raw bytes, hex>` |
//!
//! A read at the snapshot plus the entries after it ([`KeptValues`]) shows a kept value instead of
//! evaluating when nothing since the snapshot can have changed it: every entry after it is a
//! `set`, and none of their cells falls inside the chunk's area. A row or column edit or an import
//! after the snapshot, or a chunk whose formulas call a volatile function (`NOW`, `RAND`,
//! `INDIRECT`, …; [`formula::is_volatile`]), leaves the read to evaluate as it would without any.
//! The values are derived state: a missing or unreadable index only costs that evaluation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::SnapshotError;
use super::builder::LogEntry;
use super::format::{ChunkHash, Manifest, open_framed};
use super::read::{ReadBudget, read_rows};
use super::store::{BlobStore, ImportSource};
use crate::codec::{Reader, Writer, read_value, write_value};
use crate::event::Event;
use crate::formula::{self, EvalError, MAX_EVAL_BYTES, MAX_EVAL_CELLS, TAB};
use crate::{CellRef, Range, Row, Value};

/// The index's format number.
pub const VALUES_FORMAT: u32 = 1;
const BLOB_MAGIC: &[u8; 4] = b"SLV1";
/// Cells the values pass of one snapshot loads over all its chunks (each chunk's evaluation is
/// also held to what one read may load, [`MAX_EVAL_CELLS`]). Chunks past it keep no values, and
/// reads evaluate them. About eight times the bench sheet's million cells: a few seconds.
pub const VALUES_PASS_CELLS: usize = 8_000_000;
/// Cells set after a snapshot beyond which a read does not look for kept values: checking each
/// against every area would cost more than it saves.
const MAX_TAIL_CELLS: usize = 100_000;
/// Largest raw values blob read back (a chunk holds at most a few MB of cells).
const MAX_RAW_VALUES: usize = 1 << 30;

pub fn values_key(log_id: Uuid, seq: u64) -> String {
    format!("snapshots/{log_id}/values/{seq:020}.json")
}

pub fn values_blob_key(log_id: Uuid, hash: &ChunkHash) -> String {
    format!("snapshots/{log_id}/values/blobs/{hash}")
}

/// The values kept for one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValuesIndex {
    pub format: u32,
    pub log_id: Uuid,
    pub seq: u64,
    /// The chunks whose values are kept, in manifest order; a chunk with formulas that is not
    /// listed is evaluated by every read.
    pub chunks: Vec<ChunkValues>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChunkValues {
    /// The chunk's position in the manifest, and its hash (checked by readers).
    pub chunk: u32,
    pub chunk_hash: ChunkHash,
    /// Every cell the chunk's formulas read, directly or through other formulas, and the chunk's
    /// own rows (columns A to its last), as an A1 range.
    pub area: String,
    pub formulas: u64,
    /// The values blob.
    pub hash: ChunkHash,
}

/// What a values pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValuesReport {
    /// Chunks with formulas, and of those the ones whose values were kept.
    pub formula_chunks: usize,
    pub kept_chunks: usize,
    pub kept_formulas: u64,
    /// Cells evaluated to compute them (the cells their formulas reach).
    pub cells_loaded: usize,
    /// Where the index went (`None` when the snapshot has no formulas).
    pub index_key: Option<String>,
}

/// The rows of chunk `j` of `manifest`, as a range.
fn chunk_range(manifest: &Manifest, starts: &[u32], j: usize) -> Option<Range> {
    let c = manifest.chunks.get(j)?;
    let start = *starts.get(j)?;
    let last = start.checked_add(c.rows)?.checked_sub(1)?;
    Some(Range::new(
        CellRef { row: start, col: 0 },
        CellRef {
            row: last,
            col: c.max_col,
        },
    ))
}

/// Evaluates the formulas of every chunk of `manifest` that has some and keeps their values and
/// areas beside it, until [`VALUES_PASS_CELLS`] are loaded or `deadline` passes (the chunks left
/// are evaluated by the reads that need them). Idempotent: the same snapshot gives the same
/// objects.
pub async fn compute_values(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    manifest: &Manifest,
    deadline: Option<Instant>,
) -> Result<ValuesReport, SnapshotError> {
    let starts = manifest.chunk_starts();
    let mut report = ValuesReport::default();
    let mut chunks = Vec::new();
    // The chunks kept so far, in row order: a later chunk's formulas that read theirs take their
    // values rather than evaluating them again, so a running total down the whole sheet costs
    // each chunk its own rows, not every row above it.
    let mut done: Vec<Done> = Vec::new();
    for (j, c) in manifest.chunks.iter().enumerate() {
        if c.formulas == 0 {
            continue;
        }
        report.formula_chunks += 1;
        let over_time = deadline.is_some_and(|d| Instant::now() >= d);
        if over_time || report.cells_loaded >= VALUES_PASS_CELLS {
            continue;
        }
        let Some(range) = chunk_range(manifest, &starts, j) else {
            continue;
        };
        let left = (VALUES_PASS_CELLS - report.cells_loaded).min(MAX_EVAL_CELLS);
        let Some(kept) = chunk_values(store, payloads, manifest, range, left, &done).await? else {
            continue;
        };
        report.cells_loaded += kept.cells_loaded;
        let raw = encode_values(range.start.row, &kept.values);
        let hash = ChunkHash::of(&raw);
        store
            .put_if_absent(
                &values_blob_key(manifest.log_id, &hash),
                Bytes::from(seal(&raw)?),
            )
            .await?;
        report.kept_chunks += 1;
        report.kept_formulas += kept.values.len() as u64;
        chunks.push(ChunkValues {
            chunk: u32::try_from(j).map_err(|_| SnapshotError::Internal("chunk index".into()))?,
            chunk_hash: c.hash,
            area: kept.area.to_string(),
            formulas: kept.values.len() as u64,
            hash,
        });
        done.push(Done {
            rows: range,
            area: kept.area,
            values: kept.values.into_iter().collect(),
        });
    }
    if report.formula_chunks == 0 {
        return Ok(report);
    }
    let index = ValuesIndex {
        format: VALUES_FORMAT,
        log_id: manifest.log_id,
        seq: manifest.seq,
        chunks,
    };
    let key = values_key(manifest.log_id, manifest.seq);
    let json = serde_json::to_vec(&index).map_err(|e| SnapshotError::Internal(e.to_string()))?;
    store.put(&key, Bytes::from(json)).await?;
    report.index_key = Some(key);
    Ok(report)
}

/// A chunk the pass has kept: its rows, its area and its formulas' values.
struct Done {
    rows: Range,
    area: Range,
    values: HashMap<CellRef, Value>,
}

/// `rows` with the formulas of chunks in `done` replaced by their values; the areas of the chunks
/// used are added to `area` (a value kept from another chunk stands for everything it read).
fn take_done(done: &[Done], mut rows: Vec<Row>, area: &mut Option<Range>) -> Vec<Row> {
    for row in &mut rows {
        let i = done.partition_point(|d| d.rows.end.row < row.index);
        let Some(d) = done.get(i).filter(|d| d.rows.start.row <= row.index) else {
            continue;
        };
        for (col, cell) in &mut row.cells {
            let at = CellRef {
                row: row.index,
                col: *col,
            };
            if let (Value::Formula(_), Some(v)) = (&cell.value, d.values.get(&at)) {
                cell.value = v.clone();
                *area = Some(area.map_or(d.area, |a| union(a, d.area)));
            }
        }
    }
    rows
}

fn union(a: Range, b: Range) -> Range {
    Range::new(
        CellRef {
            row: a.start.row.min(b.start.row),
            col: a.start.col.min(b.start.col),
        },
        CellRef {
            row: a.end.row.max(b.end.row),
            col: a.end.col.max(b.end.col),
        },
    )
}

/// One chunk's evaluated formulas (its cells by position) and their area.
struct Kept {
    values: Vec<(CellRef, Value)>,
    area: Range,
    cells_loaded: usize,
}

/// Evaluates the formulas of `range` (one chunk) as a read of it at the snapshot would, taking
/// the values of the chunks already kept (`done`), or `None` when they cannot be kept: a volatile
/// function among what they reach, or more than `limit` cells to load.
async fn chunk_values(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    manifest: &Manifest,
    range: Range,
    limit: usize,
    done: &[Done],
) -> Result<Option<Kept>, SnapshotError> {
    let budget = ReadBudget {
        cells: limit,
        bytes: MAX_EVAL_BYTES,
    };
    let used = std::sync::Mutex::new(None::<Range>);
    let used = &used;
    let read = |area: Range| async move {
        let (rows, _) = read_rows(
            store,
            payloads,
            manifest.log_id,
            Some(manifest),
            &[],
            area,
            budget,
        )
        .await?;
        let mut used = used.lock().unwrap_or_else(|e| e.into_inner());
        Ok(take_done(done, rows, &mut used))
    };
    let rows = match read(range).await {
        Ok(rows) => rows,
        Err(SnapshotError::OverBudget { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let reached = match formula::load_reach(rows, range, TAB, read).await {
        Ok(reached) => reached,
        Err(SnapshotError::OverBudget { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let used = *used.lock().unwrap_or_else(|e| e.into_inner());
    let area = used.map_or(reached.bounds, |u| union(reached.bounds, u));
    let volatile =
        reached.rows.iter().flat_map(|r| &r.cells).any(
            |(_, cell)| matches!(&cell.value, Value::Formula(f) if formula::is_volatile(&f.text)),
        );
    if volatile {
        return Ok(None);
    }
    let cells: usize = reached.rows.iter().map(|r| r.cells.len()).sum();
    let loaded = reached.rows;
    let evaluated =
        match tokio::task::spawn_blocking(move || formula::evaluate(&loaded).map(|e| (e, loaded)))
            .await
            .map_err(|e| SnapshotError::Internal(format!("evaluating formulas: {e}")))?
        {
            Ok(done) => done,
            Err(EvalError::TooManyCells { .. }) => return Ok(None),
            Err(EvalError::Engine(e)) => {
                return Err(SnapshotError::Internal(format!("evaluating formulas: {e}")));
            }
        };
    let (evaluated, loaded) = evaluated;
    let mut values = Vec::new();
    for row in loaded
        .iter()
        .filter(|r| range.start.row <= r.index && r.index <= range.end.row)
    {
        for (col, cell) in &row.cells {
            let at = CellRef {
                row: row.index,
                col: *col,
            };
            if matches!(cell.value, Value::Formula(_)) && range.contains(at) {
                values.push((at, evaluated.shown(at, &cell.value).clone()));
            }
        }
    }
    Ok(Some(Kept {
        values,
        area,
        cells_loaded: cells,
    }))
}

/// A values blob's raw bytes: the count, then per formula (in row, then column order) its row
/// relative to the chunk's first row, its column, and its value in the cell encoding.
pub(super) fn encode_values(first_row: u32, values: &[(CellRef, Value)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.varint(values.len() as u64);
    for (at, value) in values {
        w.varint(u64::from(at.row - first_row));
        w.varint(u64::from(at.col));
        write_value(&mut w, value, None);
    }
    w.buf
}

pub(super) fn decode_values(first_row: u32, raw: &[u8]) -> Result<HashMap<CellRef, Value>, String> {
    let mut r = Reader::new(raw);
    let n = r.varint().map_err(|e| e.to_string())?;
    let mut out = HashMap::new();
    for _ in 0..n {
        let row = r
            .varint_u32(crate::limits::MAX_ROWS, "row")
            .map_err(|e| e.to_string())?;
        let col = r
            .varint_u32(crate::limits::MAX_COLS, "column")
            .map_err(|e| e.to_string())?;
        let (value, _) = read_value(&mut r).map_err(|e| e.to_string())?;
        let row = first_row
            .checked_add(row)
            .ok_or_else(|| "row past the sheet".to_owned())?;
        out.insert(CellRef { row, col }, value);
    }
    r.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

pub(super) fn seal(raw: &[u8]) -> Result<Vec<u8>, SnapshotError> {
    let frame = zstd::bulk::compress(raw, 1)
        .map_err(|e| SnapshotError::Internal(format!("compressing values: {e}")))?;
    let mut blob = Vec::with_capacity(BLOB_MAGIC.len() + frame.len());
    blob.extend_from_slice(BLOB_MAGIC);
    blob.extend_from_slice(&frame);
    Ok(blob)
}

pub(super) fn unseal(key: &str, hash: &ChunkHash, blob: &[u8]) -> Result<Vec<u8>, SnapshotError> {
    open_framed(key, BLOB_MAGIC, "values blob", hash, blob, MAX_RAW_VALUES)
}

/// A chunk whose kept values a read may show.
#[derive(Debug, Clone)]
struct Usable {
    first_row: u32,
    last_row: u32,
    hash: ChunkHash,
}

/// The kept values a read at a snapshot plus the entries after it may show in place of
/// evaluating (see the module's header for when). Values blobs are fetched as rows need them and
/// kept for the read's life.
#[derive(Debug, Default)]
pub struct KeptValues {
    log_id: Uuid,
    /// By first row, not overlapping.
    usable: Vec<Usable>,
    loaded: Mutex<HashMap<ChunkHash, Arc<HashMap<CellRef, Value>>>>,
}

impl KeptValues {
    /// No kept values: every formula is evaluated.
    pub fn none() -> Self {
        Self::default()
    }

    /// The chunks of `base` whose kept values still hold after `entries` (which follow it). A
    /// missing or unreadable index gives none.
    pub async fn open(
        store: &dyn BlobStore,
        base: Option<&Manifest>,
        entries: &[LogEntry],
    ) -> Result<Self, SnapshotError> {
        let Some(base) = base else {
            return Ok(Self::none());
        };
        let Some(set) = set_cells(entries) else {
            return Ok(Self::none());
        };
        let key = values_key(base.log_id, base.seq);
        let Some(json) = store.get(&key).await? else {
            return Ok(Self::none());
        };
        let Ok(index) = serde_json::from_slice::<ValuesIndex>(&json) else {
            return Ok(Self::none());
        };
        if index.format != VALUES_FORMAT || index.log_id != base.log_id || index.seq != base.seq {
            return Ok(Self::none());
        }
        let starts = base.chunk_starts();
        let mut usable = Vec::new();
        for c in &index.chunks {
            let j = c.chunk as usize;
            let same_chunk = base.chunks.get(j).is_some_and(|m| m.hash == c.chunk_hash);
            let (Some(rows), Ok(area)) = (chunk_range(base, &starts, j), c.area.parse::<Range>())
            else {
                continue;
            };
            if same_chunk && !set.iter().any(|at| area.contains(*at)) {
                usable.push(Usable {
                    first_row: rows.start.row,
                    last_row: rows.end.row,
                    hash: c.hash,
                });
            }
        }
        Ok(KeptValues {
            log_id: base.log_id,
            usable,
            loaded: Mutex::default(),
        })
    }

    /// True when no chunk's values can be shown.
    pub fn is_empty(&self) -> bool {
        self.usable.is_empty()
    }

    /// `rows` with every formula whose kept value holds replaced by that value.
    pub async fn apply(
        &self,
        store: &dyn BlobStore,
        mut rows: Vec<Row>,
    ) -> Result<Vec<Row>, SnapshotError> {
        if self.usable.is_empty() {
            return Ok(rows);
        }
        for row in &mut rows {
            if !row
                .cells
                .iter()
                .any(|(_, c)| matches!(c.value, Value::Formula(_)))
            {
                continue;
            }
            let i = self.usable.partition_point(|u| u.last_row < row.index);
            let Some(u) = self.usable.get(i).filter(|u| u.first_row <= row.index) else {
                continue;
            };
            // Derived state: a values blob gone or damaged costs an evaluation, not the read.
            let values = match self.values(store, u).await {
                Ok(values) => values,
                Err(SnapshotError::MissingObject(_) | SnapshotError::Corrupt { .. }) => continue,
                Err(e) => return Err(e),
            };
            for (col, cell) in &mut row.cells {
                if !matches!(cell.value, Value::Formula(_)) {
                    continue;
                }
                let at = CellRef {
                    row: row.index,
                    col: *col,
                };
                if let Some(v) = values.get(&at) {
                    cell.value = v.clone();
                }
            }
        }
        Ok(rows)
    }

    async fn values(
        &self,
        store: &dyn BlobStore,
        u: &Usable,
    ) -> Result<Arc<HashMap<CellRef, Value>>, SnapshotError> {
        if let Some(v) = self.cache().get(&u.hash) {
            return Ok(Arc::clone(v));
        }
        let key = values_blob_key(self.log_id, &u.hash);
        let blob = store
            .get(&key)
            .await?
            .ok_or_else(|| SnapshotError::MissingObject(key.clone()))?;
        let raw = unseal(&key, &u.hash, &blob)?;
        let values = Arc::new(
            decode_values(u.first_row, &raw)
                .map_err(|reason| SnapshotError::Corrupt { key, reason })?,
        );
        self.cache().insert(u.hash, Arc::clone(&values));
        Ok(values)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<ChunkHash, Arc<HashMap<CellRef, Value>>>> {
        // A poisoned lock only means another read of this request panicked; the map is whole.
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The cells `entries` set, or `None` when an entry does anything else that can move or change
/// what a formula reads (a row or column edit, an import) or when they set too many cells to check.
fn set_cells(entries: &[LogEntry]) -> Option<Vec<CellRef>> {
    let mut out = Vec::new();
    for e in entries {
        for ev in e.entry.events() {
            match ev {
                Event::Set(s) => out.extend(s.cells.iter().map(|c| c.at)),
                _ => return None,
            }
        }
        if out.len() > MAX_TAIL_CELLS {
            return None;
        }
    }
    Some(out)
}
