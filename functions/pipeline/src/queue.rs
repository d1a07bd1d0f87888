//! The snapshot queue, consumed the way Lambda's SQS event source does it: receive (the queue's
//! visibility timeout applies), invoke the worker's handler with one message per invocation and
//! a deadline, then delete the messages it did not report as failed. Several invocations run at
//! once, as Lambda scales an SQS consumer out.

use std::time::{Duration, Instant};

use anyhow::Context;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::MessageSystemAttributeName;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use sheetlog_snapshot_worker::{Handler, MessageResult};
use tracing::warn;

/// Polls the snapshot queue and runs the worker.
#[derive(Debug, Clone)]
pub struct QueueDriver {
    sqs: aws_sdk_sqs::Client,
    url: String,
    handler: Handler,
    /// Each invocation's time: the worker hands off once it is used up (after at least one
    /// chunk), so a small budget exercises hand-off locally.
    time_budget: Duration,
    concurrency: usize,
    /// The function's timeout: an invocation still running then is cut off.
    timeout: Option<Duration>,
}

impl QueueDriver {
    pub fn new(
        sqs: aws_sdk_sqs::Client,
        url: impl Into<String>,
        handler: Handler,
        time_budget: Duration,
        concurrency: usize,
    ) -> Self {
        Self {
            sqs,
            url: url.into(),
            handler,
            time_budget,
            concurrency: concurrency.max(1),
            timeout: None,
        }
    }

    /// Cuts each invocation off at `timeout` (the function's), as Lambda does.
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Receives up to `max` messages (waiting up to `wait` for the first).
    async fn receive(&self, max: usize, wait: Duration) -> anyhow::Result<Vec<SqsMessage>> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(i32::try_from(max.clamp(1, 10)).unwrap_or(10))
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

    /// One invocation with one message: the handler, then the event source's delete.
    async fn invoke(&self, message: SqsMessage) -> MessageResult {
        let receipt = message.receipt_handle.clone();
        let mut event = SqsEvent::default();
        event.records = vec![message];
        let handoff_at = Instant::now() + self.time_budget;
        let id = message_id(&event);
        let handled = self.handler.handle_detailed(event, handoff_at);
        let Some(mut results) = crate::within(self.timeout, handled).await else {
            // Cut off, as Lambda cuts it off: the message is not deleted and comes back after
            // its visibility timeout; the worker resumes from its last checkpoint.
            let limit = self.timeout.unwrap_or_default();
            warn!(
                ?limit,
                "a snapshot worker invocation ran past the function's timeout; cut off"
            );
            return MessageResult {
                message_id: id,
                job: None,
                result: Err(sheetlog_snapshot_worker::WorkerError::TimedOut(limit)),
                keep: true,
            };
        };
        let result = results.pop().unwrap_or_else(|| MessageResult {
            message_id: String::new(),
            job: None,
            result: Ok(sheetlog_snapshot_worker::Outcome::Duplicate),
            keep: true,
        });
        if !result.keep
            && let Some(r) = receipt
            && let Err(e) = self
                .sqs
                .delete_message()
                .queue_url(&self.url)
                .receipt_handle(r)
                .send()
                .await
        {
            // The message comes back after its visibility timeout; the worker treats
            // the repeat as a duplicate.
            warn!(error = %e, "deleting a handled message failed");
        }
        result
    }

    /// Receives what is visible now (up to the concurrency) and runs those invocations to the
    /// end. Returns their results (empty when the queue had nothing visible).
    pub async fn poll_once(&self) -> anyhow::Result<Vec<MessageResult>> {
        let messages = self.receive(self.concurrency, Duration::ZERO).await?;
        let mut running: FuturesUnordered<_> =
            messages.into_iter().map(|m| self.invoke(m)).collect();
        let mut out = Vec::new();
        while let Some(r) = running.next().await {
            out.push(r);
        }
        Ok(out)
    }

    /// Runs until `shutdown` resolves, keeping up to `concurrency` invocations in flight.
    /// Invocations still running at shutdown are dropped, like a Lambda killed mid-job; the
    /// protocol picks their jobs up again.
    pub async fn run(&self, poll: Duration, shutdown: impl std::future::Future<Output = ()>) {
        crate::check_queue_visibility(&self.sqs, &self.url, self.timeout, "the snapshot worker")
            .await;
        tokio::pin!(shutdown);
        let mut running = FuturesUnordered::new();
        loop {
            let free = self.concurrency.saturating_sub(running.len());
            if free > 0 {
                match self.receive(free, Duration::ZERO).await {
                    Ok(messages) => {
                        for m in messages {
                            running.push(self.invoke(m));
                        }
                    }
                    Err(e) => warn!(error = %format!("{e:#}"), "receiving snapshot jobs failed"),
                }
            }
            tokio::select! {
                _ = &mut shutdown => return,
                Some(_) = running.next(), if !running.is_empty() => {}
                _ = tokio::time::sleep(poll) => {}
            }
        }
    }
}

fn message_id(event: &SqsEvent) -> String {
    event
        .records
        .first()
        .and_then(|m| m.message_id.clone())
        .unwrap_or_default()
}
