//! The snapshot format: chunk bytes, chunk blobs, the manifest, and the object keys.
//!
//! A chunk is a contiguous run of rows. Its raw bytes are
//! `varint row-count-stored, then per row: varint gap, varint cell-count, then per cell:
//! varint column-gap and the cell (sheet::codec)`, where a row's *gap* is its index relative to the
//! end of the previous row in the chunk (the first row's gap is its position relative to the
//! chunk's first covered row) and a cell's column gap is likewise relative to the previous cell.
//! Nothing in a chunk is absolute, so rows inserted or deleted above a chunk leave its bytes alone.
//!
//! The blob stored for a chunk is `b"SLC1"` followed by one zstd frame of the raw bytes; its key is
//! `snapshots/<log>/chunks/v3/<sha256 of the raw bytes, hex>` from format 3 on
//! (`snapshots/<log>/chunks/<hash>` before). The manifest is JSON at
//! `snapshots/<log>/manifests/<seq, 20 digits>.json`, stored as one zstd frame of that JSON from
//! format 2 on (format 1 stored the JSON itself; [`Manifest::from_bytes`] reads every format).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::SnapshotError;
use crate::codec::{self, CodecError, Reader, StyleRefs, StyleTable, Writer};
use crate::layout::Layout;
use crate::limits::{MAX_COLS, MAX_ROWS};
use crate::{Cell, Row};

/// Bumped if the chunk bytes, the blob framing, the manifest encoding or the chunk-boundary rule
/// ever change; a builder treats a base snapshot of another format as if every chunk had changed,
/// and a checkpoint of another format is not resumed.
///
/// - 1: JSON manifest, 256 KiB default chunk target.
/// - 2: the manifest object is a zstd frame of the same JSON (a manifest lists every chunk, and an
///   incremental snapshot writes it whole, so its size counts against every small edit); the
///   default chunk target is 64 KiB. Chunk bytes and blobs are unchanged, so a format-1 snapshot
///   still reads.
/// - 3: chunk blobs are compressed at zstd level 1, not 3 (compression was the largest cost of a
///   build). Chunks are named by their raw bytes, so a format-2 blob of the same chunk would have
///   the same hash: format-3 chunks live under `chunks/v3/`, so a builder that finds a chunk's
///   key already stored (and skips writing it) never finds a blob of another format there, and
///   every snapshot stays byte-identical to a from-scratch build. The manifest lists its chunks
///   before its totals (`rows`, `cells`), so a builder streams it into the compressor instead of
///   holding the list decoded ([`ManifestWriter`]), at level 1 with a 128 KiB window (format 2:
///   level 3 and its 2 MiB window), so writing a manifest needs that window and the compressed
///   output, and a reader refuses a frame that asks for more than format 2's window.
pub const FORMAT_VERSION: u32 = 3;
/// The first bytes of a zstd frame (RFC 8878), which no JSON text starts with.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// Refuse to inflate a manifest past this: a sheet of 1,048,576 one-row chunks lists ~160 MB.
const MAX_RAW_MANIFEST: usize = 256 << 20;
/// The largest zstd window a manifest may need to be read: format 2's (level 3 streaming, 2 MiB).
/// A frame that declares more is refused before anything is allocated for it.
const MAX_MANIFEST_WINDOW_LOG: u32 = 21;
/// The window a format-3 manifest is compressed with: 128 KiB. What repeats in a manifest (field
/// names, small numbers) repeats within a chunk entry or two, so a larger window buys nothing
/// measurable (a 10M-cell manifest at level 3: 80,755 bytes with this window, 81,288 as format 2
/// stored it).
const MANIFEST_WINDOW_LOG: u32 = 17;
/// The level format-3 manifests are compressed at. A manifest is mostly hex hashes, which no
/// level compresses much past their entropy: with the 128 KiB window, a 10M-cell manifest (1,766
/// chunks) is 77,322 bytes at level 1 and 80,755 at level 3 (81,288 in format 2), and level 1's
/// tables are a few KB where level 3's are about 1 MB.
const MANIFEST_ZSTD_LEVEL: i32 = 1;
/// Format 2's level for chunks and manifests (and format 1's for chunks), kept to write old
/// formats in tests.
const LEGACY_ZSTD_LEVEL: i32 = 3;
const BLOB_MAGIC: &[u8; 4] = b"SLC1";
/// Room kept at the front of a chunk's body for its row count (a varint of at most 10 bytes).
const ROW_COUNT_ROOM: usize = 10;
/// Level 1 (zstd's `fast` strategy) against format 2's level 3, measured on a 10M-cell build on
/// one core: 0.88-0.92 against 0.95-1.06 CPU-seconds, 15.5% more stored bytes, range reads
/// unchanged (`docs/sheet-model.md`, "Measured").
const ZSTD_LEVEL: i32 = 1;
/// Refuse to inflate a chunk past this: a chunk is a few MB unless a single row is enormous, and
/// the largest legal row (16,384 cells of 32,767 chars) is under 2 GiB only barely; 1 GiB keeps a
/// corrupt blob from exhausting memory while admitting every realistic row.
const MAX_RAW_CHUNK: usize = 1 << 30;

/// The manifest: everything needed to find and place every chunk of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    pub log_id: Uuid,
    /// The snapshot holds the state of every entry before this sequence.
    pub seq: u64,
    /// The chunk target size (raw bytes) the chunk boundaries were chosen for.
    pub chunk_target: u32,
    /// Listed before the totals, so a builder can write the JSON as it produces chunks
    /// ([`ManifestWriter`]); readers of every format take the fields in any order.
    pub chunks: Vec<ChunkRef>,
    /// Rows covered: the last non-empty row's index plus one.
    pub rows: u32,
    pub cells: u64,
    /// Column widths, row heights and frozen panes (`crate::layout`), when any are set.
    #[serde(default, skip_serializing_if = "Layout::is_default")]
    pub layout: Layout,
}

/// A chunk's name: the SHA-256 of its raw bytes. Held as the 32 bytes (a large manifest lists
/// tens of thousands of chunks, and a hex `String` each cost three times the memory); written as
/// 64 lowercase hex digits, in the manifest's JSON and in the chunk's key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkHash(pub [u8; 32]);

impl ChunkHash {
    pub fn of(raw: &[u8]) -> Self {
        ChunkHash(Sha256::digest(raw).into())
    }
}

impl std::fmt::Display for ChunkHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut hex = [0u8; 64];
        // Cannot fail: the output is exactly twice the input.
        hex::encode_to_slice(self.0, &mut hex).map_err(|_| std::fmt::Error)?;
        f.write_str(std::str::from_utf8(&hex).map_err(|_| std::fmt::Error)?)
    }
}

impl std::fmt::Debug for ChunkHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChunkHash({self})")
    }
}

impl std::str::FromStr for ChunkHash {
    type Err = hex::FromHexError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut h = [0u8; 32];
        hex::decode_to_slice(s, &mut h)?;
        Ok(ChunkHash(h))
    }
}

impl Serialize for ChunkHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ChunkHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One chunk as the manifest records it. Its first covered row is the sum of `rows` of the
/// chunks before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChunkRef {
    /// SHA-256 of the raw chunk bytes (hex in JSON).
    pub hash: ChunkHash,
    /// Rows covered, from the first covered row through the chunk's last (non-empty) row.
    pub rows: u32,
    pub cells: u64,
    /// The highest column used in the chunk (lets a column edit to its right skip it).
    pub max_col: u32,
    /// Formula cells in the chunk. A structural edit anywhere may rewrite their references, so
    /// a chunk with formulas is opened by every row or column insert and delete after it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub formulas: u64,
    /// Size of the stored blob.
    pub bytes: u64,
    pub raw_bytes: u64,
    /// The log whose prefix stores the blob, when not the manifest's own: a fork's snapshots
    /// share the unchanged chunks of the log it was forked from instead of copying them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<Uuid>,
}

impl ChunkRef {
    /// Where the blob is stored, for a chunk of a manifest of `log_id`.
    /// `format` is the manifest's: chunk keys moved in format 3.
    pub fn key(&self, log_id: Uuid, format: u32) -> String {
        chunk_key(self.log.unwrap_or(log_id), &self.hash, format)
    }
}

pub fn manifest_key(log_id: Uuid, seq: u64) -> String {
    format!("snapshots/{log_id}/manifests/{seq:020}.json")
}

/// Where the state as of sequence `seq` of log `log_id` is kept for `restore` entries
/// (`restore.rs`). The state as of a sequence never changes, so the key needs no more than the
/// two, and restoring the same version twice writes the same object.
pub fn restore_manifest_key(log_id: Uuid, seq: u64) -> String {
    format!("snapshots/{log_id}/restores/{seq:020}.json")
}

/// The key of one part of a build's chunk list (its compact records, as a checkpoint carries
/// them), named by the SHA-256 of its bytes: a large build writes its list to the store in
/// parts as it goes, so neither its memory nor its checkpoints hold the whole list. Nothing but
/// the build's checkpoints refers to these, and the manifest is the list's only lasting form.
pub fn list_key(log_id: Uuid, hash: &ChunkHash) -> String {
    format!("snapshots/{log_id}/lists/{hash}")
}

/// Whether `key` is one of [`list_key`]'s.
pub fn is_list_key(key: &str) -> bool {
    key.strip_prefix("snapshots/")
        .and_then(|k| k.split_once('/'))
        .is_some_and(|(_, rest)| rest.starts_with("lists/"))
}

/// The key of a chunk of a snapshot of `format`.
pub fn chunk_key(log_id: Uuid, hash: &ChunkHash, format: u32) -> String {
    if format < 3 {
        format!("snapshots/{log_id}/chunks/{hash}")
    } else {
        format!("snapshots/{log_id}/chunks/v3/{hash}")
    }
}

impl Manifest {
    /// An empty sheet's manifest.
    pub fn empty(log_id: Uuid, seq: u64, chunk_target: u32) -> Self {
        Manifest {
            format: FORMAT_VERSION,
            log_id,
            seq,
            chunk_target,
            rows: 0,
            cells: 0,
            chunks: Vec::new(),
            layout: Layout::default(),
        }
    }

    /// Canonical JSON: struct order, no whitespace, trailing newline. Same manifest, same bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// The stored object: the canonical JSON, compressed for format 2 and later. Same manifest,
    /// same bytes: for format 3, what [`ManifestWriter`] writes as a builder lists the chunks.
    pub fn to_blob(&self) -> Result<Vec<u8>, SnapshotError> {
        if self.format < 2 {
            return Ok(self.to_bytes());
        }
        if self.format >= 3 {
            let mut w = ManifestWriter::new(self.format, self.log_id, self.seq, self.chunk_target)?;
            for c in &self.chunks {
                w.push(c)?;
            }
            let (blob, totals) = w.finish(&self.layout)?;
            if totals.rows != u64::from(self.rows) || totals.cells != self.cells {
                return Err(SnapshotError::Internal(
                    "manifest totals differ from its chunks".into(),
                ));
            }
            return Ok(blob);
        }
        // Format 2: streamed into the compressor at the level's own window.
        use std::io::Write;
        let internal = |e: std::io::Error| SnapshotError::Internal(format!("zstd: {e}"));
        let mut z =
            zstd::stream::write::Encoder::new(Vec::new(), LEGACY_ZSTD_LEVEL).map_err(internal)?;
        serde_json::to_writer(&mut z, self)
            .map_err(|e| SnapshotError::Internal(format!("manifest: {e}")))?;
        z.write_all(b"\n").map_err(internal)?;
        z.finish().map_err(internal)
    }

    /// Reads a stored manifest of any format: JSON, or a zstd frame of JSON.
    pub fn from_bytes(key: &str, b: &[u8]) -> Result<Self, SnapshotError> {
        Self::from_bytes_within(key, b, MAX_RAW_MANIFEST)
    }

    /// [`from_bytes`](Self::from_bytes) with the limit on the inflated JSON as a parameter, so
    /// tests can pass a limit without inflating hundreds of MB.
    pub(crate) fn from_bytes_within(
        key: &str,
        b: &[u8],
        max_raw: usize,
    ) -> Result<Self, SnapshotError> {
        let bad = |reason: String| SnapshotError::BadManifest {
            key: key.to_owned(),
            reason,
        };
        let inflated;
        let json = if b.starts_with(&ZSTD_MAGIC) {
            use std::io::Read;
            let mut raw = Vec::new();
            let mut decoder =
                zstd::stream::read::Decoder::new(b).map_err(|e| bad(e.to_string()))?;
            decoder
                .window_log_max(MAX_MANIFEST_WINDOW_LOG)
                .map_err(|e| bad(e.to_string()))?;
            decoder
                .take(max_raw as u64 + 1)
                .read_to_end(&mut raw)
                .map_err(|e| bad(e.to_string()))?;
            if raw.len() > max_raw {
                return Err(bad("inflates past the manifest size limit".into()));
            }
            inflated = raw;
            &inflated[..]
        } else {
            b
        };
        let m: Manifest = serde_json::from_slice(json).map_err(|e| bad(e.to_string()))?;
        let covered: u64 = m.chunks.iter().map(|c| u64::from(c.rows)).sum();
        if covered != u64::from(m.rows) || m.rows > MAX_ROWS {
            return Err(SnapshotError::BadManifest {
                key: key.to_owned(),
                reason: format!("chunks cover {covered} rows, manifest says {}", m.rows),
            });
        }
        Ok(m)
    }

    /// The first covered row of each chunk.
    pub fn chunk_starts(&self) -> Vec<u32> {
        let mut at = 0u32;
        self.chunks
            .iter()
            .map(|c| {
                let s = at;
                at += c.rows;
                s
            })
            .collect()
    }

    pub fn stored_bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.bytes).sum()
    }

    /// The other logs whose chunks this manifest lists (a fork's snapshots share their
    /// source's), each once.
    pub fn other_logs(&self) -> std::collections::BTreeSet<Uuid> {
        self.chunks
            .iter()
            .filter_map(|c| c.log)
            .filter(|l| *l != self.log_id)
            .collect()
    }
}

/// Totals of a manifest [`ManifestWriter`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ManifestTotals {
    pub chunks: u64,
    pub rows: u64,
    pub cells: u64,
    /// Sum of the chunks' stored sizes.
    pub stored_bytes: u64,
}

/// Writes a format-3 manifest's stored form a chunk at a time: the canonical JSON of
/// [`Manifest`] (fields in struct order, chunks before the totals) streamed through a zstd
/// encoder with a 128 KiB window, so a builder holds neither the chunk list nor its JSON; it
/// takes the compressed output (about 43 bytes per chunk) as it grows and writes it out in parts.
pub struct ManifestWriter {
    z: zstd::stream::write::Encoder<'static, Vec<u8>>,
    totals: ManifestTotals,
}

impl std::fmt::Debug for ManifestWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManifestWriter")
            .field("totals", &self.totals)
            .finish_non_exhaustive()
    }
}

impl ManifestWriter {
    pub fn new(
        format: u32,
        log_id: Uuid,
        seq: u64,
        chunk_target: u32,
    ) -> Result<Self, SnapshotError> {
        use std::io::Write;
        let mut z = zstd::stream::write::Encoder::new(Vec::new(), MANIFEST_ZSTD_LEVEL)
            .map_err(zstd_error)?;
        z.window_log(MANIFEST_WINDOW_LOG).map_err(zstd_error)?;
        // serde_json writes a `Uuid` as a quoted string, as `Manifest` serialises it.
        write!(
            z,
            "{{\"format\":{format},\"logId\":\"{log_id}\",\"seq\":{seq},\"chunkTarget\":{chunk_target},\"chunks\":["
        )
        .map_err(zstd_error)?;
        Ok(ManifestWriter {
            z,
            totals: ManifestTotals::default(),
        })
    }

    /// Lists the next chunk.
    pub fn push(&mut self, c: &ChunkRef) -> Result<(), SnapshotError> {
        use std::io::Write;
        if self.totals.chunks > 0 {
            self.z.write_all(b",").map_err(zstd_error)?;
        }
        serde_json::to_writer(&mut self.z, c)
            .map_err(|e| SnapshotError::Internal(format!("manifest: {e}")))?;
        self.totals.chunks += 1;
        self.totals.rows += u64::from(c.rows);
        self.totals.cells += c.cells;
        self.totals.stored_bytes += c.bytes;
        Ok(())
    }

    /// Bytes of the stored manifest compressed so far and not yet taken.
    pub fn pending(&self) -> usize {
        self.z.get_ref().len()
    }

    /// Takes the stored manifest's bytes compressed so far, so a large one is written out as it
    /// is produced ([`finish`](Self::finish) returns the rest).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(self.z.get_mut())
    }

    /// Writes the totals and the layout and ends the frame: the rest of the stored manifest (all
    /// of it if nothing was taken), and what it lists.
    pub fn finish(mut self, layout: &Layout) -> Result<(Vec<u8>, ManifestTotals), SnapshotError> {
        use std::io::Write;
        let t = self.totals;
        if t.rows > u64::from(MAX_ROWS) {
            return Err(SnapshotError::Internal(format!(
                "chunks cover {} rows, more than a sheet has",
                t.rows
            )));
        }
        write!(self.z, "],\"rows\":{},\"cells\":{}", t.rows, t.cells).map_err(zstd_error)?;
        if !layout.is_default() {
            self.z.write_all(b",\"layout\":").map_err(zstd_error)?;
            serde_json::to_writer(&mut self.z, layout)
                .map_err(|e| SnapshotError::Internal(format!("manifest: {e}")))?;
        }
        self.z.write_all(b"}\n").map_err(zstd_error)?;
        Ok((self.z.finish().map_err(zstd_error)?, t))
    }
}

fn zstd_error(e: std::io::Error) -> SnapshotError {
    SnapshotError::Internal(format!("zstd: {e}"))
}

/// A chunk being assembled: rows are encoded as they arrive, so memory is the raw size.
#[derive(Debug)]
pub struct ChunkBuilder {
    /// First row this chunk covers (absolute).
    pub start: u32,
    body: Writer,
    rows: u64,
    cells: u64,
    formulas: u64,
    max_col: u32,
    /// Relative index just past the last row written.
    end: u32,
    scratch: Writer,
    /// The styles written so far, which later cells refer to by position (`codec::write_cell_in`).
    styles: StyleTable,
}

/// What appending a row did: the bytes it added, and the hash of its contents (not its position)
/// that the boundary rule looks at.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    pub size: u64,
    pub content_hash: u64,
}

/// What sealing chunks reuses from one chunk to the next: the zstd context (its tables cost
/// more to set up than a small chunk costs to compress) and the buffers.
pub struct ChunkEncoder {
    zstd: zstd::bulk::Compressor<'static>,
    spare: Option<(Writer, Writer)>,
}

impl std::fmt::Debug for ChunkEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkEncoder").finish_non_exhaustive()
    }
}

impl ChunkEncoder {
    pub fn new() -> Result<Self, SnapshotError> {
        Ok(ChunkEncoder {
            zstd: zstd::bulk::Compressor::new(ZSTD_LEVEL)
                .map_err(|e| SnapshotError::Internal(format!("zstd: {e}")))?,
            spare: None,
        })
    }
}

impl ChunkBuilder {
    pub fn new(start: u32) -> Self {
        Self::with_buffers(start, Writer::new(), Writer::new())
    }

    /// A chunk builder that reuses the buffers of the last chunk `enc` sealed.
    pub fn new_in(start: u32, enc: &mut ChunkEncoder) -> Self {
        match enc.spare.take() {
            Some((body, scratch)) => Self::with_buffers(start, body, scratch),
            None => Self::new(start),
        }
    }

    fn with_buffers(start: u32, mut body: Writer, scratch: Writer) -> Self {
        body.buf.clear();
        body.buf.resize(ROW_COUNT_ROOM, 0);
        ChunkBuilder {
            start,
            body,
            rows: 0,
            cells: 0,
            formulas: 0,
            max_col: 0,
            end: 0,
            scratch,
            styles: StyleTable::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Bytes of rows so far (the chunk's raw bytes less its leading row count).
    pub fn raw_len(&self) -> u64 {
        (self.body.len() - ROW_COUNT_ROOM) as u64
    }

    /// Appends a non-empty row whose index is at or after `start` and after every row so far.
    pub fn push(&mut self, row: &Row) -> Result<Appended, SnapshotError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.buf.clear();
        let encoded = encode_row(&mut scratch, row, &mut self.styles);
        let appended = encoded.and_then(|e| self.append(row.index, &scratch.buf, e));
        self.scratch = scratch;
        appended
    }

    /// Appends a row already encoded by [`RowWriter`] (`bytes`, without its gap): what
    /// [`push`](Self::push) does after encoding, so both give the same chunk bytes. A row with
    /// styles (an XLSX import's) is decoded and pushed: its cells must refer to the chunk's table
    /// of styles, which the encoder of one row could not know.
    pub fn push_encoded(
        &mut self,
        index: u32,
        bytes: &[u8],
        row: EncodedRow,
    ) -> Result<Appended, SnapshotError> {
        if row.styled > 0 {
            // Its styles refer to a table of its own; encoded again, they refer to the chunk's.
            let mut r = Reader::new(bytes);
            let cells = read_row_cells(&mut r, &mut StyleRefs::default())
                .and_then(|cells| r.finish().map(|()| cells))
                .map_err(|e| SnapshotError::Internal(format!("row {index} as encoded: {e}")))?;
            return self.push(&Row { index, cells });
        }
        self.append(index, bytes, row)
    }

    fn append(
        &mut self,
        index: u32,
        bytes: &[u8],
        row: EncodedRow,
    ) -> Result<Appended, SnapshotError> {
        let rel = index
            .checked_sub(self.start)
            .filter(|rel| self.rows == 0 || *rel >= self.end)
            .ok_or_else(|| {
                SnapshotError::Internal(format!(
                    "row {index} arrived out of order (chunk starts at {}, next free relative row {})",
                    self.start, self.end
                ))
            })?;
        if row.cells > 0 {
            self.max_col = self.max_col.max(row.max_col);
        }
        let before = self.body.len();
        self.body.varint(u64::from(rel - self.end));
        self.body.buf.extend_from_slice(bytes);
        self.rows += 1;
        self.cells += u64::from(row.cells);
        self.formulas += u64::from(row.formulas);
        self.end = rel + 1;
        Ok(Appended {
            size: (self.body.len() - before) as u64,
            content_hash: xxhash_rust::xxh3::xxh3_64(bytes),
        })
    }

    /// Finishes the chunk: raw bytes, their hash, the compressed blob, and its manifest entry.
    pub fn finish(self, enc: &mut ChunkEncoder) -> Result<SealedChunk, SnapshotError> {
        // The row count goes in the room left before the rows, so the raw bytes are one slice
        // of the body instead of a copy of it.
        let mut count = Writer::new();
        count.varint(self.rows);
        let at = ROW_COUNT_ROOM
            .checked_sub(count.len())
            .ok_or_else(|| SnapshotError::Internal("row count varint too long".into()))?;
        let mut body = self.body;
        body.buf[at..ROW_COUNT_ROOM].copy_from_slice(&count.buf);
        let raw = &body.buf[at..];
        let hash = ChunkHash::of(raw);
        let bound = zstd::zstd_safe::compress_bound(raw.len());
        let mut blob = std::io::Cursor::new(Vec::with_capacity(BLOB_MAGIC.len() + bound));
        blob.get_mut().extend_from_slice(BLOB_MAGIC);
        blob.set_position(BLOB_MAGIC.len() as u64);
        enc.zstd
            .compress_to_buffer(raw, &mut blob)
            .map_err(|e| SnapshotError::Internal(format!("zstd: {e}")))?;
        let mut blob = blob.into_inner();
        blob.shrink_to_fit();
        let raw_len = raw.len();
        enc.spare = Some((body, self.scratch));
        Ok(SealedChunk {
            chunk: ChunkRef {
                hash,
                rows: self.end,
                cells: self.cells,
                max_col: self.max_col,
                formulas: self.formulas,
                bytes: blob.len() as u64,
                raw_bytes: raw_len as u64,
                log: None,
            },
            blob,
        })
    }
}

/// What [`RowWriter::finish`] says about the row it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedRow {
    pub cells: u32,
    /// The highest column (0 for a row without cells).
    pub max_col: u32,
    /// How many of the cells are formulas.
    pub formulas: u32,
    /// How many of the cells have a style.
    pub styled: u32,
}

/// Writes one row in the chunk encoding, a cell at a time, at the end of a buffer: varint cell
/// count, then per cell varint column gap and the cell (`codec`). The count is not known until
/// the row ends, so one byte is reserved for it and the row is shifted in the rare case it needs
/// more (128 cells or more).
#[derive(Debug)]
pub struct RowWriter {
    start: usize,
    cells: u32,
    next_col: u32,
    max_col: u32,
    formulas: u32,
    styled: u32,
}

impl RowWriter {
    pub fn begin(w: &mut Writer) -> Self {
        let start = w.len();
        w.u8(0);
        RowWriter {
            start,
            cells: 0,
            next_col: 0,
            max_col: 0,
            formulas: 0,
            styled: 0,
        }
    }

    /// Writes the column gap of the cell at `col`; the caller writes the cell itself next.
    /// Columns must ascend.
    #[inline]
    pub fn cell(&mut self, w: &mut Writer, col: u32) -> Result<(), SnapshotError> {
        let Some(gap) = col.checked_sub(self.next_col) else {
            return Err(unsorted(col));
        };
        w.varint(u64::from(gap));
        self.cells += 1;
        self.next_col = col + 1;
        self.max_col = col;
        Ok(())
    }

    pub fn finish(self, w: &mut Writer) -> EncodedRow {
        if self.cells < 0x80 {
            w.buf[self.start] = self.cells as u8;
        } else {
            let mut count = Writer::new();
            count.varint(u64::from(self.cells));
            w.buf.splice(self.start..self.start + 1, count.buf);
        }
        EncodedRow {
            cells: self.cells,
            max_col: self.max_col,
            formulas: self.formulas,
            styled: self.styled,
        }
    }
}

#[cold]
fn unsorted(col: u32) -> SnapshotError {
    SnapshotError::Internal(format!("unsorted column {col}"))
}

/// Appends `row`'s cells to `w` in the chunk encoding (see [`RowWriter`]), styles referring to
/// `styles` (the chunk's table).
pub fn encode_row(
    w: &mut Writer,
    row: &Row,
    styles: &mut StyleTable,
) -> Result<EncodedRow, SnapshotError> {
    let mut rw = RowWriter::begin(w);
    for (col, cell) in &row.cells {
        rw.cell(w, *col).map_err(|_| {
            SnapshotError::Internal(format!("row {} has unsorted columns", row.index))
        })?;
        codec::write_cell_in(w, cell, styles);
        if matches!(cell.value, crate::Value::Formula(_)) {
            rw.formulas += 1;
        }
        if cell.style.is_some() {
            rw.styled += 1;
        }
    }
    Ok(rw.finish(w))
}

/// A finished chunk ready to store.
#[derive(Debug)]
pub struct SealedChunk {
    pub chunk: ChunkRef,
    pub blob: Vec<u8>,
}

/// Unpacks a chunk blob and checks it against the hash in its name.
pub fn open_blob(
    key: &str,
    expected_hash: &ChunkHash,
    blob: &[u8],
) -> Result<Vec<u8>, SnapshotError> {
    open_framed(key, BLOB_MAGIC, "chunk", expected_hash, blob, MAX_RAW_CHUNK)
}

/// Unpacks a blob of `magic` followed by one zstd frame (a chunk, or the values kept beside a
/// snapshot: `values.rs`), inflating at most `max_raw` bytes, and checks it against the hash in
/// its name. `what` names the kind in errors.
pub(crate) fn open_framed(
    key: &str,
    magic: &[u8; 4],
    what: &str,
    expected_hash: &ChunkHash,
    blob: &[u8],
    max_raw: usize,
) -> Result<Vec<u8>, SnapshotError> {
    let corrupt = |reason: String| SnapshotError::Corrupt {
        key: key.to_owned(),
        reason,
    };
    let frame = blob
        .strip_prefix(magic)
        .ok_or_else(|| corrupt(format!("not a sheetlog {what} (bad magic)")))?;
    let mut raw = Vec::new();
    let decoder = zstd::stream::read::Decoder::new(frame).map_err(|e| corrupt(e.to_string()))?;
    use std::io::Read;
    decoder
        .take(max_raw as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| corrupt(e.to_string()))?;
    if raw.len() > max_raw {
        return Err(corrupt(format!("inflates past the {what} size limit")));
    }
    let actual = ChunkHash::of(&raw);
    if actual != *expected_hash {
        return Err(corrupt(format!("content hash is {actual}")));
    }
    Ok(raw)
}

/// Decodes a chunk's raw bytes into rows with absolute indices (`start` + relative).
#[derive(Debug)]
pub struct ChunkRows {
    raw: Vec<u8>,
    pos: usize,
    left: u64,
    start: u32,
    next_rel: u64,
    styles: StyleRefs,
}

impl ChunkRows {
    pub fn new(raw: Vec<u8>, start: u32) -> Result<Self, CodecError> {
        let mut r = Reader::new(&raw);
        let left = r.varint()?;
        let pos = raw.len() - r.remaining();
        Ok(ChunkRows {
            raw,
            pos,
            left,
            start,
            next_rel: 0,
            styles: StyleRefs::default(),
        })
    }

    /// Decodes the next row, or `None` at the end (checking nothing is left over).
    pub fn next_row(&mut self) -> Result<Option<Row>, CodecError> {
        let mut r = Reader::new(&self.raw[self.pos..]);
        if self.left == 0 {
            r.finish()?;
            return Ok(None);
        }
        let rel = self.next_rel + r.varint()?;
        let index = u64::from(self.start) + rel;
        if index >= u64::from(MAX_ROWS) {
            return Err(CodecError::Invalid(format!(
                "row {index} is outside the sheet"
            )));
        }
        let cells = read_row_cells(&mut r, &mut self.styles)?;
        if cells.is_empty() {
            return Err(CodecError::Invalid("empty row stored".into()));
        }
        self.pos = self.raw.len() - r.remaining();
        self.left -= 1;
        self.next_rel = rel + 1;
        Ok(Some(Row {
            index: index as u32,
            cells,
        }))
    }
}

/// A row's cells as [`RowWriter`] wrote them (its cell count, then per cell its column gap and
/// the cell), styles referring to `refs`.
fn read_row_cells(
    r: &mut Reader<'_>,
    refs: &mut StyleRefs,
) -> Result<Vec<(u32, Cell)>, CodecError> {
    let n = r.varint_u32(MAX_COLS, "cells in a row")?;
    // Every cell takes at least two bytes, so a lying count cannot over-allocate.
    let mut cells: Vec<(u32, Cell)> = Vec::with_capacity((n as usize).min(r.remaining() / 2));
    let mut next_col = 0u64;
    for _ in 0..n {
        let col = next_col + r.varint()?;
        if col >= u64::from(MAX_COLS) {
            return Err(CodecError::Invalid(format!(
                "column {col} is outside the sheet"
            )));
        }
        cells.push((col as u32, codec::read_cell_in(r, refs)?));
        next_col = col + 1;
    }
    Ok(cells)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
