//! The event-log algorithms (`docs/design.md`; layouts in `docs/storage.md`):
//! create, append with optimistic concurrency, start a new segment, load, and read since a
//! sequence. Generic over [`LogStore`] and [`PayloadStore`]; knows nothing about spreadsheets.
//!
//! Layout:
//! - `mod.rs`   — [`EventLog`] and its operations
//! - `retry.rs` — exponential backoff with full jitter for the append and segment loops

#[cfg(feature = "engine")]
#[cfg(feature = "archive")]
pub mod archive;
pub mod purge;
// Client mutations are sheet events, so sync needs the engine; the stream router does without.
#[cfg(feature = "engine")]
mod batch;
#[cfg(feature = "engine")]
mod clients;
#[cfg(feature = "engine")]
mod push_rebase;
// Rebasing an edit needs the sheet model; without the engine nothing can ask for it.
#[cfg(feature = "engine")]
mod rebase;
#[cfg(not(feature = "engine"))]
#[path = "rebase_none.rs"]
mod rebase;
mod retry;
mod trigger;

#[cfg(feature = "engine")]
pub use batch::{BatchOutcome, ClientPush, ClientResult};
#[cfg(feature = "engine")]
pub use clients::{PushedMutation, Rejected, RunOutcome, RunSource, oversize_reason};
#[cfg(feature = "engine")]
pub use push_rebase::MAX_REBASE_ENTRIES;
#[cfg(feature = "engine")]
pub use rebase::RebasedAppend;
pub use trigger::{SnapshotTrigger, Triggered};

use bytes::Bytes;
use futures::StreamExt;
use serde::Serialize;
use tracing::{debug, info};

use crate::config::LogConfig;
use crate::domain::dedupe::{DedupeKey, DedupeRecord, KeyKind, MonthColumns, fingerprint};
use crate::domain::keys::{self, now_secs};
use crate::domain::{Entry, EntryRecord, EntryType, LogId, NewEntry, RequestUnits, SegmentRecord};
use crate::error::{LogError, StoreError};
use crate::ports::{
    Consistency, EntryPage, LogStore, OnceOutcome, PayloadStore, PutOutcome, TxOutcome,
};

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
}

impl IdempotencyKey {
    pub fn request(key: impl Into<String>) -> Self {
        Self {
            kind: KeyKind::Request,
            key: key.into(),
        }
    }
    pub fn upload(id: impl Into<String>) -> Self {
        Self {
            kind: KeyKind::Upload,
            key: id.into(),
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

/// The newest entry of the log and the segment it is in.
#[derive(Debug, Clone)]
struct Head {
    at: SegmentHint,
    newest: EntryRecord,
}

impl Head {
    fn next_num(&self) -> u64 {
        self.newest.num + 1
    }
    fn next_seq(&self) -> u64 {
        self.at.base_seq + self.next_num()
    }
}

/// Records read from the log, ready to have their bodies resolved.
struct Chain {
    records: Vec<(u64, EntryRecord)>,
    complete: bool,
}

/// One log table pair plus the payload bucket.
#[derive(Debug, Clone)]
pub struct EventLog<S, P> {
    store: S,
    payloads: P,
    cfg: LogConfig,
    clock: Clock,
}

impl<S: LogStore, P: PayloadStore> EventLog<S, P> {
    pub fn new(store: S, payloads: P, cfg: LogConfig) -> Result<Self, crate::config::ConfigError> {
        cfg.validate()?;
        Ok(Self {
            store,
            payloads,
            cfg,
            clock: Clock::default(),
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

    /// Creates a new log: segment 0 and its entry 0 (the Snapshot of the empty sheet) in one
    /// transaction. The empty snapshot needs no work, so segment 0 starts with it completed.
    pub async fn create(&self) -> Result<Created, LogError> {
        self.create_with_id(LogId::new_random()).await
    }

    pub async fn create_with_id(&self, log: LogId) -> Result<Created, LogError> {
        self.create_inner(log, None).await
    }

    /// Creates a log whose entry 0 is a completed snapshot already written under `root` (a
    /// fork: the state of another log at some sequence, `snapshot_input::fork_snapshot`).
    pub async fn create_fork(&self, log: LogId, root: String) -> Result<Created, LogError> {
        self.create_inner(log, Some(root)).await
    }

    async fn create_inner(&self, log: LogId, root: Option<String>) -> Result<Created, LogError> {
        let mut units = RequestUnits::default();
        let created = self.clock.now();
        let segment = SegmentRecord {
            num: 0,
            created,
            base_seq: 0,
            last_snapshot: Some(0),
            archive: None,
        };
        let first = EntryRecord {
            snapshot_root: root,
            ..internal_entry(0, 0, created, EntryType::SNAPSHOT)
        };
        let mut backoff = retry::Backoff::new(&self.cfg);
        for _ in 0..self.cfg.max_attempts {
            match self
                .store
                .create_log(log, &segment, &first, &mut units)
                .await?
            {
                TxOutcome::Committed => {
                    info!(log = %log, "created log");
                    return Ok(Created { log, seq: 0, units });
                }
                TxOutcome::Conflict => {
                    return Err(LogError::InvalidEntry(format!("log {log} already exists")));
                }
                // Cancelled by a concurrent request on the same items; nothing was written.
                TxOutcome::Interrupted => backoff.sleep().await,
            }
        }
        Err(LogError::Contention {
            log,
            attempts: self.cfg.max_attempts,
        })
    }

    /// Appends an entry (`docs/design.md`, "Append"): find the newest entry, then put at the next number
    /// on condition that it is free, retrying with backoff when another writer wins.
    pub async fn append(
        &self,
        log: LogId,
        entry: NewEntry,
        opts: AppendOptions,
    ) -> Result<Appended, LogError> {
        match self.append_inner(log, entry, opts, None, None).await? {
            AppendOnce::Appended(a) => Ok(a),
            AppendOnce::Duplicate { .. } => Err(corrupt(log, "a duplicate without a key".into())),
        }
    }

    /// Appends an entry at most once per idempotency key (`docs/design.md`, "Idempotency keys"):
    /// the entry and the key are written in one transaction, so a retry of the same request,
    /// within the key window, appends nothing and answers the first request's seq. The same key
    /// with a different entry is [`LogError::KeyReused`].
    pub async fn append_once(
        &self,
        log: LogId,
        entry: NewEntry,
        opts: AppendOptions,
        key: &IdempotencyKey,
    ) -> Result<AppendOnce, LogError> {
        self.append_inner(log, entry, opts, Some(key), None).await
    }

    /// Whether `key` already appended `entry` to `log` within the key window: a strong read of
    /// one Dedupe item (1 RRU under 4 KB), no write. `Some(Duplicate)` for the same request,
    /// [`LogError::KeyReused`] for a different one, `None` if the key is unknown. Callers use it
    /// to skip expensive work before [`EventLog::append_once`], which makes the real decision.
    pub async fn find_duplicate(
        &self,
        log: LogId,
        entry: &NewEntry,
        key: &IdempotencyKey,
    ) -> Result<Option<AppendOnce>, LogError> {
        self.find_record(self.dedupe_record(log, entry, key)).await
    }

    /// Whether upload `upload_id` was committed to `log` within the key window, and at which
    /// seq. An upload key stands for the upload, not for the entry its commit built (see
    /// [`Self::dedupe_record`]), so this needs nothing but the id: a retried commit finds its
    /// entry even after the uploaded object has expired.
    pub async fn find_upload(
        &self,
        log: LogId,
        upload_id: &str,
    ) -> Result<Option<AppendOnce>, LogError> {
        let key = IdempotencyKey::upload(upload_id);
        self.find_record(self.key_record(log, &key, upload_fingerprint(upload_id)))
            .await
    }

    async fn find_record(&self, rec: DedupeRecord) -> Result<Option<AppendOnce>, LogError> {
        let mut units = RequestUnits::default();
        match self
            .store
            .find_key(
                &rec.key,
                &rec.columns.checked,
                Consistency::Strong,
                &mut units,
            )
            .await?
        {
            Some(hit) => duplicate(&rec, hit.seq, hit.fingerprint, units).map(Some),
            None => Ok(None),
        }
    }

    /// The Dedupe record of a key for an entry, as of now. A request key's fingerprint covers the
    /// whole entry, so the same key with another request is caught. An upload key's covers only
    /// the upload id: the upload *is* the request, and each commit attempt copies the file to a
    /// fresh key of its own (so two racing commits build entries that differ in their payload
    /// key and are still one commit).
    fn dedupe_record(&self, log: LogId, entry: &NewEntry, key: &IdempotencyKey) -> DedupeRecord {
        let fp = match key.kind {
            KeyKind::Upload => upload_fingerprint(&key.key),
            KeyKind::Request => {
                let version = entry.version.to_be_bytes();
                let kind = entry.kind.0.to_be_bytes();
                let payload = entry.payload.as_deref().unwrap_or("").as_bytes();
                fingerprint(&[&kind, &version, &entry.body, payload])
            }
        };
        self.key_record(log, key, fp)
    }

    /// The Dedupe record of `key` with a fingerprint, as of now.
    fn key_record(
        &self,
        log: LogId,
        key: &IdempotencyKey,
        fingerprint: [u8; crate::domain::dedupe::FINGERPRINT_BYTES],
    ) -> DedupeRecord {
        DedupeRecord {
            key: DedupeKey::new(self.cfg.dedupe_prefix_bits, log, key.kind, &key.key),
            fingerprint,
            columns: MonthColumns::at(self.clock.now()),
        }
    }

    async fn append_inner(
        &self,
        log: LogId,
        entry: NewEntry,
        opts: AppendOptions,
        key: Option<&IdempotencyKey>,
        mut rebasing: Option<&mut rebase::Rebasing>,
    ) -> Result<AppendOnce, LogError> {
        if entry.kind == EntryType::END_SEGMENT {
            return Err(LogError::InvalidEntry(
                "End Segment entries are written only by start_segment".into(),
            ));
        }
        let mut units = RequestUnits::default();
        let dedupe = key.map(|k| self.dedupe_record(log, &entry, k));
        let (mut body, mut external) = self.place_body(log, &entry).await?;
        // What `body` holds, when rebasing may replace it between attempts.
        let mut placed = entry.body.clone();
        let created = self.clock.now();
        let attempt_id: u64 = rand::random();
        let mut hint = opts.segment_hint;
        let mut consistency = Consistency::Eventual;
        let mut backoff = retry::Backoff::new(&self.cfg);

        for attempt in 1..=self.cfg.max_attempts {
            let head = self.head(log, hint, consistency, &mut units).await?;
            let next_seq = head.next_seq();
            if let Some(expected) = opts.expected_seq
                && expected != next_seq
            {
                if consistency == Consistency::Eventual {
                    // An eventually consistent read may lag; confirm before reporting.
                    consistency = Consistency::Strong;
                    hint = Some(head.at);
                    continue;
                }
                // A retry of a request that did append: its expected seq is now behind, and the
                // key says where the first one landed.
                if let Some(rec) = &dedupe
                    && let Some(hit) = self
                        .store
                        .find_key(
                            &rec.key,
                            &rec.columns.checked,
                            Consistency::Strong,
                            &mut units,
                        )
                        .await?
                {
                    return duplicate(rec, hit.seq, hit.fingerprint, units);
                }
                return Err(LogError::Conflict { expected, next_seq });
            }
            if let Some(r) = rebasing.as_deref_mut() {
                match r.catch_up(self, log, next_seq, &mut units).await? {
                    rebase::CaughtUp::Yes => {
                        let now = r.entry();
                        if now.body != placed {
                            (body, external) = self.place_body(log, &now).await?;
                            placed = now.body;
                        }
                    }
                    rebase::CaughtUp::NotVisible => {
                        if consistency == Consistency::Strong && r.base() > next_seq {
                            return Err(LogError::OutOfRange {
                                from: r.base(),
                                next_seq,
                            });
                        }
                        // The head and the entries disagree (an eventually consistent read, or
                        // an entry written between the two): read both again, strongly.
                        consistency = Consistency::Strong;
                        hint = Some(head.at);
                        backoff.sleep().await;
                        continue;
                    }
                }
            }
            let record = EntryRecord {
                segment: head.at.segment,
                num: head.next_num(),
                created,
                kind: entry.kind,
                version: entry.version,
                body: body.clone(),
                external: external.clone(),
                snapshot_root: None,
                attempt: Some(attempt_id),
            };
            let outcome = match &dedupe {
                None => self.store.put_entry(log, &record, &mut units).await?,
                Some(rec) => {
                    match self
                        .store
                        .put_entry_once(log, &record, next_seq, rec, &mut units)
                        .await?
                    {
                        OnceOutcome::Written => PutOutcome::Written,
                        OnceOutcome::Taken(w) => PutOutcome::Taken(w),
                        // Our own write, seen again by a retry after a lost response.
                        OnceOutcome::Duplicate(hit, Some(w))
                            if w.attempt == Some(attempt_id) && hit.seq == next_seq =>
                        {
                            PutOutcome::Written
                        }
                        OnceOutcome::Duplicate(hit, _) => {
                            return duplicate(rec, hit.seq, hit.fingerprint, units);
                        }
                        OnceOutcome::Interrupted => {
                            consistency = Consistency::Strong;
                            hint = Some(head.at);
                            backoff.sleep().await;
                            continue;
                        }
                    }
                }
            };
            let outcome = match outcome {
                // The SDK retries a PutItem whose response was lost; the retry then fails its
                // condition against our own item. Recognise it, by this call's identity (never
                // by equal contents: another caller may append the same body in the same
                // second), rather than append twice.
                PutOutcome::Taken(Some(w)) if w.attempt == Some(attempt_id) => PutOutcome::Written,
                other => other,
            };
            match outcome {
                PutOutcome::Written => {
                    debug!(log = %log, seq = next_seq, attempt, "appended");
                    return Ok(AppendOnce::Appended(Appended {
                        seq: next_seq,
                        segment: head.at.segment,
                        entry: record.num,
                        next_seq: next_seq + 1,
                        hint: head.at,
                        attempts: attempt,
                        units,
                    }));
                }
                PutOutcome::Taken(winner) => {
                    if let Some(expected) = opts.expected_seq {
                        let now = self
                            .head(log, Some(head.at), Consistency::Strong, &mut units)
                            .await?;
                        return Err(LogError::Conflict {
                            expected,
                            next_seq: now.next_seq(),
                        });
                    }
                    // Back to the head query after the backoff. The winner returned with the
                    // failed condition is not necessarily the newest entry by the time we retry
                    // (continuing from it makes a writer that backed off for long crawl forward
                    // one number per attempt), but when it is an End Segment entry it tells us
                    // exactly where the next segment starts.
                    hint = Some(match winner {
                        Some(w) if w.is_end_segment() => SegmentHint {
                            segment: head.at.segment + 1,
                            base_seq: head.at.base_seq + w.num + 1,
                        },
                        _ => head.at,
                    });
                    // The number we lost exists; an eventually consistent read may still not
                    // show it, and a writer that keeps reading a stale head keeps losing. Read
                    // the head strongly from now on (1 read unit instead of 0.5, only when
                    // contended).
                    consistency = Consistency::Strong;
                    backoff.sleep().await;
                }
            }
        }
        Err(LogError::Contention {
            log,
            attempts: self.cfg.max_attempts,
        })
    }

    /// Decides where the body goes: inline, or to S3 first (discardable until this append commits).
    async fn place_body(
        &self,
        log: LogId,
        entry: &NewEntry,
    ) -> Result<(Option<Bytes>, Option<String>), LogError> {
        let size = entry.body.len();
        if size > self.cfg.max_body_bytes {
            return Err(LogError::BodyTooLarge {
                size,
                limit: self.cfg.max_body_bytes,
            });
        }
        if let Some(payload) = &entry.payload {
            if size > self.cfg.inline_body_max_bytes {
                return Err(LogError::BodyTooLarge {
                    size,
                    limit: self.cfg.inline_body_max_bytes,
                });
            }
            return Ok((Some(entry.body.clone()), Some(payload.clone())));
        }
        if size > self.cfg.inline_body_max_bytes {
            let key = keys::body_key(log);
            self.payloads
                .put_discardable(&key, entry.body.clone())
                .await?;
            return Ok((None, Some(key)));
        }
        Ok((Some(entry.body.clone()), None))
    }

    /// Starts a new segment (`docs/design.md`, "New segment"): End Segment into the current segment, the new Segment item
    /// and its Snapshot entry, in one conditional transaction. Refused until the current segment
    /// has a completed snapshot, so snapshots never pile up behind each other.
    pub async fn start_segment(&self, log: LogId) -> Result<SegmentStarted, LogError> {
        let mut units = RequestUnits::default();
        let mut consistency = Consistency::Eventual;
        let mut backoff = retry::Backoff::new(&self.cfg);
        for _ in 0..self.cfg.max_attempts {
            let current = self
                .store
                .newest_segments(log, 1, consistency, &mut units)
                .await?
                .into_iter()
                .next()
                .ok_or(LogError::LogNotFound(log))?;
            if current.last_snapshot.is_none() {
                return Err(LogError::SnapshotIncomplete {
                    log,
                    segment: current.num,
                });
            }
            let newest = self
                .store
                .newest_entry(log, current.num, consistency, &mut units)
                .await?
                .ok_or_else(|| corrupt(log, format!("segment {} has no entries", current.num)))?;
            if newest.is_end_segment() {
                // Our segment read was stale: a newer segment exists. Look again, consistently.
                consistency = Consistency::Strong;
                continue;
            }
            let created = self.clock.now();
            let end = internal_entry(current.num, newest.num + 1, created, EntryType::END_SEGMENT);
            let next = SegmentRecord {
                num: current.num + 1,
                created,
                base_seq: current.seq_of(newest.num + 2),
                last_snapshot: None,
                archive: None,
            };
            let first = internal_entry(next.num, 0, created, EntryType::SNAPSHOT);
            match self
                .store
                .start_segment(log, &end, &next, &first, &mut units)
                .await?
            {
                TxOutcome::Committed => {
                    info!(log = %log, segment = next.num, base_seq = next.base_seq, "started segment");
                    let hint = SegmentHint {
                        segment: next.num,
                        base_seq: next.base_seq,
                    };
                    return Ok(SegmentStarted {
                        segment: next.num,
                        end_seq: current.seq_of(end.num),
                        snapshot_seq: next.base_seq,
                        next_seq: next.base_seq + 1,
                        hint,
                        units,
                    });
                }
                // Lost to another writer (Conflict), or cancelled by a concurrent request on the
                // same items (Interrupted): either way nothing was written; look again.
                TxOutcome::Conflict | TxOutcome::Interrupted => {
                    consistency = Consistency::Strong;
                    backoff.sleep().await;
                }
            }
        }
        Err(LogError::Contention {
            log,
            attempts: self.cfg.max_attempts,
        })
    }

    /// Records a completed snapshot: the root on the Snapshot entry, then the segment's Last
    /// Snapshot (only ever moved forward). Both writes are idempotent.
    pub async fn complete_snapshot(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        root: &str,
    ) -> Result<RequestUnits, LogError> {
        let mut units = RequestUnits::default();
        self.store
            .set_snapshot_root(log, segment, num, root, &mut units)
            .await?;
        self.store
            .advance_last_snapshot(log, segment, num, &mut units)
            .await?;
        Ok(units)
    }

    /// Loads a log (`docs/design.md`, "Load and update").
    pub async fn load(&self, log: LogId) -> Result<Loaded, LogError> {
        let mut units = RequestUnits::default();
        let segments = self
            .store
            .newest_segments(log, 2, Consistency::Eventual, &mut units)
            .await?;
        let current = segments.first().ok_or(LogError::LogNotFound(log))?;
        let (from_segment, from_num) = match (current.last_snapshot, segments.get(1)) {
            (Some(n), _) => (current, n),
            (None, Some(previous)) => match previous.last_snapshot {
                Some(n) => (previous, n),
                None => {
                    return Err(corrupt(
                        log,
                        format!(
                            "neither segment {} nor segment {} has a completed snapshot",
                            current.num, previous.num
                        ),
                    ));
                }
            },
            (None, None) => {
                return Err(corrupt(
                    log,
                    format!("segment {} has no completed snapshot", current.num),
                ));
            }
        };
        let start = SegmentHint {
            segment: from_segment.num,
            base_seq: from_segment.base_seq,
        };
        // The snapshot entry plus at most a page of entries after it: a reader that is further
        // behind continues with `read_since` from `next_seq` (`complete` is false), so a load
        // never holds an unbounded tail in memory.
        let mut chain = self
            .read_chain(
                log,
                start,
                from_num,
                self.cfg.page_size.saturating_add(1),
                &mut units,
            )
            .await?;
        if let Some((_, first)) = chain.records.first_mut()
            && first.kind == EntryType::SNAPSHOT
            && first.snapshot_root.is_none()
            && !(start.segment == 0 && from_num == 0)
        {
            // The segment says this snapshot is complete, but an eventually consistent read can
            // miss the root written just before: read the entry again, strongly.
            let page = self
                .store
                .read_entries(
                    log,
                    start.segment,
                    from_num,
                    1,
                    Consistency::Strong,
                    &mut units,
                )
                .await?;
            if let Some(fresh) = page.entries.into_iter().next() {
                *first = fresh;
            }
        }
        let (entries, cut) = self
            .resolve_within(log, chain.records, self.cfg.read_budget_bytes)
            .await?;
        let complete = chain.complete && !cut;
        let mut entries = entries.into_iter();
        let snapshot = entries
            .next()
            .filter(|e| e.kind == EntryType::SNAPSHOT)
            .ok_or_else(|| {
                corrupt(
                    log,
                    format!(
                        "Last Snapshot of segment {} is not a Snapshot entry",
                        start.segment
                    ),
                )
            })?;
        let entries: Vec<Entry> = entries.collect();
        let next_seq = entries.last().map_or(snapshot.seq, |e| e.seq) + 1;
        Ok(Loaded {
            snapshot,
            entries,
            next_seq,
            complete,
            units,
        })
    }

    /// Updates a loaded log (`docs/design.md`, "Load and update"): up to `limit` entries from sequence `from` on, across
    /// a segment boundary. [`LogError::ReloadRequired`] when `from` is older than the two newest
    /// segments; [`LogError::OutOfRange`] when it is past the end.
    pub async fn read_since(
        &self,
        log: LogId,
        from: u64,
        limit: usize,
    ) -> Result<EntriesPage, LogError> {
        let mut units = RequestUnits::default();
        let limit = limit.max(1);
        let segments = self
            .store
            .newest_segments(log, 2, Consistency::Eventual, &mut units)
            .await?;
        let current = segments.first().ok_or(LogError::LogNotFound(log))?;
        let oldest = segments.last().unwrap_or(current);
        let seg = segments
            .iter()
            .find(|s| from >= s.base_seq)
            .ok_or(LogError::ReloadRequired {
                from,
                first_retained: oldest.base_seq,
            })?;
        let start = SegmentHint {
            segment: seg.num,
            base_seq: seg.base_seq,
        };
        let chain = self
            .read_chain(log, start, from - seg.base_seq, limit, &mut units)
            .await?;
        let (entries, cut) = self
            .resolve_within(log, chain.records, self.cfg.read_budget_bytes)
            .await?;
        let complete = chain.complete && !cut;
        let next_seq = from + entries.len() as u64;
        Ok(EntriesPage {
            entries,
            next_seq,
            complete,
            units,
        })
    }

    /// One segment of the log, read consistently; `None` when it does not exist.
    pub async fn segment(
        &self,
        log: LogId,
        num: u64,
    ) -> Result<(Option<SegmentRecord>, RequestUnits), LogError> {
        let mut units = RequestUnits::default();
        let seg = self
            .store
            .segment(log, num, Consistency::Strong, &mut units)
            .await?;
        Ok((seg, units))
    }

    /// Up to `limit` entries in sequence order starting at entry `num` of the segment `start`
    /// names, following End Segment entries into later segments. Unlike [`read_since`]
    /// (which serves readers and only looks at the two newest segments), this reads from any
    /// segment the caller has located, so the snapshot worker can read behind a log that has
    /// moved on.
    ///
    /// It holds every body of the range: the caller bounds it by `limit` (the snapshot worker
    /// reads one snapshot interval). Readers that serve requests use [`read_from_within`].
    ///
    /// [`read_since`]: Self::read_since
    /// [`read_from_within`]: Self::read_from_within
    pub async fn read_from(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
    ) -> Result<EntriesPage, LogError> {
        self.read_from_within(log, start, num, limit, usize::MAX)
            .await
            .map(|(page, _)| page)
    }

    /// As [`read_from`](Self::read_from), stopping once the bodies held reach `budget` bytes
    /// (always keeping the first entry), as [`read_since`](Self::read_since) stops at the read
    /// budget. The second value is true when it stopped for the budget: the page then says it is
    /// not complete, and `next_seq` is where to go on from.
    pub async fn read_from_within(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
        budget: usize,
    ) -> Result<(EntriesPage, bool), LogError> {
        let mut units = RequestUnits::default();
        let chain = self
            .read_chain(log, start, num, limit.max(1), &mut units)
            .await?;
        let (entries, cut) = self.resolve_within(log, chain.records, budget).await?;
        let complete = chain.complete && !cut;
        let next_seq = entries.last().map_or(start.base_seq + num, |e| e.seq + 1);
        Ok((
            EntriesPage {
                entries,
                next_seq,
                complete,
                units,
            },
            cut,
        ))
    }

    /// Up to `limit` entries from entry `num` of the segment `start` names (following End
    /// Segment entries, as [`read_from`](Self::read_from)), without their bodies: what a search
    /// for a Snapshot entry needs. Offloaded bodies are not fetched and inline ones are dropped
    /// at once, so a scan of a whole segment in pages holds one page of positions at a time.
    pub async fn scan_from(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
    ) -> Result<ScanPage, LogError> {
        let mut units = RequestUnits::default();
        let chain = self
            .read_chain(log, start, num, limit.max(1), &mut units)
            .await?;
        let marks: Vec<EntryMark> = chain
            .records
            .into_iter()
            .map(|(seq, rec)| EntryMark {
                seq,
                segment: rec.segment,
                num: rec.num,
                kind: rec.kind,
                snapshot_root: rec.snapshot_root,
            })
            .collect();
        Ok(ScanPage {
            marks,
            complete: chain.complete,
        })
    }

    /// The log's next free sequence, read consistently.
    pub async fn next_seq(&self, log: LogId) -> Result<(u64, RequestUnits), LogError> {
        let mut units = RequestUnits::default();
        let head = self
            .head(log, None, Consistency::Strong, &mut units)
            .await?;
        Ok((head.next_seq(), units))
    }

    /// As [`next_seq`](Self::next_seq), starting from a segment hint (one read instead of two
    /// when the hint is current; a stale hint is followed or dropped as appends do). Also the
    /// hint for the next call.
    pub async fn next_seq_from(
        &self,
        log: LogId,
        hint: Option<SegmentHint>,
    ) -> Result<(u64, SegmentHint), LogError> {
        let mut units = RequestUnits::default();
        let head = self
            .head(log, hint, Consistency::Strong, &mut units)
            .await?;
        Ok((head.next_seq(), head.at))
    }

    /// Every segment of the log, oldest first.
    pub async fn segments(
        &self,
        log: LogId,
    ) -> Result<(Vec<SegmentRecord>, RequestUnits), LogError> {
        let mut units = RequestUnits::default();
        let all = self.store.all_segments(log, &mut units).await?;
        if all.is_empty() {
            return Err(LogError::LogNotFound(log));
        }
        Ok((all, units))
    }

    /// Finds the newest entry, starting from a hint or the newest segment, following End Segment
    /// entries into the next segment (a stale hint or an eventually consistent segment read).
    async fn head(
        &self,
        log: LogId,
        hint: Option<SegmentHint>,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Head, LogError> {
        let mut at = match hint {
            Some(h) => h,
            None => self.current_segment(log, consistency, units).await?,
        };
        let mut consistency = consistency;
        let mut from_hint = hint.is_some();
        loop {
            match self
                .store
                .newest_entry(log, at.segment, consistency, units)
                .await?
            {
                Some(e) if e.is_end_segment() => {
                    at = SegmentHint {
                        segment: at.segment + 1,
                        base_seq: at.base_seq + e.num + 1,
                    };
                }
                Some(newest) => return Ok(Head { at, newest }),
                None if from_hint => {
                    // A hint for a segment that does not exist: fall back to the Segment table.
                    from_hint = false;
                    at = self.current_segment(log, consistency, units).await?;
                }
                None if consistency == Consistency::Eventual => {
                    // Segment and entry 0 commit together, but separate eventually consistent
                    // reads can disagree for a moment.
                    consistency = Consistency::Strong;
                }
                None => {
                    return Err(corrupt(
                        log,
                        format!("segment {} has no entries", at.segment),
                    ));
                }
            }
        }
    }

    async fn current_segment(
        &self,
        log: LogId,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<SegmentHint, LogError> {
        let newest = self
            .store
            .newest_segments(log, 1, consistency, units)
            .await?;
        let s = newest.first().ok_or(LogError::LogNotFound(log))?;
        Ok(SegmentHint {
            segment: s.num,
            base_seq: s.base_seq,
        })
    }

    /// Reads records in sequence order from `(start.segment, num)`, hopping over End Segment
    /// entries into the following segment, until `limit` records or the end of the log.
    async fn read_chain(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
        units: &mut RequestUnits,
    ) -> Result<Chain, LogError> {
        let mut records: Vec<(u64, EntryRecord)> = Vec::new();
        let (mut at, mut num) = (start, num);
        // Eventually consistent first; after a read that may have been stale, strongly.
        let mut consistency = Consistency::Eventual;
        // Re-reads after an entry appeared between two reads; each is answered by a strong read,
        // which cannot be stale, so a handful is plenty.
        let mut rereads = 0u32;
        // A segment whose entry items are gone (archived), read from its archive for the rest
        // of this read.
        let mut archived: Option<Archived> = None;
        loop {
            let remaining = limit - records.len();
            if remaining == 0 {
                return Ok(Chain {
                    records,
                    complete: false,
                });
            }
            let page = self
                .segment_page(
                    log,
                    at.segment,
                    num,
                    remaining,
                    consistency,
                    units,
                    &mut archived,
                )
                .await?;
            if page.entries.is_empty() && !page.more {
                // Nothing at or after `num` in this segment: either `num` is the end of the log,
                // or the segment ended earlier (End Segment) and `num` lies in a later segment,
                // or the caller asked past the end.
                let newest = self
                    .newest_in_segment(log, at.segment, units, &mut archived)
                    .await?
                    .ok_or_else(|| {
                        corrupt(log, format!("segment {} has no entries", at.segment))
                    })?;
                if newest.is_end_segment() && newest.num < num {
                    // `num` lies past this segment's end: it is entry `num - (end + 1)` of the
                    // next segment.
                    let skip = newest.num + 1;
                    at = SegmentHint {
                        segment: at.segment + 1,
                        base_seq: at.base_seq + skip,
                    };
                    num -= skip;
                    consistency = Consistency::Eventual;
                    continue;
                }
                if newest.num + 1 == num {
                    return Ok(Chain {
                        records,
                        complete: true,
                    });
                }
                if newest.num + 1 < num {
                    return Err(LogError::OutOfRange {
                        from: at.base_seq + num,
                        next_seq: at.base_seq + newest.num + 1,
                    });
                }
                // Entries `num..=newest` exist but the page did not show them: it was stale, or
                // they appeared between the two reads. Read them again, strongly. (Hopping to
                // the next segment here would skip them.)
                if archived.as_ref().is_some_and(|a| a.segment == at.segment) {
                    // The items are gone and the archive is now at hand: read it, not again.
                    continue;
                }
                rereads += 1;
                if rereads > 3 {
                    return Err(corrupt(
                        log,
                        format!(
                            "segment {} has entries up to {} but reads from {num} return none",
                            at.segment, newest.num
                        ),
                    ));
                }
                consistency = Consistency::Strong;
                continue;
            }
            let mut ended = None;
            for rec in page.entries {
                if rec.is_end_segment() {
                    ended = Some(rec.num);
                }
                records.push((at.base_seq + rec.num, rec));
            }
            match ended {
                Some(end) if records.len() < limit => {
                    at = SegmentHint {
                        segment: at.segment + 1,
                        base_seq: at.base_seq + end + 1,
                    };
                    num = 0;
                    consistency = Consistency::Eventual;
                }
                Some(_) => {
                    return Ok(Chain {
                        records,
                        complete: false,
                    });
                }
                None if page.more => {
                    return Ok(Chain {
                        records,
                        complete: false,
                    });
                }
                None => {
                    return Ok(Chain {
                        records,
                        complete: true,
                    });
                }
            }
        }
    }

    /// One page of a segment's entries from `num`: the Entry table's items, or the segment's
    /// archive when its items are gone. An archived segment's items are deleted in order, so
    /// what is left is a suffix: a page that starts after `num` (a gap), or a strongly read
    /// page that is empty though entries exist, means `num` is archived. Only then is the
    /// Segment item read; a live read pays nothing extra.
    #[allow(clippy::too_many_arguments)]
    async fn segment_page(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        limit: usize,
        consistency: Consistency,
        units: &mut RequestUnits,
        archived: &mut Option<Archived>,
    ) -> Result<EntryPage, LogError> {
        if let Some(a) = archived.as_ref().filter(|a| a.segment == segment) {
            return Ok(a.page(num, limit));
        }
        let page = self
            .store
            .read_entries(log, segment, num, limit, consistency, units)
            .await?;
        let gap = page.entries.first().is_some_and(|e| e.num != num);
        let gone = page.entries.is_empty() && !page.more && consistency == Consistency::Strong;
        if (gap || gone)
            && let Some(a) = self.archived(log, segment, units).await?
        {
            let p = a.page(num, limit);
            *archived = Some(a);
            return Ok(p);
        }
        if gap {
            return Err(corrupt(
                log,
                format!("segment {segment} has no entry {num} and is not archived"),
            ));
        }
        Ok(page)
    }

    /// The newest entry of a segment, read strongly, or from its archive when its items are gone.
    async fn newest_in_segment(
        &self,
        log: LogId,
        segment: u64,
        units: &mut RequestUnits,
        archived: &mut Option<Archived>,
    ) -> Result<Option<EntryRecord>, LogError> {
        if let Some(a) = archived.as_ref().filter(|a| a.segment == segment) {
            return Ok(a.records.last().cloned());
        }
        if let Some(e) = self
            .store
            .newest_entry(log, segment, Consistency::Strong, units)
            .await?
        {
            return Ok(Some(e));
        }
        match self.archived(log, segment, units).await? {
            Some(a) => {
                let last = a.records.last().cloned();
                *archived = Some(a);
                Ok(last)
            }
            None => Ok(None),
        }
    }

    /// The archive of a segment, if the Segment item names one (one strong GetItem, one S3 GET).
    async fn archived(
        &self,
        log: LogId,
        segment: u64,
        units: &mut RequestUnits,
    ) -> Result<Option<Archived>, LogError> {
        let Some(seg) = self
            .store
            .segment(log, segment, Consistency::Strong, units)
            .await?
        else {
            return Ok(None);
        };
        let Some(key) = seg.archive else {
            return Ok(None);
        };
        self.read_archive(log, segment, &key).await.map(Some)
    }

    #[cfg(feature = "archive")]
    async fn read_archive(
        &self,
        log: LogId,
        segment: u64,
        key: &str,
    ) -> Result<Archived, LogError> {
        if key == archive::DELETED {
            return Err(LogError::HistoryDeleted { log, segment });
        }
        let bytes = self.payloads.get(key).await.map_err(|e| match e {
            StoreError::NotFound { key } => corrupt(
                log,
                format!("segment {segment} names archive {key}, which does not exist"),
            ),
            other => LogError::Store(other),
        })?;
        let records =
            archive::decode(key, log, segment, &bytes).map_err(|e| corrupt(log, e.to_string()))?;
        Ok(Archived { segment, records })
    }

    #[cfg(not(feature = "archive"))]
    async fn read_archive(
        &self,
        log: LogId,
        segment: u64,
        key: &str,
    ) -> Result<Archived, LogError> {
        Err(corrupt(
            log,
            format!("segment {segment} is archived in {key}, and this build reads no archives"),
        ))
    }

    /// Turns records into entries, fetching offloaded bodies from S3 (a few at a time), stopping
    /// once the bodies held reach `budget` bytes (always keeping the first entry; `usize::MAX`
    /// for no limit): the entries, in order, and whether it stopped early. At most
    /// [`RESOLVE_CONCURRENCY`] offloaded bodies are fetched past the budget, then dropped.
    async fn resolve_within(
        &self,
        log: LogId,
        records: Vec<(u64, EntryRecord)>,
        budget: usize,
    ) -> Result<(Vec<Entry>, bool), LogError> {
        let total = records.len();
        let mut stream = self.resolve_stream(log, records);
        let mut out = Vec::new();
        let mut held = 0usize;
        while let Some(entry) = stream.next().await {
            let entry = entry?;
            held = held.saturating_add(entry.body.len());
            out.push(entry);
            if held >= budget && out.len() < total {
                return Ok((out, true));
            }
        }
        Ok((out, false))
    }

    fn resolve_stream(
        &self,
        log: LogId,
        records: Vec<(u64, EntryRecord)>,
    ) -> impl futures::Stream<Item = Result<Entry, LogError>> + '_ {
        futures::stream::iter(records)
            .map(move |(seq, rec)| async move {
                let payload = rec.payload_key().map(str::to_owned);
                let body = match (rec.body, &rec.external) {
                    (Some(body), _) => body,
                    (None, Some(key)) => self.payloads.get(key).await.map_err(|e| match e {
                        StoreError::NotFound { key } => corrupt(
                            log,
                            format!("body object {key} of sequence {seq} is missing"),
                        ),
                        other => LogError::Store(other),
                    })?,
                    (None, None) => Bytes::new(),
                };
                Ok::<Entry, LogError>(Entry {
                    seq,
                    segment: rec.segment,
                    num: rec.num,
                    created: rec.created,
                    kind: rec.kind,
                    version: rec.version,
                    body,
                    payload,
                    snapshot_root: rec.snapshot_root,
                })
            })
            .buffered(RESOLVE_CONCURRENCY)
    }
}

/// Offloaded bodies fetched from S3 at once while resolving a page.
pub const RESOLVE_CONCURRENCY: usize = 8;

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

/// A key seen before: the first request's seq when the request is the same, else a reuse error.
fn duplicate(
    rec: &DedupeRecord,
    seq: u64,
    fp: [u8; crate::domain::dedupe::FINGERPRINT_BYTES],
    units: RequestUnits,
) -> Result<AppendOnce, LogError> {
    if fp != rec.fingerprint {
        return Err(LogError::KeyReused { seq });
    }
    Ok(AppendOnce::Duplicate { seq, units })
}

fn upload_fingerprint(upload_id: &str) -> [u8; crate::domain::dedupe::FINGERPRINT_BYTES] {
    fingerprint(&[b"upload", upload_id.as_bytes()])
}

/// A segment read from its archive.
struct Archived {
    segment: u64,
    records: Vec<EntryRecord>,
}

impl Archived {
    fn page(&self, num: u64, limit: usize) -> EntryPage {
        let len = self.records.len();
        let start = usize::try_from(num).unwrap_or(usize::MAX).min(len);
        let end = start.saturating_add(limit).min(len);
        EntryPage {
            entries: self.records[start..end].to_vec(),
            more: end < len,
        }
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
mod push_rebase_tests;
#[cfg(test)]
mod rebase_tests;
#[cfg(test)]
mod tests;
