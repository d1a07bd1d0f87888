//! [`DynamoCatalog`]: the catalog port over one DynamoDB table (`docs/storage.md`, "The
//! catalog"). Key schema: partition `pk`, sort `sk`, GSI `gsi1` (`gsi1pk`, `gsi1sk`, all
//! attributes projected). Three item shapes:
//!
//! - the sheet: `pk = LOG#<logId>`, `sk = SHEET`; `name`, `owner`, `createdAt`, `updatedAt`
//!   (ms), `owners` (how many members are owners: the last-owner rule is a condition on it),
//!   `nameRev` (the name's revision), `listedAt` (when a write's stamp was last copied onto the
//!   members' items);
//! - a member: `pk = LOG#<logId>`, `sk = MEMBER#<userId>`; `userId`, `email`, `role`, `logId`,
//!   the copy (`name`, `owner`, `updatedAt`, `nameRev`), and `gsi1pk = USER#<userId>`,
//!   `gsi1sk = <createdAt 15 digits>.<logId>`, so one Query of `gsi1` lists a user's sheets
//!   newest first, with their names;
//! - an invitation: `pk = LOG#<logId>`, `sk = INVITE#<email, lower case>`; `email` (as given),
//!   `role`, `invitedAt`, `logId`, and `gsi1pk = INVITE#<email, lower case>`, `gsi1sk = <logId>`,
//!   so one Query of `gsi1` finds the sheets an address is invited to.
//!
//! Layout:
//! - `catalog.rs` — [`DynamoCatalog`]: the table, and the port's requests
//! - `catalog/items.rs` — the item shapes, their keys and their mapping to the catalog's types
//! - `catalog/copies.rs` — the members' copies of the sheet's name and last-changed time:
//!   written after a rename and a due stamp, and the listing's read for members without one
//!
//! Each member item copies its sheet's name, owner and last-changed time, so a listing is one
//! Query of `gsi1` (see `docs/storage.md` for how the copies are kept, and what it costs).

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, ConditionCheck, Delete, GlobalSecondaryIndex,
    KeySchemaElement, KeyType, Projection, ProjectionType, Put, ScalarAttributeType,
    TransactWriteItem, Update,
};

use super::dynamo::{cancellation_reasons, ddb_error};
use crate::catalog::{
    Catalog, CatalogError, Invitation, Listed, MAX_PAGE, Member, Role, Roster, Sheet, SheetPage,
    parse_listing_key,
};
use crate::domain::LogId;
use crate::error::StoreError;
use items::{
    InviteItem, Item, SHEET_SK, SheetItem, SheetRecord, corrupt, get_s, invitation_of, invite_key,
    key, listed_of, log_pk, member_item, member_of, member_sk, n, record_of, role_of, s, sheet_of,
    to_item, user_pk,
};

mod copies;
mod items;

/// The listing index.
pub const GSI1: &str = "gsi1";

/// The last-changed time a member item written now copies: the sheet's as read, or the item's
/// own copy when a stamp moved it further meanwhile (a change never moves a copy back).
fn copied_time(record: &SheetRecord, current: Option<&Item>) -> i64 {
    let own = current
        .and_then(|c| c.get("updatedAt"))
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<i64>().ok());
    own.map_or(record.sheet.updated_ms, |t| t.max(record.sheet.updated_ms))
}

/// Attempts at a membership change that lost a race (another change to the same member).
const ATTEMPTS: u32 = 5;

#[derive(Debug, Clone)]
pub struct DynamoCatalog {
    client: Client,
    table: String,
}

impl DynamoCatalog {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// The client it sends with (tests build a racing one from it).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The catalog table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the catalog table as the CDK stack defines it (the local stack and tests).
    pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
        let attr = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
        };
        let key = |name: &str, kind: KeyType| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
        };
        let build = |e| StoreError::service("DynamoDB", "CreateTable", e);
        let gsi = GlobalSecondaryIndex::builder()
            .index_name(GSI1)
            .key_schema(key("gsi1pk", KeyType::Hash).map_err(build)?)
            .key_schema(key("gsi1sk", KeyType::Range).map_err(build)?)
            .projection(
                Projection::builder()
                    .projection_type(ProjectionType::All)
                    .build(),
            )
            .build()
            .map_err(build)?;
        client
            .create_table()
            .table_name(table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("pk").map_err(build)?)
            .attribute_definitions(attr("sk").map_err(build)?)
            .attribute_definitions(attr("gsi1pk").map_err(build)?)
            .attribute_definitions(attr("gsi1sk").map_err(build)?)
            .key_schema(key("pk", KeyType::Hash).map_err(build)?)
            .key_schema(key("sk", KeyType::Range).map_err(build)?)
            .global_secondary_indexes(gsi)
            .send()
            .await
            .map_err(|e| ddb_error("CreateTable", e))?;
        Ok(())
    }

    async fn get(&self, pk: String, sk: String) -> Result<Option<Item>, CatalogError> {
        self.get_with(pk, sk, true).await
    }

    async fn get_with(
        &self,
        pk: String,
        sk: String,
        strong: bool,
    ) -> Result<Option<Item>, CatalogError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(pk, sk)))
            .consistent_read(strong)
            .send()
            .await
            .map_err(|e| ddb_error("GetItem", e))?;
        Ok(out.item)
    }

    /// The sheet item, strongly consistent.
    async fn record(&self, log: LogId) -> Result<Option<SheetRecord>, CatalogError> {
        self.get(log_pk(log), SHEET_SK.into())
            .await?
            .as_ref()
            .map(record_of)
            .transpose()
    }

    /// Applies a membership change to `current` (the member as read), with `writes` (the
    /// member's write first), in one transaction that keeps the sheet's owner count;
    /// `Ok(false)` when one of the writes' conditions failed (the member changed since it was
    /// read). With `name_rev` (a member item that copies the sheet's name at that revision), the
    /// transaction also needs the sheet's name still at that revision, so a rename between the
    /// read and the write sends the change round again to copy the new name.
    async fn change(
        &self,
        log: LogId,
        current: Option<Role>,
        writes: Vec<TransactWriteItem>,
        next: Option<Role>,
        name_rev: Option<i64>,
    ) -> Result<bool, CatalogError> {
        let owner = |r: Option<Role>| i64::from(r == Some(Role::Owner));
        let delta = owner(next) - owner(current);
        let build =
            |e| CatalogError::Store(StoreError::service("DynamoDB", "TransactWriteItems", e));
        let sheet_key = Some(key(log_pk(log), SHEET_SK.into()));
        // Items written before names were copied have no revision: that is revision 0.
        let same_name = match name_rev {
            Some(_) => " AND (attribute_not_exists(nameRev) OR nameRev = :rev)",
            None => "",
        };
        let guard = if delta == 0 {
            TransactWriteItem::builder()
                .condition_check(
                    ConditionCheck::builder()
                        .table_name(&self.table)
                        .set_key(sheet_key)
                        .condition_expression(format!("attribute_exists(pk){same_name}"))
                        .set_expression_attribute_values(
                            name_rev.map(|r| [(":rev".into(), n(r))].into()),
                        )
                        .build()
                        .map_err(build)?,
                )
                .build()
        } else {
            TransactWriteItem::builder()
                .update(
                    Update::builder()
                        .table_name(&self.table)
                        .set_key(sheet_key)
                        .update_expression("SET owners = owners + :d")
                        .condition_expression(format!(
                            "attribute_exists(pk) AND owners >= :min{same_name}"
                        ))
                        .set_expression_attribute_values(
                            name_rev.map(|r| [(":rev".into(), n(r))].into()),
                        )
                        .expression_attribute_values(":d", n(delta))
                        // Taking an owner away needs two; adding one needs the sheet.
                        .expression_attribute_values(":min", n(if delta < 0 { 2 } else { 0 }))
                        .build()
                        .map_err(build)?,
                )
                .build()
        };
        let guard_at = writes.len();
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(writes))
            .transact_items(guard)
            .send()
            .await;
        let Some(reasons) = cancellation_reasons(result)? else {
            return Ok(true);
        };
        let failed =
            |i: usize| reasons.get(i).and_then(|r| r.code()) == Some("ConditionalCheckFailed");
        if failed(guard_at) {
            let now = self.get(log_pk(log), SHEET_SK.into()).await?;
            return Err(match now.as_ref().map(record_of).transpose()? {
                None => CatalogError::SheetNotFound(log),
                // Renamed since it was read: read it again.
                Some(r) if name_rev.is_some_and(|rev| rev != r.name_rev) => return Ok(false),
                Some(_) if delta < 0 => CatalogError::LastOwner(log),
                Some(_) => return Ok(false),
            });
        }
        if (0..guard_at).any(failed)
            || reasons
                .iter()
                .any(|r| r.code() == Some("TransactionConflict"))
        {
            return Ok(false);
        }
        Err(corrupt(format!(
            "membership transaction cancelled for {:?}",
            reasons.iter().map(|r| r.code()).collect::<Vec<_>>()
        )))
    }

    /// The condition that the member item still holds `current` (absent for `None`).
    fn member_condition(current: Option<Role>) -> (String, Option<AttributeValue>) {
        match current {
            None => ("attribute_not_exists(pk)".into(), None),
            Some(r) => ("#r = :cur".into(), Some(s(r.as_str()))),
        }
    }

    /// Every item of a sheet's partition whose sort key starts with `prefix` (all with `None`).
    async fn query_log(&self, log: LogId, prefix: Option<&str>) -> Result<Vec<Item>, CatalogError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .expression_attribute_values(":p", s(log_pk(log)))
                .set_exclusive_start_key(start);
            q = match prefix {
                Some(prefix) => q
                    .key_condition_expression("pk = :p AND begins_with(sk, :m)")
                    .expression_attribute_values(":m", s(prefix)),
                None => q.key_condition_expression("pk = :p"),
            };
            let out = q.send().await.map_err(|e| ddb_error("Query", e))?;
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }
}

#[async_trait]
impl Catalog for DynamoCatalog {
    async fn create_sheet(
        &self,
        sheet: &Sheet,
        owner_email: Option<&str>,
    ) -> Result<(), CatalogError> {
        let mut item = to_item(&SheetItem {
            pk: log_pk(sheet.log),
            sk: SHEET_SK.into(),
            name: sheet.name.clone(),
            owner: sheet.owner.clone(),
            created_at: sheet.created_ms,
            updated_at: sheet.updated_ms,
            name_rev: 0,
            listed_at: None,
        });
        item.insert("owners".into(), n(1));
        let record = SheetRecord {
            sheet: sheet.clone(),
            name_rev: 0,
            listed_at: None,
        };
        let owner = Member {
            user_id: sheet.owner.clone(),
            email: owner_email.map(str::to_owned),
            role: Role::Owner,
        };
        let build =
            |e| CatalogError::Store(StoreError::service("DynamoDB", "TransactWriteItems", e));
        let put = |item: Item| -> Result<TransactWriteItem, CatalogError> {
            Ok(TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(item))
                        .condition_expression("attribute_not_exists(pk)")
                        .build()
                        .map_err(build)?,
                )
                .build())
        };
        let result = self
            .client
            .transact_write_items()
            .transact_items(put(item)?)
            .transact_items(put(member_item(&record, &owner, sheet.updated_ms))?)
            .send()
            .await;
        match cancellation_reasons(result)? {
            None => Ok(()),
            Some(r) if r.iter().any(|r| r.code() == Some("ConditionalCheckFailed")) => {
                // The SDK may have retried a transaction whose first attempt committed (its
                // answer lost): the same sheet by the same owner is that create, done.
                match self.sheet(sheet.log).await? {
                    Some(s) if s.owner == sheet.owner && s.created_ms == sheet.created_ms => Ok(()),
                    _ => Err(CatalogError::Exists(sheet.log)),
                }
            }
            Some(_) => Err(CatalogError::Contention(sheet.log)),
        }
    }

    async fn sheet(&self, log: LogId) -> Result<Option<Sheet>, CatalogError> {
        self.get(log_pk(log), SHEET_SK.into())
            .await?
            .as_ref()
            .map(sheet_of)
            .transpose()
    }

    async fn role(&self, user: &str, log: LogId) -> Result<Option<Role>, CatalogError> {
        self.get(log_pk(log), member_sk(user))
            .await?
            .as_ref()
            .map(role_of)
            .transpose()
    }

    async fn role_eventual(&self, user: &str, log: LogId) -> Result<Option<Role>, CatalogError> {
        self.get_with(log_pk(log), member_sk(user), false)
            .await?
            .as_ref()
            .map(role_of)
            .transpose()
    }

    async fn list_sheets(
        &self,
        user: &str,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<SheetPage, CatalogError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let start = match cursor {
            None => None,
            Some(c) => {
                let (_, log) =
                    parse_listing_key(c).ok_or_else(|| CatalogError::BadCursor(c.to_owned()))?;
                let mut k = key(log_pk(log), member_sk(user));
                k.insert("gsi1pk".into(), s(user_pk(user)));
                k.insert("gsi1sk".into(), s(c));
                Some(k)
            }
        };
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GSI1)
            .key_condition_expression("gsi1pk = :u")
            .expression_attribute_values(":u", s(user_pk(user)))
            .scan_index_forward(false)
            .limit(i32::try_from(limit).unwrap_or(100))
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| ddb_error("Query", e))?;
        let listed = out
            .items
            .unwrap_or_default()
            .iter()
            .map(listed_of)
            .collect::<Result<Vec<_>, _>>()?;
        // Member items without a copy of the name (written before names were copied) read
        // their sheet items, and only they: a page of copies costs the Query alone.
        let uncopied: Vec<LogId> = listed
            .iter()
            .filter(|(_, _, copy)| copy.is_none())
            .map(|(log, _, _)| *log)
            .collect();
        let mut sheets = if uncopied.is_empty() {
            HashMap::new()
        } else {
            self.sheets(&uncopied).await?
        };
        let cursor = out
            .last_evaluated_key
            .as_ref()
            .and_then(|k| get_s(k, "gsi1sk"))
            .map(str::to_owned);
        Ok(SheetPage {
            // A member item without a copy whose sheet item is gone (a delete in progress) is
            // left out; one with a copy is listed until the delete removes it, a moment later.
            sheets: listed
                .into_iter()
                .filter_map(|(log, role, copy)| {
                    let sheet = copy.or_else(|| sheets.remove(&log))?;
                    Some(Listed { sheet, role })
                })
                .collect(),
            cursor,
        })
    }

    async fn rename(&self, log: LogId, name: &str, now_ms: i64) -> Result<Sheet, CatalogError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(log_pk(log), SHEET_SK.into())))
            // A new revision of the name: copies of older ones give way to this one's, and a
            // share that read the old name fails its condition and reads again.
            .update_expression("SET #n = :n, updatedAt = :t ADD nameRev :one")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#n", "name")
            .expression_attribute_values(":n", s(name))
            .expression_attribute_values(":t", n(now_ms))
            .expression_attribute_values(":one", n(1))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await;
        match out {
            Ok(o) => {
                let record = record_of(&o.attributes.unwrap_or_default())?;
                // After the sheet item: a member who joins from here on copies the new name
                // itself, and every member there is now is found by this strong Query.
                self.copy_to_members(&record).await?;
                Ok(record.sheet)
            }
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Err(CatalogError::SheetNotFound(log))
            }
            Err(e) => Err(ddb_error("UpdateItem", e).into()),
        }
    }

    async fn touch(&self, log: LogId, now_ms: i64) -> Result<(), CatalogError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(log_pk(log), SHEET_SK.into())))
            .update_expression("SET updatedAt = :t")
            .condition_expression("attribute_exists(pk) AND updatedAt < :t")
            .expression_attribute_values(":t", n(now_ms))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await;
        match out {
            Ok(o) => {
                let record = record_of(&o.attributes.unwrap_or_default())?;
                self.stamp_members_if_due(&record, now_ms).await
            }
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(())
            }
            Err(e) => Err(ddb_error("UpdateItem", e).into()),
        }
    }

    async fn members(&self, log: LogId) -> Result<Vec<Member>, CatalogError> {
        self.query_log(log, Some("MEMBER#"))
            .await?
            .iter()
            .map(member_of)
            .collect()
    }

    async fn put_member(&self, log: LogId, member: &Member) -> Result<(), CatalogError> {
        for _ in 0..ATTEMPTS {
            let record = self
                .record(log)
                .await?
                .ok_or(CatalogError::SheetNotFound(log))?;
            let current = self.get(log_pk(log), member_sk(&member.user_id)).await?;
            let current_role = current.as_ref().map(role_of).transpose()?;
            let updated = copied_time(&record, current.as_ref());
            let mut next = member.clone();
            if next.email.is_none() {
                next.email = current
                    .as_ref()
                    .and_then(|c| get_s(c, "email"))
                    .map(str::to_owned);
            }
            let (condition, value) = Self::member_condition(current_role);
            let mut put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(member_item(&record, &next, updated)))
                .condition_expression(condition);
            if let Some(v) = value {
                put = put
                    .expression_attribute_names("#r", "role")
                    .expression_attribute_values(":cur", v);
            }
            let put = put
                .build()
                .map_err(|e| StoreError::service("DynamoDB", "TransactWriteItems", e))?;
            let write = TransactWriteItem::builder().put(put).build();
            let rev = Some(record.name_rev);
            if self
                .change(log, current_role, vec![write], Some(member.role), rev)
                .await?
            {
                return Ok(());
            }
        }
        Err(CatalogError::Contention(log))
    }

    async fn remove_member(&self, log: LogId, user: &str) -> Result<bool, CatalogError> {
        for _ in 0..ATTEMPTS {
            let Some(current) = self.role(user, log).await? else {
                return Ok(false);
            };
            let (condition, value) = Self::member_condition(Some(current));
            let mut delete = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(key(log_pk(log), member_sk(user))))
                .condition_expression(condition)
                .expression_attribute_names("#r", "role");
            if let Some(v) = value {
                delete = delete.expression_attribute_values(":cur", v);
            }
            let delete = delete
                .build()
                .map_err(|e| StoreError::service("DynamoDB", "TransactWriteItems", e))?;
            let write = TransactWriteItem::builder().delete(delete).build();
            match self
                .change(log, Some(current), vec![write], None, None)
                .await
            {
                Ok(true) => return Ok(true),
                Ok(false) => continue,
                // The sheet item is gone but the member item is not (a delete half done).
                Err(CatalogError::SheetNotFound(_)) => {
                    self.client
                        .delete_item()
                        .table_name(&self.table)
                        .set_key(Some(key(log_pk(log), member_sk(user))))
                        .send()
                        .await
                        .map_err(|e| ddb_error("DeleteItem", e))?;
                    return Ok(true);
                }
                Err(e) => return Err(e),
            }
        }
        Err(CatalogError::Contention(log))
    }

    async fn invitations(&self, log: LogId) -> Result<Vec<Invitation>, CatalogError> {
        self.query_log(log, Some("INVITE#"))
            .await?
            .iter()
            .map(invitation_of)
            .collect()
    }

    async fn roster(&self, log: LogId) -> Result<Roster, CatalogError> {
        let mut roster = Roster::default();
        for item in self.query_log(log, None).await? {
            match get_s(&item, "sk") {
                Some(SHEET_SK) => roster.sheet = Some(sheet_of(&item)?),
                Some(sk) if sk.starts_with("MEMBER#") => roster.members.push(member_of(&item)?),
                Some(sk) if sk.starts_with("INVITE#") => {
                    roster.invitations.push(invitation_of(&item)?);
                }
                _ => {}
            }
        }
        Ok(roster)
    }

    async fn invite(&self, log: LogId, invitation: &Invitation) -> Result<(), CatalogError> {
        let build =
            |e| CatalogError::Store(StoreError::service("DynamoDB", "TransactWriteItems", e));
        let key_of = invite_key(&invitation.email);
        let item = to_item(&InviteItem {
            pk: log_pk(log),
            sk: key_of.clone(),
            email: invitation.email.trim().to_owned(),
            role: invitation.role.as_str().to_owned(),
            invited_at: invitation.invited_ms,
            log_id: log.to_string(),
            gsi1pk: key_of,
            gsi1sk: log.to_string(),
        });
        let sheet = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(key(log_pk(log), SHEET_SK.into())))
            .condition_expression("attribute_exists(pk)")
            .build()
            .map_err(build)?;
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .build()
            .map_err(build)?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().condition_check(sheet).build())
            .transact_items(TransactWriteItem::builder().put(put).build())
            .send()
            .await;
        match cancellation_reasons(result)? {
            None => Ok(()),
            Some(r) if r.first().and_then(|r| r.code()) == Some("ConditionalCheckFailed") => {
                Err(CatalogError::SheetNotFound(log))
            }
            Some(_) => Err(CatalogError::Contention(log)),
        }
    }

    async fn uninvite(&self, log: LogId, email: &str) -> Result<bool, CatalogError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(log_pk(log), invite_key(email))))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| ddb_error("DeleteItem", e))?;
        Ok(out.attributes.is_some_and(|a| !a.is_empty()))
    }

    async fn invited(&self, email: &str) -> Result<Vec<LogId>, CatalogError> {
        let mut logs = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(GSI1)
                .key_condition_expression("gsi1pk = :i")
                .expression_attribute_values(":i", s(invite_key(email)))
                .projection_expression("logId")
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| ddb_error("Query", e))?;
            for item in out.items.unwrap_or_default() {
                let log = get_s(&item, "logId")
                    .and_then(|l| l.parse().ok())
                    .ok_or_else(|| corrupt("invitation item without logId"))?;
                logs.push(log);
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(logs);
            }
        }
    }

    async fn claim(
        &self,
        log: LogId,
        user: &str,
        email: &str,
    ) -> Result<Option<Role>, CatalogError> {
        let build =
            |e| CatalogError::Store(StoreError::service("DynamoDB", "TransactWriteItems", e));
        let invite_sk = invite_key(email);
        for _ in 0..ATTEMPTS {
            let Some(item) = self.get(log_pk(log), invite_sk.clone()).await? else {
                return Ok(None);
            };
            let invited = invitation_of(&item)?.role;
            let Some(record) = self.record(log).await? else {
                // A delete in progress: the invitation is a leftover.
                self.uninvite(log, email).await?;
                return Ok(None);
            };
            let current_item = self.get(log_pk(log), member_sk(user)).await?;
            let current = current_item.as_ref().map(role_of).transpose()?;
            let updated = copied_time(&record, current_item.as_ref());
            let member = Member {
                user_id: user.to_owned(),
                email: Some(email.trim().to_owned()),
                role: invited,
            };
            let (condition, value) = Self::member_condition(current);
            let mut put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(member_item(&record, &member, updated)))
                .condition_expression(condition);
            if let Some(v) = value {
                put = put
                    .expression_attribute_names("#r", "role")
                    .expression_attribute_values(":cur", v);
            }
            // The invitation as read: a role changed or withdrawn since is not claimed.
            let delete = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(key(log_pk(log), invite_sk.clone())))
                .condition_expression("#r = :inv")
                .expression_attribute_names("#r", "role")
                .expression_attribute_values(":inv", s(invited.as_str()))
                .build()
                .map_err(build)?;
            let writes = vec![
                TransactWriteItem::builder()
                    .put(put.build().map_err(build)?)
                    .build(),
                TransactWriteItem::builder().delete(delete).build(),
            ];
            let rev = Some(record.name_rev);
            match self.change(log, current, writes, Some(invited), rev).await {
                Ok(true) => return Ok(Some(invited)),
                Ok(false) => continue,
                Err(CatalogError::LastOwner(_)) => {
                    // The sheet's one owner stays its owner; the invitation is used up.
                    self.uninvite(log, email).await?;
                    return Ok(current);
                }
                Err(CatalogError::SheetNotFound(_)) => {
                    self.uninvite(log, email).await?;
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
        Err(CatalogError::Contention(log))
    }

    async fn delete_sheet(&self, log: LogId) -> Result<(), CatalogError> {
        // Members first, the sheet item last: a delete interrupted half-way is finished by the
        // next, and a member item is never left without its sheet item (which a listing reads
        // for a member without a copy, and skips that member when it is gone).
        let mut items = self.query_log(log, None).await?;
        items.sort_by_key(|i| get_s(i, "sk") == Some(SHEET_SK));
        for item in items {
            let (Some(pk), Some(sk)) = (get_s(&item, "pk"), get_s(&item, "sk")) else {
                continue;
            };
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key(pk.to_owned(), sk.to_owned())))
                .send()
                .await
                .map_err(|e| ddb_error("DeleteItem", e))?;
        }
        Ok(())
    }
}
