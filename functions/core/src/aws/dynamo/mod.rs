//! [`DynamoLogStore`]: the storage ports over DynamoDB (the Entry, Segment, Clients and Dedupe
//! tables).
//!
//! Layout:
//! - `mod.rs`       — the store, its tables, and what every call shares: error mapping, paged
//!   queries, transactions
//! - `log_store.rs` — the [`LogEntries`](crate::ports::LogEntries), [`ClientRuns`](crate::ports::ClientRuns) and [`DedupeKeys`](crate::ports::DedupeKeys) ports
//! - `groups.rs`    — [`GroupOwners`](crate::ports::GroupOwners): who owns a client group
//! - `versions.rs`  — [`NamedVersions`](crate::ports::NamedVersions): a log's named versions
//! - `archive.rs`   — the archiver's writes: a segment's Archive attribute, deleting entry items

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, CancellationReason, Put, TransactWriteItem};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use super::items::{Item, bin, item_size, num, segment_attr, segment_key};
use crate::domain::cost::{ReadConsistency, read_units, write_units};
use crate::domain::{LogId, RequestUnits};
use crate::error::StoreError;
use crate::ports::{Consistency, TxOutcome};

mod archive;
mod groups;
mod log_store;
mod versions;

const SERVICE: &str = "DynamoDB";

/// A failed DynamoDB call as a [`StoreError`]: throttling (after the SDK's own retries) becomes
/// [`StoreError::Throttled`], which callers answer with "retry later" rather than a failure.
/// Writes `requests` (puts or deletes) to `table`, 25 per BatchWriteItem, sending back what
/// DynamoDB leaves unprocessed with backoff (from `first_wait`, doubling up to 2 s), and
/// `Throttled` after ten tries of one chunk.
pub(crate) async fn batch_write(
    client: &Client,
    table: &str,
    requests: Vec<aws_sdk_dynamodb::types::WriteRequest>,
    first_wait: std::time::Duration,
) -> Result<(), StoreError> {
    for chunk in requests.chunks(25) {
        let mut pending = chunk.to_vec();
        let mut backoff = first_wait;
        let mut tries = 0;
        while !pending.is_empty() {
            tries += 1;
            if tries > 10 {
                return Err(StoreError::Throttled {
                    service: SERVICE,
                    operation: "BatchWriteItem",
                });
            }
            let out = client
                .batch_write_item()
                .request_items(table, std::mem::take(&mut pending))
                .send()
                .await
                .map_err(|e| ddb_error("BatchWriteItem", e))?;
            pending = out
                .unprocessed_items
                .and_then(|mut m| m.remove(table))
                .unwrap_or_default();
            if !pending.is_empty() {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(2));
            }
        }
    }
    Ok(())
}

/// Whether a conditional `UpdateItem` was applied: `false` when its condition did not hold.
pub(crate) fn update_applied<O>(
    result: Result<O, SdkError<UpdateItemError, HttpResponse>>,
) -> Result<bool, StoreError> {
    match result {
        Ok(_) => Ok(true),
        Err(SdkError::ServiceError(e))
            if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
        {
            Ok(false)
        }
        Err(e) => Err(ddb_error("UpdateItem", e)),
    }
}

/// Whether a conditional `PutItem` was applied: `false` when its condition did not hold.
pub(crate) fn put_applied<O>(
    result: Result<O, SdkError<PutItemError, HttpResponse>>,
) -> Result<bool, StoreError> {
    match result {
        Ok(_) => Ok(true),
        Err(SdkError::ServiceError(e))
            if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
        {
            Ok(false)
        }
        Err(e) => Err(ddb_error("PutItem", e)),
    }
}

pub(crate) fn ddb_error<E>(operation: &'static str, e: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if matches!(
        e.code(),
        Some(
            "ProvisionedThroughputExceededException"
                | "ThrottlingException"
                | "RequestLimitExceeded"
        )
    ) {
        return StoreError::Throttled {
            service: SERVICE,
            operation,
        };
    }
    if matches!(e, SdkError::TimeoutError(_)) {
        return StoreError::TimedOut {
            service: SERVICE,
            operation,
        };
    }
    StoreError::service(SERVICE, operation, e)
}

/// The code of one item's cancellation reason ("None" when it did not fail).
fn code(r: Option<&CancellationReason>) -> &str {
    r.and_then(|r| r.code()).unwrap_or("None")
}

/// The per-item reasons of a cancelled transaction; `None` when it committed.
pub(crate) fn cancellation_reasons<T>(
    result: Result<T, SdkError<TransactWriteItemsError, HttpResponse>>,
) -> Result<Option<Vec<CancellationReason>>, StoreError> {
    match result {
        Ok(_) => Ok(None),
        Err(SdkError::ServiceError(e))
            if matches!(
                e.err(),
                TransactWriteItemsError::TransactionCanceledException(_)
            ) =>
        {
            Ok(Some(match e.into_err() {
                TransactWriteItemsError::TransactionCanceledException(c) => {
                    c.cancellation_reasons.unwrap_or_default()
                }
                _ => Vec::new(),
            }))
        }
        Err(e) => Err(ddb_error("TransactWriteItems", e)),
    }
}

/// A cancellation no failed condition explains: `Ok` when another request touched one of the
/// items at the same moment (`TransactionConflict`: retry), throttling as [`StoreError::Throttled`],
/// anything else as corrupt.
fn conflict_or_error(reasons: &[CancellationReason]) -> Result<(), StoreError> {
    if reasons
        .iter()
        .any(|r| matches!(r.code(), Some("TransactionConflict")))
    {
        return Ok(());
    }
    if reasons.iter().any(|r| {
        matches!(
            r.code(),
            Some("ThrottlingError" | "ProvisionedThroughputExceeded")
        )
    }) {
        return Err(StoreError::Throttled {
            service: SERVICE,
            operation: "TransactWriteItems",
        });
    }
    Err(StoreError::corrupt(
        "TransactWriteItems",
        format!(
            "transaction cancelled for {:?}",
            reasons.iter().map(|r| r.code()).collect::<Vec<_>>()
        ),
    ))
}

/// What one Query asks for.
#[derive(Debug, Clone)]
struct QuerySpec<'a> {
    table: &'a str,
    pk_name: &'a str,
    pk: Vec<u8>,
    /// Lowest sort key wanted, if any.
    from: Option<u64>,
    forward: bool,
    limit: Option<i32>,
    consistency: Consistency,
}

/// The Entry and Segment tables, through one SDK client.
#[derive(Debug, Clone)]
pub struct DynamoLogStore {
    client: Client,
    entry_table: String,
    segment_table: String,
    /// The Dedupe table; appends with an idempotency key fail without it.
    dedupe_table: Option<String>,
    /// The Clients table; sync pushes and client queries fail without it.
    clients_table: Option<String>,
}

/// A Dedupe item is charged as 1 KB: the prefix length is chosen so that items stay under it
/// (`docs/storage.md`, "Dedupe table"; `./scripts/bench log` measures the real sizes). A
/// transaction does not return the item it updated, so the exact size is unknown on success.
const DEDUPE_ITEM_CHARGE_BYTES: u64 = 1024;

impl DynamoLogStore {
    pub fn new(
        client: Client,
        entry_table: impl Into<String>,
        segment_table: impl Into<String>,
    ) -> Self {
        Self {
            client,
            entry_table: entry_table.into(),
            segment_table: segment_table.into(),
            dedupe_table: None,
            clients_table: None,
        }
    }

    /// Enables sync clients (`mutations` entries and their range items), kept in this table.
    pub fn with_clients_table(mut self, table: impl Into<String>) -> Self {
        self.clients_table = Some(table.into());
        self
    }

    fn clients_table(&self) -> Result<&str, StoreError> {
        self.clients_table.as_deref().ok_or_else(|| {
            StoreError::corrupt(
                "configuration",
                "a sync client call was made but no Clients table is configured",
            )
        })
    }

    /// Enables appends with idempotency keys, recorded in this table.
    pub fn with_dedupe_table(mut self, table: impl Into<String>) -> Self {
        self.dedupe_table = Some(table.into());
        self
    }

    fn dedupe_table(&self) -> Result<&str, StoreError> {
        self.dedupe_table.as_deref().ok_or_else(|| {
            StoreError::corrupt(
                "configuration",
                "an idempotency key was given but no Dedupe table is configured",
            )
        })
    }

    /// One conditional UpdateItem of a Segment item setting one attribute (`name` = `:v`), with
    /// `#n` naming the key attribute for existence checks. `false` when the condition failed.
    #[allow(clippy::too_many_arguments)]
    async fn update_segment(
        &self,
        log: LogId,
        segment: u64,
        update: &str,
        condition: &str,
        name: (&str, &str),
        value: AttributeValue,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.segment_table)
            .set_key(Some(segment_key(log, segment)))
            .update_expression(update)
            .condition_expression(condition)
            .expression_attribute_names(name.0, name.1)
            .expression_attribute_names("#n", segment_attr::NUM)
            .expression_attribute_values(":v", value)
            .send()
            .await;
        *units += RequestUnits::writes(1.0);
        update_applied(result)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn consistency(c: Consistency) -> ReadConsistency {
        match c {
            Consistency::Eventual => ReadConsistency::Eventual,
            Consistency::Strong => ReadConsistency::Strong,
        }
    }

    /// One Query page; charges the units for the items it returned.
    async fn query_page(
        &self,
        spec: QuerySpec<'_>,
        start: Option<Item>,
        units: &mut RequestUnits,
    ) -> Result<(Vec<Item>, Option<Item>), StoreError> {
        let QuerySpec {
            table,
            pk_name,
            pk,
            from,
            forward,
            limit,
            consistency,
        } = spec;
        let mut q = self
            .client
            .query()
            .table_name(table)
            .expression_attribute_names("#p", pk_name)
            .expression_attribute_values(":p", bin(pk))
            .scan_index_forward(forward)
            .consistent_read(consistency == Consistency::Strong)
            .set_limit(limit)
            .set_exclusive_start_key(start);
        q = match from {
            Some(from) => q
                .key_condition_expression("#p = :p AND #n >= :n")
                .expression_attribute_names("#n", "n")
                .expression_attribute_values(":n", num(from)),
            None => q.key_condition_expression("#p = :p"),
        };
        let out = q.send().await.map_err(|e| ddb_error("Query", e))?;
        let items = out.items.unwrap_or_default();
        let bytes: u64 = items.iter().map(item_size).sum();
        *units += RequestUnits::reads(read_units(bytes, Self::consistency(consistency)));
        Ok((items, out.last_evaluated_key))
    }

    fn tx_put(table: &str, item: Item, key_attr: &str) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#k)")
            .expression_attribute_names("#k", key_attr)
            .build()
            .map_err(|e| StoreError::service(SERVICE, "TransactWriteItems", e))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    async fn transact(
        &self,
        puts: Vec<(String, Item, &'static str)>,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        let mut items = Vec::with_capacity(puts.len());
        for (table, item, key) in puts {
            // Transactions cost two write units per KB, charged whether or not they commit.
            *units += RequestUnits::writes(write_units(item_size(&item), true));
            items.push(Self::tx_put(&table, item, key)?);
        }
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        {
            Ok(_) => Ok(TxOutcome::Committed),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), TransactWriteItemsError::TransactionCanceledException(c)
                    if c.cancellation_reasons().iter().any(|r| r.code() == Some("ConditionalCheckFailed"))) =>
            {
                Ok(TxOutcome::Conflict)
            }
            // Another request touched one of the items at the same moment: nothing was written.
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), TransactWriteItemsError::TransactionCanceledException(c)
                    if c.cancellation_reasons().iter().any(|r| r.code() == Some("TransactionConflict"))) =>
            {
                Ok(TxOutcome::Interrupted)
            }
            Err(e) => Err(ddb_error("TransactWriteItems", e)),
        }
    }
}
