//! Invitations (issue 41; `docs/api.md`, "Sharing by email"). A share by email never asks the
//! user pool: it stores an invitation, which the members list shows the same way for every
//! address, so sharing cannot tell an owner who has an account. The invitation becomes a
//! membership when someone signed in with that address, verified by the pool, claims it:
//!
//! - [`claim_mine`] — listing one's sheets (the first page) claims every invitation to one's
//!   address;
//! - [`claim_on_refusal`] — a request the catalog would refuse (not a member, or a role too
//!   small) first claims the caller's invitation to that sheet, if the sheet has one: opening a
//!   shared link works at once.
//!
//! Owners withdraw an invitation with [`remove_invitation`]; sharing the address again changes
//! its role.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use sheetlog_core::LogId;
use sheetlog_core::catalog::{Catalog, Listed, Role, SheetPage, invitation_key, listing_key};

use crate::error::ApiError;
use crate::request::parse_log_id;
use crate::state::{AppState, SharedState};

/// Longest email a share takes, in bytes (the longest address SMTP carries).
pub const MAX_EMAIL_BYTES: usize = 254;

/// One invitation of a sheet, addressed by its email.
pub const INVITATION_ROUTE: &str = "/logs/{log_id}/invitations/{email}";

/// Claims every invitation to `user`'s verified address; the sheets joined, with the role now
/// held. A pool that cannot be asked (throttled, unreachable) claims nothing this time: the
/// listing still answers, and the next one tries again.
pub async fn claim_mine(
    state: &AppState,
    catalog: &dyn Catalog,
    user: &str,
) -> Result<Vec<Listed>, ApiError> {
    let email = match state.verified_email(user).await {
        Ok(Some(email)) => email,
        Ok(None) => return Ok(Vec::new()),
        Err(e) => {
            tracing::warn!(error = %e, "invitations not claimed: the user pool could not be asked");
            return Ok(Vec::new());
        }
    };
    let logs = catalog
        .invited(&email)
        .await
        .map_err(ApiError::from_catalog)?;
    let mut joined = Vec::new();
    for log in logs {
        let Some(role) = catalog
            .claim(log, user, &email)
            .await
            .map_err(ApiError::from_catalog)?
        else {
            continue;
        };
        state.forget_role(user, log);
        if let Some(sheet) = catalog.sheet(log).await.map_err(ApiError::from_catalog)? {
            tracing::info!(log = %log, role = %role, "invitation claimed by listing");
            joined.push(Listed { sheet, role });
        }
    }
    Ok(joined)
}

/// Claims `user`'s invitation to `log` when the sheet has one for their verified address: the
/// role held after, or `None`. Costs one strongly consistent Query of the sheet's invitations
/// (none, for most sheets) and asks the pool only when there are some.
pub async fn claim_on_refusal(
    state: &AppState,
    user: &str,
    log: LogId,
) -> Result<Option<Role>, ApiError> {
    let Some(catalog) = state.catalog.as_deref() else {
        return Ok(None);
    };
    let invitations = catalog
        .invitations(log)
        .await
        .map_err(ApiError::from_catalog)?;
    if invitations.is_empty() {
        return Ok(None);
    }
    let Some(email) = state
        .verified_email(user)
        .await
        .map_err(ApiError::from_directory)?
    else {
        return Ok(None);
    };
    let key = invitation_key(&email);
    if !invitations.iter().any(|i| invitation_key(&i.email) == key) {
        return Ok(None);
    }
    let role = catalog
        .claim(log, user, &email)
        .await
        .map_err(ApiError::from_catalog)?;
    state.forget_role(user, log);
    if let Some(role) = role {
        tracing::info!(log = %log, role = %role, "invitation claimed on opening the sheet");
    }
    Ok(role)
}

/// Adds the sheets `joined` by claims to the first page of a listing where they belong (newest
/// first), so a person sees a sheet they just joined although the listing index may not show
/// its membership yet. A sheet older than the page's last one is left to the later page that
/// lists it; a page past its `limit` gives its last sheets to the next page (the cursor moves).
pub fn merge_joined(page: &mut SheetPage, joined: Vec<Listed>, limit: usize) {
    let key = |l: &Listed| listing_key(l.sheet.created_ms, l.sheet.log);
    for l in joined {
        if page.sheets.iter().any(|s| s.sheet.log == l.sheet.log) {
            continue;
        }
        if page.cursor.as_deref().is_some_and(|c| key(&l).as_str() < c) {
            continue;
        }
        page.sheets.push(l);
    }
    page.sheets.sort_by_key(|l| std::cmp::Reverse(key(l)));
    if page.sheets.len() > limit {
        page.sheets.truncate(limit);
        page.cursor = page.sheets.last().map(key);
    }
}

/// Withdraws an invitation (owners).
#[utoipa::path(delete, path = "/logs/{logId}/invitations/{email}",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("email" = String, Path, description = "the invited address (any case)")),
    responses((status = 204, description = "withdrawn"),
        (status = 400, body = crate::dto::ErrorResponse),
        (status = 403, body = crate::dto::ErrorResponse),
        (status = 404, body = crate::dto::ErrorResponse, description = "`invitation-not-found`")))]
pub async fn remove_invitation(
    State(state): State<SharedState>,
    Path((log_id, email)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let log = parse_log_id(&log_id)?;
    let catalog = state.require_catalog()?;
    if email.len() > MAX_EMAIL_BYTES {
        return Err(ApiError::InvalidEntry(format!(
            "email is at most {MAX_EMAIL_BYTES} bytes (got {})",
            email.len()
        )));
    }
    if catalog
        .uninvite(log, &email)
        .await
        .map_err(ApiError::from_catalog)?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::InvitationNotFound(email))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sheetlog_core::catalog::Sheet;

    fn listed(created_ms: i64) -> Listed {
        Listed {
            sheet: Sheet {
                log: LogId::new_random(),
                name: format!("s{created_ms}"),
                owner: "o".into(),
                created_ms,
                updated_ms: created_ms,
            },
            role: Role::Viewer,
        }
    }

    fn times(page: &SheetPage) -> Vec<i64> {
        page.sheets.iter().map(|l| l.sheet.created_ms).collect()
    }

    #[test]
    fn joined_sheets_go_where_they_belong_in_the_first_page() {
        // A complete listing takes every joined sheet, newest first.
        let mut page = SheetPage {
            sheets: vec![listed(30), listed(10)],
            cursor: None,
        };
        merge_joined(&mut page, vec![listed(20), listed(5)], 10);
        assert_eq!(times(&page), [30, 20, 10, 5]);
        assert_eq!(page.cursor, None);

        // A full page: an older joined sheet waits for its page; a newer one pushes the last
        // sheet to the next page, and the cursor follows.
        let (a, b) = (listed(30), listed(20));
        let mut page = SheetPage {
            cursor: Some(listing_key(b.sheet.created_ms, b.sheet.log)),
            sheets: vec![a, b],
        };
        let newer = listed(25);
        let dup = page.sheets[0].clone();
        merge_joined(&mut page, vec![listed(5), newer.clone(), dup], 2);
        assert_eq!(times(&page), [30, 25]);
        assert_eq!(
            page.cursor,
            Some(listing_key(newer.sheet.created_ms, newer.sheet.log))
        );
    }
}
