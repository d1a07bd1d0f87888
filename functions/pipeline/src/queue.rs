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
                chained: 0,
            };
        };
        let result = results.pop().unwrap_or_else(|| MessageResult {
            message_id: String::new(),
            job: None,
            result: Ok(sheetlog_snapshot_worker::Outcome::Duplicate),
            keep: true,
            chained: 0,
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
    /// Receives are long polls of up to `wait` (whole seconds, as SQS counts them), as Lambda's
    /// event source polls: a job is taken as soon as it is sent, not at the next tick. A long
    /// poll is never abandoned half way (the messages it took would stay invisible until their
    /// visibility timeout), so invocations finish while it waits. After a failed receive the
    /// driver waits `wait` before the next. Invocations still running at shutdown are dropped,
    /// like a Lambda killed mid-job; the protocol picks their jobs up again.
    pub async fn run(&self, wait: Duration, shutdown: impl std::future::Future<Output = ()>) {
        crate::check_queue_visibility(&self.sqs, &self.url, self.timeout, "the snapshot worker")
            .await;
        tokio::pin!(shutdown);
        let wait = wait.max(Duration::from_secs(1));
        let mut running = FuturesUnordered::new();
        loop {
            let free = self.concurrency.saturating_sub(running.len());
            if free == 0 {
                tokio::select! {
                    _ = &mut shutdown => return,
                    Some(_) = running.next() => {}
                }
                continue;
            }
            let receive = self.receive(free, wait);
            tokio::pin!(receive);
            let mut stopping = false;
            let received = loop {
                tokio::select! {
                    r = &mut receive => break r,
                    Some(_) = running.next(), if !running.is_empty() => {}
                    _ = &mut shutdown, if !stopping => stopping = true,
                }
            };
            match received {
                Ok(messages) if stopping => {
                    // Stopped during the long poll: what it took is made visible again at
                    // once rather than held for the visibility timeout.
                    self.release(messages).await;
                    return;
                }
                Ok(messages) => {
                    for m in messages {
                        running.push(self.invoke(m));
                    }
                }
                Err(e) => {
                    warn!(error = %format!("{e:#}"), "receiving snapshot jobs failed");
                    if stopping {
                        return;
                    }
                    let pause = tokio::time::sleep(wait);
                    tokio::pin!(pause);
                    loop {
                        tokio::select! {
                            _ = &mut shutdown => return,
                            _ = &mut pause => break,
                            Some(_) = running.next(), if !running.is_empty() => {}
                        }
                    }
                }
            }
        }
    }

    /// Makes received messages visible again now (best effort: otherwise after the queue's
    /// visibility timeout, as for a crashed poller).
    async fn release(&self, messages: Vec<SqsMessage>) {
        for r in messages.into_iter().filter_map(|m| m.receipt_handle) {
            if let Err(e) = self
                .sqs
                .change_message_visibility()
                .queue_url(&self.url)
                .receipt_handle(r)
                .visibility_timeout(0)
                .send()
                .await
            {
                warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "releasing a received job at shutdown failed");
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
