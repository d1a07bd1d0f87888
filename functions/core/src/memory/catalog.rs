//! [`MemCatalog`]: the catalog port in memory, with the adapter's rules (one owner at least,
//! newest first, cursors, each member's copy of the sheet's name and last-changed time, which
//! the listing reads) and strong consistency.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;

use super::lock;
use crate::catalog::{
    Catalog, CatalogError, Invitation, LISTED_STAMP_INTERVAL_MS, Listed, MAX_PAGE, Member, Role,
    Roster, Sheet, SheetPage, invitation_key, listing_key, parse_listing_key,
};
use crate::domain::LogId;

/// A sheet's record, with when a write's stamp was last copied onto its members (`None`:
/// never).
#[derive(Debug, Clone)]
struct SheetState {
    sheet: Sheet,
    listed_ms: Option<i64>,
}

/// A member, with its copy of the sheet as a listing shows it (`None`: a member from before
/// names were copied, which the listing reads the sheet's record for).
#[derive(Debug, Clone)]
struct MemberState {
    member: Member,
    copy: Option<Sheet>,
}

#[derive(Debug, Default)]
struct State {
    sheets: HashMap<LogId, SheetState>,
    /// Members by sheet, then user.
    members: HashMap<LogId, BTreeMap<String, MemberState>>,
    /// Invitations by sheet, then [`invitation_key`].
    invitations: HashMap<LogId, BTreeMap<String, Invitation>>,
}

#[derive(Debug, Default)]
pub struct MemCatalog {
    state: Mutex<State>,
}

impl MemCatalog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes `user`'s membership of `log` one written before names were copied onto member
    /// items: without a copy (`catalog::conformance::check_uncopied`).
    pub fn drop_copy(&self, log: LogId, user: &str) -> Result<(), CatalogError> {
        if let Some(m) = lock(&self.state)?
            .members
            .get_mut(&log)
            .and_then(|m| m.get_mut(user))
        {
            m.copy = None;
        }
        Ok(())
    }
}

fn owners(members: &BTreeMap<String, MemberState>) -> usize {
    members
        .values()
        .filter(|m| m.member.role == Role::Owner)
        .count()
}

/// Every member's copy brought up to `sheet` (a rename, a stamp that is due): the name as it
/// is, the last-changed time never back.
fn copy_to_members(members: Option<&mut BTreeMap<String, MemberState>>, sheet: &Sheet) {
    for m in members.into_iter().flat_map(|m| m.values_mut()) {
        let updated_ms = m
            .copy
            .as_ref()
            .map_or(sheet.updated_ms, |c| c.updated_ms.max(sheet.updated_ms));
        m.copy = Some(Sheet {
            updated_ms,
            ..sheet.clone()
        });
    }
}

/// A member written now, with its copy of `sheet` (never moving its copy's time back).
fn with_copy(member: Member, sheet: &Sheet, before: Option<&MemberState>) -> MemberState {
    let updated_ms = before
        .and_then(|b| b.copy.as_ref())
        .map_or(sheet.updated_ms, |c| c.updated_ms.max(sheet.updated_ms));
    MemberState {
        member,
        copy: Some(Sheet {
            updated_ms,
            ..sheet.clone()
        }),
    }
}

#[async_trait]
impl Catalog for MemCatalog {
    async fn create_sheet(
        &self,
        sheet: &Sheet,
        owner_email: Option<&str>,
    ) -> Result<(), CatalogError> {
        let mut st = lock(&self.state)?;
        if let Some(s) = st.sheets.get(&sheet.log) {
            // The same create again (a retried request) is done already.
            if s.sheet.owner == sheet.owner && s.sheet.created_ms == sheet.created_ms {
                return Ok(());
            }
            return Err(CatalogError::Exists(sheet.log));
        }
        let state = SheetState {
            sheet: sheet.clone(),
            listed_ms: None,
        };
        st.sheets.insert(sheet.log, state);
        let owner = Member {
            user_id: sheet.owner.clone(),
            email: owner_email.map(str::to_owned),
            role: Role::Owner,
        };
        st.members
            .entry(sheet.log)
            .or_default()
            .insert(sheet.owner.clone(), with_copy(owner, sheet, None));
        Ok(())
    }

    async fn sheet(&self, log: LogId) -> Result<Option<Sheet>, CatalogError> {
        Ok(lock(&self.state)?.sheets.get(&log).map(|s| s.sheet.clone()))
    }

    async fn role(&self, user: &str, log: LogId) -> Result<Option<Role>, CatalogError> {
        Ok(lock(&self.state)?
            .members
            .get(&log)
            .and_then(|m| m.get(user))
            .map(|m| m.member.role))
    }

    async fn role_eventual(&self, user: &str, log: LogId) -> Result<Option<Role>, CatalogError> {
        self.role(user, log).await
    }

    async fn list_sheets(
        &self,
        user: &str,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<SheetPage, CatalogError> {
        let limit = limit.clamp(1, MAX_PAGE);
        if let Some(c) = cursor
            && parse_listing_key(c).is_none()
        {
            return Err(CatalogError::BadCursor(c.to_owned()));
        }
        let st = lock(&self.state)?;
        let mut mine: Vec<(String, Listed)> = st
            .members
            .iter()
            .filter_map(|(log, members)| {
                let m = members.get(user)?;
                // The member's copy; without one, the sheet's record (while it is there).
                let sheet = match &m.copy {
                    Some(copy) => copy.clone(),
                    None => st.sheets.get(log)?.sheet.clone(),
                };
                let role = m.member.role;
                Some((listing_key(sheet.created_ms, *log), Listed { sheet, role }))
            })
            .filter(|(k, _)| cursor.is_none_or(|c| k.as_str() < c))
            .collect();
        mine.sort_by(|a, b| b.0.cmp(&a.0));
        let more = mine.len() > limit;
        mine.truncate(limit);
        let cursor = if more {
            mine.last().map(|(k, _)| k.clone())
        } else {
            None
        };
        Ok(SheetPage {
            sheets: mine.into_iter().map(|(_, l)| l).collect(),
            cursor,
        })
    }

    async fn rename(&self, log: LogId, name: &str, now_ms: i64) -> Result<Sheet, CatalogError> {
        let mut st = lock(&self.state)?;
        let state = st
            .sheets
            .get_mut(&log)
            .ok_or(CatalogError::SheetNotFound(log))?;
        state.sheet.name = name.to_owned();
        state.sheet.updated_ms = now_ms;
        let sheet = state.sheet.clone();
        copy_to_members(st.members.get_mut(&log), &sheet);
        Ok(sheet)
    }

    async fn touch(&self, log: LogId, now_ms: i64) -> Result<(), CatalogError> {
        let mut st = lock(&self.state)?;
        let Some(state) = st.sheets.get_mut(&log) else {
            return Ok(());
        };
        if state.sheet.updated_ms >= now_ms {
            return Ok(());
        }
        state.sheet.updated_ms = now_ms;
        if state
            .listed_ms
            .is_some_and(|at| at > now_ms - LISTED_STAMP_INTERVAL_MS)
        {
            return Ok(());
        }
        state.listed_ms = Some(now_ms);
        let sheet = state.sheet.clone();
        copy_to_members(st.members.get_mut(&log), &sheet);
        Ok(())
    }

    async fn members(&self, log: LogId) -> Result<Vec<Member>, CatalogError> {
        Ok(lock(&self.state)?
            .members
            .get(&log)
            .map(|m| m.values().map(|m| m.member.clone()).collect())
            .unwrap_or_default())
    }

    async fn put_member(&self, log: LogId, member: &Member) -> Result<(), CatalogError> {
        let mut st = lock(&self.state)?;
        let sheet = match st.sheets.get(&log) {
            Some(s) => s.sheet.clone(),
            None => return Err(CatalogError::SheetNotFound(log)),
        };
        let members = st.members.entry(log).or_default();
        let current = members.get(&member.user_id).cloned();
        if current
            .as_ref()
            .is_some_and(|c| c.member.role == Role::Owner)
            && member.role != Role::Owner
            && owners(members) < 2
        {
            return Err(CatalogError::LastOwner(log));
        }
        let mut next = member.clone();
        if next.email.is_none() {
            next.email = current.as_ref().and_then(|c| c.member.email.clone());
        }
        let next = with_copy(next, &sheet, current.as_ref());
        members.insert(member.user_id.clone(), next);
        Ok(())
    }

    async fn remove_member(&self, log: LogId, user: &str) -> Result<bool, CatalogError> {
        let mut st = lock(&self.state)?;
        let Some(members) = st.members.get_mut(&log) else {
            return Ok(false);
        };
        match members.get(user) {
            None => Ok(false),
            Some(m) if m.member.role == Role::Owner && owners(members) < 2 => {
                Err(CatalogError::LastOwner(log))
            }
            Some(_) => {
                members.remove(user);
                Ok(true)
            }
        }
    }

    async fn invitations(&self, log: LogId) -> Result<Vec<Invitation>, CatalogError> {
        Ok(lock(&self.state)?
            .invitations
            .get(&log)
            .map(|i| i.values().cloned().collect())
            .unwrap_or_default())
    }

    async fn roster(&self, log: LogId) -> Result<Roster, CatalogError> {
        let st = lock(&self.state)?;
        Ok(Roster {
            sheet: st.sheets.get(&log).map(|s| s.sheet.clone()),
            members: st
                .members
                .get(&log)
                .map(|m| m.values().map(|m| m.member.clone()).collect())
                .unwrap_or_default(),
            invitations: st
                .invitations
                .get(&log)
                .map(|i| i.values().cloned().collect())
                .unwrap_or_default(),
        })
    }

    async fn invite(&self, log: LogId, invitation: &Invitation) -> Result<(), CatalogError> {
        let mut st = lock(&self.state)?;
        if !st.sheets.contains_key(&log) {
            return Err(CatalogError::SheetNotFound(log));
        }
        st.invitations
            .entry(log)
            .or_default()
            .insert(invitation_key(&invitation.email), invitation.clone());
        Ok(())
    }

    async fn uninvite(&self, log: LogId, email: &str) -> Result<bool, CatalogError> {
        Ok(lock(&self.state)?
            .invitations
            .get_mut(&log)
            .and_then(|i| i.remove(&invitation_key(email)))
            .is_some())
    }

    async fn invited(&self, email: &str) -> Result<Vec<LogId>, CatalogError> {
        let key = invitation_key(email);
        Ok(lock(&self.state)?
            .invitations
            .iter()
            .filter(|(_, i)| i.contains_key(&key))
            .map(|(log, _)| *log)
            .collect())
    }

    async fn claim(
        &self,
        log: LogId,
        user: &str,
        email: &str,
    ) -> Result<Option<Role>, CatalogError> {
        let mut st = lock(&self.state)?;
        let Some(invitation) = st
            .invitations
            .get_mut(&log)
            .and_then(|i| i.remove(&invitation_key(email)))
        else {
            return Ok(None);
        };
        let Some(sheet) = st.sheets.get(&log).map(|s| s.sheet.clone()) else {
            return Ok(None);
        };
        let members = st.members.entry(log).or_default();
        let before = members.get(user).cloned();
        let current = before.as_ref().map(|m| m.member.role);
        if current == Some(Role::Owner) && invitation.role != Role::Owner && owners(members) < 2 {
            return Ok(current);
        }
        let member = Member {
            user_id: user.to_owned(),
            email: Some(email.trim().to_owned()),
            role: invitation.role,
        };
        members.insert(user.to_owned(), with_copy(member, &sheet, before.as_ref()));
        Ok(Some(invitation.role))
    }

    async fn delete_sheet(&self, log: LogId) -> Result<(), CatalogError> {
        let mut st = lock(&self.state)?;
        st.sheets.remove(&log);
        st.members.remove(&log);
        st.invitations.remove(&log);
        Ok(())
    }
}
