//! The sync FIFO queue in memory ([`MemPushQueue`]).

use std::collections::BTreeSet;
use std::sync::Mutex;

use async_trait::async_trait;

use super::lock;
use crate::error::StoreError;

/// One message on the in-memory push queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedMessage {
    pub group: String,
    pub dedupe_id: String,
    pub body: String,
}

/// An in-memory FIFO push queue: messages in send order, a repeated deduplication id dropped
/// (SQS drops it within five minutes; here for the queue's life).
#[derive(Debug, Default)]
pub struct MemPushQueue {
    inner: Mutex<(Vec<QueuedMessage>, BTreeSet<String>)>,
}

impl MemPushQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes every message sent so far, in order.
    pub fn take(&self) -> Vec<QueuedMessage> {
        lock(&self.inner)
            .map(|mut q| std::mem::take(&mut q.0))
            .unwrap_or_default()
    }
}

#[async_trait]
impl crate::ports::PushQueue for MemPushQueue {
    async fn send(&self, group: &str, dedupe_id: &str, body: String) -> Result<(), StoreError> {
        let mut q = lock(&self.inner)?;
        if q.1.insert(dedupe_id.to_owned()) {
            q.0.push(QueuedMessage {
                group: group.to_owned(),
                dedupe_id: dedupe_id.to_owned(),
                body,
            });
        }
        Ok(())
    }
}
