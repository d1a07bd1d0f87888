//! A seeded, reproducible fault-injecting adapter behind the log's ports, modelling what DynamoDB
//! and S3 do and the emulator does not (`docs/storage.md`, "Failure modes"):
//!
//! - **stale reads**: an eventually consistent read may, for a bounded time after a write, return
//!   the view from before it — a page or a "newest entry" without the newest items, an entry
//!   without its just-set snapshot root, a segment without its just-advanced last snapshot, the
//!   segment list without a just-created segment;
//! - **lost responses**: a write is applied and its response lost; the SDK retries it (a
//!   conditional put then fails against its own item; a transaction carries an idempotency token,
//!   so its retry reports success);
//! - **throttling**: `ProvisionedThroughputExceededException` / `ThrottlingException` from
//!   DynamoDB, `SlowDown` from S3, after the SDK's own retries ([`StoreError::Throttled`]);
//! - **transaction conflicts**: `TransactionCanceled` with `TransactionConflict`
//!   ([`TxOutcome::Interrupted`]);
//! - **latency spikes**.
//!
//! Every decision comes from one seeded generator, so a run is reproducible from its profile and
//! seed (given the same interleaving). Counters report what was injected, and how many calls
//! (requests) passed through: with the `none` profile the adapter is a request counter, which the
//! scale benchmark uses over the emulator and the in-memory stores alike.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::domain::clients::ClientRange;
use crate::domain::dedupe::{DedupeHit, DedupeKey, DedupeRecord};
use crate::domain::{EntryRecord, LogId, RequestUnits, SegmentRecord};
use crate::error::StoreError;
use crate::ports::{
    ClientPutOutcome, Consistency, EntryPage, LogStore, OnceOutcome, PayloadStore, PutOutcome,
    RangePut, TxOutcome,
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
    /// The named profiles: `none`, `stale`, `lossy`, `throttle`, `conflict`, `hostile` (all of
    /// them at once).
    pub fn named(name: &str) -> Option<Self> {
        let none = Self {
            name: name.to_owned(),
            stale_read: 0.0,
            stale_for: Duration::from_millis(200),
            lost_response: 0.0,
            throttle: 0.0,
            tx_conflict: 0.0,
            latency_spike: 0.0,
            spike: Duration::from_millis(20),
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

/// The shared fault source: profile, seeded generator, the recent writes stale reads hide, and
/// counters.
#[derive(Debug)]
pub struct Faults {
    pub profile: FaultProfile,
    pub counts: FaultCounts,
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
}

impl Faults {
    pub fn new(profile: FaultProfile, seed: u64) -> Arc<Self> {
        Arc::new(Self {
            profile,
            counts: FaultCounts::default(),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            recent: Mutex::new(Recent::default()),
        })
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

/// [`LogStore`] with faults.
#[derive(Debug)]
pub struct FaultyLogStore<S> {
    inner: S,
    faults: Arc<Faults>,
}

impl<S> FaultyLogStore<S> {
    pub fn new(inner: S, faults: Arc<Faults>) -> Self {
        Self { inner, faults }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }
}

const DDB: &str = "DynamoDB";

impl<S: LogStore> FaultyLogStore<S> {
    /// A transaction: maybe cancelled for a conflict before it applies; maybe applied with its
    /// response lost (the SDK's retry carries the same idempotency token and reports success).
    async fn transaction(
        &self,
        log: LogId,
        entries: &[&EntryRecord],
        segment: &SegmentRecord,
        run: impl std::future::Future<Output = Result<TxOutcome, StoreError>>,
    ) -> Result<TxOutcome, StoreError> {
        self.faults.before(DDB, "TransactWriteItems").await?;
        if self.faults.roll(self.faults.profile.tx_conflict) {
            self.faults
                .counts
                .tx_conflicts
                .fetch_add(1, Ordering::Relaxed);
            return Ok(TxOutcome::Interrupted);
        }
        let out = run.await?;
        if out == TxOutcome::Committed {
            for e in entries {
                self.faults.note_entry(log, e);
            }
            if self.faults.remembers()
                && let Ok(mut r) = self.faults.recent.lock()
            {
                r.segments.insert((log, segment.num), Instant::now());
            }
            self.faults.lose_response();
        }
        Ok(out)
    }
}

#[async_trait]
impl<S: LogStore> LogStore for FaultyLogStore<S> {
    async fn create_log(
        &self,
        log: LogId,
        segment: &SegmentRecord,
        first: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        self.transaction(
            log,
            &[first],
            segment,
            self.inner.create_log(log, segment, first, units),
        )
        .await
    }

    async fn newest_segments(
        &self,
        log: LogId,
        limit: u32,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        self.faults.before(DDB, "Query").await?;
        if !self.faults.stale(consistency) {
            return self
                .inner
                .newest_segments(log, limit, consistency, units)
                .await;
        }
        // The view from before recent writes: no just-created segment (unless it is the only
        // one), no just-advanced last snapshot.
        let all = self
            .inner
            .newest_segments(log, limit.saturating_add(1), consistency, units)
            .await?;
        let (out, hid) = {
            let Ok(recent) = self.faults.recent.lock() else {
                return Ok(all.into_iter().take(limit as usize).collect());
            };
            let mut out = Vec::new();
            let mut hid = false;
            for (i, mut s) in all.into_iter().enumerate() {
                if i == 0 && self.faults.is_recent(recent.segments.get(&(log, s.num))) {
                    hid = true;
                    continue;
                }
                if let Some((at, before)) = recent.last_snapshots.get(&(log, s.num))
                    && at.elapsed() < self.faults.profile.stale_for
                {
                    s.last_snapshot = *before;
                    hid = true;
                }
                out.push(s);
            }
            (out, hid)
        };
        let mut out = out;
        if out.is_empty() {
            return self
                .inner
                .newest_segments(log, limit, consistency, units)
                .await;
        }
        if hid {
            self.faults
                .counts
                .stale_reads
                .fetch_add(1, Ordering::Relaxed);
        }
        out.truncate(limit as usize);
        Ok(out)
    }

    async fn segment(
        &self,
        log: LogId,
        num: u64,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<SegmentRecord>, StoreError> {
        self.faults.before(DDB, "GetItem").await?;
        let mut seg = self.inner.segment(log, num, consistency, units).await?;
        if self.faults.stale(consistency)
            && let (Some(s), Ok(recent)) = (seg.as_mut(), self.faults.recent.lock())
        {
            if self.faults.is_recent(recent.segments.get(&(log, num))) {
                self.faults
                    .counts
                    .stale_reads
                    .fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
            if let Some((at, before)) = recent.last_snapshots.get(&(log, num))
                && at.elapsed() < self.faults.profile.stale_for
            {
                self.faults
                    .counts
                    .stale_reads
                    .fetch_add(1, Ordering::Relaxed);
                s.last_snapshot = *before;
            }
        }
        Ok(seg)
    }

    async fn all_segments(
        &self,
        log: LogId,
        units: &mut RequestUnits,
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        self.faults.before(DDB, "Query").await?;
        self.inner.all_segments(log, units).await
    }

    async fn newest_entry(
        &self,
        log: LogId,
        segment: u64,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<EntryRecord>, StoreError> {
        self.faults.before(DDB, "Query").await?;
        let newest = self
            .inner
            .newest_entry(log, segment, consistency, units)
            .await?;
        let Some(mut e) = newest else { return Ok(None) };
        if !self.faults.stale(consistency) {
            return Ok(Some(e));
        }
        // Walk back past the entries written within the window.
        let mut hid = false;
        loop {
            let recent = self
                .faults
                .recent
                .lock()
                .map(|r| self.faults.is_recent(r.entries.get(&(log, segment, e.num))))
                .unwrap_or(false);
            if !recent || e.num == 0 {
                break;
            }
            let page = self
                .inner
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
            self.faults
                .counts
                .stale_reads
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(Some(self.hide_root(log, e)))
    }

    async fn put_entry(
        &self,
        log: LogId,
        entry: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<PutOutcome, StoreError> {
        self.faults.before(DDB, "PutItem").await?;
        let out = self.inner.put_entry(log, entry, units).await?;
        if out == PutOutcome::Written {
            self.faults.note_entry(log, entry);
            if self.faults.lose_response() {
                // What the SDK's automatic retry sees after the first response went missing.
                return self.inner.put_entry(log, entry, units).await;
            }
        }
        Ok(out)
    }

    async fn put_client_entries(
        &self,
        log: LogId,
        entry: &EntryRecord,
        ranges: &[RangePut],
        units: &mut RequestUnits,
    ) -> Result<ClientPutOutcome, StoreError> {
        self.faults.before(DDB, "TransactWriteItems").await?;
        if self.faults.roll(self.faults.profile.tx_conflict) {
            self.faults
                .counts
                .tx_conflicts
                .fetch_add(1, Ordering::Relaxed);
            return Ok(ClientPutOutcome::Interrupted);
        }
        let out = self
            .inner
            .put_client_entries(log, entry, ranges, units)
            .await?;
        if out == ClientPutOutcome::Written {
            self.faults.note_entry(log, entry);
            if self.faults.lose_response() {
                // A retry without the first call's idempotency token: both conditions fail
                // against what the first call wrote.
                return self
                    .inner
                    .put_client_entries(log, entry, ranges, units)
                    .await;
            }
        }
        Ok(out)
    }

    async fn client_ranges(
        &self,
        log: LogId,
        client: &str,
        at_most: Option<u64>,
        limit: u32,
        units: &mut RequestUnits,
    ) -> Result<Vec<ClientRange>, StoreError> {
        self.faults.before(DDB, "Query").await?;
        self.inner
            .client_ranges(log, client, at_most, limit, units)
            .await
    }

    async fn group_clients(
        &self,
        log: LogId,
        group: &str,
        units: &mut RequestUnits,
    ) -> Result<Vec<String>, StoreError> {
        self.faults.before(DDB, "GetItem").await?;
        self.inner.group_clients(log, group, units).await
    }

    async fn put_entry_once(
        &self,
        log: LogId,
        entry: &EntryRecord,
        seq: u64,
        key: &DedupeRecord,
        units: &mut RequestUnits,
    ) -> Result<OnceOutcome, StoreError> {
        self.faults.before(DDB, "TransactWriteItems").await?;
        if self.faults.roll(self.faults.profile.tx_conflict) {
            self.faults
                .counts
                .tx_conflicts
                .fetch_add(1, Ordering::Relaxed);
            return Ok(OnceOutcome::Interrupted);
        }
        let out = self
            .inner
            .put_entry_once(log, entry, seq, key, units)
            .await?;
        if out == OnceOutcome::Written {
            self.faults.note_entry(log, entry);
            if self.faults.lose_response() {
                // A retry that does not carry the first call's idempotency token: both
                // conditions fail against what the first call wrote.
                return self.inner.put_entry_once(log, entry, seq, key, units).await;
            }
        }
        Ok(out)
    }

    async fn find_key(
        &self,
        key: &DedupeKey,
        columns: &[String],
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<DedupeHit>, StoreError> {
        self.faults.before(DDB, "GetItem").await?;
        self.inner.find_key(key, columns, consistency, units).await
    }

    async fn start_segment(
        &self,
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
            self.inner.start_segment(log, end, segment, first, units),
        )
        .await
    }

    async fn read_entries(
        &self,
        log: LogId,
        segment: u64,
        from: u64,
        limit: usize,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<EntryPage, StoreError> {
        self.faults.before(DDB, "Query").await?;
        let mut page = self
            .inner
            .read_entries(log, segment, from, limit, consistency, units)
            .await?;
        if !self.faults.stale(consistency) {
            return Ok(page);
        }
        // An older view: the page ends before the first entry written within the window.
        let cut = self.faults.recent.lock().ok().and_then(|r| {
            page.entries
                .iter()
                .position(|e| self.faults.is_recent(r.entries.get(&(log, segment, e.num))))
        });
        if let Some(cut) = cut {
            self.faults
                .counts
                .stale_reads
                .fetch_add(1, Ordering::Relaxed);
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

    async fn set_snapshot_root(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        root: &str,
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        self.faults.before(DDB, "UpdateItem").await?;
        self.inner
            .set_snapshot_root(log, segment, num, root, units)
            .await?;
        if self.faults.remembers()
            && let Ok(mut r) = self.faults.recent.lock()
        {
            r.roots.insert((log, segment, num), Instant::now());
        }
        if self.faults.lose_response() {
            return self
                .inner
                .set_snapshot_root(log, segment, num, root, units)
                .await;
        }
        Ok(())
    }

    async fn advance_last_snapshot(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        self.faults.before(DDB, "UpdateItem").await?;
        // What a stale read would show after the move (bookkeeping: not a request of the log's).
        let before = if self.faults.remembers() {
            self.inner
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
        let moved = self
            .inner
            .advance_last_snapshot(log, segment, num, units)
            .await?;
        if moved {
            if self.faults.remembers()
                && let Ok(mut r) = self.faults.recent.lock()
            {
                r.last_snapshots
                    .insert((log, segment), (Instant::now(), before));
            }
            if self.faults.lose_response() {
                // The retry finds it already there.
                return self
                    .inner
                    .advance_last_snapshot(log, segment, num, units)
                    .await;
            }
        }
        Ok(moved)
    }
}

impl<S> FaultyLogStore<S> {
    /// A stale view of an entry whose snapshot root was set within the window.
    fn hide_root(&self, log: LogId, mut e: EntryRecord) -> EntryRecord {
        if e.snapshot_root.is_some()
            && let Ok(r) = self.faults.recent.lock()
            && self.faults.is_recent(r.roots.get(&(log, e.segment, e.num)))
        {
            self.faults
                .counts
                .stale_reads
                .fetch_add(1, Ordering::Relaxed);
            e.snapshot_root = None;
        }
        e
    }
}

/// [`PayloadStore`] with throttling (`SlowDown`), latency spikes and lost responses (a put is
/// idempotent: its retry writes the same bytes again).
#[derive(Debug)]
pub struct FaultyPayloadStore<P> {
    inner: P,
    faults: Arc<Faults>,
}

impl<P> FaultyPayloadStore<P> {
    pub fn new(inner: P, faults: Arc<Faults>) -> Self {
        Self { inner, faults }
    }
}

#[async_trait]
impl<P: PayloadStore> PayloadStore for FaultyPayloadStore<P> {
    async fn put_discardable(&self, key: &str, bytes: Bytes) -> Result<(), StoreError> {
        self.faults.before("S3", "PutObject").await?;
        self.inner.put_discardable(key, bytes.clone()).await?;
        if self.faults.lose_response() {
            return self.inner.put_discardable(key, bytes).await;
        }
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        self.faults.before("S3", "GetObject").await?;
        self.inner.get(key).await
    }
}

/// The snapshot engine's [`BlobStore`](sheetlog_sheet::snapshot::BlobStore) with throttling
/// (`SlowDown`) and latency spikes. Puts are idempotent (content-addressed keys), so a lost
/// response is just a rewrite of the same bytes and is not modelled separately.
#[cfg(feature = "engine")]
#[derive(Debug)]
pub struct FaultyBlobStore<B> {
    inner: B,
    faults: Arc<Faults>,
}

#[cfg(feature = "engine")]
impl<B> FaultyBlobStore<B> {
    pub fn new(inner: B, faults: Arc<Faults>) -> Self {
        Self { inner, faults }
    }
}

#[cfg(feature = "engine")]
#[async_trait]
impl<B: sheetlog_sheet::snapshot::BlobStore> sheetlog_sheet::snapshot::BlobStore
    for FaultyBlobStore<B>
{
    async fn put(
        &self,
        key: &str,
        bytes: Bytes,
    ) -> Result<(), sheetlog_sheet::snapshot::BlobError> {
        self.faults
            .before("S3", "PutObject")
            .await
            .map_err(|e| sheetlog_sheet::snapshot::BlobError::new("put", key, e))?;
        self.inner.put(key, bytes).await
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, sheetlog_sheet::snapshot::BlobError> {
        self.faults
            .before("S3", "GetObject")
            .await
            .map_err(|e| sheetlog_sheet::snapshot::BlobError::new("get", key, e))?;
        self.inner.get(key).await
    }

    async fn exists(&self, key: &str) -> Result<bool, sheetlog_sheet::snapshot::BlobError> {
        self.faults
            .before("S3", "HeadObject")
            .await
            .map_err(|e| sheetlog_sheet::snapshot::BlobError::new("exists", key, e))?;
        self.inner.exists(key).await
    }
}
