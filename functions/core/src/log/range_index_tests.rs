//! Range items written later: what every reader sees past the index mark, how windows are
//! indexed, and exactly-once when writers die before indexing, race to index, or push directly.
#![cfg(feature = "engine")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::test_support::{entry, mem_log, set_a1 as set, set_mutations};
use super::*;
use crate::error::StoreError;
use crate::faults::{FaultProfile, Faults, FaultyLogStore};
use crate::memory::{MemLogStore, MemPayloadStore};
use crate::ports::{ClientRuns, LogStore};
use crate::sheet::EntryBody;

fn push(client: &str, ids: std::ops::RangeInclusive<u64>) -> ClientPush {
    ClientPush {
        group: "g".into(),
        client: client.into(),
        mutations: set_mutations(ids),
    }
}

/// Every client's ids in log order, and where each landed, from the entries' runs.
async fn recorded<S: LogStore, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
) -> BTreeMap<String, Vec<(u64, u64)>> {
    let page = loop {
        let (Ok((next, _)), Ok(page)) =
            (log.next_seq(id).await, log.read_since(id, 0, 100_000).await)
        else {
            continue;
        };
        if page.entries.len() as u64 == next {
            break page;
        }
    };
    let mut seen: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for e in &page.entries {
        let body = EntryBody::decode(e.kind.0, e.version, &e.body).unwrap();
        for run in body.runs() {
            seen.entry(run.client.clone())
                .or_default()
                .extend((run.first..=run.last).map(|m| (m, e.seq)));
        }
    }
    seen
}

/// Fails every deferred range write while switched on: a writer that dies before indexing.
#[derive(Debug, Default, Clone)]
struct NoIndexing(Arc<AtomicBool>);

#[async_trait::async_trait]
impl crate::layer::Layer for NoIndexing {
    async fn around<T, E, F>(&self, call: crate::layer::Call, run: F) -> Result<T, E>
    where
        T: Send,
        E: From<StoreError> + Send,
        F: std::future::Future<Output = Result<T, E>> + Send,
    {
        if call.method == "put_deferred_ranges" && self.0.load(Ordering::SeqCst) {
            return Err(StoreError::Throttled {
                service: "DynamoDB",
                operation: "PutItem",
            }
            .into());
        }
        run.await
    }
}
impl crate::ports::EntriesLayer for NoIndexing {}
impl crate::ports::ClientRunsLayer for NoIndexing {}
impl crate::ports::DedupeLayer for NoIndexing {}

type Layered = crate::layer::Layered<MemLogStore, NoIndexing>;

fn unindexed_log() -> (EventLog<Layered, MemPayloadStore>, NoIndexing) {
    let switch = NoIndexing::default();
    let store = crate::layer::Layered::new(MemLogStore::new(), switch.clone());
    // Indexing retries a throttled write: keep its waits short.
    let cfg = LogConfig {
        min_backoff: std::time::Duration::from_micros(100),
        max_backoff: std::time::Duration::from_micros(200),
        ..LogConfig::default()
    };
    let log = EventLog::new(store, MemPayloadStore::new(), cfg).unwrap();
    (log, switch)
}

/// The log's index mark, after checking it is within a window of the head (`what` says why it
/// should be).
async fn mark_near_head<S: LogStore, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    what: &str,
) -> u64 {
    let mut u = RequestUnits::default();
    let mark = log.store().index_mark(id, &mut u).await.unwrap().unwrap();
    let (next, _) = log.next_seq(id).await.unwrap();
    assert!(
        next - mark <= INDEX_WINDOW + 1,
        "{what}: mark {mark}, next {next}"
    );
    mark
}

/// Every reader's answer for every client and mutation matches the log.
async fn readers_agree_with_the_log<S: LogStore, P: PayloadStore>(log: &EventLog<S, P>, id: LogId) {
    let truth = recorded(log, id).await;
    let (next, _) = log.next_seq(id).await.unwrap();
    for (client, ids) in &truth {
        let newest = log.last_mutation(id, client).await.unwrap().unwrap();
        assert_eq!(newest.last, ids.last().unwrap().0, "client {client}");
        assert_eq!(newest.seq, ids.last().unwrap().1, "client {client}");
        for &(m, seq) in ids {
            let found = log.find_mutation(id, client, m).await.unwrap().unwrap();
            assert_eq!(found.seq, seq, "client {client} mutation {m}");
            assert!(found.contains(m));
        }
        for before in [next / 3, next / 2, next] {
            let expected = ids
                .iter()
                .filter(|(_, s)| *s < before)
                .map(|(m, _)| *m)
                .max()
                .unwrap_or(0);
            assert_eq!(
                log.last_mutation_before(id, client, before).await.unwrap(),
                expected,
                "client {client} before {before}"
            );
        }
    }
    let group = log
        .group_last_mutations_before(id, "g", next)
        .await
        .unwrap();
    let expected: BTreeMap<String, u64> = truth
        .iter()
        .map(|(c, ids)| (c.clone(), ids.last().unwrap().0))
        .collect();
    assert_eq!(group, expected);
}

#[tokio::test]
async fn runs_wait_for_their_items_yet_every_reader_sees_them() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let mut known = KnownClients::default();
    let first = log
        .push_batch_known(id, &[push("a", 1..=1)], None, &mut known)
        .await
        .unwrap();
    let second = log
        .push_batch_known(id, &[push("a", 1..=3)], None, &mut known)
        .await
        .unwrap();
    let seq = second.appended[0].seq;
    let mut u = RequestUnits::default();
    let items = log
        .store()
        .client_ranges(id, "a", None, 10, &mut u)
        .await
        .unwrap();
    assert!(items.is_empty(), "no run has its item yet: {items:?}");
    assert!(
        log.store()
            .group_clients(id, "g", &mut u)
            .await
            .unwrap()
            .is_empty()
    );
    // Yet the client and its group are known, from the entries past the mark.
    assert_eq!(
        log.group_clients(id, "g").await.unwrap(),
        vec!["a".to_owned()]
    );
    assert_eq!(
        log.client_group(id, "a").await.unwrap().as_deref(),
        Some("g")
    );
    assert_eq!(log.client_group(id, "nobody").await.unwrap(), None);
    assert_eq!(
        log.store().index_mark(id, &mut u).await.unwrap(),
        Some(first.appended[0].seq - 1),
        "the mark was set before the first deferred entry"
    );
    let newest = log.last_mutation(id, "a").await.unwrap().unwrap();
    assert_eq!((newest.last, newest.seq), (3, seq));
    assert_eq!(
        log.find_mutation(id, "a", 2).await.unwrap().unwrap().seq,
        seq
    );
    assert_eq!(log.last_mutation_before(id, "a", seq).await.unwrap(), 1);
    readers_agree_with_the_log(&log, id).await;
}

#[tokio::test]
async fn a_direct_push_after_deferred_runs_applies_nothing_twice() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let mut known = KnownClients::default();
    for upto in 1..=3 {
        log.push_batch_known(id, &[push("a", 1..=upto)], None, &mut known)
            .await
            .unwrap();
    }
    let p = push("a", 1..=5);
    let out = log
        .push_run(id, "g", "a", &p.mutations, None, RunSource::Push)
        .await
        .unwrap();
    let RunOutcome::Applied { range, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!((range.first, range.last), (4, 5));
    let ids: Vec<u64> = recorded(&log, id).await["a"].iter().map(|x| x.0).collect();
    assert_eq!(ids, vec![1, 2, 3, 4, 5]);
    readers_agree_with_the_log(&log, id).await;
}

#[tokio::test]
async fn complete_windows_are_indexed_one_item_per_client_and_window() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let mut known = KnownClients::default();
    let rounds = 2 * INDEX_WINDOW + 10;
    let mut plain_units = Vec::new();
    for upto in 1..=rounds {
        let pushes: Vec<ClientPush> = ["a", "b", "c"].iter().map(|c| push(c, 1..=upto)).collect();
        let out = log
            .push_batch_known(id, &pushes, None, &mut known)
            .await
            .unwrap();
        assert_eq!(out.appended.len(), 1);
        plain_units.push(out.units.write);
        log.index_known(id, &mut known).await.unwrap();
    }
    let mark = mark_near_head(&log, id, "the mark stays within a window of the head").await;
    let mut u = RequestUnits::default();
    assert!(
        mark >= INDEX_WINDOW,
        "at least one window indexed (mark {mark})"
    );
    let mut members = log.store().group_clients(id, "g", &mut u).await.unwrap();
    members.sort();
    assert_eq!(
        members,
        ["a", "b", "c"],
        "indexing joined each client to its group"
    );
    for c in ["a", "b", "c"] {
        let items = log
            .store()
            .client_ranges(id, c, None, 100, &mut u)
            .await
            .unwrap();
        // One per indexed window, the first keyed 1.
        assert!(items.len() <= 3, "{c}: {} items", items.len());
        assert_eq!(items.last().map(|i| (i.key, i.first)), Some((1, 1)));
        assert!(
            items.iter().any(|r| r.runs.len() > 10),
            "{c}: windows merge runs"
        );
    }
    // A batch, new clients and all, is one plain conditional put: 1 WRU for an entry under 1
    // KB, not a transaction's 2 per item (an indexing batch adds its window's items).
    let typical = plain_units.iter().filter(|w| **w <= 1.0).count();
    assert!(
        typical >= plain_units.len() - 3,
        "write units per batch: {plain_units:?}"
    );
    readers_agree_with_the_log(&log, id).await;
}

#[tokio::test]
async fn writers_that_die_before_indexing_lose_nothing_and_a_later_one_indexes() {
    let (log, no_indexing) = unindexed_log();
    let id = log.create().await.unwrap().log;
    no_indexing.0.store(true, Ordering::SeqCst);
    for upto in 1..=(INDEX_WINDOW * 2) {
        if upto == 40 {
            // The entries past the mark span two segments from here on.
            log.start_segment(id).await.unwrap();
        }
        // A fresh process each time: it knows nothing but what the log says.
        let mut known = KnownClients::default();
        let pushes: Vec<ClientPush> = ["a", "b"].iter().map(|c| push(c, 1..=upto)).collect();
        let out = log
            .push_batch_known(id, &pushes, None, &mut known)
            .await
            .unwrap();
        assert_eq!(out.appended.len(), 1, "round {upto}");
    }
    let mut u = RequestUnits::default();
    let mark = log.store().index_mark(id, &mut u).await.unwrap().unwrap();
    assert!(
        mark < 2,
        "nothing indexed while the writes fail (mark {mark})"
    );
    readers_agree_with_the_log(&log, id).await;
    // A redelivery to a fresh writer applies nothing again.
    let mut known = KnownClients::default();
    let pushes: Vec<ClientPush> = ["a", "b"]
        .iter()
        .map(|c| push(c, 1..=INDEX_WINDOW * 2))
        .collect();
    let again = log
        .push_batch_known(id, &pushes, None, &mut known)
        .await
        .unwrap();
    assert!(again.appended.is_empty());
    no_indexing.0.store(false, Ordering::SeqCst);
    let pushes: Vec<ClientPush> = ["a", "b"]
        .iter()
        .map(|c| push(c, 1..=INDEX_WINDOW * 2 + 1))
        .collect();
    log.push_batch_known(id, &pushes, None, &mut known)
        .await
        .unwrap();
    log.index_known(id, &mut known).await.unwrap();
    mark_near_head(&log, id, "caught up").await;
    readers_agree_with_the_log(&log, id).await;
    for (c, ids) in recorded(&log, id).await {
        let want: Vec<u64> = (1..=INDEX_WINDOW * 2 + 1).collect();
        assert_eq!(ids.iter().map(|x| x.0).collect::<Vec<_>>(), want, "{c}");
    }
}

#[tokio::test]
async fn indexers_racing_from_the_same_or_a_stale_mark_agree() {
    let (log, no_indexing) = unindexed_log();
    let log = Arc::new(log);
    let id = log.create().await.unwrap().log;
    no_indexing.0.store(true, Ordering::SeqCst);
    let mut known = KnownClients::default();
    for upto in 1..=(INDEX_WINDOW * 3) {
        // Clients take turns, so windows hold stretches of each and runs of several sizes.
        let pushes: Vec<ClientPush> = ["a", "b", "c"]
            .iter()
            .enumerate()
            .filter(|(i, _)| (upto as usize + i).is_multiple_of(2) || upto < 3)
            .map(|(_, c)| push(c, 1..=upto))
            .collect();
        log.push_batch_known(id, &pushes, None, &mut known)
            .await
            .unwrap();
    }
    // Some direct pushes in the last window: their runs have items of their own.
    for c in ["a", "b"] {
        let p = push(c, 1..=INDEX_WINDOW * 3 + 1);
        log.push_run(id, "g", c, &p.mutations, None, RunSource::Push)
            .await
            .unwrap();
    }
    no_indexing.0.store(false, Ordering::SeqCst);
    let mut u = RequestUnits::default();
    let mark = log.store().index_mark(id, &mut u).await.unwrap().unwrap();
    let (next, at) = log.next_seq_from(id, None).await.unwrap();
    // Three indexers at once from the mark, then one more from the same stale mark.
    let racers = (0..3).map(|_| {
        let log = log.clone();
        async move {
            let mut u = RequestUnits::default();
            log.index_deferred(id, mark, next, at, &mut u)
                .await
                .unwrap()
        }
    });
    let marks = futures::future::join_all(racers).await;
    assert!(
        marks.iter().all(|m| *m == marks[0] && *m > mark),
        "{marks:?}"
    );
    log.index_deferred(id, mark, next, at, &mut u)
        .await
        .unwrap();
    readers_agree_with_the_log(&log, id).await;
}

/// Two writers (an earlier invocation still finishing, a fresh one) take turns on one sheet, with
/// direct pushes and plain entries in between, under the hostile fault profile, for several
/// windows: every id lands once, in order, and every reader agrees with the log.
#[tokio::test]
async fn writers_and_direct_pushes_stay_exactly_once_across_windows_under_faults() {
    let store = FaultyLogStore::new(
        MemLogStore::new(),
        Faults::new(FaultProfile::named("hostile").unwrap(), 23),
    );
    let log = Arc::new(EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap());
    let id = loop {
        match log.create().await {
            Ok(c) => break c.log,
            Err(LogError::Store(e)) if e.is_retryable() => continue,
            Err(e) => panic!("{e}"),
        }
    };
    let retry = |e: &LogError| {
        matches!(e, LogError::Store(s) if s.is_retryable())
            || matches!(e, LogError::Contention { .. })
    };
    let mut writers = [KnownClients::default(), KnownClients::default()];
    let clients = ["a", "b", "c", "d"];
    let rounds = INDEX_WINDOW * 2 + 20;
    for upto in 1..=rounds {
        if upto.is_multiple_of(17) {
            let p = push("a", 1..=upto);
            loop {
                match log
                    .push_run(id, "g", "a", &p.mutations, None, RunSource::Push)
                    .await
                {
                    Ok(RunOutcome::AlreadyApplied { .. }) => break,
                    Ok(_) => continue,
                    Err(e) if retry(&e) => continue,
                    Err(e) => panic!("{e}"),
                }
            }
            let (code, version, body) = set(upto as f64).encode();
            let e = crate::domain::NewEntry::new(crate::domain::EntryType(code), version, body);
            loop {
                match log.append(id, e.clone(), AppendOptions::default()).await {
                    Ok(_) => break,
                    Err(err) if retry(&err) => continue,
                    Err(err) => panic!("{err}"),
                }
            }
        }
        let pushes: Vec<ClientPush> = clients.iter().map(|c| push(c, 1..=upto)).collect();
        let known = &mut writers[(upto % 2) as usize];
        if upto.is_multiple_of(29) {
            // A process that starts afresh.
            *known = KnownClients::default();
        }
        loop {
            match log.push_batch_known(id, &pushes, None, known).await {
                Ok(out) => {
                    assert!(
                        out.clients
                            .iter()
                            .all(|r| matches!(r, ClientResult::Done { last, .. } if *last >= upto)),
                        "{out:?}"
                    );
                    // Indexing under faults may give up; a later batch takes it up again.
                    let _ = log.index_known(id, known).await;
                    break;
                }
                Err(e) if retry(&e) => continue,
                Err(e) => panic!("{e}"),
            }
        }
    }
    let seen = recorded(&log, id).await;
    for c in clients {
        let ids: Vec<u64> = seen[c].iter().map(|x| x.0).collect();
        assert_eq!(ids, (1..=rounds).collect::<Vec<_>>(), "client {c}");
    }
    // Readers under faults: retry until an answer, then compare.
    let truth = seen;
    for c in clients {
        let newest = loop {
            match log.last_mutation(id, c).await {
                Ok(n) => break n.unwrap(),
                Err(e) if retry(&e) => continue,
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(newest.last, truth[c].last().unwrap().0);
    }
}

/// Throttles every `n`th entries read while `n` is above zero.
#[derive(Debug, Default, Clone)]
struct EveryNthRead {
    n: Arc<std::sync::atomic::AtomicU64>,
    calls: Arc<std::sync::atomic::AtomicU64>,
}

#[async_trait::async_trait]
impl crate::layer::Layer for EveryNthRead {
    async fn around<T, E, F>(&self, call: crate::layer::Call, run: F) -> Result<T, E>
    where
        T: Send,
        E: From<StoreError> + Send,
        F: std::future::Future<Output = Result<T, E>> + Send,
    {
        let n = self.n.load(Ordering::SeqCst);
        if call.method == "read_entries"
            && n > 0
            && (self.calls.fetch_add(1, Ordering::SeqCst) + 1).is_multiple_of(n)
        {
            return Err(StoreError::Throttled {
                service: call.service,
                operation: call.operation,
            }
            .into());
        }
        run.await
    }
}
impl crate::ports::EntriesLayer for EveryNthRead {}
impl crate::ports::ClientRunsLayer for EveryNthRead {}
impl crate::ports::DedupeLayer for EveryNthRead {}

/// Counts body objects read.
#[derive(Debug, Default, Clone)]
struct CountGets(Arc<std::sync::atomic::AtomicU64>);

impl crate::layer::Layer for CountGets {}

#[async_trait::async_trait]
impl crate::ports::PayloadLayer for CountGets {
    async fn get<S: PayloadStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
    ) -> Result<bytes::Bytes, StoreError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        inner.get(key).await
    }
}

/// Past an index mark that stalled (no writer indexed for ten pages of entries, across a
/// segment), every fourth entries read is throttled: the group commit, the readers and the
/// indexer still get through, because a throttled page is read again rather than failing the
/// whole read. Before, each round of the commit met a throttle somewhere in its long read and
/// the commit ran out of attempts, so the mark never moved and the read only grew. Every body is
/// offloaded here, and only the bodies of `mutations` entries are fetched on the way.
#[tokio::test]
async fn a_long_read_past_a_stalled_mark_rides_out_throttled_pages() {
    let layer = EveryNthRead::default();
    let store = crate::layer::Layered::new(MemLogStore::new(), layer.clone());
    let cfg = LogConfig {
        min_backoff: std::time::Duration::from_micros(100),
        max_backoff: std::time::Duration::from_micros(200),
        inline_body_max_bytes: 8,
        ..LogConfig::default()
    };
    let gets = CountGets::default();
    let payloads = crate::layer::Layered::new(MemPayloadStore::new(), gets.clone());
    let log = EventLog::new(store, payloads, cfg).unwrap();
    let id = log.create().await.unwrap().log;
    let mut known = KnownClients::default();
    log.push_batch_known(id, &[push("a", 1..=1)], None, &mut known)
        .await
        .unwrap();
    for i in 0..320u64 {
        if i == 150 {
            log.start_segment(id).await.unwrap();
        }
        let e = entry(&super::test_support::set("A1", &format!("{i:>64}")));
        log.append(id, e, AppendOptions::default()).await.unwrap();
    }
    layer.n.store(4, Ordering::SeqCst);
    // A fresh writer: it reads everything past the mark.
    let mut known = KnownClients::default();
    let pushes = [push("a", 1..=2), push("b", 1..=1)];
    gets.0.store(0, Ordering::SeqCst);
    let out = log
        .push_batch_known(id, &pushes, None, &mut known)
        .await
        .unwrap();
    assert_eq!(out.appended.len(), 1);
    let fetched = gets.0.load(Ordering::SeqCst);
    assert!(
        fetched <= 2,
        "{fetched} bodies fetched for one mutations entry"
    );
    let newest = log.last_mutation(id, "a").await.unwrap().unwrap();
    assert_eq!((newest.first, newest.last), (2, 2));
    log.index_known(id, &mut known).await.unwrap();
    mark_near_head(&log, id, "indexed through the throttles").await;
    assert!(
        layer.calls.load(Ordering::SeqCst) >= 12,
        "the reads met throttles"
    );
    layer.n.store(0, Ordering::SeqCst);
    readers_agree_with_the_log(&log, id).await;
}
