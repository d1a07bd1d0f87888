//! The copies of a sheet's name and last-changed time on its member items (`docs/storage.md`,
//! "Catalog"), which make a listing one Query of the index: bringing every member's copy up to
//! the sheet item after a rename or a stamp that is due, and the listing's read of the sheet
//! items of members that have no copy (items written before names were copied).
//!
//! Every copy write is conditional on what it moves being older on the item (a lower `nameRev`,
//! an earlier `updatedAt`) and on the item existing, so copies only move forward, a late one
//! changes nothing, and a member removed meanwhile is not written back.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::KeysAndAttributes;
use futures::StreamExt;

use super::items::{
    Item, MemberItem, SHEET_SK, SheetRecord, from_item, key, log_pk, n, s, sheet_of,
};
use super::{ATTEMPTS, DynamoCatalog};
use crate::aws::dynamo::ddb_error;
use crate::catalog::{CatalogError, LISTED_STAMP_INTERVAL_MS, Sheet};
use crate::domain::LogId;
use crate::error::StoreError;

/// Member items a fan-out writes at once: a sheet's 1,000 members in about a second and a half
/// at 20 ms a write, without a burst that would throttle the partition.
const FAN_OUT: usize = 16;

fn condition_failed<R>(e: &SdkError<UpdateItemError, R>) -> bool {
    matches!(
        e,
        SdkError::ServiceError(e)
            if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_))
    )
}

impl DynamoCatalog {
    /// Brings every member's copy up to `record` (the sheet item as a rename or a stamp left
    /// it): one strongly consistent Query of the sheet's member items, then an UpdateItem of
    /// each whose copy is older. A member that joins after the Query has read the sheet item
    /// after `record` was written, so it copied as much already (`docs/storage.md`). Every
    /// member is tried; the first failure is the answer (a repeat finishes what it left).
    pub(super) async fn copy_to_members(&self, record: &SheetRecord) -> Result<(), CatalogError> {
        let members = self.query_log(record.sheet.log, Some("MEMBER#")).await?;
        let results: Vec<Result<(), CatalogError>> = futures::stream::iter(members)
            .map(|item| self.refresh_member(item, record))
            .buffer_unordered(FAN_OUT)
            .collect()
            .await;
        results.into_iter().collect()
    }

    /// Brings one member item's copy up to `record`: the name (with its revision and the
    /// sheet's owner) when the item's revision is lower, the last-changed time when it is
    /// earlier, in one UpdateItem on condition both still are. When a condition fails (another
    /// copy, or a change of the member, landed first) it reads the item again and goes on from
    /// there; a member gone meanwhile is left gone.
    async fn refresh_member(
        &self,
        mut item: Item,
        record: &SheetRecord,
    ) -> Result<(), CatalogError> {
        let sheet = &record.sheet;
        for _ in 0..ATTEMPTS {
            let copy: MemberItem = from_item(&item, "member item")?;
            let name_old = copy.name_rev.is_none_or(|r| r < record.name_rev);
            let time_old = copy.updated_at.is_none_or(|t| t < sheet.updated_ms);
            if !name_old && !time_old {
                return Ok(());
            }
            let mut sets = Vec::new();
            let mut conditions = vec!["attribute_exists(pk)"];
            let mut update = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(copy.pk.clone(), copy.sk.clone())));
            if name_old {
                sets.push("#n = :n, #o = :o, nameRev = :r");
                conditions.push("(attribute_not_exists(nameRev) OR nameRev < :r)");
                update = update
                    .expression_attribute_names("#n", "name")
                    .expression_attribute_names("#o", "owner")
                    .expression_attribute_values(":n", s(&sheet.name))
                    .expression_attribute_values(":o", s(&sheet.owner))
                    .expression_attribute_values(":r", n(record.name_rev));
            }
            if time_old {
                sets.push("updatedAt = :t");
                conditions.push("(attribute_not_exists(updatedAt) OR updatedAt < :t)");
                update = update.expression_attribute_values(":t", n(sheet.updated_ms));
            }
            let out = update
                .update_expression(format!("SET {}", sets.join(", ")))
                .condition_expression(conditions.join(" AND "))
                .send()
                .await;
            match out {
                Ok(_) => return Ok(()),
                Err(e) if condition_failed(&e) => match self.get(copy.pk, copy.sk).await? {
                    Some(fresh) => item = fresh,
                    None => return Ok(()),
                },
                Err(e) => return Err(ddb_error("UpdateItem", e).into()),
            }
        }
        Err(CatalogError::Contention(sheet.log))
    }

    /// After a stamp of the sheet item (`record`, as the stamp left it): when no stamp was
    /// copied onto the members' items yet, or the last one [`LISTED_STAMP_INTERVAL_MS`] or more
    /// before `now_ms`, moves `listedAt` to `now_ms` on condition it is still that old (so of the
    /// instances stamping one sheet, one copies), then copies `record` onto every member.
    pub(super) async fn stamp_members_if_due(
        &self,
        record: &SheetRecord,
        now_ms: i64,
    ) -> Result<(), CatalogError> {
        let due = now_ms - LISTED_STAMP_INTERVAL_MS;
        if record.listed_at.is_some_and(|at| at > due) {
            return Ok(());
        }
        let claimed = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(log_pk(record.sheet.log), SHEET_SK.into())))
            .update_expression("SET listedAt = :t")
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(listedAt) OR listedAt <= :due)",
            )
            .expression_attribute_values(":t", n(now_ms))
            .expression_attribute_values(":due", n(due))
            .send()
            .await;
        match claimed {
            Ok(_) => self.copy_to_members(record).await,
            // Another instance is copying, or the sheet is gone.
            Err(e) if condition_failed(&e) => Ok(()),
            Err(e) => Err(ddb_error("UpdateItem", e).into()),
        }
    }

    /// The sheet items of `logs`, by log (BatchGetItem, eventually consistent; unprocessed keys
    /// are asked for again): a listing's read for the members without a copy.
    pub(super) async fn sheets(
        &self,
        logs: &[LogId],
    ) -> Result<HashMap<LogId, Sheet>, CatalogError> {
        let mut found = HashMap::new();
        let mut keys: Vec<Item> = logs
            .iter()
            .map(|l| key(log_pk(*l), SHEET_SK.into()))
            .collect();
        let mut rounds = 0;
        while !keys.is_empty() {
            rounds += 1;
            if rounds > 10 {
                return Err(CatalogError::Store(StoreError::Throttled {
                    service: "DynamoDB",
                    operation: "BatchGetItem",
                }));
            }
            if rounds > 1 {
                tokio::time::sleep(std::time::Duration::from_millis(20 << rounds.min(6))).await;
            }
            let ask = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut keys)))
                .build()
                .map_err(|e| StoreError::service("DynamoDB", "BatchGetItem", e))?;
            let out = self
                .client
                .batch_get_item()
                .request_items(&self.table, ask)
                .send()
                .await
                .map_err(|e| ddb_error("BatchGetItem", e))?;
            for item in out
                .responses
                .and_then(|mut r| r.remove(&self.table))
                .unwrap_or_default()
            {
                let sheet = sheet_of(&item)?;
                found.insert(sheet.log, sheet);
            }
            keys = out
                .unprocessed_keys
                .and_then(|mut u| u.remove(&self.table))
                .map(|k| k.keys)
                .unwrap_or_default();
        }
        Ok(found)
    }
}
