//! [`GroupOwners`] over DynamoDB: the owner of a sync client group, on its item in the Clients
//! table.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use tracing::instrument;

use super::{DynamoLogStore, ddb_error};
use crate::aws::items::{Item, bin, client_attr, item_size, num};
use crate::domain::clients::group_key;
use crate::domain::cost::{ReadConsistency, read_units, write_units};
use crate::domain::{LogId, RequestUnits};
use crate::error::StoreError;
use crate::ports::GroupOwners;

/// The owner attribute of a group item, if it has one.
fn group_owner(item: Option<&Item>) -> Result<Option<String>, StoreError> {
    match item.and_then(|i| i.get(client_attr::OWNER)) {
        None => Ok(None),
        Some(AttributeValue::S(owner)) => Ok(Some(owner.clone())),
        Some(_) => Err(StoreError::corrupt(
            "Clients group item",
            "attribute o is not a string",
        )),
    }
}

#[async_trait]
impl GroupOwners for DynamoLogStore {
    #[instrument(skip(self, subject, units), fields(log = %log))]
    async fn claim_group(
        &self,
        log: LogId,
        group: &str,
        subject: &str,
        units: &mut RequestUnits,
    ) -> Result<String, StoreError> {
        let table = self.clients_table()?;
        let key = bin(group_key(log, group));
        // The common case, an owned group, is one read.
        let out = self
            .client
            .get_item()
            .table_name(table)
            .key(client_attr::KEY, key.clone())
            .key(client_attr::FIRST, num(0))
            .projection_expression("#o")
            .expression_attribute_names("#o", client_attr::OWNER)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| ddb_error("GetItem", e))?;
        *units += RequestUnits::reads(read_units(
            out.item.as_ref().map(item_size).unwrap_or(0),
            ReadConsistency::Strong,
        ));
        if let Some(owner) = group_owner(out.item.as_ref())? {
            return Ok(owner);
        }
        // The first claim wins; a racing claim (or a retry after a lost response) keeps it, and
        // the returned value says who holds the group either way.
        let out = self
            .client
            .update_item()
            .table_name(table)
            .key(client_attr::KEY, key)
            .key(client_attr::FIRST, num(0))
            .update_expression("SET #o = if_not_exists(#o, :o), #i = :i")
            .expression_attribute_names("#o", client_attr::OWNER)
            .expression_attribute_names("#i", client_attr::LOG)
            .expression_attribute_values(":o", AttributeValue::S(subject.to_owned()))
            .expression_attribute_values(":i", bin(log.as_bytes().to_vec()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| ddb_error("UpdateItem", e))?;
        // The group item is small (a few client ids); charged as one KB.
        *units += RequestUnits::writes(write_units(1024, false));
        group_owner(out.attributes.as_ref())?.ok_or_else(|| {
            StoreError::corrupt("Clients group item", "no owner after claiming the group")
        })
    }
}
