//! The catalog of sheets (issue 31, `docs/storage.md`, "The catalog"): each sheet's name, owner,
//! created and last-changed times, and its members with a role. Under Cognito authorization
//! (`SHEETLOG_AUTH_MODE=cognito`) every sheet route's access check reads it.
//!
//! - [`Catalog`] — the port: a narrow trait of its own (the log's ports know nothing of people).
//! - [`crate::aws::catalog::DynamoCatalog`] — the adapter: one table, `pk`/`sk` plus the GSI
//!   `gsi1` (`gsi1pk`/`gsi1sk`); the item shapes and access patterns are in `docs/storage.md`.
//! - `crate::memory::catalog::MemCatalog` — the same rules in memory, for fast tests.
//!
//! Rules every implementation keeps: a sheet always has at least one owner (a change or removal
//! that would leave none fails with [`CatalogError::LastOwner`]); a listing is newest first by
//! the sheet's creation time, paged with an opaque cursor; it reads each member's copy of the
//! sheet's name (current once the rename that changed it has answered) and last-changed time
//! (moved on at most once per [`LISTED_STAMP_INTERVAL_MS`] while the sheet is written).

use std::fmt;
use std::str::FromStr;

use crate::domain::LogId;
use crate::error::StoreError;

/// What a member may do. Ordered: every role may do what the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads the sheet: every GET, pulls, exports.
    Viewer,
    /// Also writes: appends, pushes, uploads, renames.
    Editor,
    /// Also shares and deletes the sheet.
    Owner,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Owner => "owner",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "editor" => Ok(Role::Editor),
            "owner" => Ok(Role::Owner),
            other => Err(format!(
                "role {other:?} is not one of viewer, editor, owner"
            )),
        }
    }
}

/// The name a sheet gets when its creator gives none.
pub const DEFAULT_NAME: &str = "Untitled";
/// Longest sheet name, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Most sheets one page of a listing holds.
pub const MAX_PAGE: usize = 100;

/// One sheet's catalog record. Times are milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sheet {
    pub log: LogId,
    pub name: String,
    /// The user who created it (its first owner; ownership may since have been shared).
    pub owner: String,
    pub created_ms: i64,
    /// Last change: creation, a rename, or a write (stamped at most once per
    /// [`TOUCH_INTERVAL_MS`] per sheet by each API instance). In a listing, the member's copy:
    /// moved on by a rename, and by a write at most once per [`LISTED_STAMP_INTERVAL_MS`].
    pub updated_ms: i64,
}

/// How often an API instance stamps a sheet's last-changed time while it is being written.
pub const TOUCH_INTERVAL_MS: i64 = 60_000;

/// How often a stamp of a sheet's last-changed time is also copied onto its member items, which
/// a listing reads: at most once per this interval per sheet (whichever instance stamps first
/// once it is due), so a sheet edited without pause costs one write per member per interval,
/// not per stamp, and a listing shows its last change at most this much (plus
/// [`TOUCH_INTERVAL_MS`]) behind. A sheet's first stamp, and the first after an interval
/// without a copy, are copied at once.
pub const LISTED_STAMP_INTERVAL_MS: i64 = 10 * 60_000;

/// A sheet in a member's listing, with the member's role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub sheet: Sheet,
    pub role: Role,
}

/// One page of a listing; `cursor` continues it (`None`: no more).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SheetPage {
    pub sheets: Vec<Listed>,
    pub cursor: Option<String>,
}

/// A member of a sheet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub user_id: String,
    /// The email the member was shared by (or signed in with), when known.
    pub email: Option<String>,
    pub role: Role,
}

/// A share by email waiting for whoever signs in with that address (`docs/api.md`, "Sharing by
/// email"). It is listed the same whether or not the address has an account, and becomes a
/// membership when a signed-in person whose verified email it is claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invitation {
    /// The address as the owner gave it (trimmed); matched without regard to case.
    pub email: String,
    pub role: Role,
    /// When it was made or last changed, ms since the Unix epoch.
    pub invited_ms: i64,
}

/// A sheet's record with its members and invitations, as one read of its partition gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roster {
    /// `None` when the sheet is not in the catalog.
    pub sheet: Option<Sheet>,
    pub members: Vec<Member>,
    pub invitations: Vec<Invitation>,
}

/// The form of an email an invitation is keyed by: trimmed, lower case (mailbox providers and
/// Cognito's `email` filter treat addresses without regard to case).
pub fn invitation_key(email: &str) -> String {
    email.trim().to_lowercase()
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The sheet is not in the catalog.
    #[error("sheet {0} is not in the catalog")]
    SheetNotFound(LogId),
    /// The change would leave the sheet without an owner.
    #[error("sheet {0} would have no owner left")]
    LastOwner(LogId),
    /// A create for a sheet that is already there.
    #[error("sheet {0} is already in the catalog")]
    Exists(LogId),
    /// Another change to the same member won every attempt; retry.
    #[error("the membership of sheet {0} changed concurrently; retry")]
    Contention(LogId),
    /// A listing cursor this catalog did not hand out.
    #[error("cursor {0:?} is not one this API handed out")]
    BadCursor(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

crate::port! {
    /// The catalog port.
    pub trait Catalog("DynamoDB"): CatalogLayer {
        /// Records a new sheet with `owner` as its one owner.
        async fn create_sheet(
            &self,
            sheet: &Sheet,
            owner_email: Option<&str>,
        ) -> Result<(), CatalogError> as TransactWriteItems;

        /// The sheet's record, if it is in the catalog.
        async fn sheet(&self, log: LogId) -> Result<Option<Sheet>, CatalogError> as GetItem;

        /// `user`'s role on `log`, if a member (one strongly consistent GetItem, 1 read unit).
        async fn role(&self, user: &str, log: LogId)
            -> Result<Option<Role>, CatalogError> as GetItem;

        /// The same from an eventually consistent GetItem (half a read unit): a change to the
        /// membership made within about the last second may not show yet. The access check
        /// reads this first and confirms a refusal with [`Catalog::role`].
        async fn role_eventual(&self, user: &str, log: LogId)
            -> Result<Option<Role>, CatalogError> as GetItem;

        /// The sheets `user` is a member of, newest first, at most `limit` (1..=[`MAX_PAGE`]).
        async fn list_sheets(
            &self,
            user: &str,
            limit: usize,
            cursor: Option<&str>,
        ) -> Result<SheetPage, CatalogError> as Query;

        /// Renames a sheet (also its last-changed time), then copies the name onto every
        /// member's item; the record after. A failure after the sheet's record changed leaves
        /// some members listing the old name until the rename is repeated, the next rename, or
        /// the next stamp ([`Catalog::touch`]) that is due.
        async fn rename(&self, log: LogId, name: &str, now_ms: i64)
            -> Result<Sheet, CatalogError> as UpdateItem;

        /// Moves the last-changed time forward to `now_ms` (never back); a sheet not in the
        /// catalog is left alone. When no stamp was copied onto the members' items yet, or the
        /// last one [`LISTED_STAMP_INTERVAL_MS`] or more before, copies it (and the name) onto
        /// every member's item.
        async fn touch(&self, log: LogId, now_ms: i64) -> Result<(), CatalogError> as UpdateItem;

        /// Every member of a sheet.
        async fn members(&self, log: LogId) -> Result<Vec<Member>, CatalogError> as Query;

        /// Adds `member` or changes its role (and email, when given). Fails with
        /// [`CatalogError::LastOwner`] when it would demote the last owner.
        async fn put_member(&self, log: LogId, member: &Member)
            -> Result<(), CatalogError> as TransactWriteItems;

        /// Removes a member; `false` when it was none. Fails with [`CatalogError::LastOwner`]
        /// for the last owner.
        async fn remove_member(&self, log: LogId, user: &str)
            -> Result<bool, CatalogError> as TransactWriteItems;

        /// The sheet's invitations (shares by email not yet claimed).
        async fn invitations(&self, log: LogId) -> Result<Vec<Invitation>, CatalogError> as Query;

        /// The sheet's record, members and invitations in one read (the sharing dialog's and
        /// a sheet page's view: who is in it, and its name).
        async fn roster(&self, log: LogId) -> Result<Roster, CatalogError> as Query;

        /// Invites `invitation.email` (or changes the role of its invitation). Fails with
        /// [`CatalogError::SheetNotFound`] for a sheet not in the catalog.
        async fn invite(&self, log: LogId, invitation: &Invitation)
            -> Result<(), CatalogError> as TransactWriteItems;

        /// Withdraws the invitation of `email`; `false` when there was none.
        async fn uninvite(&self, log: LogId, email: &str) -> Result<bool, CatalogError> as DeleteItem;

        /// The sheets with an invitation for `email` (an eventually consistent index read: an
        /// invitation made a moment ago may be missing, never one withdrawn long ago).
        async fn invited(&self, email: &str) -> Result<Vec<LogId>, CatalogError> as Query;

        /// Turns `email`'s invitation to `log` into a membership of `user` in one transaction:
        /// the member gets the invited role (its email recorded), the invitation goes. `None`
        /// when there is no invitation (or no sheet: then a leftover invitation is removed).
        /// A claim that would take the sheet's last owner role away leaves the role as it is
        /// and removes the invitation; the answer is the role `user` holds after.
        async fn claim(&self, log: LogId, user: &str, email: &str)
            -> Result<Option<Role>, CatalogError> as TransactWriteItems;

        /// Forgets a sheet, its members and its invitations (after the log itself is deleted).
        async fn delete_sheet(&self, log: LogId) -> Result<(), CatalogError> as BatchWriteItem;
    }
}

/// The sort key of a sheet in its members' listings: creation time, then the id (unique).
/// Fixed width so that string order is time order. It doubles as the listing cursor.
pub fn listing_key(created_ms: i64, log: LogId) -> String {
    format!("{:015}.{log}", created_ms.max(0))
}

/// Parses a cursor ([`listing_key`]); `None` when it is not one.
pub fn parse_listing_key(cursor: &str) -> Option<(i64, LogId)> {
    let (ms, id) = cursor.split_once('.')?;
    if ms.len() != 15 || !ms.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((ms.parse().ok()?, id.parse().ok()?))
}

/// Checks and trims a sheet name.
pub fn clean_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("a sheet's name must not be empty".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "a sheet's name is at most {MAX_NAME_CHARS} characters"
        ));
    }
    if name.chars().any(char::is_control) {
        return Err("a sheet's name must not hold control characters".into());
    }
    Ok(name.to_owned())
}

/// The rules every catalog keeps, run against any implementation: the in-memory one in unit
/// tests, the DynamoDB adapter on the emulator (`tests/tests/integration/catalog.rs`).
#[cfg(any(test, feature = "memory"))]
pub mod conformance {
    use super::*;

    fn ensure(ok: bool, what: &str) -> Result<(), String> {
        if ok { Ok(()) } else { Err(what.to_owned()) }
    }

    fn sheet(owner: &str, created_ms: i64) -> Sheet {
        Sheet {
            log: LogId::new_random(),
            name: DEFAULT_NAME.into(),
            owner: owner.into(),
            created_ms,
            updated_ms: created_ms,
        }
    }

    fn member(user: &str, role: Role) -> Member {
        Member {
            user_id: user.into(),
            email: Some(format!("{user}@example.com")),
            role,
        }
    }

    fn invitation(email: &str, role: Role) -> Invitation {
        Invitation {
            email: email.into(),
            role,
            invited_ms: 7_000,
        }
    }

    /// The people of a run: names prefixed so runs on a shared table stay apart.
    struct People {
        prefix: String,
        alice: String,
        bob: String,
    }

    /// Runs every rule; users are prefixed with `prefix` so runs on a shared table stay apart.
    pub async fn check(c: &dyn Catalog, prefix: &str) -> Result<(), String> {
        let p = People {
            prefix: prefix.to_owned(),
            alice: format!("{prefix}alice"),
            bob: format!("{prefix}bob"),
        };
        let s1 = creates(c, &p).await?;
        lists(c, &p, &s1).await?;
        renames(c, &p, &s1).await?;
        shares(c, &p, &s1).await?;
        invites(c, &p, &s1).await?;
        keeps_the_last_owner(c, &p, &s1).await?;
        deletes(c, &p, &s1).await
    }

    /// Create: the creator is the one owner; the same create again (a retry) is done, a create
    /// of the same id by someone else fails.
    async fn creates(c: &dyn Catalog, p: &People) -> Result<Sheet, String> {
        let e = |x: CatalogError| x.to_string();
        let (alice, bob) = (p.alice.clone(), p.bob.clone());
        // Create: the creator is the one owner; the same create again (a retry) is done, a
        // create of the same id by someone else fails.
        let s1 = sheet(&alice, 1_000);
        c.create_sheet(&s1, Some("alice@example.com"))
            .await
            .map_err(e)?;
        c.create_sheet(&s1, None).await.map_err(e)?;
        let other = Sheet {
            owner: bob.clone(),
            ..s1.clone()
        };
        ensure(
            matches!(
                c.create_sheet(&other, None).await,
                Err(CatalogError::Exists(_))
            ),
            "a create of another's sheet with the same id fails",
        )?;
        ensure(
            c.role(&alice, s1.log).await.map_err(e)? == Some(Role::Owner),
            "creator owns",
        )?;
        ensure(
            c.role(&bob, s1.log).await.map_err(e)?.is_none(),
            "bob is no member",
        )?;
        // The eventually consistent read agrees once it has caught up (the emulator and the
        // memory catalog are always caught up; the fault adapter models the lag).
        ensure(
            c.role_eventual(&alice, s1.log).await.map_err(e)? == Some(Role::Owner)
                && c.role_eventual(&bob, s1.log).await.map_err(e)?.is_none(),
            "the eventually consistent access check reads the same roles",
        )?;
        ensure(
            c.sheet(s1.log).await.map_err(e)? == Some(s1.clone()),
            "sheet reads back",
        )?;
        Ok(s1)
    }

    /// Listing: newest first, paged, with the caller's role and the sheet's name.
    async fn lists(c: &dyn Catalog, p: &People, s1: &Sheet) -> Result<(), String> {
        let e = |x: CatalogError| x.to_string();
        let alice = p.alice.clone();
        // Listing: newest first, paged, with the caller's role and the sheet's name.
        let mut created = vec![s1.clone()];
        for i in 1..5 {
            let s = sheet(&alice, 1_000 + i * 10);
            c.create_sheet(&s, None).await.map_err(e)?;
            created.push(s);
        }
        let mut seen = Vec::new();
        let mut cursor = None;
        for _ in 0..10 {
            let page = c
                .list_sheets(&alice, 2, cursor.as_deref())
                .await
                .map_err(e)?;
            ensure(page.sheets.len() <= 2, "a page holds at most its limit")?;
            seen.extend(page.sheets.iter().map(|l| (l.sheet.log, l.role)));
            cursor = page.cursor;
            if cursor.is_none() {
                break;
            }
        }
        let want: Vec<(LogId, Role)> = created.iter().rev().map(|s| (s.log, Role::Owner)).collect();
        ensure(
            seen == want,
            &format!("newest first, every sheet once: {seen:?}"),
        )?;
        ensure(
            matches!(
                c.list_sheets(&alice, 2, Some("nope")).await,
                Err(CatalogError::BadCursor(_))
            ),
            "a foreign cursor is refused",
        )?;
        Ok(())
    }

    /// `user`'s listing of `log` (first page), if it lists it.
    async fn listed(c: &dyn Catalog, user: &str, log: LogId) -> Result<Option<Listed>, String> {
        let page = c
            .list_sheets(user, MAX_PAGE, None)
            .await
            .map_err(|x| x.to_string())?;
        Ok(page.sheets.into_iter().find(|l| l.sheet.log == log))
    }

    /// Rename shows in the listing; touch only moves forward; the listing shows the first
    /// stamp at once, and the next once the last copied one is [`LISTED_STAMP_INTERVAL_MS`] old.
    async fn renames(c: &dyn Catalog, p: &People, s1: &Sheet) -> Result<(), String> {
        let e = |x: CatalogError| x.to_string();
        let alice = p.alice.clone();
        let renamed = c.rename(s1.log, "Budget", 5_000).await.map_err(e)?;
        ensure(
            renamed.name == "Budget" && renamed.updated_ms == 5_000,
            "rename",
        )?;
        c.touch(s1.log, 4_000).await.map_err(e)?;
        c.touch(s1.log, 6_000).await.map_err(e)?;
        ensure(
            c.sheet(s1.log).await.map_err(e)?.map(|s| s.updated_ms) == Some(6_000),
            "a stamp moves the sheet's time forward, never back",
        )?;
        let l = listed(c, &alice, s1.log).await?;
        ensure(
            l.as_ref()
                .is_some_and(|l| l.sheet.name == "Budget" && l.sheet.updated_ms == 6_000),
            &format!("the listing shows the new name and the sheet's first stamp: {l:?}"),
        )?;
        c.touch(s1.log, 7_000).await.map_err(e)?;
        let l = listed(c, &alice, s1.log).await?;
        ensure(
            l.as_ref().is_some_and(|l| l.sheet.updated_ms == 6_000),
            &format!("the next stamp waits for the interval: {l:?}"),
        )?;
        let due = 6_000 + LISTED_STAMP_INTERVAL_MS;
        c.touch(s1.log, due).await.map_err(e)?;
        let l = listed(c, &alice, s1.log).await?;
        ensure(
            l.as_ref()
                .is_some_and(|l| l.sheet.name == "Budget" && l.sheet.updated_ms == due),
            &format!("a stamp that is due shows in the listing: {l:?}"),
        )?;
        ensure(
            matches!(
                c.rename(LogId::new_random(), "x", 1).await,
                Err(CatalogError::SheetNotFound(_))
            ),
            "renaming an unknown sheet",
        )?;
        Ok(())
    }

    /// Share, change, leave; the last owner stays.
    async fn shares(c: &dyn Catalog, p: &People, s1: &Sheet) -> Result<(), String> {
        let e = |x: CatalogError| x.to_string();
        let alice = p.alice.clone();
        let bob = p.bob.clone();
        // Share, change, leave; the last owner stays.
        c.put_member(s1.log, &member(&bob, Role::Viewer))
            .await
            .map_err(e)?;
        ensure(
            c.role(&bob, s1.log).await.map_err(e)? == Some(Role::Viewer),
            "bob views",
        )?;
        let bobs = c.list_sheets(&bob, 10, None).await.map_err(e)?;
        let now = c.sheet(s1.log).await.map_err(e)?;
        ensure(
            bobs.sheets.len() == 1
                && bobs.sheets[0].role == Role::Viewer
                && Some(&bobs.sheets[0].sheet) == now.as_ref(),
            &format!("a share after a rename lists the sheet as it is now: {bobs:?} {now:?}"),
        )?;
        renames_for_every_member(c, p, s1.log).await?;
        c.put_member(
            s1.log,
            &Member {
                email: None,
                ..member(&bob, Role::Editor)
            },
        )
        .await
        .map_err(e)?;
        let members = c.members(s1.log).await.map_err(e)?;
        ensure(members.len() == 2, "two members")?;
        let b = members.iter().find(|m| m.user_id == bob);
        ensure(
            b.is_some_and(|b| {
                b.role == Role::Editor && b.email.as_deref() == Some(&format!("{bob}@example.com"))
            }),
            &format!("a role change keeps the email: {b:?}"),
        )?;
        ensure(
            matches!(
                c.remove_member(s1.log, &alice).await,
                Err(CatalogError::LastOwner(_))
            ),
            "the last owner cannot leave",
        )?;
        ensure(
            matches!(
                c.put_member(s1.log, &member(&alice, Role::Editor)).await,
                Err(CatalogError::LastOwner(_))
            ),
            "the last owner cannot step down",
        )?;
        c.put_member(s1.log, &member(&bob, Role::Owner))
            .await
            .map_err(e)?;
        c.put_member(s1.log, &member(&alice, Role::Viewer))
            .await
            .map_err(e)?;
        ensure(
            c.role(&alice, s1.log).await.map_err(e)? == Some(Role::Viewer),
            "alice stepped down",
        )?;
        ensure(
            matches!(
                c.remove_member(s1.log, &bob).await,
                Err(CatalogError::LastOwner(_))
            ),
            "bob is now the last owner",
        )?;
        ensure(
            c.remove_member(s1.log, &alice).await.map_err(e)?,
            "alice leaves",
        )?;
        ensure(
            !c.remove_member(s1.log, &alice).await.map_err(e)?,
            "leaving twice",
        )?;
        ensure(
            c.role(&alice, s1.log).await.map_err(e)?.is_none(),
            "alice is gone",
        )?;
        ensure(
            matches!(
                c.put_member(LogId::new_random(), &member(&bob, Role::Viewer))
                    .await,
                Err(CatalogError::SheetNotFound(_))
            ),
            "sharing an unknown sheet",
        )?;
        Ok(())
    }

    /// A rename shows in every member's listing at once, name and time.
    async fn renames_for_every_member(
        c: &dyn Catalog,
        p: &People,
        log: LogId,
    ) -> Result<(), String> {
        let e = |x: CatalogError| x.to_string();
        let at = 2 * LISTED_STAMP_INTERVAL_MS;
        c.rename(log, "Budget 2026", at).await.map_err(e)?;
        for user in [&p.alice, &p.bob] {
            let l = listed(c, user, log).await?;
            ensure(
                l.as_ref()
                    .is_some_and(|l| l.sheet.name == "Budget 2026" && l.sheet.updated_ms == at),
                &format!("{user} lists the new name at once: {l:?}"),
            )?;
        }
        Ok(())
    }

    /// Invitations: apart from members, one per address whatever its case, claimed once.
    async fn invites(c: &dyn Catalog, p: &People, s1: &Sheet) -> Result<(), String> {
        let e = |x: CatalogError| x.to_string();
        let prefix = p.prefix.clone();
        // Invitations: apart from members, one per address whatever its case, claimed once.
        let carol = format!("{prefix}carol");
        let carol_mail = format!("{carol}@Example.com");
        c.invite(s1.log, &invitation(&carol_mail, Role::Viewer))
            .await
            .map_err(e)?;
        c.invite(
            s1.log,
            &invitation(&carol_mail.to_uppercase(), Role::Editor),
        )
        .await
        .map_err(e)?;
        let invs = c.invitations(s1.log).await.map_err(e)?;
        ensure(
            invs.len() == 1 && invs[0].role == Role::Editor,
            &format!("inviting an address again changes its role: {invs:?}"),
        )?;
        ensure(
            c.members(s1.log).await.map_err(e)?.len() == 1,
            "an invitation is no member",
        )?;
        ensure(
            c.role(&carol, s1.log).await.map_err(e)?.is_none(),
            "an invitation grants nothing",
        )?;
        ensure(
            c.invited(&carol_mail.to_lowercase()).await.map_err(e)? == vec![s1.log],
            "the invited address finds the sheet",
        )?;
        let claimed = c
            .claim(s1.log, &carol, &carol_mail.to_lowercase())
            .await
            .map_err(e)?;
        ensure(
            claimed == Some(Role::Editor),
            &format!("claimed: {claimed:?}"),
        )?;
        let members = c.members(s1.log).await.map_err(e)?;
        ensure(
            members.iter().any(|m| {
                m.user_id == carol
                    && m.role == Role::Editor
                    && m.email.as_deref() == Some(&carol_mail.to_lowercase())
            }),
            &format!("the claimer is a member with the address: {members:?}"),
        )?;
        let l = listed(c, &carol, s1.log).await?;
        let now = c.sheet(s1.log).await.map_err(e)?;
        ensure(
            l.as_ref().map(|l| &l.sheet) == now.as_ref(),
            &format!("the claimer lists the sheet as it is now: {l:?} {now:?}"),
        )?;
        ensure(
            c.invitations(s1.log).await.map_err(e)?.is_empty()
                && c.invited(&carol_mail).await.map_err(e)?.is_empty(),
            "a claimed invitation is gone",
        )?;
        ensure(
            c.claim(s1.log, &carol, &carol_mail)
                .await
                .map_err(e)?
                .is_none(),
            "an invitation is claimed once",
        )?;
        let dave_mail = format!("{prefix}dave@example.com");
        c.invite(s1.log, &invitation(&dave_mail, Role::Viewer))
            .await
            .map_err(e)?;
        ensure(
            c.uninvite(s1.log, &dave_mail.to_uppercase())
                .await
                .map_err(e)?,
            "withdrawn",
        )?;
        ensure(
            !c.uninvite(s1.log, &dave_mail).await.map_err(e)?,
            "withdrawn twice",
        )?;
        ensure(
            matches!(
                c.invite(LogId::new_random(), &invitation(&dave_mail, Role::Viewer))
                    .await,
                Err(CatalogError::SheetNotFound(_))
            ),
            "inviting to an unknown sheet",
        )?;
        roster_agrees(c, s1.log).await?;
        Ok(())
    }

    /// The roster is the sheet, its members and its invitations as their own reads give them; an
    /// unknown sheet's is empty.
    async fn roster_agrees(c: &dyn Catalog, log: LogId) -> Result<(), String> {
        let e = |x: CatalogError| x.to_string();
        let mut roster = c.roster(log).await.map_err(e)?;
        let mut members = c.members(log).await.map_err(e)?;
        let mut invitations = c.invitations(log).await.map_err(e)?;
        for m in [&mut roster.members, &mut members] {
            m.sort_by(|a, b| a.user_id.cmp(&b.user_id));
        }
        for i in [&mut roster.invitations, &mut invitations] {
            i.sort_by(|a, b| a.email.cmp(&b.email));
        }
        ensure(
            roster.sheet == c.sheet(log).await.map_err(e)?
                && roster.sheet.is_some()
                && roster.members == members
                && !members.is_empty()
                && roster.invitations == invitations,
            &format!("the roster is the sheet, its members and invitations: {roster:?}"),
        )?;
        let unknown = c.roster(LogId::new_random()).await.map_err(e)?;
        ensure(
            unknown == Roster::default(),
            "an unknown sheet's roster is empty",
        )
    }

    /// The last owner claiming a smaller role keeps ownership; the invitation goes.
    async fn keeps_the_last_owner(c: &dyn Catalog, p: &People, s1: &Sheet) -> Result<(), String> {
        let e = |x: CatalogError| x.to_string();
        let bob = p.bob.clone();
        // The last owner claiming a smaller role keeps ownership; the invitation goes.
        let bob_mail = format!("{bob}@example.com");
        c.invite(s1.log, &invitation(&bob_mail, Role::Viewer))
            .await
            .map_err(e)?;
        let kept = c.claim(s1.log, &bob, &bob_mail).await.map_err(e)?;
        ensure(
            kept == Some(Role::Owner) && c.invitations(s1.log).await.map_err(e)?.is_empty(),
            &format!("the last owner stays owner: {kept:?}"),
        )?;
        Ok(())
    }

    /// Members without a copy of their sheet's name (member items written before names were
    /// copied) are listed with the sheet's name and times, among members with one, and a rename
    /// lists the new name for them as for the others. `strip` makes `user`'s membership of `log`
    /// such a member (it removes the copy from the stored item).
    pub async fn check_uncopied<F, Fut>(
        c: &dyn Catalog,
        prefix: &str,
        strip: F,
    ) -> Result<(), String>
    where
        F: Fn(LogId, String) -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let e = |x: CatalogError| x.to_string();
        let old_user = format!("{prefix}olga");
        let (old, new) = (sheet(&old_user, 2_000), sheet(&old_user, 3_000));
        for s in [&old, &new] {
            c.create_sheet(s, None).await.map_err(e)?;
        }
        c.rename(old.log, "Minutes 2019", 2_500).await.map_err(e)?;
        strip(old.log, old_user.clone()).await?;
        let page = c.list_sheets(&old_user, 10, None).await.map_err(e)?;
        let want = vec![
            c.sheet(new.log).await.map_err(e)?,
            c.sheet(old.log).await.map_err(e)?,
        ];
        let got: Vec<Option<Sheet>> = page.sheets.iter().map(|l| Some(l.sheet.clone())).collect();
        ensure(
            got == want && page.sheets.iter().all(|l| l.role == Role::Owner),
            &format!("a member without a copy lists its sheet's record: {got:?}"),
        )?;
        c.rename(old.log, "Minutes 2020", 2_600).await.map_err(e)?;
        let l = listed(c, &old_user, old.log).await?;
        ensure(
            l.is_some_and(|l| l.sheet.name == "Minutes 2020"),
            "a rename shows for a member without a copy",
        )?;
        for s in [&old, &new] {
            c.delete_sheet(s.log).await.map_err(e)?;
        }
        Ok(())
    }

    /// Delete forgets the sheet, its members and its invitations.
    async fn deletes(c: &dyn Catalog, p: &People, s1: &Sheet) -> Result<(), String> {
        let e = |x: CatalogError| x.to_string();
        let erin_mail = format!("{}erin@example.com", p.prefix);
        let bob = p.bob.clone();
        c.invite(s1.log, &invitation(&erin_mail, Role::Viewer))
            .await
            .map_err(e)?;
        // Delete forgets the sheet, its members and its invitations.
        c.delete_sheet(s1.log).await.map_err(e)?;
        ensure(
            c.invitations(s1.log).await.map_err(e)?.is_empty()
                && c.invited(&erin_mail).await.map_err(e)?.is_empty(),
            "no invitation left",
        )?;
        ensure(c.sheet(s1.log).await.map_err(e)?.is_none(), "deleted")?;
        ensure(
            c.role(&bob, s1.log).await.map_err(e)?.is_none(),
            "no member left",
        )?;
        ensure(
            c.list_sheets(&bob, 10, None)
                .await
                .map_err(e)?
                .sheets
                .is_empty(),
            "bob lists nothing",
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_order_by_what_they_allow_and_parse_back() {
        assert!(Role::Viewer < Role::Editor && Role::Editor < Role::Owner);
        for r in [Role::Viewer, Role::Editor, Role::Owner] {
            assert_eq!(r.as_str().parse::<Role>(), Ok(r));
        }
        assert!("admin".parse::<Role>().is_err());
    }

    #[test]
    fn listing_keys_sort_by_time_and_parse_back() {
        let a = LogId::new_random();
        let b = LogId::new_random();
        assert!(listing_key(999, a) < listing_key(1000, b));
        assert_eq!(parse_listing_key(&listing_key(1000, b)), Some((1000, b)));
        for bad in ["", "1.x", "000000000001000", "00000000000100x.abc"] {
            assert_eq!(parse_listing_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(clean_name("  Budget ").as_deref(), Ok("Budget"));
        assert!(clean_name("   ").is_err());
        assert!(clean_name(&"x".repeat(201)).is_err());
        assert!(clean_name("a\nb").is_err());
    }

    #[tokio::test]
    async fn the_memory_catalog_keeps_the_rules() {
        let c = crate::memory::MemCatalog::new();
        if let Err(e) = conformance::check(&c, "t-").await {
            panic!("{e}");
        }
    }

    #[tokio::test]
    async fn the_memory_catalog_lists_members_without_a_copy() {
        let c = crate::memory::MemCatalog::new();
        let strip = |log, user: String| {
            let c = &c;
            async move { c.drop_copy(log, &user).map_err(|e| e.to_string()) }
        };
        if let Err(e) = conformance::check_uncopied(&c, "t-", strip).await {
            panic!("{e}");
        }
    }
}
