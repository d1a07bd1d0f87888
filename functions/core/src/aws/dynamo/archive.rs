//! Maintenance writes of the archiver: naming a segment's archive on its Segment item and
//! deleting the entry items it replaced.

use aws_sdk_dynamodb::types::AttributeValue;
use tracing::instrument;

use super::{DynamoLogStore, SERVICE, ddb_error};
use crate::aws::items::{entry_key, segment_attr};
use crate::domain::{LogId, RequestUnits};
use crate::error::StoreError;

impl DynamoLogStore {
    /// Sets a segment's Archive attribute (`docs/storage.md`, "Archived segments"), if it is
    /// unset or already `key`. `false` when it names something else (another archiver won).
    #[instrument(skip(self, units))]
    pub async fn set_archive(
        &self,
        log: LogId,
        segment: u64,
        key: &str,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        self.update_segment(
            log,
            segment,
            "SET #a = :v",
            "attribute_exists(#n) AND (attribute_not_exists(#a) OR #a = :v)",
            ("#a", segment_attr::ARCHIVE),
            AttributeValue::S(key.to_owned()),
            units,
        )
        .await
    }

    /// Deletes entry items of a segment (at most 25: one BatchWriteItem), retrying what DynamoDB
    /// leaves unprocessed. Deleting an item that is gone is a no-op, so a rerun is safe.
    #[instrument(skip(self, nums, units), fields(n = nums.len()))]
    pub async fn delete_entries(
        &self,
        log: LogId,
        segment: u64,
        nums: &[u64],
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
        let mut requests = nums
            .iter()
            .map(|n| {
                DeleteRequest::builder()
                    .set_key(Some(entry_key(log, segment, *n)))
                    .build()
                    .map(|d| WriteRequest::builder().delete_request(d).build())
                    .map_err(|e| StoreError::service(SERVICE, "BatchWriteItem", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut backoff = std::time::Duration::from_millis(50);
        for _ in 0..10 {
            if requests.is_empty() {
                return Ok(());
            }
            *units += RequestUnits::writes(requests.len() as f64);
            let out = self
                .client
                .batch_write_item()
                .request_items(&self.entry_table, std::mem::take(&mut requests))
                .send()
                .await
                .map_err(|e| ddb_error("BatchWriteItem", e))?;
            requests = out
                .unprocessed_items
                .and_then(|mut m| m.remove(&self.entry_table))
                .unwrap_or_default();
            if !requests.is_empty() {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(2));
            }
        }
        Err(StoreError::Throttled {
            service: SERVICE,
            operation: "BatchWriteItem",
        })
    }
}
