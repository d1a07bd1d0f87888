//! Deleting a log's messages as soon as its group commit is durable, before the poke.
//!
//! SQS FIFO holds a message group back while any of its messages is in flight, so a sheet's next
//! batch cannot be received until this one's messages are deleted. Lambda's event source deletes
//! them only after the handler returns, and the handler still has the poke to publish, which may
//! wait up to the coalescing window (100 ms by default) for later commits to announce together.
//! Deleting the committed messages first lets the sheet's next batch start while the poke waits;
//! the event source's own delete afterwards finds them gone, which SQS answers without an error.
//!
//! Deleting early is safe for exactly-once: the messages are deleted only after their pushes are
//! applied (a redelivery would apply nothing anyway), and a failed delete is only logged: the
//! event source deletes them again, or SQS redelivers them and the writer skips what is applied.

use std::fmt::Debug;

use async_trait::async_trait;
use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;

/// Deletes handled messages by receipt handle (at most ten per call, SQS's batch limit).
#[async_trait]
pub trait EarlyDelete: Send + Sync + Debug {
    async fn delete(&self, receipts: &[String]) -> Result<(), String>;
}

/// [`EarlyDelete`] on an SQS queue.
#[derive(Debug, Clone)]
pub struct SqsDelete {
    sqs: aws_sdk_sqs::Client,
    url: String,
}

impl SqsDelete {
    pub fn new(sqs: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        Self {
            sqs,
            url: url.into(),
        }
    }

    /// The queue named by an event source ARN (`arn:<partition>:sqs:<region>:<account>:<name>`),
    /// its URL looked up once with `GetQueueUrl`.
    pub async fn from_arn(sqs: aws_sdk_sqs::Client, arn: &str) -> Result<Self, String> {
        let parts: Vec<&str> = arn.split(':').collect();
        let (account, name) = match parts.as_slice() {
            ["arn", _, "sqs", _, account, name] if !account.is_empty() && !name.is_empty() => {
                (*account, *name)
            }
            _ => return Err(format!("not an SQS queue ARN: {arn:?}")),
        };
        let url = sqs
            .get_queue_url()
            .queue_name(name)
            .queue_owner_aws_account_id(account)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "GetQueueUrl {name}: {}",
                    aws_sdk_sqs::error::DisplayErrorContext(e)
                )
            })?
            .queue_url
            .ok_or_else(|| format!("GetQueueUrl {name}: no URL in the answer"))?;
        Ok(Self::new(sqs, url))
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

#[async_trait]
impl EarlyDelete for SqsDelete {
    async fn delete(&self, receipts: &[String]) -> Result<(), String> {
        for chunk in receipts.chunks(10) {
            let mut req = self.sqs.delete_message_batch().queue_url(&self.url);
            for (i, r) in chunk.iter().enumerate() {
                req = req.entries(
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(r)
                        .build()
                        .map_err(|e| e.to_string())?,
                );
            }
            let out = req.send().await.map_err(|e| {
                format!(
                    "DeleteMessageBatch: {}",
                    aws_sdk_sqs::error::DisplayErrorContext(e)
                )
            })?;
            if let Some(f) = out.failed().first() {
                return Err(format!(
                    "DeleteMessageBatch: {} of {} failed, the first with {}",
                    out.failed().len(),
                    chunk.len(),
                    f.code()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_arn_that_is_not_an_sqs_queue_is_refused_without_a_request() {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        for arn in [
            "",
            "arn:aws:sns:eu-west-1:1:t",
            "arn:aws:sqs:eu-west-1::q",
            "q",
        ] {
            assert!(
                SqsDelete::from_arn(sqs.clone(), arn).await.is_err(),
                "{arn}"
            );
        }
    }
}
