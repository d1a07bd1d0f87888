//! `sheetlog-maintenance index-clients`: gives the Clients items written before the `byLog`
//! index existed the attribute it is keyed on (`docs/deploy.md`, "Upgrading"), so a delete finds
//! them. Items written since carry it already.
//!
//! Which items the index holds ([`client_attr::LOG`], the log's 16 bytes): each client's first
//! range item (sort key 1), each group item and each index mark (sort key 0). The other range
//! items are found through their client's partition, and a log's metadata item (its tombstone)
//! is never deleted, so neither needs it.
//!
//! One Scan of the table, page by page, and one conditional UpdateItem per item that needs the
//! attribute (`attribute_exists`: an item deleted meanwhile is not brought back). Safe to run
//! again, and to interrupt: a rerun passes over items that have the attribute.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;
use sheetlog_core::aws::items::{Item, bin, client_attr};
use sheetlog_core::domain::clients::{CLIENT_TAG, GROUP_TAG, MARK_TAG};
use sheetlog_core::error::StoreError;

/// What a run found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IndexReport {
    /// Items the Scan returned that had no `i` (those that have it are filtered out).
    pub scanned: u64,
    /// Items given their `i` (or that would be, in a dry run).
    pub indexed: u64,
    /// Items deleted between the Scan and their update.
    pub gone: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The log an item of the Clients table belongs in the index under, if it does: a client's
/// first range item, a group item or an index mark.
pub fn indexed_log(key: &[u8], sort: u64) -> Option<[u8; 16]> {
    let log: [u8; 16] = key.get(..16)?.try_into().ok()?;
    let wanted = match key.get(16)? {
        t if *t == CLIENT_TAG => sort == 1,
        t if *t == GROUP_TAG || *t == MARK_TAG => sort == 0,
        _ => false,
    };
    // A delete counter's key starts with 16 zero bytes, which no log id is.
    (wanted && log != [0; 16]).then_some(log)
}

/// Scans the Clients table `table` and gives each item that belongs in the index its `i`.
/// `progress` is called after each page.
pub async fn index_clients(
    client: &Client,
    table: &str,
    dry_run: bool,
    progress: &mut dyn FnMut(&IndexReport),
) -> Result<IndexReport, IndexError> {
    let mut report = IndexReport::default();
    let mut start = None;
    loop {
        let out = client
            .scan()
            .table_name(table)
            .projection_expression("#k, #m")
            .filter_expression("attribute_not_exists(#i)")
            .expression_attribute_names("#k", client_attr::KEY)
            .expression_attribute_names("#m", client_attr::FIRST)
            .expression_attribute_names("#i", client_attr::LOG)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| StoreError::service("DynamoDB", "Scan", e))?;
        for item in out.items.unwrap_or_default() {
            report.scanned += 1;
            let Some((key, sort)) = key_of(&item) else {
                continue;
            };
            let Some(log) = indexed_log(&key, sort) else {
                continue;
            };
            if dry_run {
                report.indexed += 1;
                continue;
            }
            let result = client
                .update_item()
                .table_name(table)
                .key(client_attr::KEY, bin(key))
                .key(client_attr::FIRST, AttributeValue::N(sort.to_string()))
                .update_expression("SET #i = :i")
                .condition_expression("attribute_exists(#k)")
                .expression_attribute_names("#i", client_attr::LOG)
                .expression_attribute_names("#k", client_attr::KEY)
                .expression_attribute_values(":i", bin(log.to_vec()))
                .send()
                .await;
            match result {
                Ok(_) => report.indexed += 1,
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
                {
                    report.gone += 1;
                }
                Err(e) => return Err(StoreError::service("DynamoDB", "UpdateItem", e).into()),
            }
        }
        progress(&report);
        start = out.last_evaluated_key;
        if start.is_none() {
            return Ok(report);
        }
    }
}

fn key_of(item: &Item) -> Option<(Vec<u8>, u64)> {
    let key = match item.get(client_attr::KEY)? {
        AttributeValue::B(b) => b.as_ref().to_vec(),
        _ => return None,
    };
    let sort = match item.get(client_attr::FIRST)? {
        AttributeValue::N(n) => n.parse().ok()?,
        _ => return None,
    };
    Some((key, sort))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sheetlog_core::domain::LogId;
    use sheetlog_core::domain::clients::{
        client_key, delete_rate_key, group_key, mark_key, meta_key,
    };

    #[test]
    fn first_ranges_groups_and_marks_are_indexed_under_their_log() {
        let log = LogId::new_random();
        let id = *log.as_bytes();
        assert_eq!(indexed_log(&client_key(log, "c1"), 1), Some(id));
        assert_eq!(indexed_log(&client_key(log, "c1"), 7), None);
        assert_eq!(indexed_log(&group_key(log, "g1"), 0), Some(id));
        assert_eq!(indexed_log(&mark_key(log), 0), Some(id));
        assert_eq!(indexed_log(&meta_key(log), 0), None, "the tombstone stays");
        assert_eq!(indexed_log(&delete_rate_key("alice"), 0), None);
        assert_eq!(indexed_log(b"short", 0), None);
    }
}
