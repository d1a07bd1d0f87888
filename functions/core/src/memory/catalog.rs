//! [`MemCatalog`]: the catalog port in memory, with the adapter's rules (one owner at least,
//! newest first, cursors) and strong consistency.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;

use super::lock;
use crate::catalog::{
    Catalog, CatalogError, Invitation, Listed, MAX_PAGE, Member, Role, Roster, Sheet, SheetPage,
    invitation_key, listing_key, parse_listing_key,
};
use crate::domain::LogId;

#[derive(Debug, Default)]
struct State {
    sheets: HashMap<LogId, Sheet>,
    /// Members by sheet, then user.
    members: HashMap<LogId, BTreeMap<String, Member>>,
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
}

fn owners(members: &BTreeMap<String, Member>) -> usize {
    members.values().filter(|m| m.role == Role::Owner).count()
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
            if s.owner == sheet.owner && s.created_ms == sheet.created_ms {
                return Ok(());
            }
            return Err(CatalogError::Exists(sheet.log));
        }
        st.sheets.insert(sheet.log, sheet.clone());
        let owner = Member {
            user_id: sheet.owner.clone(),
            email: owner_email.map(str::to_owned),
            role: Role::Owner,
        };
        st.members
            .entry(sheet.log)
            .or_default()
            .insert(sheet.owner.clone(), owner);
        Ok(())
    }

    async fn sheet(&self, log: LogId) -> Result<Option<Sheet>, CatalogError> {
        Ok(lock(&self.state)?.sheets.get(&log).cloned())
    }

    async fn role(&self, user: &str, log: LogId) -> Result<Option<Role>, CatalogError> {
        Ok(lock(&self.state)?
            .members
            .get(&log)
            .and_then(|m| m.get(user))
            .map(|m| m.role))
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
                let role = members.get(user)?.role;
                let sheet = st.sheets.get(log)?.clone();
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
        let sheet = st
            .sheets
            .get_mut(&log)
            .ok_or(CatalogError::SheetNotFound(log))?;
        sheet.name = name.to_owned();
        sheet.updated_ms = now_ms;
        Ok(sheet.clone())
    }

    async fn touch(&self, log: LogId, now_ms: i64) -> Result<(), CatalogError> {
        if let Some(sheet) = lock(&self.state)?.sheets.get_mut(&log) {
            sheet.updated_ms = sheet.updated_ms.max(now_ms);
        }
        Ok(())
    }

    async fn members(&self, log: LogId) -> Result<Vec<Member>, CatalogError> {
        Ok(lock(&self.state)?
            .members
            .get(&log)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default())
    }

    async fn put_member(&self, log: LogId, member: &Member) -> Result<(), CatalogError> {
        let mut st = lock(&self.state)?;
        if !st.sheets.contains_key(&log) {
            return Err(CatalogError::SheetNotFound(log));
        }
        let members = st.members.entry(log).or_default();
        let current = members.get(&member.user_id).cloned();
        if current.as_ref().is_some_and(|c| c.role == Role::Owner)
            && member.role != Role::Owner
            && owners(members) < 2
        {
            return Err(CatalogError::LastOwner(log));
        }
        let mut next = member.clone();
        if next.email.is_none() {
            next.email = current.and_then(|c| c.email);
        }
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
            Some(m) if m.role == Role::Owner && owners(members) < 2 => {
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
            sheet: st.sheets.get(&log).cloned(),
            members: st
                .members
                .get(&log)
                .map(|m| m.values().cloned().collect())
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
        if !st.sheets.contains_key(&log) {
            return Ok(None);
        }
        let members = st.members.entry(log).or_default();
        let current = members.get(user).map(|m| m.role);
        if current == Some(Role::Owner) && invitation.role != Role::Owner && owners(members) < 2 {
            return Ok(current);
        }
        members.insert(
            user.to_owned(),
            Member {
                user_id: user.to_owned(),
                email: Some(email.trim().to_owned()),
                role: invitation.role,
            },
        );
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
