//! The chunked, content-addressed snapshot engine.
//!
//! A snapshot at sequence N is the sheet after every entry before N, stored as a JSON manifest
//! plus compressed chunks of contiguous rows, each chunk named by the hash of its contents so
//! consecutive snapshots share every unchanged chunk. The format is specified in `format.rs` and
//! `docs/sheet-model.md`.
//!
//! Layout:
//! - `store.rs` — the blob-store and import-file ports; in-memory and filesystem implementations
//!   (the S3 adapter of both is `sheetlog_core::aws::S3Bucket`).
//! - `format.rs` — chunk bytes, chunk blobs, the manifest, object keys.
//! - `stream.rs` — events as streaming row transforms ([`stream::Stage`]), position mapping.
//! - `builder.rs` — the incremental, resumable builder and its checkpoints.
//! - `output.rs` — the builder's output: chunk cuts and writes, the chunk list written out in
//!   parts as it fills (`chunk_list.rs` encodes it), the manifest streamed to the store.
//! - `import_reader.rs` — the import file read on a blocking thread, its rows handed to the
//!   builder decoded or already encoded as chunk bytes.
//! - `read.rs` — range reads at any sequence; loading manifests; materialising a snapshot.
//! - `diff.rs` — the cells that differ between two versions, a page at a time.
//! - `restore.rs` — `restore` entries: the restored state's manifest as the base of what follows.
//! - `values.rs` — formula values kept beside a snapshot, and when a read may show them.
//! - `shown.rs` — a range as a reader sees it: formulas replaced by their values, kept or
//!   evaluated.
//! - `xlsx_export.rs` — a version written as an XLSX workbook in bounded memory.

pub mod builder;
mod chunk_list;
pub mod diff;
pub mod format;
mod import_reader;
mod output;
pub mod read;
pub mod restore;
pub mod shown;
pub mod store;
pub mod stream;
pub mod values;
pub mod xlsx_export;

pub use builder::{
    BuildConfig, BuildResult, BuildStats, Checkpoint, DEFAULT_CHUNK_TARGET, LogEntry, Piece,
    Pieces, Progress, SnapshotBuilder,
};
pub use format::{
    ChunkHash, ChunkRef, FORMAT_VERSION, Manifest, ManifestTotals, ManifestWriter, chunk_key,
    list_key, manifest_key, restore_manifest_key,
};
pub use output::KEPT_MANIFEST_BYTES;
pub use read::{
    Extent, ReadBudget, ReadStats, extent, grid, layout_at, load_manifest, materialize, read_range,
    read_rows,
};
pub use restore::{resolve_restores, restored_manifest, restored_seq};
pub use shown::{ShownError, shown_rows};
pub use store::{
    BlobError, BlobParts, BlobStore, FsBlobs, FsImports, ImportSource, MemBlobs, MemImports,
    PartsOf, WriteStats,
};
pub use values::{KeptValues, ValuesIndex, ValuesReport, compute_values, values_key};

/// Why a snapshot could not be built or read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Store(#[from] BlobError),
    #[error("chunk {0} is missing from the store")]
    MissingChunk(String),
    /// A manifest, or a part of a build's chunk list, that should be in the store is not.
    #[error("object {0} is missing from the store")]
    MissingObject(String),
    #[error("chunk {key} is corrupt: {reason}")]
    Corrupt { key: String, reason: String },
    #[error("manifest {key} is unreadable: {reason}")]
    BadManifest { key: String, reason: String },
    #[error("import payload {key}: {message}")]
    Import { key: String, message: String },
    #[error("invalid build input: {0}")]
    BadInput(String),
    #[error("checkpoint does not belong to this build: {0} differs")]
    CheckpointMismatch(String),
    /// A read collected more than its [`read::ReadBudget`] allows (counts so far).
    #[error("the read passed its budget at {cells} cells, about {bytes} bytes")]
    OverBudget { cells: usize, bytes: usize },
    #[error("internal error: {0}")]
    Internal(String),
}

/// Builds a snapshot in one go (no checkpoints kept): see [`SnapshotBuilder`].
pub async fn build_snapshot(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    config: BuildConfig,
    log_id: uuid::Uuid,
    seq: u64,
    base: Option<Manifest>,
    entries: impl IntoIterator<Item = LogEntry>,
) -> Result<BuildResult, SnapshotError> {
    SnapshotBuilder::new(store, payloads, config, log_id, seq, base, entries)?
        .run(|_| {})
        .await
}

#[cfg(test)]
mod format_tests;
#[cfg(test)]
mod restore_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod values_tests;
