//! Group commit over the in-memory stores, with and without injected faults.
#![cfg(feature = "engine")]

use std::collections::BTreeMap;
use std::sync::Arc;

use super::test_support::{big_set, mem_log, set_a1 as set, set_mutations};
use super::*;
use crate::domain::NewEntry;
use crate::faults::{FaultProfile, Faults, FaultyLogStore};
use crate::memory::{MemLogStore, MemPayloadStore};
use crate::ports::LogStore;
use crate::sheet::EntryBody;

fn push(client: &str, ids: std::ops::RangeInclusive<u64>) -> ClientPush {
    ClientPush {
        group: format!("g-{client}"),
        client: client.into(),
        mutations: set_mutations(ids),
    }
}

/// Every client's applied and rejected ids in log order, from the entries' runs.
async fn applied<S: LogStore, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
) -> (BTreeMap<String, Vec<u64>>, usize) {
    // Until a read shows every entry (injected stale reads may hide the newest ones).
    let page = loop {
        let (Ok((next, _)), Ok(page)) =
            (log.next_seq(id).await, log.read_since(id, 0, 10_000).await)
        else {
            continue;
        };
        if page.entries.len() as u64 == next {
            break page;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut entries = 0;
    for e in &page.entries {
        let body = EntryBody::decode(e.kind.0, e.version, &e.body).unwrap();
        if !body.runs().is_empty() {
            entries += 1;
        }
        for run in body.runs() {
            seen.entry(run.client.clone())
                .or_default()
                .extend(run.first..=run.last);
        }
    }
    (seen, entries)
}

#[tokio::test]
async fn a_batch_of_many_clients_is_one_entry_with_every_range() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let pushes: Vec<ClientPush> = (0..10).map(|c| push(&format!("c{c}"), 1..=2)).collect();
    let out = log.push_batch(id, &pushes, None).await.unwrap();
    assert_eq!(out.appended.len(), 1, "one entry for ten clients");
    let seq = out.appended[0].seq;
    for (c, r) in out.clients.iter().enumerate() {
        let ClientResult::Done { last, ranges } = r else {
            panic!("{r:?}")
        };
        assert_eq!(*last, 2);
        assert_eq!(ranges.len(), 1);
        let newest = log
            .last_mutation(id, &format!("c{c}"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((newest.first, newest.last, newest.seq), (1, 2, seq));
        assert_eq!(
            log.group_clients(id, &format!("g-c{c}"))
                .await
                .unwrap()
                .len(),
            1
        );
    }
    let page = log.read_since(id, seq, 1).await.unwrap();
    let e = &page.entries[0];
    assert_eq!(e.version, crate::sheet::mutations::DEFERRED_BATCH_VERSION);
    assert!(matches!(
        EntryBody::decode(e.kind.0, e.version, &e.body).unwrap(),
        EntryBody::Batch(b) if b.runs.len() == 10
    ));
    // Redelivered: nothing is written twice.
    let again = log.push_batch(id, &pushes, None).await.unwrap();
    assert!(again.appended.is_empty());
    assert!(
        again
            .clients
            .iter()
            .all(|r| matches!(r, ClientResult::Done { last: 2, ranges } if ranges.is_empty()))
    );
    // Half applied (a lost answer), then a longer push: only the rest is written.
    let more: Vec<ClientPush> = (0..10).map(|c| push(&format!("c{c}"), 1..=3)).collect();
    let out = log.push_batch(id, &more, None).await.unwrap();
    assert_eq!(out.appended.len(), 1);
    let (seen, entries) = applied(&log, id).await;
    assert_eq!(entries, 2);
    for ids in seen.values() {
        assert_eq!(ids, &vec![1, 2, 3]);
    }
}

#[tokio::test]
async fn a_single_client_batch_is_a_deferred_batch_of_one_run() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let out = log.push_batch(id, &[push("c", 1..=3)], None).await.unwrap();
    let page = log.read_since(id, out.appended[0].seq, 1).await.unwrap();
    let e = &page.entries[0];
    assert_eq!(e.version, crate::sheet::mutations::DEFERRED_BATCH_VERSION);
    assert!(matches!(
        EntryBody::decode(e.kind.0, e.version, &e.body).unwrap(),
        EntryBody::Batch(b) if b.runs.len() == 1 && b.runs[0].client == "c" && b.runs[0].last == 3
    ));
}

#[tokio::test]
async fn a_bad_client_is_refused_alone_and_rejections_advance_the_client() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    log.push_batch(id, &[push("a", 1..=1)], None).await.unwrap();
    let mut rejected = push("r", 1..=2);
    rejected.mutations[0].event = Err("bad args".into());
    let mut other_group = push("a", 2..=2);
    other_group.group = "someone-else".into();
    let pushes = vec![
        push("gap", 3..=4),
        other_group,
        rejected,
        push("ok", 1..=1),
        push("late", 2..=2),
    ];
    let out = log.push_batch(id, &pushes, None).await.unwrap();
    assert_eq!(out.appended.len(), 1);
    assert!(matches!(
        &out.clients[0],
        ClientResult::Refused {
            error: LogError::ClientUnknown { got: 3, .. },
            ..
        }
    ));
    assert!(matches!(
        &out.clients[1],
        ClientResult::Refused {
            error: LogError::ClientGroupMismatch { .. },
            ..
        }
    ));
    assert!(matches!(
        &out.clients[2],
        ClientResult::Done { last: 2, .. }
    ));
    assert!(matches!(
        &out.clients[3],
        ClientResult::Done { last: 1, .. }
    ));
    assert!(matches!(&out.clients[4], ClientResult::Refused { .. }));
    let r = log.find_mutation(id, "r", 1).await.unwrap().unwrap();
    assert_eq!(r.rejected, vec![1]);
    // A gap after an applied mutation.
    let out = log
        .push_batch(id, &[push("ok", 3..=3)], None)
        .await
        .unwrap();
    assert!(matches!(
        &out.clients[0],
        ClientResult::Refused {
            error: LogError::MutationGap {
                expected: 2,
                got: 3,
                ..
            },
            ..
        }
    ));
}

#[tokio::test]
async fn more_clients_than_one_entry_holds_take_several() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let n = crate::sheet::mutations::MAX_RUNS_PER_ENTRY + 5;
    let pushes: Vec<ClientPush> = (0..n).map(|c| push(&format!("c{c}"), 1..=1)).collect();
    let out = log.push_batch(id, &pushes, None).await.unwrap();
    assert_eq!(out.appended.len(), 2);
    let (seen, _) = applied(&log, id).await;
    assert_eq!(seen.len(), n);
}

/// A log over the in-memory store behind the fault adapter's hostile profile (seeded), created
/// through its throttles.
async fn hostile_log(
    seed: u64,
) -> (
    Arc<EventLog<FaultyLogStore<MemLogStore>, MemPayloadStore>>,
    LogId,
) {
    let store = FaultyLogStore::new(
        MemLogStore::new(),
        Faults::new(FaultProfile::named("hostile").unwrap(), seed),
    );
    let log = Arc::new(EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap());
    let id = loop {
        match log.create().await {
            Ok(c) => break c.log,
            Err(LogError::Store(e)) if e.is_retryable() => continue,
            Err(e) => panic!("{e}"),
        }
    };
    (log, id)
}

#[tokio::test]
async fn batches_interleave_with_direct_pushes_and_appends_under_faults() {
    let (log, id) = hostile_log(7).await;
    // A direct writer appending plain entries while batches of 8 clients go in.
    let direct = {
        let log = log.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                let (code, version, body) = set(f64::from(i)).encode();
                let e = NewEntry::new(EntryType(code), version, body);
                loop {
                    match log.append(id, e.clone(), AppendOptions::default()).await {
                        Ok(_) => break,
                        Err(LogError::Store(err)) if err.is_retryable() => continue,
                        Err(LogError::Contention { .. }) => continue,
                        Err(err) => panic!("{err}"),
                    }
                }
            }
        })
    };
    for end in 1..=10u64 {
        // Every client re-pushes from 1, like Replicache, and each batch is delivered twice.
        let pushes: Vec<ClientPush> = (0..8).map(|c| push(&format!("c{c}"), 1..=end)).collect();
        for _ in 0..2 {
            loop {
                match log.push_batch(id, &pushes, None).await {
                    Ok(out) => {
                        assert!(
                            out.clients.iter().all(
                                |r| matches!(r, ClientResult::Done { last, .. } if *last == end)
                            ),
                            "{out:?}"
                        );
                        break;
                    }
                    Err(LogError::Store(e)) if e.is_retryable() => continue,
                    Err(LogError::Contention { .. }) => continue,
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }
    direct.await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let (seen, _) = applied(&log, id).await;
    assert_eq!(seen.len(), 8);
    for (client, ids) in seen {
        assert_eq!(ids, (1..=10).collect::<Vec<_>>(), "client {client}");
    }
}

#[tokio::test]
async fn a_batch_under_a_low_entry_limit_splits_so_no_entry_exceeds_it() {
    let limit = 40 * 1024;
    let cfg = LogConfig {
        max_body_bytes: limit,
        ..LogConfig::default()
    };
    let log = EventLog::new(MemLogStore::new(), MemPayloadStore::new(), cfg).unwrap();
    let id = log.create().await.unwrap().log;
    // Six clients with one mutation of about 16 KB each: every run fits the limit alone, two
    // fit together, three do not.
    let pushes: Vec<ClientPush> = (0..6)
        .map(|c| ClientPush {
            group: format!("g-{c}"),
            client: format!("c{c}"),
            mutations: vec![PushedMutation {
                id: 1,
                event: Ok(big_set(150)),
                base: None,
                then: Vec::new(),
            }],
        })
        .collect();
    let out = log.push_batch(id, &pushes, None).await.unwrap();
    assert!(
        out.clients
            .iter()
            .all(|c| matches!(c, ClientResult::Done { last: 1, .. })),
        "{:?}",
        out.clients
    );
    assert!(out.appended.len() >= 3, "{} entries", out.appended.len());
    let page = log.read_since(id, 0, 100).await.unwrap();
    for e in &page.entries {
        assert!(
            e.body.len() <= limit,
            "entry {} is {} bytes",
            e.seq,
            e.body.len()
        );
    }
    let (seen, _) = applied(&log, id).await;
    assert_eq!(seen.len(), 6);
}

/// Counts the Clients-table range reads that pass it, and the index mark reads (each a fresh
/// look at what is past the mark).
#[derive(Debug, Default, Clone)]
struct CountRangeReads(
    Arc<std::sync::atomic::AtomicU64>,
    Arc<std::sync::atomic::AtomicU64>,
);

impl CountRangeReads {
    fn take(&self) -> u64 {
        self.0.swap(0, std::sync::atomic::Ordering::SeqCst)
    }
    fn take_marks(&self) -> u64 {
        self.1.swap(0, std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl crate::layer::Layer for CountRangeReads {
    async fn around<T, E, F>(&self, call: crate::layer::Call, run: F) -> Result<T, E>
    where
        T: Send,
        E: From<crate::error::StoreError> + Send,
        F: std::future::Future<Output = Result<T, E>> + Send,
    {
        if call.method == "client_ranges" {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        if call.method == "index_mark" {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        run.await
    }
}
impl crate::ports::EntriesLayer for CountRangeReads {}
impl crate::ports::ClientRunsLayer for CountRangeReads {}
impl crate::ports::DedupeLayer for CountRangeReads {}

fn counted_log() -> (
    EventLog<crate::layer::Layered<MemLogStore, CountRangeReads>, MemPayloadStore>,
    CountRangeReads,
) {
    let reads = CountRangeReads::default();
    let store = crate::layer::Layered::new(MemLogStore::new(), reads.clone());
    let log = EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap();
    (log, reads)
}

#[tokio::test]
async fn the_writer_reads_no_client_again_while_the_log_is_where_it_left_it() {
    let (log, reads) = counted_log();
    let id = log.create().await.unwrap().log;
    let mut known = KnownClients::default();
    let first: Vec<ClientPush> = (0..5).map(|c| push(&format!("c{c}"), 1..=1)).collect();
    log.push_batch_known(id, &first, None, &mut known)
        .await
        .unwrap();
    assert_eq!(reads.take(), 5, "the first batch reads each client once");
    assert_eq!(known.len(), 5);
    // Replicache re-pushes pending mutations: ids 1 again with 2 and 3.
    let second: Vec<ClientPush> = (0..5).map(|c| push(&format!("c{c}"), 1..=3)).collect();
    let out = log
        .push_batch_known(id, &second, None, &mut known)
        .await
        .unwrap();
    assert_eq!(reads.take(), 0, "every client was remembered");
    assert_eq!(out.appended.len(), 1);
    for r in &out.clients {
        assert!(matches!(r, ClientResult::Done { last: 3, .. }), "{r:?}");
    }
    let (seen, _) = applied(&log, id).await;
    for c in 0..5 {
        assert_eq!(
            seen[&format!("c{c}")],
            vec![1, 2, 3],
            "each id once, in order"
        );
    }
}

/// The writer's own Snapshot entry right after its commit (the snapshot trigger's) leaves its
/// clients trusted; with another writer's entry before it, the writer reads the entries since.
#[tokio::test]
async fn the_writers_own_snapshot_entry_keeps_its_clients_known() {
    let (log, reads) = counted_log();
    let id = log.create().await.unwrap().log;
    let mut known = KnownClients::default();
    let clients: Vec<ClientPush> = (0..3).map(|c| push(&format!("c{c}"), 1..=1)).collect();
    log.push_batch_known(id, &clients, None, &mut known)
        .await
        .unwrap();
    reads.take();
    let snapshot = || NewEntry::new(crate::domain::EntryType::SNAPSHOT, 0, Vec::new());
    let s = log
        .append(id, snapshot(), AppendOptions::default())
        .await
        .unwrap();
    known.after_own_entry(s.next_seq);
    let again: Vec<ClientPush> = (0..3).map(|c| push(&format!("c{c}"), 1..=2)).collect();
    log.push_batch_known(id, &again, None, &mut known)
        .await
        .unwrap();
    assert_eq!(
        reads.take(),
        0,
        "no client read again after the writer's own entry"
    );

    // A direct push for c0, then the writer's Snapshot entry: two entries, so the remembered
    // "c0 has 2" is not trusted and c0's 3 and 4 are not applied twice.
    let direct = push("c0", 3..=4);
    log.push_run(
        id,
        "g-c0",
        "c0",
        &direct.mutations,
        None,
        super::RunSource::Push,
    )
    .await
    .unwrap();
    let s = log
        .append(id, snapshot(), AppendOptions::default())
        .await
        .unwrap();
    known.after_own_entry(s.next_seq);
    reads.take();
    reads.take_marks();
    let out = log
        .push_batch_known(
            id,
            &[push("c0", 1..=5), push("c1", 1..=3)],
            None,
            &mut known,
        )
        .await
        .unwrap();
    assert_eq!(
        (reads.take(), reads.take_marks()),
        (0, 0),
        "the two entries in between are read, not the clients"
    );
    assert!(
        matches!(out.clients[0], ClientResult::Done { last: 5, .. }),
        "{:?}",
        out.clients[0]
    );
    let (seen, _) = applied(&log, id).await;
    assert_eq!(seen["c0"], vec![1, 2, 3, 4, 5]);
    assert_eq!(seen["c1"], vec![1, 2, 3]);
}

#[tokio::test]
async fn another_writer_in_between_makes_the_writer_read_the_entries_since() {
    let (log, reads) = counted_log();
    let id = log.create().await.unwrap().log;
    let mut known = KnownClients::default();
    log.push_batch_known(id, &[push("a", 1..=1), push("b", 1..=1)], None, &mut known)
        .await
        .unwrap();
    reads.take();
    // A direct push applies a's 2 and 3 behind the writer's back: the head moves.
    let direct = push("a", 2..=3);
    log.push_run(
        id,
        "g-a",
        "a",
        &direct.mutations,
        None,
        super::RunSource::Push,
    )
    .await
    .unwrap();
    reads.take();
    reads.take_marks();
    // The writer's remembered "a has 1" is stale; it must not apply 2 and 3 again.
    let out = log
        .push_batch_known(id, &[push("a", 1..=4), push("b", 1..=2)], None, &mut known)
        .await
        .unwrap();
    assert_eq!(
        (reads.take(), reads.take_marks()),
        (0, 0),
        "the direct push's entry is read, not the clients"
    );
    assert!(
        matches!(out.clients[0], ClientResult::Done { last: 4, .. }),
        "{:?}",
        out.clients[0]
    );
    assert!(
        matches!(out.clients[1], ClientResult::Done { last: 2, .. }),
        "{:?}",
        out.clients[1]
    );
    let (seen, _) = applied(&log, id).await;
    assert_eq!(seen["a"], vec![1, 2, 3, 4]);
    assert_eq!(seen["b"], vec![1, 2]);
}

#[tokio::test]
async fn a_failed_batch_leaves_the_writer_knowing_nothing() {
    let (log, _) = counted_log();
    let id = log.create().await.unwrap().log;
    let mut known = KnownClients::default();
    log.push_batch_known(id, &[push("a", 1..=1)], None, &mut known)
        .await
        .unwrap();
    assert_eq!(known.len(), 1);
    let missing = LogId::new_random();
    assert!(
        log.push_batch_known(missing, &[push("a", 1..=2)], None, &mut known)
            .await
            .is_err()
    );
    assert!(known.is_empty());
}

/// The writer's remembered clients under stale reads, lost answers, throttling and conflicts,
/// with another writer pushing for one of its clients and appending plain entries in between:
/// every id lands once, in order.
#[tokio::test]
async fn remembered_clients_stay_exactly_once_under_faults_and_another_writer() {
    let (log, id) = hostile_log(11).await;
    // Pushes c0's mutations up to `upto` directly, and appends a plain entry, retrying faults.
    let direct = |upto: u64| {
        let log = log.clone();
        async move {
            let p = push("c0", 1..=upto);
            loop {
                match log
                    .push_run(id, "g-c0", "c0", &p.mutations, None, super::RunSource::Push)
                    .await
                {
                    Ok(RunOutcome::AlreadyApplied { .. }) => break,
                    Ok(_) => continue,
                    Err(LogError::Store(e)) if e.is_retryable() => continue,
                    Err(LogError::Contention { .. }) => continue,
                    Err(e) => panic!("{e}"),
                }
            }
            let (code, version, body) = set(upto as f64).encode();
            let e = NewEntry::new(EntryType(code), version, body);
            loop {
                match log.append(id, e.clone(), AppendOptions::default()).await {
                    Ok(_) => break,
                    Err(LogError::Store(err)) if err.is_retryable() => continue,
                    Err(LogError::Contention { .. }) => continue,
                    Err(err) => panic!("{err}"),
                }
            }
        }
    };
    let mut known = KnownClients::default();
    for end in 1..=10u64 {
        if end % 3 == 0 {
            // Behind the writer's back: c0 moves one past what the batch will carry.
            direct(end + 1).await;
        }
        let pushes: Vec<ClientPush> = (0..6).map(|c| push(&format!("c{c}"), 1..=end)).collect();
        for _ in 0..2 {
            loop {
                match log.push_batch_known(id, &pushes, None, &mut known).await {
                    Ok(out) => {
                        // c0 may be ahead of the batch, never behind it.
                        assert!(
                            out.clients.iter().all(
                                |r| matches!(r, ClientResult::Done { last, .. } if *last >= end)
                            ),
                            "{out:?}"
                        );
                        break;
                    }
                    Err(LogError::Store(e)) if e.is_retryable() => continue,
                    Err(LogError::Contention { .. }) => continue,
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let (seen, _) = applied(&log, id).await;
    assert_eq!(seen.len(), 6);
    for (client, ids) in seen {
        assert_eq!(ids, (1..=10).collect::<Vec<_>>(), "client {client}");
    }
}

#[tokio::test]
async fn a_client_is_read_afresh_before_a_remembered_range_refuses_it() {
    let (log, reads) = counted_log();
    let id = log.create().await.unwrap().log;
    let mut known = KnownClients::default();
    log.push_batch_known(id, &[push("a", 1..=3)], None, &mut known)
        .await
        .unwrap();
    reads.take();
    reads.take_marks();
    // A remembered range that is wrong though the head has not moved (no real commit leaves
    // one): "a" looks unknown, so its push from 4 would be refused as a client that lost its
    // state.
    known.forge("a", None);
    let out = log
        .push_batch_known(id, &[push("a", 4..=5)], None, &mut known)
        .await
        .unwrap();
    assert!(
        matches!(out.clients[0], ClientResult::Done { last: 5, .. }),
        "{:?}",
        out.clients[0]
    );
    assert_eq!(reads.take_marks(), 1, "read afresh, once");
    let (seen, _) = applied(&log, id).await;
    assert_eq!(seen["a"], vec![1, 2, 3, 4, 5]);
}
