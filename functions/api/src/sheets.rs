//! The catalog routes (Cognito authorization, issue 31): who am I, my sheets, rename, members.
//! The middleware (`access.rs`) has checked the caller's role before any of these runs; the
//! handlers check only what depends on the request (removing someone else needs the owner role).
//! `GET /config.json` tells the web page how to sign in.

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sheetlog_core::LogId;
use sheetlog_core::catalog::{
    self, Catalog, Invitation, Listed, MAX_PAGE, Member, Role, invitation_key,
};
use time::format_description::well_known::Rfc3339;
use utoipa::ToSchema;

use crate::access::Caller;
use crate::dto::ErrorResponse;
use crate::error::ApiError;
use crate::request::{ApiResult, parse_body, parse_log_id, reject_unknown_params};
use crate::state::{SharedState, now_ms};

/// Longest user id a member route takes, in bytes (a Cognito `sub` is 36; the catalog keys
/// members by it, and DynamoDB refuses a sort key over 1 KiB).
pub const MAX_USER_ID_BYTES: usize = 128;
pub use crate::invitations::MAX_EMAIL_BYTES;

/// `GET /config.json`: how the page signs in.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientConfig {
    /// `none`, `iam`, `jwt` or `cognito`.
    pub auth: String,
    /// The user pool, under Cognito authorization.
    pub cognito: Option<CognitoClientConfig>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CognitoClientConfig {
    pub region: String,
    pub user_pool_id: String,
    pub client_id: String,
    pub endpoint: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub user_id: String,
    pub email: Option<String>,
}

/// A sheet as its members see it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SheetDto {
    pub log_id: String,
    pub name: String,
    /// The caller's role: `viewer`, `editor` or `owner`.
    pub role: String,
    /// The user id of who created it.
    pub owner: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339: the last rename or write. In `GET /sheets`, the caller's copy of it, which a
    /// write moves on at most once per 10 minutes per sheet (`docs/storage.md`, "Catalog").
    pub updated_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SheetList {
    /// Newest first (by creation).
    pub sheets: Vec<SheetDto>,
    /// Pass as `cursor` for the next page; `null` at the end.
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenameRequest {
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberDto {
    pub user_id: String,
    pub email: Option<String>,
    pub role: String,
}

/// A share by email not yet claimed (`docs/api.md`, "Sharing by email"): listed the same
/// whether or not anyone signs in with the address.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InvitationDto {
    pub email: String,
    pub role: String,
    /// RFC 3339: when it was made or its role last changed.
    pub invited_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MemberList {
    /// The sheet's name (absent for a sheet not in the catalog).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub members: Vec<MemberDto>,
    /// Shares by email that nobody has claimed yet.
    pub invitations: Vec<InvitationDto>,
}

/// `POST /logs/{logId}/members`: who (an email in the user pool, or a user id) and the role.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddMemberRequest {
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub user_id: Option<String>,
    /// `viewer`, `editor` or `owner`.
    pub role: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleRequest {
    pub role: String,
}

pub(crate) fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

pub fn sheet_dto(l: &Listed) -> SheetDto {
    SheetDto {
        log_id: l.sheet.log.to_string(),
        name: l.sheet.name.clone(),
        role: l.role.to_string(),
        owner: l.sheet.owner.clone(),
        created_at: rfc3339(l.sheet.created_ms),
        updated_at: rfc3339(l.sheet.updated_ms),
    }
}

fn member_dto(m: &Member) -> MemberDto {
    MemberDto {
        user_id: m.user_id.clone(),
        email: m.email.clone(),
        role: m.role.to_string(),
    }
}

fn subject(caller: &Option<axum::Extension<Caller>>, need: &'static str) -> ApiResult<String> {
    caller
        .as_ref()
        .and_then(|c| c.0.subject.clone())
        .ok_or(ApiError::NotMember { need })
}

/// Refuses a `what` (a user id, an email) longer than `limit` bytes before it reaches the
/// catalog or the user pool, which would fail it as an internal error.
fn check_len<'a>(what: &str, value: &'a str, limit: usize) -> ApiResult<&'a str> {
    if value.len() > limit {
        return Err(ApiError::InvalidEntry(format!(
            "{what} is at most {limit} bytes (got {})",
            value.len()
        )));
    }
    Ok(value)
}

fn parse_role(raw: &str) -> ApiResult<Role> {
    raw.parse().map_err(ApiError::InvalidEntry)
}

/// How the web page signs in on this stack.
#[utoipa::path(get, path = "/config.json", responses((status = 200, body = ClientConfig)))]
pub async fn config_json(State(state): State<SharedState>) -> Json<ClientConfig> {
    Json(ClientConfig {
        auth: state.cfg.effective_auth_mode().as_str().into(),
        cognito: state.cfg.cognito.as_ref().map(|c| CognitoClientConfig {
            region: c.region.clone(),
            user_pool_id: c.user_pool_id.clone(),
            client_id: c.client_id.clone(),
            endpoint: c.endpoint.clone(),
        }),
    })
}

/// The signed-in user: the token's `sub`, and the email the user pool holds for it.
#[utoipa::path(get, path = "/me",
    responses((status = 200, body = Me), (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse, description = "`no-catalog`: not Cognito authorization")))]
pub async fn me(
    State(state): State<SharedState>,
    caller: Option<axum::Extension<Caller>>,
) -> ApiResult<Json<Me>> {
    state.require_catalog()?;
    let user_id = subject(&caller, "sign-in")?;
    let email = match &state.users {
        Some(users) => users
            .by_id(&user_id)
            .await
            .map_err(ApiError::from_directory)?
            .and_then(|u| u.email),
        None => None,
    };
    Ok(Json(Me { user_id, email }))
}

/// The sheets shared with the caller (its own included), newest first, a page at a time. The
/// first page first claims the invitations to the caller's verified email.
#[utoipa::path(get, path = "/sheets",
    params(("limit" = Option<u32>, Query, description = "sheets per page, 1 to 100 (default 50)"),
        ("cursor" = Option<String>, Query, description = "the previous page's `cursor`")),
    responses((status = 200, body = SheetList), (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub async fn list_sheets(
    State(state): State<SharedState>,
    caller: Option<axum::Extension<Caller>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<SheetList>> {
    let catalog = state.require_catalog()?;
    let user = subject(&caller, "sign-in")?;
    reject_unknown_params(&q, &["limit", "cursor"])?;
    let limit = match q.get("limit") {
        None => 50,
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
            _ => {
                return Err(ApiError::InvalidQuery(format!(
                    "limit {l:?} must be a number from 1 to {MAX_PAGE}"
                )));
            }
        },
    };
    let cursor = q.get("cursor").map(String::as_str);
    // The first page claims the caller's invitations (`invitations.rs`) and shows the sheets
    // joined, which the listing index may not show yet.
    let joined = match cursor {
        None => crate::invitations::claim_mine(&state, catalog, &user).await?,
        Some(_) => Vec::new(),
    };
    let mut page = catalog
        .list_sheets(&user, limit, cursor)
        .await
        .map_err(ApiError::from_catalog)?;
    crate::invitations::merge_joined(&mut page, joined, limit);
    Ok(Json(SheetList {
        sheets: page.sheets.iter().map(sheet_dto).collect(),
        cursor: page.cursor,
    }))
}

/// Renames a sheet (editors and owners).
#[utoipa::path(patch, path = "/logs/{logId}",
    params(("logId" = String, Path, description = "the log's UUID")),
    request_body = RenameRequest,
    responses((status = 200, body = SheetDto), (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub async fn rename(
    State(state): State<SharedState>,
    caller: Option<axum::Extension<Caller>>,
    Path(log_id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<SheetDto>> {
    let log = parse_log_id(&log_id)?;
    let catalog = state.require_catalog()?;
    let user = subject(&caller, "write")?;
    let req: RenameRequest = parse_body(body, state.cfg.max_request_bytes)?;
    let name = catalog::clean_name(&req.name).map_err(ApiError::InvalidEntry)?;
    let sheet = catalog
        .rename(log, &name, now_ms())
        .await
        .map_err(ApiError::from_catalog)?;
    let role = state
        .role(&user, log, Role::Viewer)
        .await
        .map_err(ApiError::from_catalog)?
        .unwrap_or(Role::Editor);
    Ok(Json(sheet_dto(&Listed { sheet, role })))
}

/// The sheet's members (any member may see them).
#[utoipa::path(get, path = "/logs/{logId}/members",
    params(("logId" = String, Path, description = "the log's UUID")),
    responses((status = 200, body = MemberList), (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub async fn members(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
) -> ApiResult<Json<MemberList>> {
    let log = parse_log_id(&log_id)?;
    let catalog = state.require_catalog()?;
    // One Query of the sheet's partition: its name, members and invitations.
    let roster = catalog.roster(log).await.map_err(ApiError::from_catalog)?;
    Ok(Json(MemberList {
        name: roster.sheet.map(|s| s.name),
        members: roster.members.iter().map(member_dto).collect(),
        invitations: roster
            .invitations
            .iter()
            .map(|i| InvitationDto {
                email: i.email.clone(),
                role: i.role.to_string(),
                invited_at: rfc3339(i.invited_ms),
            })
            .collect(),
    }))
}

/// The answer to sharing by email: the same whether or not anyone signs in with the address
/// (`docs/api.md`, "Sharing by email").
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShareAccepted {
    /// The address as given (trimmed).
    pub email: String,
    /// `viewer`, `editor` or `owner`.
    pub role: String,
}

/// Shares the sheet (owners): with a person by the email they sign in with, or by user id.
/// Sharing with a member again changes their role. By email the answer is `202` and an
/// invitation, the same whether or not the address has an account in the user pool (no user
/// id, and the pool is not asked), so sharing cannot tell who has an account; whoever signs in
/// with the address (verified) claims it by listing their sheets or opening this one.
#[utoipa::path(post, path = "/logs/{logId}/members",
    params(("logId" = String, Path, description = "the log's UUID")),
    request_body = AddMemberRequest,
    responses((status = 200, body = MemberDto, description = "by user id: the member"),
        (status = 202, body = ShareAccepted, description = "by email: an invitation, the same answer whether or not anyone signs in with the address; it becomes a membership when the person who does claims it"),
        (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse),
        (status = 409, body = ErrorResponse, description = "`last-owner`: the sheet would have no owner; `too-many-members`: it has 1,000 members and invitations already")))]
pub async fn add_member(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let log = parse_log_id(&log_id)?;
    let catalog = state.require_catalog()?;
    let req: AddMemberRequest = parse_body(body, state.cfg.max_request_bytes)?;
    let role = parse_role(&req.role)?;
    match (&req.email, &req.user_id) {
        (Some(email), None) => {
            let email = check_len("email", email.trim(), MAX_EMAIL_BYTES)?;
            if email.is_empty() {
                return Err(ApiError::InvalidEntry("email is empty".into()));
            }
            share_by_email(&state, catalog, log, email, role).await?;
            let answer = ShareAccepted {
                email: email.to_owned(),
                role: role.to_string(),
            };
            Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
        }
        (None, Some(user_id)) if !user_id.trim().is_empty() => {
            let member = Member {
                user_id: check_len("userId", user_id.trim(), MAX_USER_ID_BYTES)?.to_owned(),
                email: None,
                role,
            };
            let members = catalog.members(log).await.map_err(ApiError::from_catalog)?;
            Ok(put(&state, catalog, log, &members, member, false)
                .await?
                .into_response())
        }
        _ => Err(ApiError::InvalidEntry(
            "give exactly one of email and userId".into(),
        )),
    }
}

/// Shares by email: a member listed with this address gets the new role at once (the list
/// shows them already); anyone else gets an invitation, listed as such whether or not the
/// address has an account. The user pool is not asked, so neither the answer, nor its time, nor
/// the members list afterwards tells who has an account. Members and invitations together are
/// at most `max_members`.
async fn share_by_email(
    state: &SharedState,
    catalog: &dyn Catalog,
    log: LogId,
    email: &str,
    role: Role,
) -> ApiResult<()> {
    let members = catalog.members(log).await.map_err(ApiError::from_catalog)?;
    let key = invitation_key(email);
    let same = |m: &&Member| m.email.as_deref().is_some_and(|e| invitation_key(e) == key);
    if let Some(known) = members.iter().find(same) {
        let member = Member {
            user_id: known.user_id.clone(),
            email: None,
            role,
        };
        return put(state, catalog, log, &members, member, true)
            .await
            .map(drop);
    }
    let invitations = catalog
        .invitations(log)
        .await
        .map_err(ApiError::from_catalog)?;
    let again = invitations.iter().any(|i| invitation_key(&i.email) == key);
    if !again && members.len() + invitations.len() >= state.cfg.max_members {
        let limit = state.cfg.max_members;
        return Err(ApiError::TooManyMembers { limit });
    }
    let invitation = Invitation {
        email: email.to_owned(),
        role,
        invited_ms: now_ms(),
    };
    catalog
        .invite(log, &invitation)
        .await
        .map_err(ApiError::from_catalog)
}

/// Adds or changes `member` (a member already, when `existing`): the sheet's `members` (read by
/// the caller) keep it within `max_members` and answer the member as stored; then the write.
async fn put(
    state: &SharedState,
    catalog: &dyn Catalog,
    log: LogId,
    members: &[Member],
    member: Member,
    existing: bool,
) -> ApiResult<Json<MemberDto>> {
    let before = members.iter().find(|m| m.user_id == member.user_id);
    match before {
        None if existing => return Err(ApiError::MemberNotFound(member.user_id)),
        None if members.len() >= state.cfg.max_members => {
            let limit = state.cfg.max_members;
            return Err(ApiError::TooManyMembers { limit });
        }
        _ => {}
    }
    catalog
        .put_member(log, &member)
        .await
        .map_err(ApiError::from_catalog)?;
    state.forget_role(&member.user_id, log);
    members_changed(state, log).await;
    // The catalog keeps the email it had when the change gives none.
    let stored = Member {
        email: member
            .email
            .clone()
            .or_else(|| before.and_then(|m| m.email.clone())),
        ..member
    };
    Ok(Json(member_dto(&stored)))
}

/// Changes a member's role (owners).
#[utoipa::path(put, path = "/logs/{logId}/members/{userId}",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("userId" = String, Path, description = "the member's user id")),
    request_body = RoleRequest,
    responses((status = 200, body = MemberDto), (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse, description = "`member-not-found`"),
        (status = 409, body = ErrorResponse, description = "`last-owner`")))]
pub async fn set_role(
    State(state): State<SharedState>,
    Path((log_id, user_id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<MemberDto>> {
    let log = parse_log_id(&log_id)?;
    let catalog = state.require_catalog()?;
    let req: RoleRequest = parse_body(body, state.cfg.max_request_bytes)?;
    let role = parse_role(&req.role)?;
    check_len("userId", &user_id, MAX_USER_ID_BYTES)?;
    let member = Member {
        user_id,
        email: None,
        role,
    };
    let members = catalog.members(log).await.map_err(ApiError::from_catalog)?;
    put(&state, catalog, log, &members, member, true).await
}

/// Removes a member: owners remove anyone, any member removes themselves (leaves).
#[utoipa::path(delete, path = "/logs/{logId}/members/{userId}",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("userId" = String, Path, description = "the member's user id")),
    responses((status = 204, description = "removed"), (status = 400, body = ErrorResponse),
        (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse, description = "`member-not-found`"),
        (status = 409, body = ErrorResponse, description = "`last-owner`")))]
pub async fn remove_member(
    State(state): State<SharedState>,
    caller: Option<axum::Extension<Caller>>,
    Path((log_id, user_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let log = parse_log_id(&log_id)?;
    let catalog = state.require_catalog()?;
    check_len("userId", &user_id, MAX_USER_ID_BYTES)?;
    let me = subject(&caller, "share")?;
    if me != user_id {
        let caller = caller
            .map(|c| c.0)
            .ok_or(ApiError::NotMember { need: "share" })?;
        crate::access::check(
            &state,
            &caller,
            crate::access::Need::Share,
            Some(*log.as_uuid()),
        )
        .await?;
    }
    let removed = catalog
        .remove_member(log, &user_id)
        .await
        .map_err(ApiError::from_catalog)?;
    state.forget_role(&user_id, log);
    if removed {
        members_changed(&state, log).await;
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::MemberNotFound(user_id))
    }
}

/// Tells the sheet's open pages that its members changed (a poke on its channel), so a member
/// whose role changed sees it at once, not at the page's next poll.
async fn members_changed(state: &SharedState, log: LogId) {
    if let Some(poker) = &state.poker {
        poker.members_changed(log).await;
    }
}
