//! The handler over the in-memory stores: sample events, redelivery, poison, transient failures
//! and FIFO order within a log's messages.

use std::sync::Arc;

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use bytes::Bytes;
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::LogId;
use sheetlog_core::error::StoreError;
use sheetlog_core::layer::{Layer, Layered};
use sheetlog_core::log::EventLog;
use sheetlog_core::memory::{MemLogStore, MemPayloadStore};
use sheetlog_core::ports::{LogStore, PayloadLayer, PayloadStore};
use sheetlog_core::sheet::EntryBody;
use sheetlog_core::sync_queue::{QueuedMutation, QueuedPush, StoredPush};

use crate::{Handler, MessageOutcome, WriterConfig};

const SAMPLE_LOG: &str = "6f1c2a9e-3b7d-4c1e-9a55-0d2f4e8b7c11";

/// Reads of payload keys containing `flaky` fail as a throttled service would.
#[derive(Debug)]
struct Flaky;

impl Layer for Flaky {}

#[async_trait]
impl PayloadLayer for Flaky {
    async fn get<S: PayloadStore + ?Sized>(
        &self,
        inner: &S,
        key: &str,
    ) -> Result<Bytes, StoreError> {
        if key.contains("flaky") {
            return Err(StoreError::service(
                "S3",
                "GetObject",
                "service unavailable",
            ));
        }
        inner.get(key).await
    }
}

async fn handler() -> (Handler, Arc<dyn PayloadStore>) {
    let payloads: Arc<dyn PayloadStore> = Arc::new(Layered::new(MemPayloadStore::new(), Flaky));
    let store: Arc<dyn LogStore> = Arc::new(MemLogStore::new());
    let log = EventLog::new(store, payloads.clone(), LogConfig::default()).unwrap();
    let cfg = WriterConfig {
        retry_delay: std::time::Duration::from_millis(1),
        ..WriterConfig::default()
    };
    (Handler::new(log, payloads.clone(), cfg), payloads)
}

fn push(log: LogId, client: &str, ids: &[u64]) -> QueuedPush {
    QueuedPush {
        v: 1,
        log,
        group: format!("group-{client}"),
        mutations: ids
            .iter()
            .map(|id| QueuedMutation {
                client_id: client.into(),
                id: *id,
                name: "set".into(),
                args: serde_json::json!({"cells": [{"ref": "A1", "value": *id}]}),
            })
            .collect(),
        received: 0,
        subject: None,
    }
}

fn event(bodies: &[String]) -> SqsEvent {
    let mut e = SqsEvent::default();
    e.records = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut m = SqsMessage::default();
            m.message_id = Some(format!("m{i}"));
            m.body = Some(b.clone());
            m
        })
        .collect();
    e
}

fn load(name: &str, log: LogId) -> SqsEvent {
    let path = format!("{}/events/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text.replace(SAMPLE_LOG, &log.to_string())).unwrap()
}

/// Each client's mutation ids in log order, from every `mutations` entry; and how many there are.
async fn applied(h: &Handler, log: LogId) -> (Vec<(String, u64)>, usize) {
    let page = h.log().read_since(log, 0, 10_000).await.unwrap();
    let mut ids = Vec::new();
    let mut entries = 0;
    for e in &page.entries {
        let body = EntryBody::decode(e.kind.0, e.version, &e.body).unwrap();
        entries += usize::from(!body.runs().is_empty());
        for r in body.runs() {
            ids.extend((r.first..=r.last).map(|id| (r.client.clone(), id)));
        }
    }
    (ids, entries)
}

#[tokio::test]
async fn the_sample_batch_is_one_entry_and_a_redelivery_applies_nothing() {
    let (h, _) = handler().await;
    let log = h.log().create().await.unwrap().log;
    let ev = load("push-batch.json", log);
    let results = h.handle_detailed(ev.clone()).await;
    assert_eq!(results.len(), 3);
    assert!(
        results.iter().all(|r| r.outcome == MessageOutcome::Applied),
        "{results:?}"
    );
    let (ids, entries) = applied(&h, log).await;
    assert_eq!(entries, 1, "three pushes of two clients in one entry");
    assert_eq!(ids.len(), 4);
    assert_eq!(
        h.log()
            .last_mutation(log, "client-1")
            .await
            .unwrap()
            .unwrap()
            .last,
        2
    );
    // The writer died before deleting the messages: SQS delivers the batch again.
    let again = h.handle(ev).await;
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(applied(&h, log).await, (ids, 1));
}

#[tokio::test]
async fn a_poison_message_is_dropped_and_the_next_push_of_the_sheet_applies() {
    let (h, _) = handler().await;
    let log = h.log().create().await.unwrap().log;
    let results = h.handle_detailed(load("poison.json", log)).await;
    assert!(
        matches!(results[0].outcome, MessageOutcome::Poison(_)),
        "{results:?}"
    );
    assert_eq!(results[1].outcome, MessageOutcome::Applied);
    assert_eq!(
        h.log()
            .last_mutation(log, "client-3")
            .await
            .unwrap()
            .unwrap()
            .last,
        1
    );
    // A push to a log that does not exist, a stored push that expired: dropped too.
    let gone = serde_json::to_string(&StoredPush {
        v: 1,
        log,
        s3: "pushes/x/gone.json".into(),
    })
    .unwrap();
    let missing = push(LogId::new_random(), "c", &[1]).to_json();
    let mut next = push(log, "client-3", &[1, 2]);
    next.group = "group-a".into();
    let next = next.to_json();
    let results = h.handle_detailed(event(&[gone, missing, next])).await;
    assert!(
        matches!(results[0].outcome, MessageOutcome::Poison(_)),
        "{results:?}"
    );
    assert!(
        matches!(results[1].outcome, MessageOutcome::Poison(_)),
        "{results:?}"
    );
    assert_eq!(results[2].outcome, MessageOutcome::Applied);
    assert_eq!(
        h.log()
            .last_mutation(log, "client-3")
            .await
            .unwrap()
            .unwrap()
            .last,
        2
    );
}

#[tokio::test]
async fn a_transient_failure_keeps_the_rest_of_its_log_in_order_and_other_logs_go_on() {
    let (h, payloads) = handler().await;
    let a = h.log().create().await.unwrap().log;
    let b = h.log().create().await.unwrap().log;
    let key = format!("pushes/{a}/flaky.json");
    payloads
        .put_discardable(&key, Bytes::from(push(a, "c", &[1]).to_json()))
        .await
        .unwrap();
    let stored = serde_json::to_string(&StoredPush {
        v: 1,
        log: a,
        s3: key,
    })
    .unwrap();
    let bodies = [
        push(a, "first", &[1]).to_json(),
        push(b, "other", &[1]).to_json(),
        stored,
        push(a, "c", &[1, 2]).to_json(),
    ];
    let results = h.handle_detailed(event(&bodies)).await;
    assert_eq!(results[0].outcome, MessageOutcome::Applied, "{results:?}");
    assert_eq!(results[1].outcome, MessageOutcome::Applied);
    assert!(matches!(results[2].outcome, MessageOutcome::Failed(_)));
    // Message 3 is after the failed one in log a's group: not applied before it.
    assert!(matches!(results[3].outcome, MessageOutcome::Failed(_)));
    assert_eq!(h.log().last_mutation(a, "c").await.unwrap(), None);
    let resp = h.handle(event(&bodies)).await;
    let failed: Vec<_> = resp
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(failed, vec!["m2", "m3"]);
    // After the dead-letter queue took the stored push, the client's re-push (from its oldest
    // pending mutation, as Replicache does) applies.
    let results = h
        .handle_detailed(event(&[push(a, "c", &[1, 2]).to_json()]))
        .await;
    assert_eq!(results[0].outcome, MessageOutcome::Applied);
    assert_eq!(
        h.log().last_mutation(a, "c").await.unwrap().unwrap().last,
        2
    );
}

#[tokio::test]
async fn a_gap_is_refused_without_blocking_the_clients_later_pushes() {
    let (h, _) = handler().await;
    let log = h.log().create().await.unwrap().log;
    h.handle_detailed(event(&[push(log, "c", &[1]).to_json()]))
        .await;
    // Mutation 2 went to the dead-letter queue; the client's next push holds only 3.
    let results = h
        .handle_detailed(event(&[push(log, "c", &[3]).to_json()]))
        .await;
    assert_eq!(
        results[0].outcome,
        MessageOutcome::Applied,
        "refused, and deleted"
    );
    assert_eq!(
        h.log().last_mutation(log, "c").await.unwrap().unwrap().last,
        1
    );
    // Replicache re-pushes every pending mutation: 2 and 3 apply, in order.
    let results = h
        .handle_detailed(event(&[push(log, "c", &[2, 3]).to_json()]))
        .await;
    assert_eq!(results[0].outcome, MessageOutcome::Applied);
    let (ids, _) = applied(&h, log).await;
    assert_eq!(
        ids,
        vec![
            ("c".to_owned(), 1),
            ("c".to_owned(), 2),
            ("c".to_owned(), 3)
        ]
    );
}

#[tokio::test]
async fn sixty_four_clients_in_batches_of_ten_all_land_once() {
    let (h, _) = handler().await;
    let log = h.log().create().await.unwrap().log;
    let bodies: Vec<String> = (0..64)
        .map(|c| push(log, &format!("c{c}"), &[1, 2]).to_json())
        .collect();
    let mut entries_written = 0;
    for chunk in bodies.chunks(10) {
        let results = h.handle_detailed(event(chunk)).await;
        assert!(results.iter().all(|r| r.outcome == MessageOutcome::Applied));
        entries_written += 1;
    }
    let (ids, entries) = applied(&h, log).await;
    assert_eq!(ids.len(), 128);
    assert_eq!(entries, entries_written, "one entry per batch");
}

/// After a batch, the handler indexes the windows its entries completed: the log's index mark
/// follows the head, and every client's items record its runs.
#[tokio::test]
async fn the_handler_indexes_completed_windows_after_its_batches() {
    use sheetlog_core::ports::ClientRuns;
    let (h, _) = handler().await;
    let log = h.log().create().await.unwrap().log;
    let rounds = sheetlog_core::log::INDEX_WINDOW * 2 + 3;
    for id in 1..=rounds {
        let bodies: Vec<String> = ["a", "b"]
            .iter()
            .map(|c| push(log, c, &[id]).to_json())
            .collect();
        let results = h.handle_detailed(event(&bodies)).await;
        assert!(results.iter().all(|r| r.outcome == MessageOutcome::Applied));
    }
    let mut u = sheetlog_core::domain::RequestUnits::default();
    let mark = h
        .log()
        .store()
        .index_mark(log, &mut u)
        .await
        .unwrap()
        .unwrap();
    let (next, _) = h.log().next_seq(log).await.unwrap();
    assert!(
        next - mark <= sheetlog_core::log::INDEX_WINDOW + 1,
        "mark {mark}, next {next}"
    );
    for c in ["a", "b"] {
        let items = h
            .log()
            .store()
            .client_ranges(log, c, None, 10, &mut u)
            .await
            .unwrap();
        assert!(!items.is_empty(), "{c} has no range item");
        assert_eq!(items.last().map(|i| i.key), Some(1));
        let newest = h.log().last_mutation(log, c).await.unwrap().unwrap();
        assert_eq!(newest.last, rounds);
    }
}

/// Throttles, while switched on, a log store's deferred range writes (a writer that cannot
/// index) and its entry puts (a group commit that cannot land).
#[derive(Debug, Default, Clone)]
struct Stalls {
    index: Arc<std::sync::atomic::AtomicBool>,
    put: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait]
impl Layer for Stalls {
    async fn around<T, E, F>(&self, call: sheetlog_core::layer::Call, run: F) -> Result<T, E>
    where
        T: Send,
        E: From<StoreError> + Send,
        F: std::future::Future<Output = Result<T, E>> + Send,
    {
        use std::sync::atomic::Ordering;
        let stalled = match call.method {
            "put_deferred_ranges" => self.index.load(Ordering::SeqCst),
            "put_entry" => self.put.load(Ordering::SeqCst),
            _ => false,
        };
        if stalled {
            return Err(StoreError::Throttled {
                service: call.service,
                operation: call.operation,
            }
            .into());
        }
        run.await
    }
}
impl sheetlog_core::ports::EntriesLayer for Stalls {}
impl sheetlog_core::ports::ClientRunsLayer for Stalls {}
impl sheetlog_core::ports::DedupeLayer for Stalls {}

/// A commit that fails (every put throttled) still indexes the windows already complete: the
/// writer keeps what it read of the log through the failure. Without it, a sheet whose commits
/// keep failing never indexes, so every commit reads a longer stretch past the mark and fails
/// more often.
#[tokio::test]
async fn a_failed_commit_still_indexes_completed_windows() {
    use sheetlog_core::ports::ClientRuns;
    use std::sync::atomic::Ordering;
    let stalls = Stalls::default();
    let store: Arc<dyn LogStore> = Arc::new(Layered::new(MemLogStore::new(), stalls.clone()));
    let payloads: Arc<dyn PayloadStore> = Arc::new(MemPayloadStore::new());
    let log_cfg = LogConfig {
        min_backoff: std::time::Duration::from_micros(100),
        max_backoff: std::time::Duration::from_micros(200),
        ..LogConfig::default()
    };
    let log = EventLog::new(store, payloads.clone(), log_cfg).unwrap();
    let cfg = WriterConfig {
        retry_delay: std::time::Duration::from_millis(1),
        ..WriterConfig::default()
    };
    let h = Handler::new(log, payloads, cfg);
    let log = h.log().create().await.unwrap().log;
    let batch = |id: u64| {
        let bodies: Vec<String> = ["a", "b"]
            .iter()
            .map(|c| push(log, c, &[id]).to_json())
            .collect();
        event(&bodies)
    };
    let mark = |h: &Handler| {
        let store = h.log().store().clone();
        async move {
            let mut u = sheetlog_core::domain::RequestUnits::default();
            store.index_mark(log, &mut u).await.unwrap().unwrap()
        }
    };
    stalls.index.store(true, Ordering::SeqCst);
    let rounds = sheetlog_core::log::INDEX_WINDOW * 2 + 3;
    for id in 1..=rounds {
        let results = h.handle_detailed(batch(id)).await;
        assert!(results.iter().all(|r| r.outcome == MessageOutcome::Applied));
    }
    let stalled = mark(&h).await;
    assert!(
        stalled < 2,
        "nothing indexed while the writes fail: {stalled}"
    );

    stalls.index.store(false, Ordering::SeqCst);
    stalls.put.store(true, Ordering::SeqCst);
    let results = h.handle_detailed(batch(rounds + 1)).await;
    assert!(
        results
            .iter()
            .all(|r| matches!(r.outcome, MessageOutcome::Failed(_))),
        "{results:?}"
    );
    let (next, _) = h.log().next_seq(log).await.unwrap();
    let moved = mark(&h).await;
    assert!(
        next - moved <= sheetlog_core::log::INDEX_WINDOW + 1,
        "the failed commit indexed: mark {moved}, next {next}"
    );

    stalls.put.store(false, Ordering::SeqCst);
    let results = h.handle_detailed(batch(rounds + 1)).await;
    assert!(results.iter().all(|r| r.outcome == MessageOutcome::Applied));
    for c in ["a", "b"] {
        let newest = h.log().last_mutation(log, c).await.unwrap().unwrap();
        assert_eq!(newest.last, rounds + 1, "{c}");
    }
}
