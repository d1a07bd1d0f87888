//! [`LogPurge`] over DynamoDB and [`ObjectPurge`] over S3: deleting a log (`docs/storage.md`,
//! "Deleting a log").

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, ReturnValue, WriteRequest};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use tracing::instrument;

use super::dynamo::{batch_write, ddb_error};
use super::items::{
    CLIENTS_BY_LOG, Item, bin, client_attr, dedupe_attr, entry_attr, num, opt_num, opt_str,
    segment_attr,
};
use super::s3::S3Bucket;
use crate::domain::clients::{CLIENT_TAG, delete_rate_key, meta_key};
use crate::domain::dedupe::{DedupeRef, column_name, month_index};
use crate::domain::{LogId, segment_id};
use crate::error::StoreError;
use crate::ports::{LogMeta, LogPurge, ObjectPurge};

const SERVICE: &str = "DynamoDB";

/// Metadata item attributes (in the Clients table, beside `k` and `m`).
pub mod meta_attr {
    /// The creator's subject.
    pub const CREATOR: &str = "o";
    /// The tombstone: when the log was deleted (Unix seconds).
    pub const DELETED: &str = "d";
    /// Who owned the sheet when its delete finished (string set): they may repeat the delete
    /// once the catalog has forgotten the sheet.
    pub const OWNERS: &str = "p";
}

/// A subject's delete counter (in the Clients table, under [`delete_rate_key`]).
pub mod rate_attr {
    /// The start of the counted window (Unix seconds).
    pub const WINDOW: &str = "t";
    /// Deletes counted in it.
    pub const COUNT: &str = "n";
}

/// Pending Snapshots key attributes.
const PENDING_LOG: &str = "l";
const PENDING_KEY: &str = "n";

/// Dedupe items updated at once while a page of entries is purged.
const DEDUPE_CONCURRENCY: usize = 8;

/// The tables a log's items live in.
#[derive(Debug, Clone)]
pub struct DynamoPurge {
    client: Client,
    entry_table: String,
    segment_table: String,
    pending_table: String,
    clients_table: String,
    /// The Dedupe table, where entries appended with an idempotency key recorded it.
    dedupe_table: Option<String>,
}

impl DynamoPurge {
    pub fn new(
        client: Client,
        entry_table: impl Into<String>,
        segment_table: impl Into<String>,
        pending_table: impl Into<String>,
        clients_table: impl Into<String>,
    ) -> Self {
        Self {
            client,
            entry_table: entry_table.into(),
            segment_table: segment_table.into(),
            pending_table: pending_table.into(),
            clients_table: clients_table.into(),
            dedupe_table: None,
        }
    }

    /// Reads tombstones (and counts deletes) only, for a function that must not write to a
    /// deleted log: the sync writer, the snapshot worker. Its purge calls fail.
    pub fn tombstones(client: Client, clients_table: impl Into<String>) -> Self {
        Self::new(client, "", "", "", clients_table)
    }

    /// The Dedupe table: a purge removes the idempotency keys the log's entries recorded there.
    /// Without it, purging an entry that recorded one is an error.
    pub fn with_dedupe_table(mut self, table: impl Into<String>) -> Self {
        self.dedupe_table = Some(table.into());
        self
    }

    fn meta_item_key(log: LogId) -> Item {
        Item::from([
            (client_attr::KEY.to_owned(), bin(meta_key(log))),
            (client_attr::FIRST.to_owned(), num(0)),
        ])
    }

    /// The keys of up to `limit` items of one partition, in order, with the attribute `extra`
    /// when given (take it out before using the item as a key).
    async fn query_keys(
        &self,
        table: &str,
        (pk_name, sk_name): (&str, &str),
        pk: Vec<u8>,
        limit: usize,
        extra: Option<&str>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut keys = Vec::new();
        let mut start = None;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(table)
                .key_condition_expression("#p = :p")
                .expression_attribute_names("#p", pk_name)
                .expression_attribute_names("#s", sk_name);
            q = match extra {
                Some(name) => q
                    .projection_expression("#p, #s, #x")
                    .expression_attribute_names("#x", name),
                None => q.projection_expression("#p, #s"),
            };
            let out = q
                .expression_attribute_values(":p", bin(pk.clone()))
                .consistent_read(true)
                .limit(i32::try_from(limit - keys.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| ddb_error("Query", e))?;
            keys.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() || keys.len() >= limit {
                return Ok(keys);
            }
        }
    }

    /// Deletes items by key, 25 per BatchWriteItem, retrying unprocessed ones with backoff.
    async fn delete_keys(&self, table: &str, keys: Vec<Item>) -> Result<(), StoreError> {
        let requests = keys
            .into_iter()
            .map(|k| {
                DeleteRequest::builder()
                    .set_key(Some(k))
                    .build()
                    .map(|d| WriteRequest::builder().delete_request(d).build())
                    .map_err(|e| StoreError::service(SERVICE, "BatchWriteItem", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        batch_write(
            &self.client,
            table,
            requests,
            std::time::Duration::from_millis(50),
        )
        .await
    }

    /// Up to `limit` keys (`k`, `m`) of the log's indexed Clients items: each client's first
    /// range item, each group item and the index mark ([`client_attr::LOG`]), from the
    /// [`CLIENTS_BY_LOG`] index. A Query of this log's index partition: it reads nothing of any
    /// other log. The index is eventually consistent, so an item written a moment ago may be
    /// missing (the next delete call finds it) and one just deleted may still be listed
    /// (deleting it again is a no-op).
    async fn indexed_client_keys(&self, log: LogId, limit: usize) -> Result<Vec<Item>, StoreError> {
        let mut keys = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.clients_table)
                .index_name(CLIENTS_BY_LOG)
                .key_condition_expression("#i = :i")
                .expression_attribute_names("#i", client_attr::LOG)
                .expression_attribute_values(":i", bin(log.as_bytes().to_vec()))
                .limit(i32::try_from(limit - keys.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| ddb_error("Query", e))?;
            keys.extend(out.items.unwrap_or_default().into_iter().map(|mut item| {
                // Keys only: the table's key, without the index's.
                item.remove(client_attr::LOG);
                item
            }));
            start = out.last_evaluated_key;
            if start.is_none() || keys.len() >= limit {
                return Ok(keys);
            }
        }
    }

    /// Deletes up to about `max` of the log's Clients items (never its metadata item); returns
    /// how many. Group items and the index mark go as the index lists them. A client's range
    /// items are its partition, read strongly; its first range item (the indexed one) goes
    /// after the others, so a purge cut off in between finds the client again.
    async fn purge_clients(&self, log: LogId, max: usize) -> Result<usize, StoreError> {
        let meta = meta_key(log);
        let mut deleted = 0;
        let mut whole = Vec::new();
        for key in self.indexed_client_keys(log, max).await? {
            let Some(AttributeValue::B(k)) = key.get(client_attr::KEY) else {
                return Err(StoreError::corrupt(
                    "Clients item",
                    "attribute k is not binary",
                ));
            };
            let k = k.as_ref().to_vec();
            if !k.starts_with(log.as_bytes()) || k == meta {
                // Not this log's (an item indexed under the wrong log), or its tombstone.
                continue;
            }
            if k.get(16) != Some(&CLIENT_TAG) {
                // A group item or the index mark: one item.
                whole.push(key);
                deleted += 1;
                if deleted >= max {
                    break;
                }
                continue;
            }
            let rest = max.saturating_sub(deleted).max(1);
            let mut ranges = self
                .query_keys(
                    &self.clients_table,
                    (client_attr::KEY, client_attr::FIRST),
                    k,
                    rest + 1,
                    None,
                )
                .await?;
            let complete = ranges.len() <= rest;
            // Ascending by sort key: the first range item (1) comes first when it is there.
            let first = match ranges.first() {
                Some(r) if opt_num::<u64>(r, client_attr::FIRST, "Clients item")? == Some(1) => {
                    Some(ranges.remove(0))
                }
                _ => None,
            };
            ranges.truncate(rest);
            deleted += ranges.len();
            self.delete_keys(&self.clients_table, ranges).await?;
            if let (true, Some(first)) = (complete, first) {
                // Its other range items are gone: it goes with the group items, after them.
                deleted += 1;
                whole.push(first);
            }
            if deleted >= max {
                break;
            }
        }
        self.delete_keys(&self.clients_table, whole).await?;
        Ok(deleted)
    }

    /// Segment keys, with each segment's base sequence (`q`) when `with_base`.
    async fn segment_nums(
        &self,
        log: LogId,
        limit: usize,
        with_base: bool,
    ) -> Result<Vec<Item>, StoreError> {
        self.query_keys(
            &self.segment_table,
            (segment_attr::LOG_ID, segment_attr::NUM),
            log.as_bytes().to_vec(),
            limit,
            with_base.then_some(segment_attr::BASE_SEQ),
        )
        .await
    }

    /// Removes the idempotency keys that the given Entry items (keys with their `k` attribute,
    /// numbers of a segment whose entry 0 is at `base_seq`) recorded in the Dedupe table: one
    /// `DELETE` of their two elements from the month column, per Dedupe item and column. Removing
    /// elements that are gone is a no-op, so a purge that stopped after this and before deleting
    /// the entries repeats it harmlessly. An item left with no month column (only this log's keys
    /// were in it) is deleted too, unless a key was added to it meanwhile.
    async fn remove_dedupe_keys(&self, entries: &[Item], base_seq: u64) -> Result<(), StoreError> {
        let mut groups: BTreeMap<(Vec<u8>, String), Vec<Vec<u8>>> = BTreeMap::new();
        for item in entries {
            let Some(value) = item.get(entry_attr::DEDUPE) else {
                continue;
            };
            let r = match value {
                AttributeValue::B(b) => DedupeRef::decode(b.as_ref()),
                _ => None,
            }
            .ok_or_else(|| StoreError::corrupt("Entry item", "attribute k is not a Dedupe ref"))?;
            let n: u64 = opt_num(item, entry_attr::NUM, "Entry item")?
                .ok_or_else(|| StoreError::corrupt("Entry item", "attribute n is missing"))?;
            groups
                .entry((r.prefix.clone(), r.column()))
                .or_default()
                .extend(r.elements(base_seq + n));
        }
        if groups.is_empty() {
            return Ok(());
        }
        let table = self.dedupe_table.as_deref().ok_or_else(|| {
            StoreError::corrupt(
                "configuration",
                "the log's entries recorded idempotency keys but no Dedupe table is configured",
            )
        })?;
        futures::stream::iter(groups)
            .map(|((prefix, column), elements)| {
                self.remove_elements(table, prefix, column, elements)
            })
            .buffer_unordered(DEDUPE_CONCURRENCY)
            .try_collect::<()>()
            .await
    }

    async fn remove_elements(
        &self,
        table: &str,
        prefix: Vec<u8>,
        column: String,
        elements: Vec<Vec<u8>>,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(table)
            .key(dedupe_attr::PREFIX, bin(prefix.clone()))
            .update_expression("DELETE #c :e")
            .condition_expression("attribute_exists(#p)")
            .expression_attribute_names("#c", &column)
            .expression_attribute_names("#p", dedupe_attr::PREFIX)
            .expression_attribute_values(
                ":e",
                AttributeValue::Bs(elements.into_iter().map(Blob::new).collect()),
            )
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        let left = match result {
            Ok(out) => out.attributes.unwrap_or_default(),
            // No such item: the keys aged out with it, or an earlier call removed it.
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                return Ok(());
            }
            Err(e) => return Err(ddb_error("UpdateItem", e)),
        };
        if left.keys().any(|k| k != dedupe_attr::PREFIX) {
            return Ok(());
        }
        // Only the prefix is left. Delete the item unless an append has just added a key to it
        // (appends write the current month's column; a month either side covers clock skew).
        let month = month_index(time::OffsetDateTime::now_utc().unix_timestamp());
        let columns: Vec<String> = [month.saturating_sub(1), month, month + 1]
            .into_iter()
            .map(column_name)
            .collect();
        let mut delete = self
            .client
            .delete_item()
            .table_name(table)
            .key(dedupe_attr::PREFIX, bin(prefix))
            .condition_expression(
                "attribute_not_exists(#m0) AND attribute_not_exists(#m1) AND attribute_not_exists(#m2)",
            );
        for (i, c) in columns.iter().enumerate() {
            delete = delete.expression_attribute_names(format!("#m{i}"), c);
        }
        match delete.send().await {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), DeleteItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(())
            }
            Err(e) => Err(ddb_error("DeleteItem", e)),
        }
    }
}

#[async_trait]
impl LogPurge for DynamoPurge {
    #[instrument(skip(self), fields(log = %log))]
    async fn log_meta(&self, log: LogId) -> Result<Option<LogMeta>, StoreError> {
        const WHAT: &str = "log metadata item";
        let out = self
            .client
            .get_item()
            .table_name(&self.clients_table)
            .set_key(Some(Self::meta_item_key(log)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| ddb_error("GetItem", e))?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let owners = match item.get(meta_attr::OWNERS) {
            None => Vec::new(),
            Some(AttributeValue::Ss(owners)) => owners.clone(),
            Some(_) => return Err(StoreError::corrupt(WHAT, "attribute p is not a string set")),
        };
        Ok(Some(LogMeta {
            creator: opt_str(&item, meta_attr::CREATOR, WHAT)?,
            deleted: opt_num(&item, meta_attr::DELETED, WHAT)?,
            owners,
        }))
    }

    #[instrument(skip(self, owners), fields(log = %log, owners = owners.len()))]
    async fn record_owners(&self, log: LogId, owners: &[String]) -> Result<(), StoreError> {
        if owners.is_empty() {
            return Ok(());
        }
        self.client
            .update_item()
            .table_name(&self.clients_table)
            .set_key(Some(Self::meta_item_key(log)))
            .update_expression("ADD #p :p")
            .condition_expression("attribute_exists(#d)")
            .expression_attribute_names("#p", meta_attr::OWNERS)
            .expression_attribute_names("#d", meta_attr::DELETED)
            .expression_attribute_values(":p", AttributeValue::Ss(owners.to_vec()))
            .send()
            .await
            .map_err(|e| ddb_error("UpdateItem", e))?;
        Ok(())
    }

    #[instrument(skip(self, subject), fields(log = %log))]
    async fn record_creator(&self, log: LogId, subject: &str) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.clients_table)
            .set_key(Some(Self::meta_item_key(log)))
            .update_expression("SET #o = if_not_exists(#o, :o)")
            .expression_attribute_names("#o", meta_attr::CREATOR)
            .expression_attribute_values(":o", AttributeValue::S(subject.to_owned()))
            .send()
            .await
            .map_err(|e| ddb_error("UpdateItem", e))?;
        Ok(())
    }

    #[instrument(skip(self), fields(log = %log))]
    async fn mark_deleted(&self, log: LogId, now: i64) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.clients_table)
            .set_key(Some(Self::meta_item_key(log)))
            .update_expression("SET #d = if_not_exists(#d, :d)")
            .expression_attribute_names("#d", meta_attr::DELETED)
            .expression_attribute_values(":d", num(now))
            .send()
            .await
            .map_err(|e| ddb_error("UpdateItem", e))?;
        Ok(())
    }

    #[instrument(skip(self, subject))]
    async fn count_delete(
        &self,
        subject: &str,
        window: i64,
        limit: u32,
    ) -> Result<bool, StoreError> {
        let key = Item::from([
            (client_attr::KEY.to_owned(), bin(delete_rate_key(subject))),
            (client_attr::FIRST.to_owned(), num(0)),
        ]);
        // The common case: one more in the current window.
        let counted = self
            .client
            .update_item()
            .table_name(&self.clients_table)
            .set_key(Some(key.clone()))
            .update_expression("ADD #n :one")
            .condition_expression("#t = :t AND #n < :limit")
            .expression_attribute_names("#n", rate_attr::COUNT)
            .expression_attribute_names("#t", rate_attr::WINDOW)
            .expression_attribute_values(":one", num(1))
            .expression_attribute_values(":t", num(window))
            .expression_attribute_values(":limit", num(limit))
            .send()
            .await;
        match counted {
            Ok(_) => return Ok(true),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) => {}
            Err(e) => return Err(ddb_error("UpdateItem", e)),
        }
        // A new window (or the subject's first delete) starts the count again; a window not
        // newer than the item's means this one is full.
        let started = self
            .client
            .update_item()
            .table_name(&self.clients_table)
            .set_key(Some(key))
            .update_expression("SET #t = :t, #n = :one")
            .condition_expression("attribute_not_exists(#t) OR #t < :t")
            .expression_attribute_names("#n", rate_attr::COUNT)
            .expression_attribute_names("#t", rate_attr::WINDOW)
            .expression_attribute_values(":one", num(1))
            .expression_attribute_values(":t", num(window))
            .send()
            .await;
        match started {
            Ok(_) => Ok(limit > 0),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(false)
            }
            Err(e) => Err(ddb_error("UpdateItem", e)),
        }
    }

    async fn has_segments(&self, log: LogId) -> Result<bool, StoreError> {
        Ok(!self.segment_nums(log, 1, false).await?.is_empty())
    }

    #[instrument(skip(self), fields(log = %log))]
    async fn purge_items(&self, log: LogId, max: usize) -> Result<usize, StoreError> {
        let max = max.max(1);
        let mut deleted = 0;
        let mut segments = self.segment_nums(log, usize::MAX, true).await?;
        // Entries first, segment by segment: the Segment items are how the next call finds them.
        for segment in &mut segments {
            let n: u64 = opt_num(segment, segment_attr::NUM, "Segment item")?
                .ok_or_else(|| StoreError::corrupt("Segment item", "attribute n is missing"))?;
            let base_seq: u64 = opt_num(segment, segment_attr::BASE_SEQ, "Segment item")?
                .ok_or_else(|| StoreError::corrupt("Segment item", "attribute q is missing"))?;
            segment.remove(segment_attr::BASE_SEQ);
            let mut keys = self
                .query_keys(
                    &self.entry_table,
                    (entry_attr::SEGMENT_ID, entry_attr::NUM),
                    segment_id(log, n),
                    max - deleted,
                    Some(entry_attr::DEDUPE),
                )
                .await?;
            // The idempotency keys before the entries that say where they are, so a purge cut
            // off in between finds them again.
            self.remove_dedupe_keys(&keys, base_seq).await?;
            for k in &mut keys {
                k.remove(entry_attr::DEDUPE);
            }
            deleted += keys.len();
            self.delete_keys(&self.entry_table, keys).await?;
            if deleted >= max {
                return Ok(deleted);
            }
        }
        let pending = self
            .query_keys(
                &self.pending_table,
                (PENDING_LOG, PENDING_KEY),
                log.as_bytes().to_vec(),
                max - deleted,
                None,
            )
            .await?;
        deleted += pending.len();
        self.delete_keys(&self.pending_table, pending).await?;
        if deleted >= max {
            return Ok(deleted);
        }
        deleted += self.purge_clients(log, max - deleted).await?;
        if deleted >= max {
            return Ok(deleted);
        }
        let segments: Vec<Item> = segments.into_iter().take(max - deleted).collect();
        deleted += segments.len();
        self.delete_keys(&self.segment_table, segments).await?;
        Ok(deleted)
    }
}

#[async_trait]
impl ObjectPurge for S3Bucket {
    async fn list_keys(&self, prefix: &str, max: usize) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .client()
                .list_objects_v2()
                .bucket(self.bucket())
                .prefix(prefix)
                .max_keys(i32::try_from((max - keys.len()).min(1000)).unwrap_or(1000))
                .set_continuation_token(token)
                .send()
                .await
                .map_err(|e| StoreError::service("S3", "ListObjectsV2", e))?;
            keys.extend(
                out.contents
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|o| o.key),
            );
            token = out.next_continuation_token;
            if token.is_none() || keys.len() >= max {
                return Ok(keys);
            }
        }
    }

    async fn delete_keys(&self, keys: &[String]) -> Result<(), StoreError> {
        use aws_sdk_s3::types::{Delete, ObjectIdentifier};
        for chunk in keys.chunks(1000) {
            let objects = chunk
                .iter()
                .map(|k| ObjectIdentifier::builder().key(k).build())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::service("S3", "DeleteObjects", e))?;
            let delete = Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .map_err(|e| StoreError::service("S3", "DeleteObjects", e))?;
            let out = self
                .client()
                .delete_objects()
                .bucket(self.bucket())
                .delete(delete)
                .send()
                .await
                .map_err(|e| StoreError::service("S3", "DeleteObjects", e))?;
            if let Some(err) = out.errors.unwrap_or_default().into_iter().next() {
                return Err(StoreError::corrupt(
                    "S3 DeleteObjects",
                    format!(
                        "{} not deleted: {}",
                        err.key.unwrap_or_default(),
                        err.message.unwrap_or_default()
                    ),
                ));
            }
        }
        Ok(())
    }

    async fn put_marker(&self, key: &str) -> Result<(), StoreError> {
        self.put_object(key, Bytes::new(), false).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use aws_sdk_dynamodb::config::{Credentials, Region};
    use aws_smithy_types::retry::RetryConfig;
    use aws_smithy_types::timeout::TimeoutConfig;

    use super::*;

    /// A purge call that times out is "retry later" (503), like every other DynamoDB call. The
    /// purge kept its own copy of the error mapping, which had no timeout case: the same call was
    /// an internal error (500).
    #[tokio::test]
    async fn a_timed_out_purge_call_is_a_timeout_not_an_internal_error() {
        // Accepts connections and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let _held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                open.push(socket);
            }
        });
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(format!("http://{addr}"))
            .credentials_provider(Credentials::new("a", "b", None, None, "test"))
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_timeout(Duration::from_millis(300))
                    .build(),
            )
            .build();
        let purge = DynamoPurge::new(Client::from_conf(config), "e", "s", "p", "c");
        let err = purge
            .log_meta(LogId::new_random())
            .await
            .expect_err("nobody answers");
        assert!(
            matches!(err, StoreError::TimedOut { .. }),
            "{err:?} should be a timeout"
        );
    }
}
