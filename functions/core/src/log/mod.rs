//! The event-log algorithms (`docs/design.md`; layouts in `docs/storage.md`):
//! create, append with optimistic concurrency, start a new segment, load, and read since a
//! sequence. Generic over the storage ports ([`crate::ports`]), each block of methods over only those it uses; knows nothing about spreadsheets.
//!
//! Layout:
//! - `mod.rs`      — [`EventLog`], the types its operations return, shared helpers
//! - `segments.rs` — create a log, start a segment, record a completed snapshot
//! - `append.rs`   — append (with idempotency keys and rebasing) and the head lookups
//! - `read_chain.rs` — the read chain across segments and archives
//! - `load.rs`     — load, read since, read from, scan, resolving offloaded bodies
//! - `batch.rs`, `clients.rs` — sync client runs and group commit
//! - `pushed_mutation.rs` — one mutation as a sync client pushed it
//! - `rebase/`     — rebasing an edit made against an older view (`baseSeq`): an append's, a push's
//! - `range_index.rs` — clients' range items written after their group commit, a window at a time
//! - `trigger.rs`  — the snapshot trigger after every append (API and sync writer)
//! - `archive.rs`, `archive_cache.rs` — archived segments in S3, and the one a reader read last
//! - `purge.rs`    — deleting a log: tombstone, then every item and object, in pages
//! - `retry.rs`    — exponential backoff with full jitter for the append and segment loops

mod append;
#[cfg(feature = "engine")]
#[cfg(feature = "archive")]
pub mod archive;
mod archive_cache;
mod read_chain;
pub use archive_cache::ARCHIVE_KEEP;
mod load;
pub mod purge;
mod segments;
pub use segments::ForkOrigin;
// Client mutations are sheet events, so sync needs the engine; the stream router does without.
#[cfg(feature = "engine")]
mod batch;
#[cfg(feature = "engine")]
mod clients;
#[cfg(feature = "engine")]
mod pushed_mutation;
#[cfg(feature = "engine")]
mod range_index;
// Rebasing an edit needs the sheet model; without the engine nothing can ask for it.
mod rebase;
mod retry;
mod trigger;

#[cfg(feature = "engine")]
pub use batch::{BatchOutcome, ClientPush, ClientResult, KnownClients, MAX_KNOWN_CLIENTS};
#[cfg(feature = "engine")]
pub use clients::{Rejected, RunOutcome, RunSource, RunState, oversize_reason};
pub use load::RESOLVE_CONCURRENCY;
#[cfg(feature = "engine")]
pub use pushed_mutation::PushedMutation;
#[cfg(feature = "engine")]
pub use range_index::{INDEX_WINDOW, LoggedRun, Tail, index_due};
#[cfg(feature = "engine")]
pub use rebase::RebasedAppend;
#[cfg(feature = "engine")]
pub use rebase::push::MAX_REBASE_ENTRIES;
pub use retry::Backoff;
pub use trigger::{SnapshotTrigger, Triggered};

use bytes::Bytes;
use serde::Serialize;

use crate::config::LogConfig;
use crate::domain::dedupe::KeyKind;
use crate::domain::keys::now_secs;
use crate::domain::{Entry, EntryRecord, EntryType, LogId, RequestUnits};
use crate::error::LogError;
use crate::ports::{LogEntries, PayloadStore};

/// Where a log's newest segment starts. Callers that keep the hint from their last append skip
/// the Segment query. A stale hint is harmless: the segment it
/// names ends with an End Segment entry, which leads to the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SegmentHint {
    pub segment: u64,
    pub base_seq: u64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct AppendOptions {
    /// Fail with [`LogError::Conflict`] unless the entry would get exactly this sequence.
    pub expected_seq: Option<u64>,
    pub segment_hint: Option<SegmentHint>,
}

/// An idempotency key for [`EventLog::append_once`]: a client's key, or an upload id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub kind: KeyKind,
    pub key: String,
    /// What a request key stands for when that is the request rather than the entry it builds:
    /// an undo worked out again on a retry builds a different entry (the step it took back is
    /// gone from the stack), and must still be found as the same request. `None`: the entry.
    pub request: Option<[u8; crate::domain::dedupe::FINGERPRINT_BYTES]>,
}

impl IdempotencyKey {
    pub fn request(key: impl Into<String>) -> Self {
        Self {
            kind: KeyKind::Request,
            key: key.into(),
            request: None,
        }
    }

    /// A client's key for a request whose entry is worked out by the server and may differ on
    /// a retry: the key stands for `parts` (the request's own fields), not for the entry.
    pub fn for_request(key: impl Into<String>, parts: &[&[u8]]) -> Self {
        Self {
            kind: KeyKind::Request,
            key: key.into(),
            request: Some(crate::domain::dedupe::fingerprint(parts)),
        }
    }
    pub fn upload(id: impl Into<String>) -> Self {
        Self {
            kind: KeyKind::Upload,
            key: id.into(),
            request: None,
        }
    }
}

/// What [`EventLog::append_once`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum AppendOnce {
    /// The entry was appended now.
    Appended(Appended),
    /// The key was seen before with the same request: nothing was appended; `seq` is where the
    /// first request's entry is.
    Duplicate { seq: u64, units: RequestUnits },
}

impl AppendOnce {
    pub fn seq(&self) -> u64 {
        match self {
            AppendOnce::Appended(a) => a.seq,
            AppendOnce::Duplicate { seq, .. } => *seq,
        }
    }
    pub fn units(&self) -> RequestUnits {
        match self {
            AppendOnce::Appended(a) => a.units,
            AppendOnce::Duplicate { units, .. } => *units,
        }
    }
}

/// The source of "now" (Unix seconds): entry timestamps and the Dedupe table's month columns.
/// Tests swap it to cross month boundaries.
#[derive(Clone)]
pub struct Clock(std::sync::Arc<dyn Fn() -> i64 + Send + Sync>);

impl Clock {
    pub fn new(f: impl Fn() -> i64 + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(f))
    }
    pub fn now(&self) -> i64 {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new(now_secs)
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Created {
    pub log: LogId,
    pub seq: u64,
    pub units: RequestUnits,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Appended {
    pub seq: u64,
    pub segment: u64,
    pub entry: u64,
    /// The log's next free sequence right after this append.
    pub next_seq: u64,
    pub hint: SegmentHint,
    /// How many read-then-write rounds it took (1 when uncontended).
    pub attempts: u32,
    pub units: RequestUnits,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentStarted {
    /// The new segment's number.
    pub segment: u64,
    /// Sequence of the End Segment entry written into the previous segment.
    pub end_seq: u64,
    /// Sequence of the new segment's entry 0, its Snapshot entry.
    pub snapshot_seq: u64,
    pub next_seq: u64,
    pub hint: SegmentHint,
    pub units: RequestUnits,
}

/// What a load returns (`docs/design.md`, "Load and update"): the newest completed snapshot entry and every entry after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub snapshot: Entry,
    /// At most `page_size` entries after the snapshot.
    pub entries: Vec<Entry>,
    pub next_seq: u64,
    /// False when more entries follow: continue with `read_since(next_seq)`.
    pub complete: bool,
    pub units: RequestUnits,
}

/// A page of entries from a sequence onwards.
#[derive(Debug, Clone, PartialEq)]
pub struct EntriesPage {
    pub entries: Vec<Entry>,
    /// The sequence to ask for next.
    pub next_seq: u64,
    /// True when the page reached the end of the log as it was read.
    pub complete: bool,
    pub units: RequestUnits,
}

/// Where an entry is and what kind it is, without its body ([`EventLog::scan_from`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EntryMark {
    pub seq: u64,
    pub segment: u64,
    pub num: u64,
    pub kind: EntryType,
    /// Snapshot entries: the root manifest key once the snapshot is complete.
    pub snapshot_root: Option<String>,
}

/// A page of [`EntryMark`]s.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanPage {
    pub marks: Vec<EntryMark>,
    /// True when the page reached the end of the log as it was read.
    pub complete: bool,
}

/// One log table pair plus the payload bucket.
#[derive(Debug, Clone)]
pub struct EventLog<S, P> {
    store: S,
    payloads: P,
    cfg: LogConfig,
    clock: Clock,
    /// The archive read last, shared by the pages of a read (`read_chain.rs`).
    archives: archive_cache::ArchiveCache,
}

impl<S: LogEntries, P: PayloadStore> EventLog<S, P> {
    pub fn new(store: S, payloads: P, cfg: LogConfig) -> Result<Self, crate::config::ConfigError> {
        cfg.validate()?;
        Ok(Self {
            store,
            payloads,
            cfg,
            clock: Clock::default(),
            archives: archive_cache::ArchiveCache::default(),
        })
    }

    /// Replaces the clock (tests).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    pub fn config(&self) -> &LogConfig {
        &self.cfg
    }
    pub fn store(&self) -> &S {
        &self.store
    }
    pub fn payloads(&self) -> &P {
        &self.payloads
    }
}

fn internal_entry(segment: u64, num: u64, created: i64, kind: EntryType) -> EntryRecord {
    EntryRecord {
        segment,
        num,
        created,
        kind,
        version: 0,
        body: Some(Bytes::new()),
        external: None,
        snapshot_root: None,
        attempt: None,
    }
}

fn corrupt(log: LogId, detail: String) -> LogError {
    LogError::CorruptLog { log, detail }
}

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod clients_tests;
#[cfg(test)]
mod dedupe_tests;
#[cfg(test)]
mod range_index_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
