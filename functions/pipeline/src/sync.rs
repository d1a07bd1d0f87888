//! The sync FIFO queue, consumed the way Lambda's SQS event source consumes a FIFO queue: receive
//! up to ten messages (long polling; the queue's visibility timeout applies and holds back a
//! message group while any of its messages is in flight), invoke the sync writer's handler with
//! the batch, then delete the messages it did not report as batch item failures. One batch at a
//! time, so each log's pushes are applied in the order they were sent. The handler deletes a
//! log's messages itself once they are committed, before it pokes (as it does under Lambda, see
//! `sheetlog_sync_writer::early_delete`); the driver deletes what is left.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use sheetlog_sync_writer::{Handler, MessageResult, SqsDelete};
use tracing::{debug, warn};

/// SQS's largest batch, and the stack's event-source batch size.
pub const SYNC_BATCH_SIZE: usize = 10;
/// Batches handled at once (invocations, under Lambda).
pub const SYNC_POLLERS: usize = 2;

/// Polls the sync queue and runs the writer.
#[derive(Debug, Clone)]
pub struct SyncDriver {
    sqs: aws_sdk_sqs::Client,
    url: String,
    handler: Arc<Handler>,
    early: SqsDelete,
    timeout: Option<Duration>,
}

impl SyncDriver {
    pub fn new(sqs: aws_sdk_sqs::Client, url: impl Into<String>, handler: Arc<Handler>) -> Self {
        let url = url.into();
        Self {
            early: SqsDelete::new(sqs.clone(), url.clone()),
            sqs,
            url,
            handler,
            timeout: None,
        }
    }

    /// Cuts each invocation off at `timeout` (the function's), as Lambda does.
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn handler(&self) -> &Handler {
        &self.handler
    }

    /// Receives up to ten messages, waiting up to `wait` for the first.
    pub async fn receive(&self, wait: Duration) -> anyhow::Result<Vec<SqsMessage>> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(SYNC_BATCH_SIZE as i32)
            .wait_time_seconds(i32::try_from(wait.as_secs().min(20)).unwrap_or(0))
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .context("ReceiveMessage")?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| {
                let mut msg = SqsMessage::default();
                msg.message_id = m.message_id;
                msg.receipt_handle = m.receipt_handle;
                msg.body = m.body;
                msg.md5_of_body = m.md5_of_body;
                msg.attributes = m
                    .attributes
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k.as_str().to_owned(), v))
                    .collect();
                msg.event_source = Some("aws:sqs".into());
                msg
            })
            .collect())
    }

    /// Deletes the messages of a batch that were handled (the event source's side).
    pub async fn delete(
        &self,
        messages: &[SqsMessage],
        results: &[MessageResult],
    ) -> anyhow::Result<()> {
        let mut req = self.sqs.delete_message_batch().queue_url(&self.url);
        let mut any = false;
        for (i, (m, r)) in messages.iter().zip(results).enumerate() {
            if r.keep() || r.deleted {
                continue;
            }
            let Some(receipt) = &m.receipt_handle else {
                continue;
            };
            req = req.entries(
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(receipt)
                    .build()
                    .context("DeleteMessageBatch entry")?,
            );
            any = true;
        }
        if any {
            let out = req.send().await.context("DeleteMessageBatch")?;
            for f in out.failed() {
                // The message comes back after its visibility timeout; the writer skips what
                // it already applied.
                warn!(
                    id = f.id(),
                    code = f.code(),
                    "deleting a handled push failed"
                );
            }
        }
        Ok(())
    }

    /// One invocation: receive a batch (waiting up to `wait`), handle it, delete what was
    /// handled. Returns the results (empty when nothing arrived).
    pub async fn poll_once(&self, wait: Duration) -> anyhow::Result<Vec<MessageResult>> {
        let t0 = Instant::now();
        let messages = self.receive(wait).await?;
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let t1 = Instant::now();
        let mut event = SqsEvent::default();
        event.records = messages.clone();
        let handled = self.handler.handle_detailed_with(event, Some(&self.early));
        let Some(results) = crate::within(self.timeout, handled).await else {
            // As under Lambda: the batch failed; what the handler deleted is gone, the rest
            // comes back after the visibility timeout and the writer skips what it applied.
            anyhow::bail!(
                "the sync writer ran past the function's timeout ({:?}) and was cut off; its \
                 messages come back after the visibility timeout",
                self.timeout.unwrap_or_default()
            );
        };
        let t2 = Instant::now();
        self.delete(&messages, &results).await?;
        let t3 = Instant::now();
        debug!(
            messages = messages.len(),
            receive_ms = (t1 - t0).as_millis() as u64,
            handle_ms = (t2 - t1).as_millis() as u64,
            delete_ms = (t3 - t2).as_millis() as u64,
            "sync batch"
        );
        Ok(results)
    }

    /// Runs until `shutdown` resolves, with [`SYNC_POLLERS`] pollers, as Lambda's event source
    /// runs more than one invocation at a time: FIFO delivery still hands a message group to one
    /// of them at a time, and the next batch of a sheet can start while the previous one's
    /// handler waits to poke (its messages are deleted once committed). A batch still running at
    /// shutdown is dropped, like a Lambda killed mid-batch: its messages come back after the
    /// visibility timeout.
    pub async fn run(&self, poll: Duration, shutdown: impl std::future::Future<Output = ()>) {
        crate::check_queue_visibility(&self.sqs, &self.url, self.timeout, "the sync writer").await;
        tokio::pin!(shutdown);
        let pollers = futures::future::join_all((0..SYNC_POLLERS).map(|_| self.poll_loop(poll)));
        tokio::select! {
            _ = &mut shutdown => {}
            _ = pollers => {}
        }
    }

    /// Polls forever: at once again after a batch, after `poll` when the queue was empty.
    async fn poll_loop(&self, poll: Duration) {
        loop {
            match self.poll_once(Duration::from_secs(1)).await {
                Ok(results) if results.is_empty() => {}
                Ok(_) => continue,
                Err(e) => warn!(error = %format!("{e:#}"), "polling the sync queue failed"),
            }
            tokio::time::sleep(poll).await;
        }
    }
}
