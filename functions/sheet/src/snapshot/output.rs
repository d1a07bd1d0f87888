//! The output side of a build: cutting the row stream into chunks, writing them, keeping the
//! chunk list (and writing it out in parts as it fills), and at the end streaming the manifest
//! from that list into the store.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::SnapshotError;
use super::chunk_list::{Piece, Pieces, records};
use super::format::{
    Appended, ChunkBuilder, ChunkEncoder, ChunkHash, ChunkRef, ChunkRows, EncodedRow,
    FORMAT_VERSION, Manifest, ManifestTotals, ManifestWriter, chunk_key, list_key, open_blob,
};
use super::store::{BlobError, BlobParts, BlobStore};
use super::stream::{Item, Span};
use crate::Row;
use crate::layout::Layout;

/// A checkpoint comes after every chunk while a build has written fewer than this many, then after
/// every `pieces / CHECKPOINT_SPACING` chunks.
const CHECKPOINT_SPACING: usize = 16;

/// Sealed chunks held until they are written together, each its own existence check and put, at
/// once: on S3 a chunk's two requests take tens of milliseconds that a build one chunk at a time
/// would wait out ~1,800 times for 10M cells, and a filesystem store's trip to the blocking pool
/// is a thread hand-off per call. At most this many compressed chunks are held (each at most
/// four times the target, so about 2 MiB at worst, ~200 KB usually).
pub(crate) const CHUNKS_IN_FLIGHT: usize = 8;

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
pub(crate) struct Output {
    log_id: Uuid,
    pub(crate) target: u32,
    min: u64,
    max: u64,
    /// The cut threshold per byte of row at the target size (see `is_cut`).
    per_byte: u64,
    acc: Option<ChunkBuilder>,
    /// The zstd context and buffers every chunk of the build reuses.
    enc: ChunkEncoder,
    /// First row of the next chunk (just past the last cut).
    pub(crate) next_start: u32,
    pub(crate) pieces: Pieces,
    /// The base's last chunk, held back: it ended at the end of the old sheet rather than at a
    /// cut, so it can be reused only if nothing follows it.
    pending_last: Option<Span>,
    base_last: Option<usize>,
    pub(crate) stats: BuildStats,
    /// Chunks cut since the last checkpoint.
    pub(crate) cuts_since_checkpoint: usize,
    /// Sealed chunks not yet written, by key ([`CHUNKS_IN_FLIGHT`]): written before the batch
    /// fills, before any checkpoint (which names them), and at the end.
    unwritten: Vec<(String, Bytes)>,
}

impl Output {
    pub(crate) fn new(
        log_id: Uuid,
        target: u32,
        base_last: Option<usize>,
    ) -> Result<Self, SnapshotError> {
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
            unwritten: Vec::new(),
        })
    }

    pub(crate) fn checkpoint_ready(&self) -> bool {
        // A checkpoint lists every piece so far, so one per chunk would cost the square of the
        // chunk count in a large build; one per `pieces / CHECKPOINT_SPACING` chunks costs a
        // constant factor of the last one, and loses at most that share of the work done.
        self.cuts_since_checkpoint >= self.checkpoint_due()
            && self.unwritten.is_empty()
            && self.acc.is_none()
            && self.pending_last.is_none()
            && self.pieces.next_full().is_none()
    }

    /// Chunks cut between checkpoints, at the current size.
    fn checkpoint_due(&self) -> usize {
        (self.pieces.len() / CHECKPOINT_SPACING).max(1)
    }

    /// Writes the sealed chunks held, all at once, skipping those already stored (content
    /// addressed: an unchanged chunk that had to be reread, or a rerun after a crash).
    async fn write_chunks(&mut self, store: &dyn BlobStore) -> Result<(), SnapshotError> {
        if self.unwritten.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.unwritten);
        let written =
            futures::future::try_join_all(batch.into_iter().map(|(key, blob)| async move {
                let len = blob.len() as u64;
                let wrote = store.put_if_absent(&key, blob).await?;
                Ok::<_, BlobError>(wrote.then_some(len))
            }))
            .await?;
        for len in written.into_iter().flatten() {
            self.stats.chunks_written += 1;
            self.stats.chunk_bytes_written += len;
        }
        Ok(())
    }

    pub(crate) async fn accept(
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
                    self.write_parts(store).await
                } else {
                    self.open_span(s, store, base).await
                }
            }
        }
    }

    /// Writes each full block of the chunk list to the store as a part, and drops it.
    async fn write_parts(&mut self, store: &dyn BlobStore) -> Result<(), SnapshotError> {
        while let Some(block) = self.pieces.next_full() {
            let hash = ChunkHash::of(block);
            // Content-addressed, so a rerun writes the same bytes to the same key.
            store
                .put(&list_key(self.log_id, &hash), Bytes::copy_from_slice(block))
                .await?;
            self.pieces.written(hash);
        }
        Ok(())
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
    pub(crate) async fn encoded_row(
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
        // The same chunk twice in one batch is written once (the second would have found the
        // first stored).
        if !self.unwritten.iter().any(|(k, _)| *k == key) {
            self.unwritten.push((key, Bytes::from(sealed.blob)));
        }
        self.next_start = start + sealed.chunk.rows;
        self.pieces.push(Piece::New(sealed.chunk));
        self.cuts_since_checkpoint += 1;
        // A checkpoint names every chunk before it, so none may be left unwritten once one is
        // due; `cuts_since_checkpoint` only grows until then, so every later chunk is written at
        // once too.
        if self.unwritten.len() >= CHUNKS_IN_FLIGHT
            || self.cuts_since_checkpoint >= self.checkpoint_due()
        {
            self.write_chunks(store).await?;
        }
        self.write_parts(store).await
    }

    pub(crate) async fn finish(&mut self, store: &dyn BlobStore) -> Result<(), SnapshotError> {
        if let Some(p) = self.pending_last.take() {
            self.reuse(p);
        }
        self.seal(store).await?;
        self.write_chunks(store).await?;
        self.write_parts(store).await
    }
}

/// A manifest this size or smaller is kept in the [`BuildResult`](super::BuildResult) as well
/// as written (a 10M-cell sheet's is about 77 KB); a larger one is only streamed to the store.
pub const KEPT_MANIFEST_BYTES: usize = 128 << 10;
/// The compressed manifest is handed to the store once this much of it is ready.
const MANIFEST_PART: usize = 64 << 10;

/// The stored manifest of a finished build as [`BlobParts`]: the chunk list's parts read back
/// from the store one at a time, then the pieces still in memory, listed through a
/// [`ManifestWriter`] whose output is handed out as it grows. What it wrote is in
/// [`finished`](Self::finished).
pub(crate) struct ManifestParts<'a> {
    store: &'a dyn BlobStore,
    key: &'a str,
    log_id: Uuid,
    base: Option<&'a Manifest>,
    /// What the manifest ends with.
    layout: Layout,
    writer: Option<ManifestWriter>,
    parts: std::vec::IntoIter<ChunkHash>,
    blocks: std::vec::IntoIter<Vec<u8>>,
    last: Option<Piece>,
    totals: Option<ManifestTotals>,
    /// Everything handed out, while it is at most [`KEPT_MANIFEST_BYTES`].
    kept: Option<Vec<u8>>,
    bytes: u64,
    /// Why the manifest could not be produced (the store sees only that it failed).
    failed: Option<SnapshotError>,
}

impl std::fmt::Debug for ManifestParts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManifestParts")
            .field("key", &self.key)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

/// What [`ManifestParts`] wrote.
#[derive(Debug)]
pub(crate) struct WrittenManifest {
    pub totals: ManifestTotals,
    pub bytes: u64,
    pub kept: Option<Vec<u8>>,
}

impl<'a> ManifestParts<'a> {
    pub(crate) fn new(
        store: &'a dyn BlobStore,
        key: &'a str,
        log_id: Uuid,
        seq: u64,
        chunk_target: u32,
        base: Option<&'a Manifest>,
        pieces: Pieces,
    ) -> Result<Self, SnapshotError> {
        let (parts, blocks, last) = pieces.into_parts();
        Ok(ManifestParts {
            store,
            key,
            log_id,
            base,
            layout: Layout::default(),
            writer: Some(ManifestWriter::new(
                FORMAT_VERSION,
                log_id,
                seq,
                chunk_target,
            )?),
            parts: parts.into_iter(),
            blocks: blocks.into_iter(),
            last,
            totals: None,
            kept: Some(Vec::new()),
            bytes: 0,
            failed: None,
        })
    }

    /// The manifest ends with `layout` (none by default).
    pub(crate) fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// What was written, once the store has pulled every part; the error that stopped it if
    /// one did.
    pub(crate) fn finished(self) -> Result<WrittenManifest, SnapshotError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let totals = self
            .totals
            .ok_or_else(|| SnapshotError::Internal("the manifest was not finished".into()))?;
        Ok(WrittenManifest {
            totals,
            bytes: self.bytes,
            kept: self.kept,
        })
    }

    /// The next part, or `None` at the end.
    async fn produce(&mut self) -> Result<Option<Vec<u8>>, SnapshotError> {
        loop {
            let Some(w) = self.writer.as_mut() else {
                return Ok(None);
            };
            if w.pending() >= MANIFEST_PART {
                return Ok(Some(w.take()));
            }
            if let Some(hash) = self.parts.next() {
                let block = self.read_part(&hash).await?;
                self.list_block(&block)?;
            } else if let Some(block) = self.blocks.next() {
                self.list_block(&block)?;
            } else if let Some(p) = self.last.take() {
                self.list(p)?;
            } else if let Some(w) = self.writer.take() {
                let (rest, totals) = w.finish(&self.layout)?;
                self.totals = Some(totals);
                return Ok(Some(rest));
            }
        }
    }

    /// A part of the chunk list, read back and checked against its name.
    async fn read_part(&self, hash: &ChunkHash) -> Result<Bytes, SnapshotError> {
        let key = list_key(self.log_id, hash);
        let bytes = self
            .store
            .get(&key)
            .await?
            .ok_or_else(|| SnapshotError::MissingObject(key.clone()))?;
        if ChunkHash::of(&bytes) != *hash {
            return Err(SnapshotError::Corrupt {
                key,
                reason: "the chunk list part does not match its name".into(),
            });
        }
        Ok(bytes)
    }

    fn list_block(&mut self, block: &[u8]) -> Result<(), SnapshotError> {
        for p in records(block) {
            let p = p.map_err(|e| SnapshotError::Internal(format!("chunk list: {e}")))?;
            self.list(p)?;
        }
        Ok(())
    }

    fn list(&mut self, p: Piece) -> Result<(), SnapshotError> {
        let w = self
            .writer
            .as_mut()
            .ok_or_else(|| SnapshotError::Internal("the manifest is already finished".into()))?;
        match p {
            Piece::New(c) => w.push(&c),
            Piece::Reused { from, to } => {
                let base = self.base.ok_or_else(|| {
                    SnapshotError::Internal("reused chunks without a base".into())
                })?;
                let reused = base.chunks.get(from..to).ok_or_else(|| {
                    SnapshotError::Internal("reused chunks past the base's end".into())
                })?;
                // A base of another log (a fork's first snapshot): its chunks stay where they
                // are, and the manifest says so.
                let owner = (base.log_id != self.log_id).then_some(base.log_id);
                for c in reused {
                    w.push(&ChunkRef {
                        log: c.log.or(owner),
                        ..c.clone()
                    })?;
                }
                Ok(())
            }
        }
    }
}

#[async_trait::async_trait]
impl BlobParts for ManifestParts<'_> {
    async fn next_part(&mut self) -> Result<Option<Bytes>, BlobError> {
        if self.failed.is_some() {
            return Err(BlobError::new(
                "put",
                self.key,
                "the manifest could not be produced",
            ));
        }
        match self.produce().await {
            Ok(Some(part)) => {
                self.bytes += part.len() as u64;
                if let Some(k) = &mut self.kept {
                    if k.len() + part.len() <= KEPT_MANIFEST_BYTES {
                        k.extend_from_slice(&part);
                    } else {
                        self.kept = None;
                    }
                }
                Ok(Some(Bytes::from(part)))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                let message = e.to_string();
                self.failed = Some(e);
                Err(BlobError::new("put", self.key, message))
            }
        }
    }
}
