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
