//! The two ports of the snapshot engine — [`BlobStore`], which it writes manifests and chunks
//! through, and [`ImportSource`], which it reads import files through — and their local
//! implementations (in memory, filesystem). The S3 adapter of both lives in `sheetlog-core`
//! (`aws::s3`), so this crate never links an AWS SDK.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use super::format::is_list_key;
use crate::import::ReadSeek;

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A blob or import-file store failure, with the operation and key it happened on. The cause is
/// kept as the error's source (an adapter's own error, an I/O error), not flattened to text.
#[derive(Debug, thiserror::Error)]
#[error("blob store {op} {key:?}: {source}")]
pub struct BlobError {
    pub op: &'static str,
    pub key: String,
    #[source]
    pub source: BoxError,
}

impl BlobError {
    pub fn new(op: &'static str, key: &str, source: impl Into<BoxError>) -> Self {
        BlobError {
            op,
            key: key.to_owned(),
            source: source.into(),
        }
    }
}

/// Where snapshot manifests and chunks live. Keys are `/`-separated paths; values are immutable
/// once written (every key is derived from its content or from the snapshot it belongs to, so a
/// second `put` of a key always carries the same bytes).
///
/// Its implementations are the real stores: [`MemBlobs`], [`FsBlobs`] and the S3 adapter in
/// `sheetlog-core`. Everything that decorates a store (faults, counting, a test's recorder) is a
/// layer in `sheetlog-core` (`port! { impl BlobStore … }` in its `ports.rs`), which picks up a
/// method added here on its own; the engine takes `&dyn BlobStore`, so a shared
/// `Arc<dyn BlobStore>` is passed as `&*arc` and needs no forwarding implementation.
#[async_trait]
pub trait BlobStore: Send + Sync + fmt::Debug {
    async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError>;
    async fn get(&self, key: &str) -> Result<Option<Bytes>, BlobError>;
    async fn exists(&self, key: &str) -> Result<bool, BlobError>;
    /// Writes `bytes` at `key` unless an object is already there, which holds the same bytes
    /// (keys are named by their content or their snapshot); `true` when this call wrote it. A
    /// build writes every chunk this way. This default is [`exists`](Self::exists) and then
    /// [`put`](Self::put); a store that can do both in one request or one trip does (S3: a PUT
    /// with `If-None-Match: *`; files: one trip to the blocking pool).
    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool, BlobError> {
        if self.exists(key).await? {
            return Ok(false);
        }
        self.put(key, bytes).await?;
        Ok(true)
    }
    /// Writes one object from `parts`, pulled in order until it returns `None`, without holding
    /// it whole where the store allows: a large manifest is produced a piece at a time. Readers
    /// see the object only once it is complete (S3: one PUT, or a multipart upload completed at
    /// the end; files: a temporary file renamed into place). This default collects the parts and
    /// `put`s them.
    async fn put_parts(&self, key: &str, parts: &mut dyn BlobParts) -> Result<(), BlobError> {
        let mut all = Vec::new();
        while let Some(p) = parts.next_part().await? {
            all.extend_from_slice(&p);
        }
        self.put(key, Bytes::from(all)).await
    }
}

/// The bytes of one object, handed out a part at a time to [`BlobStore::put_parts`]. A part may
/// be any size, empty included; the store regroups them as it needs (S3 multipart uploads take
/// parts of at least 5 MiB).
#[async_trait]
pub trait BlobParts: Send {
    /// The next bytes of the object, or `None` after the last.
    async fn next_part(&mut self) -> Result<Option<Bytes>, BlobError>;
}

/// [`BlobParts`] over parts already in memory (tests, small objects).
#[derive(Debug)]
pub struct PartsOf<I>(pub I);

#[async_trait]
impl<I: Iterator<Item = Bytes> + Send> BlobParts for PartsOf<I> {
    async fn next_part(&mut self) -> Result<Option<Bytes>, BlobError> {
        Ok(self.0.next())
    }
}

/// Where import files (the external payloads of `import` entries) are read from. The reader is
/// seekable so a resumed import can continue from a checkpoint instead of the start.
#[async_trait]
pub trait ImportSource: Send + Sync + fmt::Debug {
    async fn open(&self, key: &str) -> Result<Box<dyn ReadSeek>, BlobError>;
}

/// Counters of what a store was asked to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteStats {
    pub puts: u64,
    pub bytes: u64,
}

/// An in-memory store that counts writes. With `discarding`, it remembers keys but drops the
/// bytes (for benchmarks that must not hold a whole sheet in memory); `get` then returns `None`,
/// except for the parts of a build's chunk list (`snapshots/<log>/lists/…`, see
/// [`list_key`](super::format::list_key)), which the build reads back to write its manifest.
#[derive(Debug, Default)]
pub struct MemBlobs {
    blobs: Mutex<BTreeMap<String, Bytes>>,
    keys: Mutex<BTreeSet<String>>,
    discard: bool,
    puts: AtomicU64,
    bytes: AtomicU64,
}

impl MemBlobs {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn discarding() -> Self {
        MemBlobs {
            discard: true,
            ..Self::default()
        }
    }

    pub fn stats(&self) -> WriteStats {
        WriteStats {
            puts: self.puts.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    pub fn reset_stats(&self) {
        self.puts.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
    }

    /// Every key written, sorted.
    pub fn keys(&self) -> Vec<String> {
        self.keys
            .lock()
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A copy of the stored blobs (for byte-for-byte comparisons in tests).
    pub fn snapshot(&self) -> BTreeMap<String, Bytes> {
        self.blobs.lock().map(|b| b.clone()).unwrap_or_default()
    }

    fn poisoned(op: &'static str, key: &str) -> BlobError {
        BlobError::new(op, key, "lock poisoned")
    }
}

#[async_trait]
impl BlobStore for MemBlobs {
    async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.keys
            .lock()
            .map_err(|_| Self::poisoned("put", key))?
            .insert(key.to_owned());
        if !self.discard || is_list_key(key) {
            self.blobs
                .lock()
                .map_err(|_| Self::poisoned("put", key))?
                .insert(key.to_owned(), bytes);
        }
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, BlobError> {
        Ok(self
            .blobs
            .lock()
            .map_err(|_| Self::poisoned("get", key))?
            .get(key)
            .cloned())
    }

    async fn exists(&self, key: &str) -> Result<bool, BlobError> {
        Ok(self
            .keys
            .lock()
            .map_err(|_| Self::poisoned("exists", key))?
            .contains(key))
    }

    /// Counted as one put of the whole object; a discarding store counts the parts' bytes
    /// without collecting them.
    async fn put_parts(&self, key: &str, parts: &mut dyn BlobParts) -> Result<(), BlobError> {
        if !self.discard {
            let mut all = Vec::new();
            while let Some(p) = parts.next_part().await? {
                all.extend_from_slice(&p);
            }
            return self.put(key, Bytes::from(all)).await;
        }
        let mut len = 0u64;
        while let Some(p) = parts.next_part().await? {
            len += p.len() as u64;
        }
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(len, Ordering::Relaxed);
        self.keys
            .lock()
            .map_err(|_| Self::poisoned("put", key))?
            .insert(key.to_owned());
        Ok(())
    }
}

/// A store in a directory: key `a/b/c` is the file `<root>/a/b/c`. Writes go to a temporary file
/// renamed into place, so a reader never sees half a blob.
#[derive(Debug, Clone)]
pub struct FsBlobs {
    root: PathBuf,
}

impl FsBlobs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FsBlobs { root: root.into() }
    }

    fn path(&self, key: &str) -> Result<PathBuf, BlobError> {
        // Keys come from this crate, but a `..` would escape the root, so refuse it outright.
        if key
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
        {
            return Err(BlobError::new("path", key, "not a valid key"));
        }
        Ok(self.root.join(key))
    }
}

#[async_trait]
impl BlobStore for FsBlobs {
    async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        let path = self.path(key)?;
        blocking("put", key, move || write_file(&path, &bytes)).await
    }

    /// One trip to the blocking pool for the check and the write, where `exists` and `put`
    /// take two (on one CPU each trip is a switch to another thread and back).
    async fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool, BlobError> {
        let path = self.path(key)?;
        blocking("put", key, move || {
            if path.try_exists()? {
                return Ok(false);
            }
            write_file(&path, &bytes)?;
            Ok(true)
        })
        .await
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, BlobError> {
        match tokio::fs::read(self.path(key)?).await {
            Ok(b) => Ok(Some(Bytes::from(b))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(BlobError::new("get", key, e)),
        }
    }

    async fn exists(&self, key: &str) -> Result<bool, BlobError> {
        tokio::fs::try_exists(self.path(key)?)
            .await
            .map_err(|e| BlobError::new("exists", key, e))
    }

    /// Each part is appended to a temporary file as it comes, and the file renamed into place
    /// after the last, so the object is never held whole and never seen half written. A failure
    /// removes the temporary file.
    async fn put_parts(&self, key: &str, parts: &mut dyn BlobParts) -> Result<(), BlobError> {
        let path = self.path(key)?;
        let tmp = path.with_extension(format!("tmp-{}", uuid::Uuid::new_v4()));
        let written = async {
            // The file goes to the blocking pool and back with each part, as `put` sends its
            // bytes there: plain `std::fs`, one trip per part, no second buffer.
            let create = tmp.clone();
            let mut file = blocking("put", key, move || {
                std::fs::create_dir_all(create.parent().unwrap_or(Path::new(".")))?;
                std::fs::File::create(&create)
            })
            .await?;
            while let Some(p) = parts.next_part().await? {
                file = blocking("put", key, move || {
                    use std::io::Write;
                    file.write_all(&p)?;
                    Ok(file)
                })
                .await?;
            }
            let (from, to) = (tmp.clone(), path);
            blocking("put", key, move || {
                drop(file);
                std::fs::rename(&from, &to)
            })
            .await
        }
        .await;
        if written.is_err() {
            // Best effort: the temporary file is garbage whatever happens to this removal.
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        written
    }
}

/// Writes a whole file: the directory, a temporary file and its rename into place (all in one
/// trip to the blocking pool: a build writes thousands of chunks, and each trip wakes a thread).
fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    let tmp = path.with_extension(format!("tmp-{}", uuid::Uuid::new_v4()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Runs `f` on the blocking pool, its failures as [`BlobError`]s of `op` on `key`.
async fn blocking<T: Send + 'static>(
    op: &'static str,
    key: &str,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, BlobError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BlobError::new(op, key, e))?
        .map_err(|e| BlobError::new(op, key, e))
}

/// Import payloads held in memory, by key.
#[derive(Debug, Default)]
pub struct MemImports {
    files: Mutex<BTreeMap<String, Bytes>>,
}

impl MemImports {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, key: &str) -> Option<Bytes> {
        self.files.lock().ok()?.get(key).cloned()
    }

    pub fn insert(&self, key: &str, bytes: impl Into<Bytes>) {
        if let Ok(mut f) = self.files.lock() {
            f.insert(key.to_owned(), bytes.into());
        }
    }
}

#[async_trait]
impl ImportSource for MemImports {
    async fn open(&self, key: &str) -> Result<Box<dyn ReadSeek>, BlobError> {
        let bytes = self
            .files
            .lock()
            .map_err(|_| BlobError::new("open", key, "lock poisoned"))?
            .get(key)
            .cloned()
            .ok_or_else(|| BlobError::new("open", key, "no such payload"))?;
        Ok(Box::new(std::io::Cursor::new(bytes)))
    }
}

/// Import payloads as files in a directory (key = path relative to it).
#[derive(Debug, Clone)]
pub struct FsImports {
    root: PathBuf,
}

impl FsImports {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FsImports { root: root.into() }
    }
}

#[async_trait]
impl ImportSource for FsImports {
    async fn open(&self, key: &str) -> Result<Box<dyn ReadSeek>, BlobError> {
        if key
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
        {
            return Err(BlobError::new("open", key, "not a valid key"));
        }
        let f =
            std::fs::File::open(self.root.join(key)).map_err(|e| BlobError::new("open", key, e))?;
        Ok(Box::new(std::io::BufReader::with_capacity(256 * 1024, f)))
    }
}
