//! A seeded, reproducible fault-injecting adapter behind the log's ports, modelling what DynamoDB
//! and S3 do and the emulator does not (`docs/storage.md`, "Failure modes"):
//!
//! - **stale reads**: an eventually consistent read may, for a bounded time after a write, return
//!   the view from before it — a page or a "newest entry" without the newest items, an entry
//!   without its just-set snapshot root, a segment without its just-advanced last snapshot, the
//!   segment list without a just-created segment, a catalog listing without a just-added sheet
//!   or member, an eventually consistent access check without a just-made share;
//! - **lost responses**: a write is applied and its response lost; the SDK retries it (a
//!   conditional put, or a catalog create, then fails against its own item; a log transaction
//!   carries an idempotency token, so its retry reports success);
//! - **throttling**: `ProvisionedThroughputExceededException` / `ThrottlingException` from
//!   DynamoDB, `SlowDown` from S3, after the SDK's own retries ([`StoreError::Throttled`]);
//! - **transaction conflicts**: `TransactionCanceled` with `TransactionConflict`
//!   ([`TxOutcome::Interrupted`]);
//! - **latency spikes**.
//!
//! Every decision comes from one seeded generator, so a run is reproducible from its profile and
//! seed (given the same interleaving). Counters report what was injected, and how many calls
//! (requests) passed through: with the `none` profile the adapter is a request counter, which the
//! scale benchmark uses over the emulator and the in-memory stores alike. Tests can also script a
//! failure ([`Scripted`]): a put that always loses its race, a lost response on the next put, a
//! create that fails.
//!
//! It is a [`Layer`] (`Arc<Faults>`), so it applies to every port through [`Layered`]: every call
//! is counted, and may be delayed or throttled, in [`Layer::around`]; the methods below override
//! only what a port's call does besides (stale reads, lost responses, transaction conflicts).
//! The catalog's overrides are in `faults_catalog.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::domain::dedupe::DedupeRecord;
use crate::domain::{EntryRecord, LogId, RequestUnits, SegmentRecord};
use crate::error::StoreError;
use crate::layer::{Call, Layer, Layered};
use crate::ports::{
    ClientPutOutcome, ClientRuns, ClientRunsLayer, Consistency, DedupeKeys, DedupeLayer,
    EntriesLayer, EntryPage, GroupOwnersLayer, LogEntries, LogPurgeLayer, ObjectPurgeLayer,
    OnceOutcome, PayloadLayer, PayloadStore, PendingLayer, PushQueueLayer, PutOutcome, RangePut,
    TxOutcome,
};

/// How often each fault happens (probabilities per call) and for how long reads may be stale.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultProfile {
    pub name: String,
    /// An eventually consistent read returns the view from before a recent write.
    pub stale_read: f64,
    /// How long after a write a read may still miss it.
    pub stale_for: Duration,
    /// A write is applied and its response lost, then retried by the SDK.
    pub lost_response: f64,
    pub throttle: f64,
    pub tx_conflict: f64,
    pub latency_spike: f64,
    pub spike: Duration,
}

impl FaultProfile {
    /// No fault at all.
    pub fn none() -> Self {
        Self {
            name: "none".to_owned(),
            stale_read: 0.0,
            stale_for: Duration::from_millis(200),
            lost_response: 0.0,
            throttle: 0.0,
            tx_conflict: 0.0,
            latency_spike: 0.0,
            spike: Duration::from_millis(20),
        }
    }

    /// The named profiles: `none`, `stale`, `lossy`, `throttle`, `conflict`, `hostile` (all of
    /// them at once).
    pub fn named(name: &str) -> Option<Self> {
        let none = Self {
            name: name.to_owned(),
            ..Self::none()
        };
        Some(match name {
            "none" => none,
            "stale" => Self {
                stale_read: 0.5,
                ..none
            },
            "lossy" => Self {
                lost_response: 0.2,
                ..none
            },
            "throttle" => Self {
                throttle: 0.05,
                ..none
            },
            "conflict" => Self {
                tx_conflict: 0.5,
                ..none
            },
            "hostile" => Self {
                stale_read: 0.3,
                lost_response: 0.1,
                throttle: 0.02,
                tx_conflict: 0.3,
                latency_spike: 0.02,
                ..none
            },
            _ => return None,
        })
    }

    pub const NAMES: [&'static str; 6] =
        ["none", "stale", "lossy", "throttle", "conflict", "hostile"];

    /// Parses `profile` or `profile:seed` (as `SHEETLOG_FAULTS` and `--faults` take it).
    pub fn parse(spec: &str) -> Result<(Self, u64), String> {
        let (name, seed) = match spec.split_once(':') {
            Some((n, s)) => (
                n,
                s.parse::<u64>()
                    .map_err(|e| format!("fault seed {s:?}: {e}"))?,
            ),
            None => (spec, 1),
        };
        let profile = Self::named(name).ok_or_else(|| {
            format!(
                "unknown fault profile {name:?}; one of {}",
                Self::NAMES.join(", ")
            )
        })?;
        Ok((profile, seed))
    }
}

/// What was injected, by kind.
#[derive(Debug, Default)]
pub struct FaultCounts {
    /// Calls that reached the adapter, faulted or not: one request each (`all_segments` pages
    /// inside one call). Not a fault, so not in [`FaultCounts::total`].
    pub calls: AtomicU64,
    pub stale_reads: AtomicU64,
    pub lost_responses: AtomicU64,
    pub throttles: AtomicU64,
    pub tx_conflicts: AtomicU64,
    pub latency_spikes: AtomicU64,
}

impl FaultCounts {
    pub fn total(&self) -> u64 {
        self.by_kind().iter().map(|(_, n)| n).sum()
    }

    pub fn by_kind(&self) -> [(&'static str, u64); 5] {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("stale_read", l(&self.stale_reads)),
            ("lost_response", l(&self.lost_responses)),
            ("throttle", l(&self.throttles)),
            ("tx_conflict", l(&self.tx_conflicts)),
            ("latency_spike", l(&self.latency_spikes)),
        ]
    }
}

/// Failures a test asks for, on top of the profile's random ones.
#[derive(Debug, Default)]
pub struct Scripted {
    /// Every conditional put reports that the entry number was taken (by an unknown winner).
    pub always_taken: AtomicBool,
    /// The next put is applied, then answered as if the SDK retried it after a lost response.
    pub lose_next_put_response: AtomicBool,
    /// Puts that reached the inner store.
    pub puts: AtomicU32,
    /// Creating a log fails, as a throttled transaction does, and writes nothing.
    pub fail_create_log: AtomicBool,
}

/// The shared fault source: profile, seeded generator, the recent writes stale reads hide, and
/// counters.
#[derive(Debug)]
pub struct Faults {
    pub profile: FaultProfile,
    pub counts: FaultCounts,
    pub script: Scripted,
    rng: Mutex<StdRng>,
    recent: Mutex<Recent>,
}

/// Writes within the staleness window, and what they replaced.
#[derive(Debug, Default)]
struct Recent {
    entries: HashMap<(LogId, u64, u64), Instant>,
    roots: HashMap<(LogId, u64, u64), Instant>,
    /// (when, the last snapshot before the write).
    last_snapshots: HashMap<(LogId, u64), (Instant, Option<u64>)>,
    segments: HashMap<(LogId, u64), Instant>,
    /// Catalog memberships (user, sheet) added: a listing (a GSI, never strongly consistent)
    /// may not show them yet.
    members: HashMap<(String, LogId), Instant>,
    /// Invitations (address key, sheet) made: the index of invitations by address may not show
    /// them yet.
    invitations: HashMap<(String, LogId), Instant>,
}

impl Faults {
    pub fn new(profile: FaultProfile, seed: u64) -> Arc<Self> {
        Arc::new(Self {
            profile,
            counts: FaultCounts::default(),
            script: Scripted::default(),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            recent: Mutex::new(Recent::default()),
        })
    }

    /// No random fault (the `none` profile): a request counter, with [`Scripted`] failures.
    pub fn scripted() -> Arc<Self> {
        Self::new(FaultProfile::none(), 1)
    }

    fn roll(&self, p: f64) -> bool {
        p > 0.0
            && self
                .rng
                .lock()
                .map(|mut r| r.random_bool(p))
                .unwrap_or(false)
    }

    /// Whether recent writes must be remembered: only stale reads look at them, so a profile
    /// without stale reads skips the bookkeeping (and its cost, which grows with the write rate).
    fn remembers(&self) -> bool {
        self.profile.stale_read > 0.0
    }

    fn is_recent(&self, at: Option<&Instant>) -> bool {
        at.is_some_and(|t| t.elapsed() < self.profile.stale_for)
    }

    /// Before every call: maybe a latency spike, maybe throttled.
    async fn before(
        &self,
        service: &'static str,
        operation: &'static str,
    ) -> Result<(), StoreError> {
        self.counts.calls.fetch_add(1, Ordering::Relaxed);
        if self.roll(self.profile.latency_spike) {
            self.counts.latency_spikes.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(self.profile.spike).await;
        }
        if self.roll(self.profile.throttle) {
            self.counts.throttles.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::Throttled { service, operation });
        }
        Ok(())
    }

    fn stale(&self, consistency: Consistency) -> bool {
        consistency == Consistency::Eventual && self.roll(self.profile.stale_read)
    }

    fn lose_response(&self) -> bool {
        let lost = self.roll(self.profile.lost_response);
        if lost {
            self.counts.lost_responses.fetch_add(1, Ordering::Relaxed);
        }
        lost
    }

    fn note_entry(&self, log: LogId, e: &EntryRecord) {
        if !self.remembers() {
            return;
        }
        if let Ok(mut r) = self.recent.lock() {
            let now = Instant::now();
            let window = self.profile.stale_for;
            r.entries.retain(|_, t| t.elapsed() < window);
            r.entries.insert((log, e.segment, e.num), now);
        }
    }
}

/// The log's ports with faults.
pub type FaultyLogStore<S> = Layered<S, Arc<Faults>>;

/// [`PayloadStore`] with throttling (`SlowDown`), latency spikes and lost responses (a put is
/// idempotent: its retry writes the same bytes again).
pub type FaultyPayloadStore<P> = Layered<P, Arc<Faults>>;

const DDB: &str = "DynamoDB";

impl Faults {
    /// Counts the write as applied, then maybe loses its response.
    fn applied_entry(&self, log: LogId, entry: &EntryRecord) -> bool {
        self.note_entry(log, entry);
        self.lose_response()
    }

    /// Maybe cancels a transaction for a conflict before it applies.
    fn conflict(&self) -> bool {
        let hit = self.roll(self.profile.tx_conflict);
        if hit {
            self.counts.tx_conflicts.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    fn stale_read_seen(&self) {
        self.counts.stale_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// A transaction that writes a segment: maybe cancelled for a conflict before it applies;
    /// maybe applied with its response lost (the SDK's retry carries the same idempotency token
    /// and reports success).
    async fn transaction(
        &self,
        log: LogId,
        entries: &[&EntryRecord],
        segment: &SegmentRecord,
        run: impl std::future::Future<Output = Result<TxOutcome, StoreError>>,
    ) -> Result<TxOutcome, StoreError> {
        self.before(DDB, "TransactWriteItems").await?;
        if self.conflict() {
            return Ok(TxOutcome::Interrupted);
        }
        let out = run.await?;
        if out == TxOutcome::Committed {
            for e in entries {
                self.note_entry(log, e);
            }
            if self.remembers()
                && let Ok(mut r) = self.recent.lock()
            {
                r.segments.insert((log, segment.num), Instant::now());
            }
            self.lose_response();
        }
        Ok(out)
    }

    /// A stale view of an entry whose snapshot root was set within the window.
    fn hide_root(&self, log: LogId, mut e: EntryRecord) -> EntryRecord {
        if e.snapshot_root.is_some()
            && let Ok(r) = self.recent.lock()
            && self.is_recent(r.roots.get(&(log, e.segment, e.num)))
        {
            self.stale_read_seen();
            e.snapshot_root = None;
        }
        e
    }
}

/// Every call: counted, maybe a latency spike, maybe throttled.
#[async_trait]
impl Layer for Arc<Faults> {
    async fn around<T, E, F>(&self, call: Call, run: F) -> Result<T, E>
    where
        T: Send,
        E: From<StoreError> + Send,
        F: std::future::Future<Output = Result<T, E>> + Send,
    {
        self.before(call.service, call.operation).await?;
        run.await
    }
}

#[async_trait]
impl EntriesLayer for Arc<Faults> {
    async fn create_log<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        segment: &SegmentRecord,
        first: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        if self.script.fail_create_log.load(Ordering::SeqCst) {
            return Err(StoreError::Throttled {
                service: DDB,
                operation: "TransactWriteItems",
            });
        }
        self.transaction(
            log,
            &[first],
            segment,
            inner.create_log(log, segment, first, units),
        )
        .await
    }

    async fn newest_segments<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        limit: u32,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        self.before(DDB, "Query").await?;
        if !self.stale(consistency) {
            return inner.newest_segments(log, limit, consistency, units).await;
        }
        // The view from before recent writes: no just-created segment (unless it is the only
        // one), no just-advanced last snapshot.
        let all = inner
            .newest_segments(log, limit.saturating_add(1), consistency, units)
            .await?;
        let (mut out, hid) = {
            let Ok(recent) = self.recent.lock() else {
                return Ok(all.into_iter().take(limit as usize).collect());
            };
            let mut out = Vec::new();
            let mut hid = false;
            for (i, mut s) in all.into_iter().enumerate() {
                if i == 0 && self.is_recent(recent.segments.get(&(log, s.num))) {
                    hid = true;
                    continue;
                }
                if let Some((at, before)) = recent.last_snapshots.get(&(log, s.num))
                    && at.elapsed() < self.profile.stale_for
                {
                    s.last_snapshot = *before;
                    hid = true;
                }
                out.push(s);
            }
            (out, hid)
        };
        if out.is_empty() {
            return inner.newest_segments(log, limit, consistency, units).await;
        }
        if hid {
            self.stale_read_seen();
        }
        out.truncate(limit as usize);
        Ok(out)
    }

    async fn segment<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        num: u64,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<SegmentRecord>, StoreError> {
        self.before(DDB, "GetItem").await?;
        let mut seg = inner.segment(log, num, consistency, units).await?;
        if self.stale(consistency)
            && let (Some(s), Ok(recent)) = (seg.as_mut(), self.recent.lock())
        {
            if self.is_recent(recent.segments.get(&(log, num))) {
                self.stale_read_seen();
                return Ok(None);
            }
            if let Some((at, before)) = recent.last_snapshots.get(&(log, num))
                && at.elapsed() < self.profile.stale_for
            {
                self.stale_read_seen();
                s.last_snapshot = *before;
            }
        }
        Ok(seg)
    }

    async fn newest_entry<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        segment: u64,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<EntryRecord>, StoreError> {
        self.before(DDB, "Query").await?;
        let newest = inner.newest_entry(log, segment, consistency, units).await?;
        let Some(mut e) = newest else { return Ok(None) };
        if !self.stale(consistency) {
            return Ok(Some(e));
        }
        // Walk back past the entries written within the window.
        let mut hid = false;
        loop {
            let recent = self
                .recent
                .lock()
                .map(|r| self.is_recent(r.entries.get(&(log, segment, e.num))))
                .unwrap_or(false);
            if !recent || e.num == 0 {
                break;
            }
            let page = inner
                .read_entries(log, segment, e.num - 1, 1, consistency, units)
                .await?;
            match page.entries.into_iter().next() {
                Some(prev) => {
                    e = prev;
                    hid = true;
                }
                None => break,
            }
        }
        if hid {
            self.stale_read_seen();
        }
        Ok(Some(self.hide_root(log, e)))
    }

    async fn put_entry<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        entry: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<PutOutcome, StoreError> {
        self.before(DDB, "PutItem").await?;
        if self.script.always_taken.load(Ordering::SeqCst) {
            return Ok(PutOutcome::Taken(None));
        }
        self.script.puts.fetch_add(1, Ordering::SeqCst);
        let out = inner.put_entry(log, entry, units).await?;
        let scripted_loss = self
            .script
            .lose_next_put_response
            .swap(false, Ordering::SeqCst);
        if scripted_loss || (out == PutOutcome::Written && self.applied_entry(log, entry)) {
            // What the SDK's automatic retry sees after the first response went missing.
            self.script.puts.fetch_add(1, Ordering::SeqCst);
            return inner.put_entry(log, entry, units).await;
        }
        Ok(out)
    }

    async fn start_segment<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        end: &EntryRecord,
        segment: &SegmentRecord,
        first: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        self.transaction(
            log,
            &[end, first],
            segment,
            inner.start_segment(log, end, segment, first, units),
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn read_entries<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        segment: u64,
        from: u64,
        limit: usize,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<EntryPage, StoreError> {
        self.before(DDB, "Query").await?;
        let mut page = inner
            .read_entries(log, segment, from, limit, consistency, units)
            .await?;
        if !self.stale(consistency) {
            return Ok(page);
        }
        // An older view: the page ends before the first entry written within the window.
        let cut = self.recent.lock().ok().and_then(|r| {
            page.entries
                .iter()
                .position(|e| self.is_recent(r.entries.get(&(log, segment, e.num))))
        });
        if let Some(cut) = cut {
            self.stale_read_seen();
            page.entries.truncate(cut);
            page.more = false;
        }
        page.entries = page
            .entries
            .into_iter()
            .map(|e| self.hide_root(log, e))
            .collect();
        Ok(page)
    }

    async fn set_snapshot_root<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        segment: u64,
        num: u64,
        root: &str,
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        self.before(DDB, "UpdateItem").await?;
        inner
            .set_snapshot_root(log, segment, num, root, units)
            .await?;
        if self.remembers()
            && let Ok(mut r) = self.recent.lock()
        {
            r.roots.insert((log, segment, num), Instant::now());
        }
        if self.lose_response() {
            return inner
                .set_snapshot_root(log, segment, num, root, units)
                .await;
        }
        Ok(())
    }

    async fn advance_last_snapshot<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        segment: u64,
        num: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        self.before(DDB, "UpdateItem").await?;
        // What a stale read would show after the move (bookkeeping: not a request of the log's).
        let before = if self.remembers() {
            inner
                .segment(
                    log,
                    segment,
                    Consistency::Strong,
                    &mut RequestUnits::default(),
                )
                .await?
                .and_then(|s| s.last_snapshot)
        } else {
            None
        };
        let moved = inner
            .advance_last_snapshot(log, segment, num, units)
            .await?;
        if moved {
            if self.remembers()
                && let Ok(mut r) = self.recent.lock()
            {
                r.last_snapshots
                    .insert((log, segment), (Instant::now(), before));
            }
            if self.lose_response() {
                // The retry finds it already there.
                return inner.advance_last_snapshot(log, segment, num, units).await;
            }
        }
        Ok(moved)
    }
}

#[async_trait]
impl ClientRunsLayer for Arc<Faults> {
    async fn put_client_entries<S: ClientRuns + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        entry: &EntryRecord,
        ranges: &[RangePut],
        units: &mut RequestUnits,
    ) -> Result<ClientPutOutcome, StoreError> {
        self.before(DDB, "TransactWriteItems").await?;
        if self.conflict() {
            return Ok(ClientPutOutcome::Interrupted);
        }
        let out = inner.put_client_entries(log, entry, ranges, units).await?;
        if out == ClientPutOutcome::Written && self.applied_entry(log, entry) {
            // A retry without the first call's idempotency token: both conditions fail
            // against what the first call wrote.
            return inner.put_client_entries(log, entry, ranges, units).await;
        }
        Ok(out)
    }
}

#[async_trait]
impl DedupeLayer for Arc<Faults> {
    async fn put_entry_once<S: DedupeKeys + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        entry: &EntryRecord,
        seq: u64,
        key: &DedupeRecord,
        units: &mut RequestUnits,
    ) -> Result<OnceOutcome, StoreError> {
        self.before(DDB, "TransactWriteItems").await?;
        if self.conflict() {
            return Ok(OnceOutcome::Interrupted);
        }
        let out = inner.put_entry_once(log, entry, seq, key, units).await?;
        if out == OnceOutcome::Written && self.applied_entry(log, entry) {
            // A retry that does not carry the first call's idempotency token: both
            // conditions fail against what the first call wrote.
            return inner.put_entry_once(log, entry, seq, key, units).await;
        }
        Ok(out)
    }
}

#[async_trait]
impl PayloadLayer for Arc<Faults> {
    async fn put_discardable<S: PayloadStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
        bytes: Bytes,
    ) -> Result<(), StoreError> {
        self.before("S3", "PutObject").await?;
        inner.put_discardable(key, bytes.clone()).await?;
        if self.lose_response() {
            return inner.put_discardable(key, bytes).await;
        }
        Ok(())
    }
}

// The other ports: every call counted, maybe delayed or throttled ([`Layer::around`]).
impl GroupOwnersLayer for Arc<Faults> {}
impl crate::ports::NamedVersionsLayer for Arc<Faults> {}
impl PushQueueLayer for Arc<Faults> {}
impl PendingLayer for Arc<Faults> {}
impl LogPurgeLayer for Arc<Faults> {}
impl ObjectPurgeLayer for Arc<Faults> {}

impl Faults {
    fn note_member(&self, user: &str, log: LogId) {
        if !self.remembers() {
            return;
        }
        if let Ok(mut r) = self.recent.lock() {
            let window = self.profile.stale_for;
            r.members.retain(|_, t| t.elapsed() < window);
            r.members.insert((user.to_owned(), log), Instant::now());
        }
    }
}

/// The snapshot engine's [`BlobStore`](sheetlog_sheet::snapshot::BlobStore) with throttling
/// (`SlowDown`) and latency spikes. A plain put is idempotent (content-addressed keys), so its
/// lost response is just a rewrite of the same bytes and is not modelled. A chunk write
/// (`put_if_absent`, a PUT with `If-None-Match: *` on S3) may lose its response: the SDK's retry
/// then finds the object the first attempt wrote and is refused (412), so the caller hears
/// "already there" for a chunk it wrote itself.
#[cfg(feature = "engine")]
pub type FaultyBlobStore<B> = Layered<B, Arc<Faults>>;

#[cfg(feature = "engine")]
#[async_trait]
impl crate::ports::BlobLayer for Arc<Faults> {
    async fn put_if_absent<S: sheetlog_sheet::snapshot::BlobStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
        bytes: Bytes,
    ) -> Result<bool, sheetlog_sheet::snapshot::BlobError> {
        self.before("S3", "PutObject").await?;
        let wrote = inner.put_if_absent(key, bytes.clone()).await?;
        if wrote && self.lose_response() {
            return inner.put_if_absent(key, bytes).await;
        }
        Ok(wrote)
    }
}

#[path = "faults_catalog.rs"]
mod catalog;

#[cfg(test)]
#[path = "faults_tests.rs"]
mod tests;
