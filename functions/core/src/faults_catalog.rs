//! The catalog behind the fault adapter: every call counted, maybe delayed or throttled; a
//! create may lose its response; eventually consistent reads may miss a recent membership or
//! invitation.

use std::sync::Arc;

use std::time::Instant;

use async_trait::async_trait;

use super::{DDB, Faults};
use crate::catalog::{
    Catalog, CatalogError, CatalogLayer, Invitation, Member, Role, Sheet, SheetPage, invitation_key,
};
use crate::domain::LogId;
use crate::ports::Consistency;

/// The catalog: every call counted, maybe delayed or throttled; a create may lose its response,
/// and the reads of its global secondary index (eventually consistent) may miss what was written
/// within the window: a listing a membership added (a share, a claimed invitation), the
/// invitations of an address one just made.
#[async_trait]
impl CatalogLayer for Arc<Faults> {
    async fn create_sheet<S: Catalog + ?Sized>(
        &self,
        inner: &S,
        sheet: &Sheet,
        owner_email: Option<&str>,
    ) -> Result<(), CatalogError> {
        self.before(DDB, "TransactWriteItems").await?;
        inner.create_sheet(sheet, owner_email).await?;
        self.note_member(&sheet.owner, sheet.log);
        if self.lose_response() {
            // A retry without the first call's idempotency token: its conditions fail against
            // what the first call wrote.
            return inner.create_sheet(sheet, owner_email).await;
        }
        Ok(())
    }

    async fn put_member<S: Catalog + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        member: &Member,
    ) -> Result<(), CatalogError> {
        self.before(DDB, "TransactWriteItems").await?;
        inner.put_member(log, member).await?;
        self.note_member(&member.user_id, log);
        Ok(())
    }

    async fn invite<S: Catalog + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        invitation: &Invitation,
    ) -> Result<(), CatalogError> {
        self.before(DDB, "TransactWriteItems").await?;
        inner.invite(log, invitation).await?;
        if self.remembers()
            && let Ok(mut r) = self.recent.lock()
        {
            let window = self.profile.stale_for;
            r.invitations.retain(|_, t| t.elapsed() < window);
            r.invitations
                .insert((invitation_key(&invitation.email), log), Instant::now());
        }
        Ok(())
    }

    async fn invited<S: Catalog + ?Sized>(
        &self,
        inner: &S,
        email: &str,
    ) -> Result<Vec<LogId>, CatalogError> {
        self.before(DDB, "Query").await?;
        let mut logs = inner.invited(email).await?;
        if self.stale(Consistency::Eventual)
            && let Ok(r) = self.recent.lock()
        {
            let key = invitation_key(email);
            let before = logs.len();
            logs.retain(|l| !self.is_recent(r.invitations.get(&(key.clone(), *l))));
            if logs.len() < before {
                self.stale_read_seen();
            }
        }
        Ok(logs)
    }

    async fn claim<S: Catalog + ?Sized>(
        &self,
        inner: &S,
        log: LogId,
        user: &str,
        email: &str,
    ) -> Result<Option<Role>, CatalogError> {
        self.before(DDB, "TransactWriteItems").await?;
        let role = inner.claim(log, user, email).await?;
        if role.is_some() {
            self.note_member(user, log);
        }
        Ok(role)
    }

    async fn role_eventual<S: Catalog + ?Sized>(
        &self,
        inner: &S,
        user: &str,
        log: LogId,
    ) -> Result<Option<Role>, CatalogError> {
        self.before(DDB, "GetItem").await?;
        let role = inner.role_eventual(user, log).await?;
        if role.is_some()
            && self.stale(Consistency::Eventual)
            && let Ok(r) = self.recent.lock()
            && self.is_recent(r.members.get(&(user.to_owned(), log)))
        {
            // The replica read has not seen the share yet.
            self.stale_read_seen();
            return Ok(None);
        }
        Ok(role)
    }

    async fn list_sheets<S: Catalog + ?Sized>(
        &self,
        inner: &S,
        user: &str,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<SheetPage, CatalogError> {
        self.before(DDB, "Query").await?;
        let mut page = inner.list_sheets(user, limit, cursor).await?;
        if self.stale(Consistency::Eventual)
            && let Ok(r) = self.recent.lock()
        {
            let before = page.sheets.len();
            page.sheets
                .retain(|l| !self.is_recent(r.members.get(&(user.to_owned(), l.sheet.log))));
            if page.sheets.len() < before {
                self.stale_read_seen();
            }
        }
        Ok(page)
    }
}
