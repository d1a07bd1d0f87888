//! The catalog table's item shapes and their mapping to the catalog's types (`docs/storage.md`,
//! "Catalog"): keys, the sheet, member and invitation items, and reading them back.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::catalog::{
    CatalogError, Invitation, Member, Role, Sheet, invitation_key, listing_key, parse_listing_key,
};
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
    /// The name's revision: 0 at creation, one more at each rename (absent on items written
    /// before names were copied: 0). A member's copy of the name carries the revision it copied.
    #[serde(default)]
    pub(super) name_rev: i64,
    /// When a write's stamp was last copied onto the members' items (absent: never, so the
    /// next stamp is copied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) listed_at: Option<i64>,
}

/// A member item's attributes. `name`, `owner`, `updatedAt` and `nameRev` are its copy of the
/// sheet's, which a listing reads; items written before names were copied have none.
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) updated_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) name_rev: Option<i64>,
}

/// A sheet item as the copies need it: the sheet, the revision of its name, and when a write's
/// stamp was last copied onto its members' items (`None`: never).
#[derive(Debug, Clone)]
pub(super) struct SheetRecord {
    pub(super) sheet: Sheet,
    pub(super) name_rev: i64,
    pub(super) listed_at: Option<i64>,
}

/// The member item of `member` in `record`'s sheet, with its copy of the sheet's name (at the
/// record's revision) and last-changed time (`updated_ms`).
pub(super) fn member_item(record: &SheetRecord, member: &Member, updated_ms: i64) -> Item {
    let sheet = &record.sheet;
    to_item(&MemberItem {
        pk: log_pk(sheet.log),
        sk: member_sk(&member.user_id),
        user_id: member.user_id.clone(),
        role: member.role.as_str().to_owned(),
        log_id: sheet.log.to_string(),
        gsi1pk: user_pk(&member.user_id),
        gsi1sk: listing_key(sheet.created_ms, sheet.log),
        email: member.email.clone(),
        name: Some(sheet.name.clone()),
        owner: Some(sheet.owner.clone()),
        updated_at: Some(updated_ms),
        name_rev: Some(record.name_rev),
    })
}

/// A member item as a listing reads it: the sheet, the role, and the sheet as the item's copy
/// has it (`None` for an item without a copy, written before names were copied).
pub(super) fn listed_of(item: &Item) -> Result<(LogId, Role, Option<Sheet>), CatalogError> {
    let it: MemberItem = from_item(item, "member item")?;
    let log: LogId = it
        .log_id
        .parse()
        .map_err(|_| corrupt(format!("member item with logId {:?}", it.log_id)))?;
    let role = it.role.parse().map_err(corrupt)?;
    let copy = match (it.name, it.owner, it.updated_at) {
        (Some(name), Some(owner), Some(updated_ms)) => {
            let (created_ms, _) = parse_listing_key(&it.gsi1sk)
                .ok_or_else(|| corrupt(format!("member item with gsi1sk {:?}", it.gsi1sk)))?;
            Some(Sheet {
                log,
                name,
                owner,
                created_ms,
                updated_ms,
            })
        }
        _ => None,
    };
    Ok((log, role, copy))
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
    record_of(item).map(|r| r.sheet)
}

pub(super) fn record_of(item: &Item) -> Result<SheetRecord, CatalogError> {
    let it: SheetItem = from_item(item, "sheet item")?;
    let log = it
        .pk
        .strip_prefix("LOG#")
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| corrupt(format!("sheet item without a log key: {}", it.pk)))?;
    Ok(SheetRecord {
        sheet: Sheet {
            log,
            name: it.name,
            owner: it.owner,
            created_ms: it.created_at,
            updated_ms: it.updated_at,
        },
        name_rev: it.name_rev,
        listed_at: it.listed_at,
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
