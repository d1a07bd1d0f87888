//! The incremental, resumable snapshot builder.
//!
//! From the previous snapshot (or nothing) and the entries since, it streams the next snapshot
//! chunk by chunk. Memory holds the pending edits (one [`Stage`] per entry), at most one chunk of
//! the previous snapshot being rewritten, and the chunk being assembled — never the sheet.
//!
//! **Chunk boundaries are content-defined.** After each row, the chunk is cut when it holds at
//! least a quarter of the target size and a hash of the row's contents falls under a threshold
//! proportional to the row's size (stricter below the target, looser above it, so chunks stay
//! close to the target), or when it reaches four times the target. The decision depends only on the rows since the last cut, never on history, so:
//! - an incremental build and a from-scratch build of the same state give the same chunks, byte
//!   for byte (the builder passes an old chunk through unopened only when the cut before it falls
//!   where it did before, in which case rebuilding it would give the same bytes);
//! - an edit rewrites the chunk it lands in, and boundaries re-synchronise at the next cut, so
//!   chunks that grow past the target split and chunks that shrink merge with a neighbour.
//!
//! **Resumable.** After a chunk whose cut ends a source item, [`SnapshotBuilder::step`]
//! yields a [`Checkpoint`]: how far the source has been read, the chunks produced so far (old
//! ones as index ranges), and counters. It does so after every such chunk for the first 16, then
//! after about every sixteenth of the chunks so far, so checkpoints cost linear, not quadratic,
//! work in a large build. Every stage's state is a function of how far its input has
//! gone, so [`SnapshotBuilder::resume`] rebuilds it and continues to byte-identical output.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::SnapshotError;
use super::format::{
    Appended, ChunkBuilder, ChunkEncoder, ChunkRef, ChunkRows, EncodedRow, FORMAT_VERSION,
    Manifest, ManifestWriter, chunk_key, manifest_key, open_blob,
};
use super::import_reader::{EncodedRx, ImportMsg, ImportRx, spawn_encoded_import, spawn_import};
pub use super::pieces_codec::{Piece, Pieces};
use super::store::{BlobStore, ImportSource};
use super::stream::{Item, Pipeline, Span, Stage};
use crate::Row;
use crate::entry::EntryBody;
use crate::event::{Event, ImportFormat};
use crate::import::ImportPos;

/// Default chunk target: 64 KiB of raw (uncompressed) chunk bytes, about 18 KB stored.
///
/// The chunk an edit lands in is rewritten whole, and so is the manifest, so an edit costs about
/// one chunk plus the manifest. A typical cell is 10–15 raw bytes, so a 1,000,000-cell sheet is
/// ~12 MB raw: at 256 KiB (format 1) one chunk was 2.3% of it; at 64 KiB a chunk is ~0.55%
/// and the compressed manifest (176 chunks) ~0.23%, under 1% together. Smaller targets shrink the
/// chunk but grow the manifest and the object count: measured in `docs/sheet-model.md`.
/// Configurable per build.
pub const DEFAULT_CHUNK_TARGET: u32 = 64 << 10;
/// A checkpoint comes after every chunk while a build has written fewer than this many, then after
/// every `pieces / CHECKPOINT_SPACING` chunks.
const CHECKPOINT_SPACING: usize = 16;

/// One log entry as the builder takes it: its sequence, the decoded entry, and for an entry with
/// an external payload (an import file) the payload's key.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    pub seq: u64,
    pub entry: EntryBody,
    pub payload: Option<String>,
}

impl LogEntry {
    pub fn event(seq: u64, event: Event) -> Self {
        LogEntry {
            seq,
            entry: EntryBody::Event(event),
            payload: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildConfig {
    /// Target raw chunk size in bytes (chunks average this; min a quarter, max four times).
    pub chunk_target: u32,
}

impl Default for BuildConfig {
    fn default() -> Self {
        BuildConfig {
            chunk_target: DEFAULT_CHUNK_TARGET,
        }
    }
}

/// Counters of one build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildStats {
    /// Chunk blobs written (a chunk already in the store is not written again).
    pub chunks_written: u64,
    pub chunk_bytes_written: u64,
    /// Chunks of the previous snapshot taken over without being read.
    pub chunks_reused: u64,
    /// Chunks of the previous snapshot read and rewritten.
    pub chunks_opened: u64,
    /// Rows that went into new chunks.
    pub rows_encoded: u64,
}

/// A resumable build's state after a chunk. Small (a few hundred bytes plus about 60 bytes per
/// *new* chunk) and serde-serialisable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checkpoint {
    pub format: u32,
    pub log_id: Uuid,
    pub seq: u64,
    pub base_seq: Option<u64>,
    pub chunk_target: u32,
    /// The source (base chunks or import file) has delivered every row below this.
    pub consumed: u32,
    /// For an import source, where its reader resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportPos>,
    /// First row of the next chunk.
    pub next_chunk_start: u32,
    /// Compact in memory and on the wire (about 44 bytes per new chunk, 60 in base64): see
    /// `pieces_codec`. Shares the list's full 64 KiB blocks with the builder (a 100M-cell build
    /// lists ~18,000 chunks, 12 blocks), so handing out a checkpoint copies at most one block.
    pub pieces: Pieces,
    pub stats: BuildStats,
}

/// A finished build. It holds the manifest as stored (compressed, about 43 bytes a chunk), not
/// its chunk list, so a large build ends without the list in memory; [`manifest`] decodes it.
///
/// [`manifest`]: Self::manifest
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildResult {
    pub manifest_key: String,
    /// The manifest object written at `manifest_key`.
    pub manifest_blob: Bytes,
    pub manifest_bytes: u64,
    /// Rows the snapshot covers.
    pub rows: u32,
    pub cells: u64,
    /// Chunks the manifest lists, and the sum of their stored sizes.
    pub chunks: u64,
    pub stored_bytes: u64,
    pub stats: BuildStats,
}

impl BuildResult {
    /// The manifest written, decoded.
    pub fn manifest(&self) -> Result<Manifest, SnapshotError> {
        Manifest::from_bytes(&self.manifest_key, &self.manifest_blob)
    }
}

#[derive(Debug)]
pub enum Progress {
    Checkpoint(Checkpoint),
    Done(BuildResult),
}

/// Where rows come from.
#[derive(Debug)]
enum Source {
    Base {
        starts: Vec<u32>,
        next_chunk: usize,
        open: Option<ChunkRows>,
        /// Every chunk is rewritten (the base was built with other parameters).
        rebuild_all: bool,
    },
    Import {
        key: String,
        format: ImportFormat,
        rx: Option<ImportRx>,
    },
    /// An import with no stage after it (a from-scratch build of an imported sheet): the reader
    /// thread encodes rows straight into chunk bytes, and the builder only cuts and seals.
    EncodedImport {
        key: String,
        format: ImportFormat,
        rx: Option<EncodedRx>,
    },
    Empty,
}

/// Builds one snapshot. Drive it with [`step`](Self::step) until it returns `Done`.
#[derive(Debug)]
pub struct SnapshotBuilder<'a> {
    store: &'a dyn BlobStore,
    payloads: &'a dyn ImportSource,
    log_id: Uuid,
    seq: u64,
    /// The sequence the manifest is written for: `seq`, except for a fork's first snapshot
    /// (the source's state at `seq` becomes the fork's sequence 0).
    out_seq: u64,
    base: Option<Manifest>,
    pipeline: Pipeline,
    source: Source,
    /// Source rows below this are already in the output (set on resume; rows below it are skipped).
    skip_below: u32,
    consumed: u32,
    import_pos: Option<ImportPos>,
    out: Output,
    scratch: Vec<Item>,
    done: bool,
}

impl<'a> SnapshotBuilder<'a> {
    /// Starts a build of the snapshot at `seq` (the state of every entry before `seq`) from `base`
    /// (the previous snapshot, or `None` for an empty sheet) and the entries from `base.seq` (or 0)
    /// up to `seq - 1`, in order and without gaps.
    pub fn new(
        store: &'a dyn BlobStore,
        payloads: &'a dyn ImportSource,
        config: BuildConfig,
        log_id: Uuid,
        seq: u64,
        base: Option<Manifest>,
        entries: impl IntoIterator<Item = LogEntry>,
    ) -> Result<Self, SnapshotError> {
        if config.chunk_target < 64 {
            return Err(SnapshotError::BadInput(
                "chunk target must be at least 64 bytes".into(),
            ));
        }
        if let Some(b) = &base
            && b.log_id != log_id
        {
            return Err(SnapshotError::BadInput(format!(
                "base snapshot belongs to log {}, not {log_id}",
                b.log_id
            )));
        }
        Self::new_unchecked(store, payloads, config, log_id, seq, base, entries)
    }

    /// The first snapshot of a fork: the state of log `base.log_id` (or an empty sheet) at
    /// `source_seq`, from its snapshot `base` and its entries after it, written as sequence 0 of
    /// the fork `fork_id`. Chunks the entries leave alone stay in the source log's prefix and the
    /// manifest points at them; nothing is copied.
    pub fn fork(
        store: &'a dyn BlobStore,
        payloads: &'a dyn ImportSource,
        config: BuildConfig,
        fork_id: Uuid,
        source_seq: u64,
        base: Option<Manifest>,
        entries: impl IntoIterator<Item = LogEntry>,
    ) -> Result<Self, SnapshotError> {
        let mut b =
            Self::new_unchecked(store, payloads, config, fork_id, source_seq, base, entries)?;
        b.out_seq = 0;
        Ok(b)
    }

    fn new_unchecked(
        store: &'a dyn BlobStore,
        payloads: &'a dyn ImportSource,
        config: BuildConfig,
        log_id: Uuid,
        seq: u64,
        base: Option<Manifest>,
        entries: impl IntoIterator<Item = LogEntry>,
    ) -> Result<Self, SnapshotError> {
        let from = base.as_ref().map_or(0, |b| b.seq);
        let (stages, import) = plan(from, seq, entries)?;
        let source = match import {
            Some((key, format)) if stages.is_empty() => Source::EncodedImport {
                key,
                format,
                rx: None,
            },
            Some((key, format)) => Source::Import {
                key,
                format,
                rx: None,
            },
            None => match &base {
                Some(b) => Source::Base {
                    starts: b.chunk_starts(),
                    next_chunk: 0,
                    open: None,
                    rebuild_all: b.format != FORMAT_VERSION
                        || b.chunk_target != config.chunk_target,
                },
                None => Source::Empty,
            },
        };
        // An import replaces the base: nothing of it is reused.
        let reuse_base = matches!(
            source,
            Source::Base {
                rebuild_all: false,
                ..
            }
        );
        let base_last = base
            .as_ref()
            .filter(|_| reuse_base)
            .and_then(|b| b.chunks.len().checked_sub(1));
        Ok(SnapshotBuilder {
            store,
            payloads,
            log_id,
            seq,
            out_seq: seq,
            base,
            pipeline: Pipeline::new(stages),
            source,
            skip_below: 0,
            consumed: 0,
            import_pos: None,
            out: Output::new(log_id, config.chunk_target, base_last)?,
            scratch: Vec::new(),
            done: false,
        })
    }

    /// Reads an import the general way (a `Row` per row through the pipeline) even when no stage
    /// follows it, so tests can hold the encoded path against it byte for byte.
    #[cfg(test)]
    pub(crate) fn decoding_imports(mut self) -> Self {
        if let Source::EncodedImport { key, format, .. } = &self.source {
            self.source = Source::Import {
                key: key.clone(),
                format: *format,
                rx: None,
            };
        }
        self
    }

    /// Continues a build from a checkpoint, given the same base and entries as the original.
    #[allow(clippy::too_many_arguments)]
    pub fn resume(
        store: &'a dyn BlobStore,
        payloads: &'a dyn ImportSource,
        config: BuildConfig,
        log_id: Uuid,
        seq: u64,
        base: Option<Manifest>,
        entries: impl IntoIterator<Item = LogEntry>,
        checkpoint: &Checkpoint,
    ) -> Result<Self, SnapshotError> {
        let base_seq = base.as_ref().map(|b| b.seq);
        let mismatch = |what: &str| SnapshotError::CheckpointMismatch(what.to_owned());
        if checkpoint.format != FORMAT_VERSION {
            return Err(mismatch("format"));
        }
        if checkpoint.log_id != log_id || checkpoint.seq != seq {
            return Err(mismatch("log id or sequence"));
        }
        if checkpoint.base_seq != base_seq {
            return Err(mismatch("base snapshot"));
        }
        if checkpoint.chunk_target != config.chunk_target {
            return Err(mismatch("chunk target"));
        }
        let mut b = Self::new(store, payloads, config, log_id, seq, base, entries)?;
        let import = matches!(
            b.source,
            Source::Import { .. } | Source::EncodedImport { .. }
        );
        if import != checkpoint.import.is_some() {
            return Err(mismatch("source kind"));
        }
        let base_chunks = b.base.as_ref().map_or(0, |m| m.chunks.len());
        for p in checkpoint.pieces.iter() {
            if let Piece::Reused { from, to } = p.map_err(|_| mismatch("chunk list"))?
                && (from >= to || to > base_chunks)
            {
                return Err(mismatch("reused chunk range"));
            }
        }
        b.pipeline.skip_to(checkpoint.consumed);
        b.skip_below = checkpoint.consumed;
        b.consumed = checkpoint.consumed;
        b.import_pos = checkpoint.import;
        b.out.next_start = checkpoint.next_chunk_start;
        b.out.pieces = checkpoint.pieces.clone();
        b.out.stats = checkpoint.stats;
        Ok(b)
    }

    /// Runs until the next checkpoint or the end.
    pub async fn step(&mut self) -> Result<Progress, SnapshotError> {
        if self.done {
            return Err(SnapshotError::BadInput("the build is already done".into()));
        }
        if matches!(self.source, Source::EncodedImport { .. }) {
            return self.step_encoded().await;
        }
        loop {
            match self.next_source_item().await? {
                Some(item) => {
                    self.pipeline.push(item, &mut self.scratch)?;
                    for it in std::mem::take(&mut self.scratch) {
                        self.out.accept(it, self.store, self.base.as_ref()).await?;
                    }
                    if self.out.checkpoint_ready() {
                        // A checkpoint says every source row below `consumed` is in the output;
                        // stages may still hold rows they owe below that bound: emit them first.
                        self.pipeline.advance(self.consumed, &mut self.scratch)?;
                        for it in std::mem::take(&mut self.scratch) {
                            self.out.accept(it, self.store, self.base.as_ref()).await?;
                        }
                    }
                    if self.out.checkpoint_ready() {
                        self.out.cuts_since_checkpoint = 0;
                        return Ok(Progress::Checkpoint(self.checkpoint()));
                    }
                }
                None => {
                    self.pipeline.finish(&mut self.scratch)?;
                    for it in std::mem::take(&mut self.scratch) {
                        self.out.accept(it, self.store, self.base.as_ref()).await?;
                    }
                    let result = self.finish().await?;
                    self.done = true;
                    return Ok(Progress::Done(result));
                }
            }
        }
    }

    /// [`step`](Self::step) for an encoded import: there are no stages, so rows go from the
    /// reader's batches to the chunk being assembled without being decoded.
    async fn step_encoded(&mut self) -> Result<Progress, SnapshotError> {
        let Source::EncodedImport { key, format, rx } = &mut self.source else {
            return Err(SnapshotError::Internal("not an encoded import".into()));
        };
        if rx.is_none() {
            let reader = self.payloads.open(key).await?;
            *rx = Some(spawn_encoded_import(
                *format,
                reader,
                self.import_pos.unwrap_or_default(),
            ));
        }
        let Some(rx) = rx else {
            return Err(SnapshotError::Internal("no import reader".into()));
        };
        loop {
            let more = rx.ready().await.map_err(|message| SnapshotError::Import {
                key: key.clone(),
                message,
            })?;
            if !more {
                break;
            }
            let (r, bytes) = rx.take();
            self.import_pos = Some(r.pos);
            if r.index < self.skip_below {
                continue;
            }
            self.consumed = r.index + 1;
            self.out
                .encoded_row(r.index, bytes, r.row, self.store)
                .await?;
            // No stage holds rows back, so a chunk boundary is a checkpoint as it stands.
            if self.out.checkpoint_ready() {
                self.out.cuts_since_checkpoint = 0;
                return Ok(Progress::Checkpoint(self.checkpoint()));
            }
        }
        let result = self.finish().await?;
        self.done = true;
        Ok(Progress::Done(result))
    }

    /// Runs the whole build, handing each checkpoint to `on_checkpoint`.
    pub async fn run(
        mut self,
        mut on_checkpoint: impl FnMut(Checkpoint),
    ) -> Result<BuildResult, SnapshotError> {
        loop {
            match self.step().await? {
                Progress::Checkpoint(c) => on_checkpoint(c),
                Progress::Done(r) => return Ok(r),
            }
        }
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            format: FORMAT_VERSION,
            log_id: self.log_id,
            seq: self.seq,
            base_seq: self.base.as_ref().map(|b| b.seq),
            chunk_target: self.out.target,
            consumed: self.consumed,
            import: self.import_pos,
            next_chunk_start: self.out.next_start,
            pieces: self.out.pieces.clone(),
            stats: self.out.stats,
        }
    }

    async fn finish(&mut self) -> Result<BuildResult, SnapshotError> {
        self.out.finish(self.store).await?;
        // The chunk list is streamed from the compact pieces into the compressed manifest, and
        // the pieces dropped before it is stored: a large build never holds the list decoded.
        let pieces = std::mem::take(&mut self.out.pieces);
        let mut w = ManifestWriter::new(
            FORMAT_VERSION,
            self.log_id,
            self.out_seq,
            self.out.target,
            pieces.chunks(),
        )?;
        let base = self.base.as_ref();
        let log_id = self.log_id;
        pieces.drain(
            |e| SnapshotError::Internal(format!("chunk list: {e}")),
            |p| match p {
                Piece::New(c) => w.push(&c),
                Piece::Reused { from, to } => {
                    let base = base.ok_or_else(|| {
                        SnapshotError::Internal("reused chunks without a base".into())
                    })?;
                    let reused = base.chunks.get(from..to).ok_or_else(|| {
                        SnapshotError::Internal("reused chunks past the base's end".into())
                    })?;
                    // A base of another log (a fork's first snapshot): its chunks stay where
                    // they are, and the manifest says so.
                    let owner = (base.log_id != log_id).then_some(base.log_id);
                    for c in reused {
                        w.push(&ChunkRef {
                            log: c.log.or(owner),
                            ..c.clone()
                        })?;
                    }
                    Ok(())
                }
            },
        )?;
        let (blob, totals) = w.finish()?;
        let blob = Bytes::from(blob);
        let key = manifest_key(self.log_id, self.out_seq);
        self.store.put(&key, blob.clone()).await?;
        Ok(BuildResult {
            manifest_key: key,
            manifest_bytes: blob.len() as u64,
            manifest_blob: blob,
            rows: u32::try_from(totals.rows)
                .map_err(|_| SnapshotError::Internal("row overflow".into()))?,
            cells: totals.cells,
            chunks: totals.chunks,
            stored_bytes: totals.stored_bytes,
            stats: self.out.stats,
        })
    }

    async fn next_source_item(&mut self) -> Result<Option<Item>, SnapshotError> {
        match &mut self.source {
            Source::Empty => Ok(None),
            Source::Base {
                starts,
                next_chunk,
                open,
                rebuild_all,
            } => loop {
                if let Some(rows) = open {
                    match rows.next_row().map_err(|e| SnapshotError::Corrupt {
                        key: "base chunk".into(),
                        reason: e.to_string(),
                    })? {
                        Some(r) if r.index < self.skip_below => continue,
                        Some(r) => {
                            self.consumed = r.index + 1;
                            return Ok(Some(Item::Row(r)));
                        }
                        None => *open = None,
                    }
                }
                let Some(base) = self.base.as_ref() else {
                    return Ok(None);
                };
                let j = *next_chunk;
                let (Some(c), Some(start)) = (base.chunks.get(j), starts.get(j)) else {
                    return Ok(None);
                };
                *next_chunk += 1;
                let span = Span {
                    chunk: j,
                    start: *start,
                    rows: c.rows,
                    max_col: c.max_col,
                };
                let end = start + c.rows;
                if end <= self.skip_below {
                    continue;
                }
                if *rebuild_all || !self.pipeline.span_is_clean(&span) {
                    *open = Some(load_chunk(self.store, base, c, *start).await?);
                    self.out.stats.chunks_opened += 1;
                    continue;
                }
                self.consumed = end;
                return Ok(Some(Item::Span(span)));
            },
            Source::EncodedImport { .. } => Err(SnapshotError::Internal(
                "an encoded import is read by step_encoded".into(),
            )),
            Source::Import { key, format, rx } => {
                if rx.is_none() {
                    let reader = self.payloads.open(key).await?;
                    *rx = Some(spawn_import(
                        *format,
                        reader,
                        self.import_pos.unwrap_or_default(),
                    ));
                }
                let Some(rx) = rx else { return Ok(None) };
                loop {
                    match rx.recv().await {
                        Some(ImportMsg::Row(r, pos)) => {
                            self.import_pos = Some(pos);
                            if r.index < self.skip_below {
                                continue;
                            }
                            self.consumed = r.index + 1;
                            return Ok(Some(Item::Row(r)));
                        }
                        Some(ImportMsg::Failed(message)) => {
                            return Err(SnapshotError::Import {
                                key: key.clone(),
                                message,
                            });
                        }
                        None => return Ok(None),
                    }
                }
            }
        }
    }
}

/// Checks the entries and turns them into stages; an import resets everything before it and
/// becomes the source.
#[allow(clippy::type_complexity)]
pub(crate) fn plan<E: std::borrow::Borrow<LogEntry>>(
    from: u64,
    seq: u64,
    entries: impl IntoIterator<Item = E>,
) -> Result<(Vec<Stage>, Option<(String, ImportFormat)>), SnapshotError> {
    let mut stages = Vec::new();
    let mut import = None;
    let mut expect = from;
    for e in entries {
        let e: &LogEntry = e.borrow();
        if e.seq != expect {
            return Err(SnapshotError::BadInput(format!(
                "expected the entry at sequence {expect}, got {}",
                e.seq
            )));
        }
        if e.seq >= seq {
            return Err(SnapshotError::BadInput(format!(
                "entry {} is not before the snapshot at {seq}",
                e.seq
            )));
        }
        expect += 1;
        for ev in e.entry.events() {
            match ev {
                Event::Import(i) => {
                    let key = e.payload.clone().ok_or_else(|| {
                        SnapshotError::BadInput(format!(
                            "import entry {} has no payload key",
                            e.seq
                        ))
                    })?;
                    stages.clear();
                    import = Some((key, i.format));
                }
                other => stages.extend(Stage::new(other)),
            }
        }
    }
    if expect != seq {
        return Err(SnapshotError::BadInput(format!(
            "entries stop at {expect}, the snapshot is at {seq}"
        )));
    }
    Ok((stages, import))
}

/// Loads and verifies one chunk of snapshot `manifest`, ready to stream its rows.
pub async fn load_chunk(
    store: &dyn BlobStore,
    manifest: &Manifest,
    chunk: &ChunkRef,
    start: u32,
) -> Result<ChunkRows, SnapshotError> {
    let key = chunk.key(manifest.log_id, manifest.format);
    let blob = store
        .get(&key)
        .await?
        .ok_or_else(|| SnapshotError::MissingChunk(key.clone()))?;
    let raw = open_blob(&key, &chunk.hash, &blob)?;
    ChunkRows::new(raw, start).map_err(|e| SnapshotError::Corrupt {
        key,
        reason: e.to_string(),
    })
}

/// The output side: cuts the row stream into chunks and writes them.
#[derive(Debug)]
struct Output {
    log_id: Uuid,
    target: u32,
    min: u64,
    max: u64,
    /// The cut threshold per byte of row at the target size (see `is_cut`).
    per_byte: u64,
    acc: Option<ChunkBuilder>,
    /// The zstd context and buffers every chunk of the build reuses.
    enc: ChunkEncoder,
    /// First row of the next chunk (just past the last cut).
    next_start: u32,
    pieces: Pieces,
    /// The base's last chunk, held back: it ended at the end of the old sheet rather than at a
    /// cut, so it can be reused only if nothing follows it.
    pending_last: Option<Span>,
    base_last: Option<usize>,
    stats: BuildStats,
    /// Chunks cut since the last checkpoint.
    cuts_since_checkpoint: usize,
}

impl Output {
    fn new(log_id: Uuid, target: u32, base_last: Option<usize>) -> Result<Self, SnapshotError> {
        let min = u64::from(target) / 4;
        let max = u64::from(target) * 4;
        Ok(Output {
            log_id,
            target,
            min,
            max,
            per_byte: u64::MAX / u64::from(target),
            acc: None,
            enc: ChunkEncoder::new()?,
            next_start: 0,
            pieces: Pieces::default(),
            pending_last: None,
            base_last,
            stats: BuildStats::default(),
            cuts_since_checkpoint: 0,
        })
    }

    fn checkpoint_ready(&self) -> bool {
        // A checkpoint lists every piece so far, so one per chunk would cost the square of the
        // chunk count in a large build; one per `pieces / CHECKPOINT_SPACING` chunks costs a
        // constant factor of the last one, and loses at most that share of the work done.
        let due = (self.pieces.len() / CHECKPOINT_SPACING).max(1);
        self.cuts_since_checkpoint >= due && self.acc.is_none() && self.pending_last.is_none()
    }

    async fn accept(
        &mut self,
        item: Item,
        store: &dyn BlobStore,
        base: Option<&Manifest>,
    ) -> Result<(), SnapshotError> {
        if let Some(p) = self.pending_last.take() {
            self.open_span(p, store, base).await?;
        }
        match item {
            Item::Row(r) => self.row(r, store).await,
            Item::Span(s) => {
                let aligned = self.acc.is_none() && s.start == self.next_start;
                if aligned && Some(s.chunk) == self.base_last {
                    self.pending_last = Some(s);
                    Ok(())
                } else if aligned {
                    self.reuse(s);
                    Ok(())
                } else {
                    self.open_span(s, store, base).await
                }
            }
        }
    }

    fn reuse(&mut self, s: Span) {
        self.pieces.push_reused(s.chunk);
        self.next_start = s.start + s.rows;
        self.stats.chunks_reused += 1;
    }

    async fn open_span(
        &mut self,
        s: Span,
        store: &dyn BlobStore,
        base: Option<&Manifest>,
    ) -> Result<(), SnapshotError> {
        let (base, chunk) = base
            .and_then(|b| Some((b, b.chunks.get(s.chunk)?)))
            .ok_or_else(|| SnapshotError::Internal(format!("span of unknown chunk {}", s.chunk)))?;
        let mut rows = load_chunk(store, base, chunk, s.start).await?;
        self.stats.chunks_opened += 1;
        while let Some(r) = rows.next_row().map_err(|e| SnapshotError::Corrupt {
            key: chunk.key(base.log_id, base.format),
            reason: e.to_string(),
        })? {
            self.row(r, store).await?;
        }
        Ok(())
    }

    async fn row(&mut self, row: Row, store: &dyn BlobStore) -> Result<(), SnapshotError> {
        let appended = self.chunk().push(&row)?;
        self.appended(appended, store).await
    }

    /// A row encoded by the import reader ([`RowWriter`]): the same bytes [`Self::row`] would
    /// have encoded.
    async fn encoded_row(
        &mut self,
        index: u32,
        bytes: &[u8],
        row: EncodedRow,
        store: &dyn BlobStore,
    ) -> Result<(), SnapshotError> {
        let appended = self.chunk().push_encoded(index, bytes, row)?;
        self.appended(appended, store).await
    }

    /// The chunk being assembled, begun at the next start if there is none.
    fn chunk(&mut self) -> &mut ChunkBuilder {
        let start = self.next_start;
        let enc = &mut self.enc;
        self.acc
            .get_or_insert_with(|| ChunkBuilder::new_in(start, enc))
    }

    async fn appended(
        &mut self,
        row: Appended,
        store: &dyn BlobStore,
    ) -> Result<(), SnapshotError> {
        self.stats.rows_encoded += 1;
        let size = self.acc.as_ref().map_or(0, ChunkBuilder::raw_len);
        if self.is_cut(size, row) {
            self.seal(store).await?;
        }
        Ok(())
    }

    /// The boundary rule. A row ends a chunk with a probability proportional to its size, so a
    /// cut is expected once per `target` bytes; like FastCDC's normalised chunking, the odds are
    /// 16 times lower before the target size and 16 times higher after it, which keeps chunk
    /// sizes close to the target (an edit's cost is the size of the chunk it lands in, so a
    /// narrow spread matters more than the mean). Hard bounds: `min` and `max`.
    fn is_cut(&self, size: u64, row: Appended) -> bool {
        if size < self.min {
            return false;
        }
        if size >= self.max {
            return true;
        }
        let per_byte = if size < u64::from(self.target) {
            self.per_byte / 16
        } else {
            self.per_byte.saturating_mul(16)
        };
        row.content_hash < row.size.saturating_mul(per_byte)
    }

    async fn seal(&mut self, store: &dyn BlobStore) -> Result<(), SnapshotError> {
        let Some(acc) = self.acc.take() else {
            return Ok(());
        };
        let start = acc.start;
        let sealed = acc.finish(&mut self.enc)?;
        let key = chunk_key(self.log_id, &sealed.chunk.hash, FORMAT_VERSION);
        // Content-addressed: a chunk already stored (an unchanged chunk that had to be reread, or
        // a rerun after a crash) is not written again.
        if !store.exists(&key).await? {
            self.stats.chunks_written += 1;
            self.stats.chunk_bytes_written += sealed.blob.len() as u64;
            store.put(&key, Bytes::from(sealed.blob)).await?;
        }
        self.next_start = start + sealed.chunk.rows;
        self.pieces.push(Piece::New(sealed.chunk));
        self.cuts_since_checkpoint += 1;
        Ok(())
    }

    async fn finish(&mut self, store: &dyn BlobStore) -> Result<(), SnapshotError> {
        if let Some(p) = self.pending_last.take() {
            self.reuse(p);
        }
        self.seal(store).await
    }
}
