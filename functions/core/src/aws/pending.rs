//! The Pending Snapshots table (`docs/design.md`, Pending Snapshots protocol): one item per snapshot that a
//! worker has started and not finished, keyed so a log's pending snapshots sort in log order.
//!
//! Every write but the first is conditional on the item's increment `i`, which every write
//! bumps. That one rule gives the protocol its guarantees: a claim succeeds for exactly one of
//! several racing invocations, a checkpoint only ever moves forward (an invocation whose claim
//! was taken over finds its next write refused and bails out), and a stale invocation can never
//! overwrite newer state.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use tracing::instrument;

use super::items::{Item, bin, get_bin, get_num, num, opt_bool, opt_num, opt_str};
use crate::domain::{Guarded, LogId, PendingKey, PendingSnapshot};
use crate::error::StoreError;
use crate::ports::PendingSnapshots;

const SERVICE: &str = "DynamoDB";
const WHAT: &str = "Pending Snapshots item";

/// Pending Snapshots attribute names (`docs/storage.md`).
pub mod pending_attr {
    pub const LOG_ID: &str = "l";
    pub const NUM: &str = "n";
    pub const CREATED: &str = "c";
    pub const MODIFIED: &str = "m";
    pub const ACTIVE: &str = "a";
    pub const INCREMENT: &str = "i";
    pub const RETRIES: &str = "r";
    pub const STATE: &str = "k";
}

fn item_key(key: &PendingKey) -> Item {
    HashMap::from([
        (
            pending_attr::LOG_ID.to_owned(),
            bin(key.log.as_bytes().to_vec()),
        ),
        (pending_attr::NUM.to_owned(), bin(key.sort_key().to_vec())),
    ])
}

fn pending_from_item(item: &Item) -> Result<PendingSnapshot, StoreError> {
    use pending_attr::*;
    let log = LogId::from_slice(get_bin(item, LOG_ID, WHAT)?)
        .ok_or_else(|| StoreError::corrupt(WHAT, "log id is not 16 bytes"))?;
    let sk = get_bin(item, NUM, WHAT)?;
    let (seg, entry) = match sk.len() {
        16 => sk.split_at(8),
        n => return Err(StoreError::corrupt(WHAT, format!("sort key of {n} bytes"))),
    };
    let be = |b: &[u8]| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_be_bytes(a)
    };
    Ok(PendingSnapshot {
        key: PendingKey::new(log, be(seg), be(entry)),
        created: get_num(item, CREATED, WHAT)?,
        modified: get_num(item, MODIFIED, WHAT)?,
        active: opt_bool(item, ACTIVE, WHAT)?.unwrap_or(false),
        increment: get_num(item, INCREMENT, WHAT)?,
        retries: opt_num(item, RETRIES, WHAT)?.unwrap_or(0),
        state: opt_str(item, STATE, WHAT)?,
    })
}

/// The Pending Snapshots table.
#[derive(Debug, Clone)]
pub struct DynamoPendingStore {
    client: Client,
    table: String,
}

impl DynamoPendingStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    #[allow(clippy::too_many_arguments)]
    async fn guarded_update(
        &self,
        key: PendingKey,
        increment: u64,
        update: &str,
        names: &[(&str, &str)],
        values: Vec<(&str, AttributeValue)>,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item_key(&key)))
            .update_expression(update)
            .condition_expression("attribute_exists(#n) AND #i = :seen")
            .expression_attribute_names("#n", pending_attr::NUM)
            .expression_attribute_names("#i", pending_attr::INCREMENT)
            .expression_attribute_names("#m", pending_attr::MODIFIED)
            .expression_attribute_values(":seen", num(increment))
            .expression_attribute_values(":now", num(now))
            .expression_attribute_values(":one", num(1))
            .return_values(ReturnValue::AllNew);
        for (placeholder, name) in names {
            req = req.expression_attribute_names(*placeholder, *name);
        }
        for (placeholder, value) in values {
            req = req.expression_attribute_values(placeholder, value);
        }
        match req.send().await {
            Ok(out) => {
                let item = out
                    .attributes
                    .ok_or_else(|| StoreError::corrupt(WHAT, "update returned no attributes"))?;
                Ok(Guarded::Done(pending_from_item(&item)?))
            }
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(Guarded::Lost)
            }
            Err(e) => Err(StoreError::service(SERVICE, "UpdateItem", e)),
        }
    }
}

#[async_trait]
impl PendingSnapshots for DynamoPendingStore {
    /// The log's first pending snapshot in log order, read consistently: the one that must finish
    /// before any later snapshot of the log may start.
    #[instrument(skip(self), fields(log = %log))]
    async fn earliest(&self, log: LogId) -> Result<Option<PendingSnapshot>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#l = :l")
            .expression_attribute_names("#l", pending_attr::LOG_ID)
            .expression_attribute_values(":l", bin(log.as_bytes().to_vec()))
            .scan_index_forward(true)
            .consistent_read(true)
            .limit(1)
            .send()
            .await
            .map_err(|e| StoreError::service(SERVICE, "Query", e))?;
        out.items
            .unwrap_or_default()
            .first()
            .map(pending_from_item)
            .transpose()
    }

    /// Every pending snapshot of a log, in log order (tests and operators).
    async fn list(&self, log: LogId) -> Result<Vec<PendingSnapshot>, StoreError> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#l = :l")
                .expression_attribute_names("#l", pending_attr::LOG_ID)
                .expression_attribute_values(":l", bin(log.as_bytes().to_vec()))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| StoreError::service(SERVICE, "Query", e))?;
            for item in page.items() {
                out.push(pending_from_item(item)?);
            }
            match page.last_evaluated_key {
                Some(k) => start = Some(k),
                None => return Ok(out),
            }
        }
    }

    /// One pending snapshot, read consistently.
    #[instrument(skip(self))]
    async fn get(&self, key: PendingKey) -> Result<Option<PendingSnapshot>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item_key(&key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::service(SERVICE, "GetItem", e))?;
        out.item.as_ref().map(pending_from_item).transpose()
    }

    /// Starts a pending snapshot, active and held by the caller, on condition that none exists
    /// (conditional on the item not existing). `Lost` means another invocation got there
    /// first: the caller holds a duplicate message.
    #[instrument(skip(self))]
    async fn create(
        &self,
        key: PendingKey,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        use pending_attr::*;
        let mut item = item_key(&key);
        item.insert(CREATED.into(), num(now));
        item.insert(MODIFIED.into(), num(now));
        item.insert(ACTIVE.into(), AttributeValue::Bool(true));
        item.insert(INCREMENT.into(), num(0));
        item.insert(RETRIES.into(), num(0));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#n)")
            .expression_attribute_names("#n", NUM)
            .send()
            .await;
        match result {
            Ok(_) => Ok(Guarded::Done(PendingSnapshot {
                key,
                created: now,
                modified: now,
                active: true,
                increment: 0,
                retries: 0,
                state: None,
            })),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(Guarded::Lost)
            }
            Err(e) => Err(StoreError::service(SERVICE, "PutItem", e)),
        }
    }

    /// Takes over a pending snapshot whose holder released it or went quiet: marks it active and
    /// bumps increment, modified and retries, on condition that the increment is still the one
    /// the caller read. `Lost` means another invocation claimed it first.
    #[instrument(skip(self, seen), fields(increment = seen.increment))]
    async fn claim(
        &self,
        seen: &PendingSnapshot,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        self.guarded_update(
            seen.key,
            seen.increment,
            "SET #a = :t, #m = :now, #i = #i + :one, #r = if_not_exists(#r, :zero) + :one",
            &[("#a", pending_attr::ACTIVE), ("#r", pending_attr::RETRIES)],
            vec![(":t", AttributeValue::Bool(true)), (":zero", num(0))],
            now,
        )
        .await
    }

    /// Records a checkpoint. Conditional on the increment the caller holds, so checkpoints only
    /// move forward: an invocation that lost its claim is refused (`Lost`) and must stop.
    #[instrument(skip(self, state), fields(bytes = state.len()))]
    async fn checkpoint(
        &self,
        key: PendingKey,
        increment: u64,
        state: &str,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        self.guarded_update(
            key,
            increment,
            "SET #k = :k, #m = :now, #i = #i + :one",
            &[("#k", pending_attr::STATE)],
            vec![(":k", AttributeValue::S(state.to_owned()))],
            now,
        )
        .await
    }

    /// Refreshes `modified` while a long step runs, so a duplicate does not take the item over
    /// from a holder that is alive but between checkpoints.
    #[instrument(skip(self))]
    async fn heartbeat(
        &self,
        key: PendingKey,
        increment: u64,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        self.guarded_update(
            key,
            increment,
            "SET #m = :now, #i = #i + :one",
            &[],
            vec![],
            now,
        )
        .await
    }

    /// Clears the active flag (a hand-off, or a wait behind an earlier snapshot) so the next
    /// invocation claims the item straight away instead of waiting out the timeout.
    #[instrument(skip(self))]
    async fn release(
        &self,
        key: PendingKey,
        increment: u64,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        self.guarded_update(
            key,
            increment,
            "SET #a = :f, #m = :now, #i = #i + :one",
            &[("#a", pending_attr::ACTIVE)],
            vec![(":f", AttributeValue::Bool(false))],
            now,
        )
        .await
    }

    /// Removes a pending snapshot once the snapshot is complete, conditional on the increment
    /// its holder last wrote: an invocation that lost the item (it went quiet and another took
    /// over) cannot delete the new holder's item. Deleting an item that is already gone succeeds,
    /// so the SDK's retry of a delete whose response was lost is not mistaken for a lost item.
    #[instrument(skip(self))]
    async fn delete(&self, key: PendingKey, increment: u64) -> Result<Guarded<()>, StoreError> {
        match self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(item_key(&key)))
            .condition_expression("attribute_not_exists(#n) OR #i = :seen")
            .expression_attribute_names("#n", pending_attr::NUM)
            .expression_attribute_names("#i", pending_attr::INCREMENT)
            .expression_attribute_values(":seen", num(increment))
            .send()
            .await
        {
            Ok(_) => Ok(Guarded::Done(())),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), DeleteItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(Guarded::Lost)
            }
            Err(e) => Err(StoreError::service(SERVICE, "DeleteItem", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_keys_order_like_log_positions() {
        let log = LogId::new_random();
        let mut keys = vec![
            PendingKey::new(log, 1, 0),
            PendingKey::new(log, 0, 300),
            PendingKey::new(log, 0, 5),
            PendingKey::new(log, 256, 1),
            PendingKey::new(log, 2, u64::MAX),
        ];
        let mut by_bytes = keys.clone();
        by_bytes.sort_by_key(|k| k.sort_key());
        keys.sort_by_key(|k| k.position());
        assert_eq!(by_bytes, keys);
    }

    #[test]
    fn items_round_trip_and_reject_bad_keys() {
        let key = PendingKey::new(LogId::new_random(), 7, 42);
        let mut item = item_key(&key);
        item.insert("c".into(), num(10));
        item.insert("m".into(), num(12));
        item.insert("a".into(), AttributeValue::Bool(true));
        item.insert("i".into(), num(3));
        item.insert("r".into(), num(1));
        item.insert("k".into(), AttributeValue::S("{}".into()));
        let p = pending_from_item(&item).ok();
        assert_eq!(
            p,
            Some(PendingSnapshot {
                key,
                created: 10,
                modified: 12,
                active: true,
                increment: 3,
                retries: 1,
                state: Some("{}".into()),
            })
        );
        item.insert("n".into(), bin(vec![0u8; 9]));
        assert!(pending_from_item(&item).is_err());
    }

    #[test]
    fn staleness_is_measured_from_the_last_write() {
        let p = PendingSnapshot {
            key: PendingKey::new(LogId::new_random(), 0, 1),
            created: 0,
            modified: 100,
            active: true,
            increment: 0,
            retries: 0,
            state: None,
        };
        assert!(!p.is_stale(219, 120));
        assert!(p.is_stale(220, 120));
    }
}
