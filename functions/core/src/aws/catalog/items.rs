//! The catalog table's item shapes and their mapping to the catalog's types (`docs/storage.md`,
//! "Catalog"): keys, the sheet, member and invitation items, and reading them back.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::catalog::{CatalogError, Invitation, Member, Role, Sheet, invitation_key};
use crate::domain::LogId;
use crate::error::StoreError;

pub(super) type Item = HashMap<String, AttributeValue>;

pub(super) const SHEET_SK: &str = "SHEET";

pub(super) fn log_pk(log: LogId) -> String {
    format!("LOG#{log}")
}
pub(super) fn member_sk(user: &str) -> String {
    format!("MEMBER#{user}")
}
pub(super) fn user_pk(user: &str) -> String {
    format!("USER#{user}")
}
/// The sort key of an invitation in its sheet's partition, and its `gsi1pk`.
pub(super) fn invite_key(email: &str) -> String {
    format!("INVITE#{}", invitation_key(email))
}
pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}
pub(super) fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(super) fn key(pk: String, sk: String) -> Item {
    HashMap::from([("pk".to_owned(), s(pk)), ("sk".to_owned(), s(sk))])
}

pub(super) fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}
pub(super) fn corrupt(detail: impl Into<String>) -> CatalogError {
    CatalogError::Store(StoreError::corrupt("catalog item", detail))
}

/// A sheet item's attributes (`owners` is kept by conditions and updates, not read here).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SheetItem {
    pub(super) pk: String,
    pub(super) sk: String,
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) owner: String,
    #[serde(default)]
    pub(super) created_at: i64,
    #[serde(default)]
    pub(super) updated_at: i64,
}

/// A member item's attributes.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct MemberItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) user_id: String,
    pub(super) role: String,
    pub(super) log_id: String,
    pub(super) gsi1pk: String,
    pub(super) gsi1sk: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) email: Option<String>,
}

/// An invitation item's attributes.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InviteItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) email: String,
    pub(super) role: String,
    pub(super) invited_at: i64,
    pub(super) log_id: String,
    pub(super) gsi1pk: String,
    pub(super) gsi1sk: String,
}

pub(super) fn invitation_of(item: &Item) -> Result<Invitation, CatalogError> {
    let it: InviteItem = from_item(item, "invitation item")?;
    Ok(Invitation {
        email: it.email,
        role: it.role.parse().map_err(corrupt)?,
        invited_ms: it.invited_at,
    })
}

/// The one attribute a role check reads.
#[derive(Debug, serde::Deserialize)]
pub(super) struct RoleItem {
    pub(super) role: String,
}

pub(super) fn from_item<T: serde::de::DeserializeOwned>(
    item: &Item,
    what: &str,
) -> Result<T, CatalogError> {
    serde_dynamo::from_item(item.clone()).map_err(|e| corrupt(format!("{what}: {e}")))
}

pub(super) fn to_item(value: &impl serde::Serialize) -> Item {
    // Strings and numbers only: serialising them cannot fail.
    serde_dynamo::to_item(value).unwrap_or_default()
}

pub(super) fn sheet_of(item: &Item) -> Result<Sheet, CatalogError> {
    let it: SheetItem = from_item(item, "sheet item")?;
    let log = it
        .pk
        .strip_prefix("LOG#")
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| corrupt(format!("sheet item without a log key: {}", it.pk)))?;
    Ok(Sheet {
        log,
        name: it.name,
        owner: it.owner,
        created_ms: it.created_at,
        updated_ms: it.updated_at,
    })
}

pub(super) fn role_of(item: &Item) -> Result<Role, CatalogError> {
    from_item::<RoleItem>(item, "member item")?
        .role
        .parse()
        .map_err(corrupt)
}

pub(super) fn member_of(item: &Item) -> Result<Member, CatalogError> {
    let it: MemberItem = from_item(item, "member item")?;
    Ok(Member {
        user_id: it.user_id,
        email: it.email,
        role: it.role.parse().map_err(corrupt)?,
    })
}
