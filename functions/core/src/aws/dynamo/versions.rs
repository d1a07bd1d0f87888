//! [`NamedVersions`] over DynamoDB: one item per named version in the Clients table, partition
//! log ‖ `v`, sort key the version's sequence (`docs/storage.md`, "Clients table").

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use tracing::instrument;

use super::{DynamoLogStore, ddb_error};
use crate::aws::items::{Item, bin, client_attr, get_num, item_size, num, opt_str};
use crate::domain::cost::{ReadConsistency, read_units, write_units};
use crate::domain::versions::{NamedVersion, versions_key};
use crate::domain::{LogId, RequestUnits};
use crate::error::StoreError;
use crate::ports::NamedVersions;

/// A version item's own attributes (beside the key `k`, `m` and the index attribute `i`).
pub mod version_attr {
    pub const NAME: &str = "n";
    /// When the version was first named, Unix milliseconds.
    pub const CREATED: &str = "c";
    /// Who first named it.
    pub const BY: &str = "u";
}

const WHAT: &str = "Clients version item";

fn version_from_item(item: &Item) -> Result<NamedVersion, StoreError> {
    Ok(NamedVersion {
        seq: get_num(item, client_attr::FIRST, WHAT)?,
        name: opt_str(item, version_attr::NAME, WHAT)?
            .ok_or_else(|| StoreError::corrupt(WHAT, "attribute n is missing"))?,
        created_at: get_num(item, version_attr::CREATED, WHAT)?,
        by: opt_str(item, version_attr::BY, WHAT)?,
    })
}

#[async_trait]
impl NamedVersions for DynamoLogStore {
    #[instrument(skip(self, units), fields(log = %log))]
    async fn list_versions(
        &self,
        log: LogId,
        units: &mut RequestUnits,
    ) -> Result<Vec<NamedVersion>, StoreError> {
        let table = self.clients_table()?;
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(table)
                .key_condition_expression("#k = :k")
                .expression_attribute_names("#k", client_attr::KEY)
                .expression_attribute_values(":k", bin(versions_key(log)))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| ddb_error("Query", e))?;
            let items = page.items.unwrap_or_default();
            let bytes: u64 = items.iter().map(item_size).sum();
            *units += RequestUnits::reads(read_units(bytes, ReadConsistency::Strong));
            for item in &items {
                out.push(version_from_item(item)?);
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(out);
            }
        }
    }

    #[instrument(skip(self, name, by, units), fields(log = %log))]
    async fn name_version(
        &self,
        log: LogId,
        seq: u64,
        name: &str,
        by: Option<&str>,
        now_ms: i64,
        units: &mut RequestUnits,
    ) -> Result<NamedVersion, StoreError> {
        let table = self.clients_table()?;
        let mut update = "SET #n = :n, #c = if_not_exists(#c, :c), #i = :i".to_owned();
        let mut req = self
            .client
            .update_item()
            .table_name(table)
            .key(client_attr::KEY, bin(versions_key(log)))
            .key(client_attr::FIRST, num(seq))
            .expression_attribute_names("#n", version_attr::NAME)
            .expression_attribute_names("#c", version_attr::CREATED)
            .expression_attribute_names("#i", client_attr::LOG)
            .expression_attribute_values(":n", AttributeValue::S(name.to_owned()))
            .expression_attribute_values(":c", num(now_ms))
            .expression_attribute_values(":i", bin(log.as_bytes().to_vec()));
        if let Some(by) = by {
            update.push_str(", #u = if_not_exists(#u, :u)");
            req = req
                .expression_attribute_names("#u", version_attr::BY)
                .expression_attribute_values(":u", AttributeValue::S(by.to_owned()));
        }
        let out = req
            .update_expression(update)
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| ddb_error("UpdateItem", e))?;
        let item = out.attributes.unwrap_or_default();
        *units += RequestUnits::writes(write_units(item_size(&item), false));
        version_from_item(&item)
    }

    /// A strong read of the item, then its delete as a batch of one: the API's role deletes
    /// items in batches only (`cdk/test/iam.test.ts`). A racing rename in between is forgotten
    /// too, as if it came first.
    #[instrument(skip(self, units), fields(log = %log))]
    async fn delete_version(
        &self,
        log: LogId,
        seq: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        let table = self.clients_table()?;
        let key: Item = [
            (client_attr::KEY.to_owned(), bin(versions_key(log))),
            (client_attr::FIRST.to_owned(), num(seq)),
        ]
        .into_iter()
        .collect();
        let out = self
            .client
            .get_item()
            .table_name(table)
            .set_key(Some(key.clone()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| ddb_error("GetItem", e))?;
        let Some(item) = out.item else {
            *units += RequestUnits::reads(read_units(0, ReadConsistency::Strong));
            return Ok(false);
        };
        *units += RequestUnits::reads(read_units(item_size(&item), ReadConsistency::Strong));
        let delete = aws_sdk_dynamodb::types::DeleteRequest::builder()
            .set_key(Some(key))
            .build()
            .map_err(|e| StoreError::corrupt("a version's delete request", e.to_string()))?;
        super::batch_write(
            &self.client,
            table,
            vec![
                aws_sdk_dynamodb::types::WriteRequest::builder()
                    .delete_request(delete)
                    .build(),
            ],
            std::time::Duration::from_millis(50),
        )
        .await?;
        *units += RequestUnits::writes(write_units(item_size(&item), false));
        Ok(true)
    }
}
