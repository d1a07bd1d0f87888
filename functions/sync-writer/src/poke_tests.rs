//! Pokes after a group commit: one per batch and sheet, carrying the next sequence; a publish
//! that fails does not fail the batch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::LogId;
use sheetlog_core::log::EventLog;
use sheetlog_core::memory::{MemLogStore, MemPayloadStore};
use sheetlog_core::poke::{PokeConfig, PokeError, PokePublisher, Poker};
use sheetlog_core::ports::{LogStore, PayloadStore};
use sheetlog_core::sync_queue::{QueuedMutation, QueuedPush};

use crate::{Handler, MessageOutcome, WriterConfig};

#[derive(Debug, Default)]
struct Recorder {
    sent: Mutex<Vec<(String, Vec<String>)>>,
    down: AtomicBool,
}

#[async_trait]
impl PokePublisher for Recorder {
    async fn publish(&self, channel: &str, events: Vec<String>) -> Result<(), PokeError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(PokeError::Publish {
                channel: channel.into(),
                message: "AppSync is down".into(),
            });
        }
        self.sent.lock().unwrap().push((channel.into(), events));
        Ok(())
    }
}

fn handler(rec: Arc<Recorder>) -> Handler {
    let payloads: Arc<dyn PayloadStore> = Arc::new(MemPayloadStore::new());
    let store: Arc<dyn LogStore> = Arc::new(MemLogStore::new());
    let log = EventLog::new(store, payloads.clone(), LogConfig::default()).unwrap();
    let poker = Poker::new(rec, &PokeConfig::new("http://127.0.0.1:1/event"));
    Handler::new(log, payloads, WriterConfig::default()).with_poker(Arc::new(poker))
}

fn message(i: usize, log: LogId, client: &str, id: u64) -> SqsMessage {
    let push = QueuedPush {
        v: 1,
        log,
        group: format!("group-{client}"),
        mutations: vec![QueuedMutation {
            client_id: client.into(),
            id,
            name: "set".into(),
            args: serde_json::json!({"cells": [{"ref": "A1", "value": id}]}),
        }],
        received: 0,
        subject: None,
    };
    let mut m = SqsMessage::default();
    m.message_id = Some(format!("m{i}"));
    m.body = Some(push.to_json());
    m
}

#[tokio::test]
async fn a_batch_publishes_one_poke_per_sheet_with_its_next_sequence() {
    let rec = Arc::new(Recorder::default());
    let h = handler(rec.clone());
    let a = h.log().create().await.unwrap().log;
    let b = h.log().create().await.unwrap().log;
    let mut ev = SqsEvent::default();
    ev.records = vec![
        message(0, a, "c1", 1),
        message(1, b, "c2", 1),
        message(2, a, "c1", 2),
        message(3, a, "c3", 1),
    ];
    let results = h.handle_detailed(ev).await;
    assert!(results.iter().all(|r| r.outcome == MessageOutcome::Applied));
    let mut sent = rec.sent.lock().unwrap().clone();
    sent.sort();
    let (next_a, _) = h.log().next_seq(a).await.unwrap();
    let (next_b, _) = h.log().next_seq(b).await.unwrap();
    let mut want = vec![
        (
            format!("/sheets/{a}"),
            vec![format!(r#"{{"seq":{next_a}}}"#)],
        ),
        (
            format!("/sheets/{b}"),
            vec![format!(r#"{{"seq":{next_b}}}"#)],
        ),
    ];
    want.sort();
    assert_eq!(sent, want);
}

#[tokio::test]
async fn a_failed_publish_does_not_fail_the_batch() {
    let rec = Arc::new(Recorder::default());
    rec.down.store(true, Ordering::SeqCst);
    let h = handler(rec.clone());
    let log = h.log().create().await.unwrap().log;
    let mut ev = SqsEvent::default();
    ev.records = vec![message(0, log, "c1", 1)];
    let resp = h.handle(ev).await;
    assert!(resp.batch_item_failures.is_empty());
    assert_eq!(
        h.log()
            .last_mutation(log, "c1")
            .await
            .unwrap()
            .unwrap()
            .last,
        1
    );
    assert!(rec.sent.lock().unwrap().is_empty());
}

/// Records what the handler deleted early, and the pokes published before each deletion.
#[derive(Debug)]
struct Deleter {
    pokes: Arc<Recorder>,
    fail: bool,
    /// Per call: the receipts, and how many pokes had been published by then.
    calls: Mutex<Vec<(Vec<String>, usize)>>,
}

#[async_trait]
impl crate::EarlyDelete for Deleter {
    async fn delete(&self, receipts: &[String]) -> Result<(), String> {
        let published = self.pokes.sent.lock().unwrap().len();
        self.calls
            .lock()
            .unwrap()
            .push((receipts.to_vec(), published));
        if self.fail {
            return Err("SQS is down".into());
        }
        Ok(())
    }
}

fn with_receipt(mut m: SqsMessage) -> SqsMessage {
    m.receipt_handle = m.message_id.as_ref().map(|id| format!("receipt-{id}"));
    m
}

#[tokio::test]
async fn committed_messages_are_deleted_before_the_poke_and_failed_ones_stay() {
    let rec = Arc::new(Recorder::default());
    let h = handler(rec.clone());
    let a = h.log().create().await.unwrap().log;
    let missing = LogId::new_random();
    let deleter = Deleter {
        pokes: rec.clone(),
        fail: false,
        calls: Mutex::new(Vec::new()),
    };
    let mut ev = SqsEvent::default();
    let mut bad = SqsMessage::default();
    bad.message_id = Some("m9".into());
    bad.body = Some("not a push".into());
    ev.records = vec![
        with_receipt(message(0, a, "c1", 1)),
        with_receipt(message(1, a, "c2", 1)),
        with_receipt(message(2, missing, "c3", 1)),
        with_receipt(bad),
    ];
    let results = h.handle_detailed_with(ev, Some(&deleter)).await;
    let calls = deleter.calls.lock().unwrap().clone();
    // Sheet `a`: its two messages in one call, before its poke; the missing log's message is
    // poison (dropped) and deleted the same way; the unreadable one is left to the event source.
    let mut deleted: Vec<String> = calls.iter().flat_map(|(r, _)| r.clone()).collect();
    deleted.sort();
    assert_eq!(deleted, ["receipt-m0", "receipt-m1", "receipt-m2"]);
    let for_a = calls
        .iter()
        .find(|(r, _)| r.contains(&"receipt-m0".to_owned()))
        .unwrap();
    assert_eq!(for_a.1, 0, "the poke went out before the delete: {calls:?}");
    assert_eq!(rec.sent.lock().unwrap().len(), 1);
    let flags: Vec<bool> = results.iter().map(|r| r.deleted).collect();
    assert_eq!(flags, [true, true, true, false]);
}

#[tokio::test]
async fn a_failed_early_delete_leaves_the_messages_to_the_event_source() {
    let rec = Arc::new(Recorder::default());
    let h = handler(rec.clone());
    let a = h.log().create().await.unwrap().log;
    let deleter = Deleter {
        pokes: rec.clone(),
        fail: true,
        calls: Mutex::new(Vec::new()),
    };
    let mut ev = SqsEvent::default();
    ev.records = vec![with_receipt(message(0, a, "c1", 1))];
    let results = h.handle_detailed_with(ev, Some(&deleter)).await;
    assert_eq!(results[0].outcome, MessageOutcome::Applied);
    assert!(!results[0].deleted);
    assert_eq!(deleter.calls.lock().unwrap().len(), 1);
    // The commit stands and is still announced.
    assert_eq!(rec.sent.lock().unwrap().len(), 1);
}

/// One sheet's large push (several entries) does not hold up another sheet's push in the same
/// batch: the small one is committed and deleted first, although its message comes second.
#[tokio::test]
async fn a_large_push_on_one_sheet_does_not_hold_up_another_sheet_in_the_batch() {
    let rec = Arc::new(Recorder::default());
    let h = handler(rec.clone());
    let a = h.log().create().await.unwrap().log;
    let b = h.log().create().await.unwrap().log;
    let deleter = Deleter {
        pokes: rec.clone(),
        fail: false,
        calls: Mutex::new(Vec::new()),
    };
    let large = QueuedPush {
        v: 1,
        log: a,
        group: "group-big".into(),
        mutations: (1..=3_000)
            .map(|id| QueuedMutation {
                client_id: "big".into(),
                id,
                name: "set".into(),
                args: serde_json::json!({"cells": [{"ref": "A1", "value": id}], "baseSeq": 1}),
            })
            .collect(),
        received: 0,
        subject: None,
    };
    let mut first = SqsMessage::default();
    first.message_id = Some("m0".into());
    first.body = Some(large.to_json());
    let mut ev = SqsEvent::default();
    ev.records = vec![with_receipt(first), with_receipt(message(1, b, "small", 1))];
    let results = h.handle_detailed_with(ev, Some(&deleter)).await;
    assert!(results.iter().all(|r| r.outcome == MessageOutcome::Applied));
    let calls = deleter.calls.lock().unwrap().clone();
    let order: Vec<String> = calls.iter().flat_map(|(r, _)| r.clone()).collect();
    assert_eq!(order, ["receipt-m1", "receipt-m0"], "{calls:?}");
    assert_eq!(
        h.log().last_mutation(a, "big").await.unwrap().unwrap().last,
        3_000
    );
}
