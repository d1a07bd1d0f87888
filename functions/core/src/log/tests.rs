//! The log's algorithms over the in-memory store, under the failure modes the fault adapter
//! models. Each test here failed before the fix it guards (see the test's comment).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Barrier;

use super::test_support::{SET, append_bodies, mem_log, raw_set_entry};
use super::*;
use crate::domain::NewEntry;
use crate::error::StoreError;
use crate::faults::{FaultProfile, Faults, FaultyLogStore};
use crate::layer::{Layer, Layered};
use crate::memory::{MemLogStore, MemPayloadStore};
use crate::ports::{ClientRunsLayer, DedupeLayer, EntriesLayer, LogEntries, PutOutcome};

/// Every eventually consistent read is stale for a minute after a write: reads see only what
/// was written before the window, as long as a strong read is not asked for.
pub(super) fn always_stale() -> Arc<Faults> {
    let mut p = FaultProfile::named("none").expect("profile");
    p.stale_read = 1.0;
    p.stale_for = Duration::from_secs(60);
    Faults::new(p, 7)
}

/// Lets `n` callers of `put_entry` through together, so they all read the head before any of
/// them writes. A layer: every other call goes through unchanged.
#[derive(Debug)]
pub(super) struct RacingPuts {
    pub(super) gate: Barrier,
}

impl Layer for RacingPuts {}
impl ClientRunsLayer for RacingPuts {}
impl DedupeLayer for RacingPuts {}

#[async_trait]
impl EntriesLayer for RacingPuts {
    async fn put_entry<S: LogEntries + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        entry: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<PutOutcome, StoreError> {
        if entry.num == 1 {
            self.gate.wait().await;
        }
        inner.put_entry(log, entry, units).await
    }
}

/// Hole 1: the append recognised "my own earlier attempt" by equal contents, so two writers
/// appending the same body in the same second both got the same sequence and one write was lost.
#[tokio::test]
async fn two_writers_of_the_same_body_get_two_entries() {
    let store = Layered::new(
        MemLogStore::new(),
        RacingPuts {
            gate: Barrier::new(2),
        },
    );
    let log = Arc::new(EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap());
    let id = log.create().await.unwrap().log;
    let (a, b) = tokio::join!(
        log.append(id, raw_set_entry(b"7"), AppendOptions::default()),
        log.append(id, raw_set_entry(b"7"), AppendOptions::default())
    );
    let (a, b) = (a.unwrap().seq, b.unwrap().seq);
    assert_ne!(a, b, "two appends acknowledged with one sequence");
    let page = log.read_since(id, 0, 10).await.unwrap();
    assert_eq!(page.entries.len(), 3, "entry 0 and both appends");
}

/// A retry of the same call after a lost response is still recognised (and not appended twice).
#[tokio::test]
async fn a_lost_put_response_is_recognised_by_the_calls_identity() {
    let mut p = FaultProfile::named("none").unwrap();
    p.lost_response = 1.0;
    let faults = Faults::new(p, 3);
    let store = FaultyLogStore::new(MemLogStore::new(), faults.clone());
    let log = EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap();
    let id = log.create().await.unwrap().log;
    for i in 1..=5u64 {
        let out = log
            .append(id, raw_set_entry(b"x"), AppendOptions::default())
            .await
            .unwrap();
        assert_eq!(out.seq, i);
    }
    assert!(
        faults
            .counts
            .lost_responses
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 5
    );
    assert_eq!(log.read_since(id, 0, 100).await.unwrap().entries.len(), 6);
}

/// Hole 2: a stale (empty) page followed by a strong read that found the segment's End Segment
/// entry jumped to the next segment and skipped the ended segment's tail.
#[tokio::test]
async fn a_stale_page_at_a_segment_end_does_not_skip_entries() {
    let faults = always_stale();
    let store = FaultyLogStore::new(MemLogStore::new(), faults.clone());
    let log = EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap();
    let id = log.create().await.unwrap().log;
    append_bodies(&log, id, SET, &[b"a", b"b", b"c"]).await;
    let started = log.start_segment(id).await.unwrap();
    assert_eq!(started.end_seq, 4);
    let page = log.read_since(id, 1, 100).await.unwrap();
    let seqs: Vec<u64> = page.entries.iter().map(|e| e.seq).collect();
    assert_eq!(
        &seqs[..4],
        &[1, 2, 3, 4],
        "the ended segment's tail is read: {seqs:?}"
    );
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "gapless: {seqs:?}"
    );
}

/// Hole 3: a transaction cancelled for a conflict with another request surfaced as an error.
#[tokio::test]
async fn transactions_cancelled_for_a_conflict_are_retried() {
    let mut p = FaultProfile::named("conflict").unwrap();
    p.tx_conflict = 0.5;
    let faults = Faults::new(p, 11);
    let store = FaultyLogStore::new(MemLogStore::new(), faults.clone());
    let cfg = LogConfig {
        min_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(2),
        ..LogConfig::default()
    };
    let log = EventLog::new(store, MemPayloadStore::new(), cfg).unwrap();
    for _ in 0..20 {
        let id = log.create().await.unwrap().log;
        log.append(id, raw_set_entry(b"x"), AppendOptions::default())
            .await
            .unwrap();
        log.start_segment(id).await.unwrap();
    }
    assert!(
        faults
            .counts
            .tx_conflicts
            .load(std::sync::atomic::Ordering::Relaxed)
            > 5
    );
}

/// Hole 4: load read the newest completed Snapshot entry eventually consistently and could see
/// it without its root (written just before), then failed to find the snapshot.
#[tokio::test]
async fn load_reads_a_snapshot_root_that_a_stale_read_misses() {
    let faults = always_stale();
    let mem = Arc::new(MemLogStore::new());
    let log = EventLog::new(mem.clone(), MemPayloadStore::new(), LogConfig::default()).unwrap();
    let id = log.create().await.unwrap().log;
    log.append(id, raw_set_entry(b"x"), AppendOptions::default())
        .await
        .unwrap();
    let snap = log
        .append(
            id,
            NewEntry::new(EntryType::SNAPSHOT, 0, Bytes::new()),
            AppendOptions::default(),
        )
        .await
        .unwrap();
    // The root is written through the faulty store (so eventual reads miss it for a while);
    // the segment's Last Snapshot is already visible to every read.
    let faulty = FaultyLogStore::new(mem.clone(), faults.clone());
    let mut units = RequestUnits::default();
    faulty
        .set_snapshot_root(
            id,
            snap.segment,
            snap.entry,
            "snapshots/x/root.json",
            &mut units,
        )
        .await
        .unwrap();
    mem.advance_last_snapshot(id, snap.segment, snap.entry, &mut units)
        .await
        .unwrap();
    let reader = EventLog::new(faulty, MemPayloadStore::new(), LogConfig::default()).unwrap();
    let loaded = reader.load(id).await.unwrap();
    assert_eq!(loaded.snapshot.seq, snap.seq);
    assert_eq!(
        loaded.snapshot.snapshot_root.as_deref(),
        Some("snapshots/x/root.json")
    );
    assert!(
        faults
            .counts
            .stale_reads
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
}

/// Hole 5: load read the whole tail after the snapshot into memory, however long.
#[tokio::test]
async fn load_returns_at_most_a_page_and_says_more_follows() {
    let cfg = LogConfig {
        page_size: 10,
        ..LogConfig::default()
    };
    let log = EventLog::new(MemLogStore::new(), MemPayloadStore::new(), cfg).unwrap();
    let id = log.create().await.unwrap().log;
    for _ in 0..30 {
        log.append(id, raw_set_entry(b"x"), AppendOptions::default())
            .await
            .unwrap();
    }
    let loaded = log.load(id).await.unwrap();
    assert_eq!(loaded.entries.len(), 10);
    assert!(!loaded.complete);
    assert_eq!(loaded.next_seq, 11);
    let rest = log.read_since(id, loaded.next_seq, 100).await.unwrap();
    assert_eq!(rest.entries.len(), 20);
    assert!(rest.complete);
}

/// Issue 26: reads held every body of a page (up to 1,001 entries for a load) before trimming,
/// so a few large entries could exhaust a function's memory. A page now ends once the bodies it
/// holds reach `read_budget_bytes`, says it is not complete, and the reader goes on from there.
#[tokio::test]
async fn reads_end_a_page_early_at_the_byte_budget() {
    let cfg = LogConfig {
        read_budget_bytes: 250 * 1024,
        ..LogConfig::default()
    };
    let log = EventLog::new(MemLogStore::new(), MemPayloadStore::new(), cfg).unwrap();
    let id = log.create().await.unwrap().log;
    for i in 0..10u8 {
        let e = raw_set_entry(vec![i; 100 * 1024]);
        log.append(id, e, AppendOptions::default()).await.unwrap();
    }
    let page = log.read_since(id, 1, 100).await.unwrap();
    assert_eq!(page.entries.len(), 3, "100 KB bodies, 250 KB budget");
    assert!(!page.complete);
    assert_eq!(page.next_seq, 4);
    // Going on from there reaches the end without skipping anything.
    let mut seqs: Vec<u64> = page.entries.iter().map(|e| e.seq).collect();
    let mut at = page.next_seq;
    loop {
        let p = log.read_since(id, at, 100).await.unwrap();
        assert!(p.entries.iter().map(|e| e.body.len()).sum::<usize>() < 400 * 1024);
        seqs.extend(p.entries.iter().map(|e| e.seq));
        at = p.next_seq;
        if p.complete {
            break;
        }
    }
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
    let loaded = log.load(id).await.unwrap();
    assert!(!loaded.complete);
    assert_eq!(
        loaded.entries.len(),
        3,
        "the snapshot's empty body, then three"
    );
    assert_eq!(loaded.next_seq, 4);
}

#[tokio::test]
async fn a_pull_reads_what_changed_since_its_cookie_in_one_query() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    append_bodies(&log, id, SET, &[b"a", b"b", b"c"]).await;
    let (next, hint) = log.next_seq_from(id, None).await.unwrap();
    assert_eq!(next, 4);
    let unchanged = log.pull_since(id, 4, 100, hint).await.unwrap().unwrap();
    assert!(unchanged.entries.is_empty());
    assert_eq!(unchanged.next_seq, 4);
    let behind = log.pull_since(id, 2, 100, hint).await.unwrap().unwrap();
    let seqs: Vec<u64> = behind.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [2, 3]);
    assert_eq!(behind.next_seq, 4);
    assert_eq!(&behind.entries[0].body[..], b"b");
    // What one read cannot decide is left to the head check.
    assert!(
        log.pull_since(id, 9, 100, hint).await.unwrap().is_none(),
        "a cookie past the end"
    );
    assert!(
        log.pull_since(id, 0, 100, hint).await.unwrap().is_none(),
        "no entry before cookie 0"
    );
    assert!(
        log.pull_since(id, 1, 2, hint).await.unwrap().is_none(),
        "more entries than the limit"
    );
    log.start_segment(id).await.unwrap();
    assert!(
        log.pull_since(id, 4, 100, hint).await.unwrap().is_none(),
        "the hinted segment has ended"
    );
    let (_, moved) = log.next_seq_from(id, None).await.unwrap();
    let after = log.pull_since(id, 5, 100, moved).await.unwrap();
    assert!(
        after.is_none(),
        "the entry before the cookie is the old segment's end"
    );
    let at_new = log.pull_since(id, 6, 100, moved).await.unwrap().unwrap();
    assert_eq!(at_new.next_seq, 6);
}

/// Under stale reads a pull's one read may lag the log, never lead it: it answers an older head
/// (the cookie itself when the news is not visible yet) or leaves the pull to the head check.
#[tokio::test]
async fn a_pull_under_stale_reads_lags_and_never_leads() {
    let mut p = FaultProfile::named("none").expect("profile");
    p.stale_read = 1.0;
    p.stale_for = Duration::from_millis(200);
    let faults = Faults::new(p, 7);
    let store = FaultyLogStore::new(MemLogStore::new(), faults.clone());
    let log = EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap();
    let id = log.create().await.unwrap().log;
    append_bodies(&log, id, SET, &[b"a", b"b"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // "c" is written within the stale window: reads do not show it yet.
    append_bodies(&log, id, SET, &[b"c"]).await;
    let (next, hint) = log.next_seq_from(id, None).await.unwrap();
    assert_eq!(next, 4);
    let lagging = log.pull_since(id, 3, 100, hint).await.unwrap().unwrap();
    assert!(lagging.entries.is_empty(), "{lagging:?}");
    assert_eq!(
        lagging.next_seq, 3,
        "the cookie again: nothing new yet, not a gap"
    );
    let from_two = log.pull_since(id, 2, 100, hint).await.unwrap().unwrap();
    assert_eq!(from_two.entries.len(), 1);
    assert_eq!(from_two.next_seq, 3, "up to what it saw");
    // The entry before the cookie is itself too new to show: the head check decides.
    assert!(log.pull_since(id, 4, 100, hint).await.unwrap().is_none());
    assert!(
        faults
            .counts
            .stale_reads
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let caught_up = log.pull_since(id, 3, 100, hint).await.unwrap().unwrap();
    assert_eq!(caught_up.next_seq, 4);
}
