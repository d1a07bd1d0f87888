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
pub use super::chunk_list::{Piece, Pieces};
use super::format::{ChunkRows, FORMAT_VERSION, Manifest, manifest_key, restore_manifest_key};
use super::import_reader::{EncodedRx, ImportMsg, ImportRx, spawn_encoded_import, spawn_import};
pub use super::output::{BuildStats, load_chunk};
use super::output::{ManifestParts, Output};
use super::store::{BlobStore, ImportSource};
use super::stream::{Item, Pipeline, Span, Stage};
use crate::entry::EntryBody;
use crate::event::{Event, Import, ImportFormat};
use crate::import::ImportPos;
use crate::layout::Layout;

/// Default chunk target: 64 KiB of raw (uncompressed) chunk bytes, about 18 KB stored.
///
/// The chunk an edit lands in is rewritten whole, and so is the manifest, so an edit costs about
/// one chunk plus the manifest. A typical cell is 10–15 raw bytes, so a 1,000,000-cell sheet is
/// ~12 MB raw: at 256 KiB (format 1) one chunk was 2.3% of it; at 64 KiB a chunk is ~0.55%
/// and the compressed manifest (176 chunks) ~0.23%, under 1% together. Smaller targets shrink the
/// chunk but grow the manifest and the object count: measured in `docs/sheet-model.md`.
/// Configurable per build.
pub const DEFAULT_CHUNK_TARGET: u32 = 64 << 10;

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

    /// An `import` of the file at `payload` (a key of the build's [`ImportSource`]).
    pub fn import(seq: u64, format: ImportFormat, payload: &str) -> Self {
        LogEntry {
            seq,
            entry: EntryBody::Event(Event::Import(Import {
                format,
                group: None,
                layout: None,
            })),
            payload: Some(payload.to_owned()),
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

/// A resumable build's state after a chunk, serde-serialisable and bounded whatever the sheet's
/// size: a few hundred bytes of fields, the chunk list's block being filled (about 60 bytes of
/// base64 per *new* chunk, at most ~44 KB), and a 64-digit name per part of the list already
/// written to the store (one per ~745 new chunks).
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
    /// The chunks so far: the parts of the list written to the store, named, and the records
    /// after them (about 44 bytes per new chunk, 60 in base64): see `chunk_list`. A resumed
    /// build reads the parts back from the store when it writes the manifest.
    pub pieces: Pieces,
    pub stats: BuildStats,
}

/// A finished build. It holds neither the chunk list nor, for a large sheet, the manifest (which
/// was streamed to the store): [`read_manifest`] reads it back, [`manifest`] decodes the copy a
/// small build keeps.
///
/// [`manifest`]: Self::manifest
/// [`read_manifest`]: Self::read_manifest
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildResult {
    pub manifest_key: String,
    /// The manifest object written at `manifest_key`, when it is at most
    /// [`KEPT_MANIFEST_BYTES`](super::output::KEPT_MANIFEST_BYTES) (a 10M-cell sheet's is about
    /// 77 KB); a larger one is only in the store.
    pub manifest_blob: Option<Bytes>,
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
    /// The manifest written, decoded from the copy kept of a small one; an error for a large
    /// one, which [`read_manifest`](Self::read_manifest) reads back from the store.
    pub fn manifest(&self) -> Result<Manifest, SnapshotError> {
        match &self.manifest_blob {
            Some(blob) => Manifest::from_bytes(&self.manifest_key, blob),
            None => Err(SnapshotError::Internal(format!(
                "manifest {} ({} bytes) was not kept: read it from the store",
                self.manifest_key, self.manifest_bytes
            ))),
        }
    }

    /// The manifest written: the copy kept of a small one, or read back from `store`.
    pub async fn read_manifest(&self, store: &dyn BlobStore) -> Result<Manifest, SnapshotError> {
        if self.manifest_blob.is_some() {
            return self.manifest();
        }
        let blob = store
            .get(&self.manifest_key)
            .await?
            .ok_or_else(|| SnapshotError::MissingObject(self.manifest_key.clone()))?;
        Manifest::from_bytes(&self.manifest_key, &blob)
    }
}

#[derive(Debug)]
pub enum Progress {
    /// Boxed: a checkpoint holds the chunk list's open block and its parts' names, several
    /// times the size of the other variant.
    Checkpoint(Box<Checkpoint>),
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
    /// Where the manifest goes: the log's snapshot at `out_seq`, or (for [`Self::restore`]) the
    /// state kept for `restore` entries.
    out_key: String,
    base: Option<Manifest>,
    /// The layout the manifest records: the base's, through the entries.
    layout: Layout,
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
        b.out_key = manifest_key(fork_id, 0);
        Ok(b)
    }

    /// The state of log `log_id` as of `seq`, from its snapshot `base` and its entries after it
    /// (already through [`super::resolve_restores`]), written where a `restore` entry to `seq`
    /// finds it ([`restore_manifest_key`]) rather than as a snapshot of the log. Chunks
    /// the entries leave alone are the base's; only what they touch is written.
    pub fn restore(
        store: &'a dyn BlobStore,
        payloads: &'a dyn ImportSource,
        config: BuildConfig,
        log_id: Uuid,
        seq: u64,
        base: Option<Manifest>,
        entries: impl IntoIterator<Item = LogEntry>,
    ) -> Result<Self, SnapshotError> {
        let mut b = Self::new(store, payloads, config, log_id, seq, base, entries)?;
        b.out_key = restore_manifest_key(log_id, seq);
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
        let mut layout = base.as_ref().map(|b| b.layout.clone()).unwrap_or_default();
        let (stages, import) = plan(from, seq, entries, &mut layout)?;
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
            out_key: manifest_key(log_id, seq),
            base,
            layout,
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

    /// Writes the chunk list out in parts of `bytes` (at least one record) rather than 32 KiB:
    /// for tests, so a small build writes out many parts. Any size gives the same snapshot.
    pub fn with_list_block(mut self, bytes: usize) -> Self {
        self.out.pieces.set_block(bytes);
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
                        return Ok(Progress::Checkpoint(Box::new(self.checkpoint())));
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
                return Ok(Progress::Checkpoint(Box::new(self.checkpoint())));
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
                Progress::Checkpoint(c) => on_checkpoint(*c),
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
        // The manifest is streamed into the store from the chunk list: its parts already
        // written are read back one at a time, and the compressed manifest goes out in parts as
        // it is produced, so a large build holds neither the list nor the manifest.
        let key = self.out_key.clone();
        let mut parts = ManifestParts::new(
            self.store,
            &key,
            self.log_id,
            self.out_seq,
            self.out.target,
            self.base.as_ref(),
            std::mem::take(&mut self.out.pieces),
        )?
        .with_layout(self.layout.clone());
        let put = self.store.put_parts(&key, &mut parts).await;
        let written = parts.finished()?;
        put?;
        let totals = written.totals;
        Ok(BuildResult {
            manifest_key: key,
            manifest_bytes: written.bytes,
            manifest_blob: written.kept.map(Bytes::from),
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
                    formulas: c.formulas > 0,
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
    layout: &mut Layout,
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
            layout.apply(ev);
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
                Event::Restore(_) => {
                    return Err(SnapshotError::BadInput(format!(
                        "the restore at sequence {} was not resolved (snapshot::resolve_restores)",
                        e.seq
                    )));
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
