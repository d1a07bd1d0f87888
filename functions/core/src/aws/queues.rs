//! The queues over SQS. The snapshot job queue: sending jobs (one or a batch), re-sending a job
//! with a delay (how the worker defers without using up the message's receive count), changing a
//! message's visibility. The sync FIFO queue ([`SqsPushQueue`]): sending a queued push in its
//! log's message group. The local stack creates its queues in `sheetlog-pipeline`
//! (`provision.rs`).

use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use tracing::instrument;

use async_trait::async_trait;

use crate::domain::SnapshotJob;
use crate::error::StoreError;
use crate::ports::PushQueue;

const SERVICE: &str = "SQS";

/// SQS refuses a `DelaySeconds` above 15 minutes.
pub const MAX_DELAY: Duration = Duration::from_secs(900);
/// SQS takes at most 10 messages per SendMessageBatch.
const MAX_BATCH: usize = 10;

/// The snapshot job queue.
#[derive(Debug, Clone)]
pub struct SqsJobQueue {
    client: Client,
    url: String,
}

impl SqsJobQueue {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends one job, invisible for `delay` (capped at SQS's 15 minutes).
    #[instrument(skip(self), fields(log = %job.log_id, segment = job.segment, entry = job.entry))]
    pub async fn send(&self, job: &SnapshotJob, delay: Duration) -> Result<(), StoreError> {
        let secs = delay.min(MAX_DELAY).as_secs();
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(job.to_json())
            .delay_seconds(i32::try_from(secs).unwrap_or(900))
            .send()
            .await
            .map_err(|e| StoreError::service(SERVICE, "SendMessage", e))?;
        Ok(())
    }

    /// Sends jobs ten to a request; the result for each job is in the same position, so a
    /// caller can report exactly the ones that failed.
    #[instrument(skip(self, jobs), fields(jobs = jobs.len()))]
    pub async fn send_batch(&self, jobs: &[SnapshotJob]) -> Vec<Result<(), StoreError>> {
        let mut results = Vec::with_capacity(jobs.len());
        for chunk in jobs.chunks(MAX_BATCH) {
            let mut req = self.client.send_message_batch().queue_url(&self.url);
            let mut built = Vec::with_capacity(chunk.len());
            for (i, job) in chunk.iter().enumerate() {
                built.push(
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(job.to_json())
                        .build()
                        .map_err(|e| StoreError::service(SERVICE, "SendMessageBatch", e)),
                );
            }
            let mut errors: Vec<Option<StoreError>> = Vec::with_capacity(chunk.len());
            for b in built {
                match b {
                    Ok(entry) => {
                        req = req.entries(entry);
                        errors.push(None);
                    }
                    Err(e) => errors.push(Some(e)),
                }
            }
            match req.send().await {
                Ok(out) => {
                    for failed in out.failed() {
                        if let Some(slot) = failed
                            .id()
                            .parse::<usize>()
                            .ok()
                            .and_then(|i| errors.get_mut(i))
                        {
                            *slot = Some(StoreError::service(
                                SERVICE,
                                "SendMessageBatch",
                                format!(
                                    "{}: {}",
                                    failed.code(),
                                    failed.message().unwrap_or("no message")
                                ),
                            ));
                        }
                    }
                    results.extend(errors.into_iter().map(|e| match e {
                        Some(e) => Err(e),
                        None => Ok(()),
                    }));
                }
                Err(e) => {
                    let text = e.to_string();
                    results.extend(chunk.iter().map(|_| {
                        Err(StoreError::service(
                            SERVICE,
                            "SendMessageBatch",
                            text.clone(),
                        ))
                    }));
                }
            }
        }
        results
    }

    /// Makes a received message visible again after `timeout` (0: right away).
    #[instrument(skip(self, receipt))]
    pub async fn change_visibility(
        &self,
        receipt: &str,
        timeout: Duration,
    ) -> Result<(), StoreError> {
        // SQS allows at most 12 hours.
        let secs = timeout.as_secs().min(12 * 3600);
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .visibility_timeout(i32::try_from(secs).unwrap_or(0))
            .send()
            .await
            .map_err(|e| StoreError::service(SERVICE, "ChangeMessageVisibility", e))?;
        Ok(())
    }

    /// Deletes a received message (the local driver's side of Lambda's event-source mapping).
    pub async fn delete(&self, receipt: &str) -> Result<(), StoreError> {
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| StoreError::service(SERVICE, "DeleteMessage", e))?;
        Ok(())
    }
}

/// The sync FIFO queue: queued Replicache pushes, one message group per log.
#[derive(Debug, Clone)]
pub struct SqsPushQueue {
    client: Client,
    url: String,
}

impl SqsPushQueue {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

#[async_trait]
impl PushQueue for SqsPushQueue {
    #[instrument(skip(self, body), fields(group, bytes = body.len()))]
    async fn send(&self, group: &str, dedupe_id: &str, body: String) -> Result<(), StoreError> {
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_group_id(group)
            .message_deduplication_id(dedupe_id)
            .message_body(body)
            .send()
            .await
            .map_err(|e| StoreError::service(SERVICE, "SendMessage", e))?;
        Ok(())
    }
}
