//! Per-log access under JWT authorization (`docs/api.md`, "Access to logs").
//!
//! API Gateway's JWT authorizer proves who the caller is; which logs the caller may use is in one
//! claim of the token (`SHEETLOG_ACCESS_CLAIM`, `sheetlog_logs` by default), written by whoever
//! issues the tokens: the customer's app, which knows who may open which sheet. The claim is a
//! list of grants, separated by spaces or commas (or a JSON array, which API Gateway hands to the
//! function as `[a b c]`):
//!
//! - `<logId>` or `<logId>:write`: read and write that log;
//! - `<logId>:read`: read it only;
//! - `*` / `*:read`: every log (a service token);
//! - `create`: create logs (`POST /logs`; a fork also needs read access to its source).
//!
//! A grant's level is what follows its last `:`; the rest is the target, `*` or a log id in its
//! hyphenated form (any case). Anything else (`*:x:read`, `:read`, `<logId>:READ`, a braced or
//! URN id) grants nothing. The poke channel's onSubscribe handler reads grants by the same
//! grammar; `cdk/test/fixtures/grants.json` is the one table of cases both are tested against.
//!
//! The check runs before a handler touches storage and depends on the token alone, so a caller
//! without a grant gets the same 403 for a log that exists and one that does not: the answer says
//! nothing about which ids exist. A caller with a grant for an id that does not exist gets the
//! usual 404. With IAM authorization (the default) there is no token: IAM policies on the API
//! decide who may call it at all, and every caller may use every log.
//!
//! Under Cognito authorization (`SHEETLOG_AUTH_MODE=cognito`) the caller is the token's `sub`
//! and what it may do is its role in the catalog ([`check`], `docs/api.md`, "Sign-in and
//! sharing"): viewer reads, editor writes, owner shares and deletes. A role read from the
//! catalog is cached per instance for `SHEETLOG_CATALOG_CACHE_SECS` and trusted only to allow,
//! so a removal takes effect within that time and a new share at once.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use sheetlog_core::catalog::Role;

use crate::error::ApiError;
use crate::state::{AppState, SharedState};

/// The claim read when none is configured.
pub const DEFAULT_ACCESS_CLAIM: &str = "sheetlog_logs";

/// What a route needs of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Read,
    Write,
    Create,
    /// Deleting a log: a write grant on it and being its creator, or the `*` write grant. The
    /// middleware checks the write grant; the handler, which reads the creator, the rest.
    /// Under Cognito authorization: the owner role.
    Delete,
    /// Changing who may use a sheet (members routes): the owner role under Cognito
    /// authorization; a write grant under JWT authorization (where these routes have no catalog).
    Share,
    /// Any proven identity, no log (`GET /me`, `GET /sheets`).
    SignedIn,
}

impl Need {
    pub fn name(self) -> &'static str {
        match self {
            Need::Read => "read",
            Need::Write => "write",
            Need::Create => "create",
            Need::Delete => "delete",
            Need::Share => "share",
            Need::SignedIn => "sign-in",
        }
    }

    /// The catalog role a need takes (Cognito authorization).
    pub fn role(self) -> Role {
        match self {
            Need::Read | Need::SignedIn | Need::Create => Role::Viewer,
            Need::Write => Role::Editor,
            Need::Delete | Need::Share => Role::Owner,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Read,
    Write,
}

/// The grants of one token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    every_log: Option<Level>,
    logs: HashMap<Uuid, Level>,
    create: bool,
}

impl Grants {
    /// Parses a claim's value. Entries that are not grants (a misspelt id, an unknown level) grant
    /// nothing; they are logged once per request so a token issuer can see its mistake.
    pub fn parse(raw: &str) -> Self {
        let inner = raw.trim();
        let inner = inner
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or(inner);
        let mut grants = Grants::default();
        for item in inner
            .split(|c: char| c.is_whitespace() || c == ',')
            .map(|s| s.trim_matches('"'))
            .filter(|s| !s.is_empty())
        {
            if item == "create" {
                grants.create = true;
                continue;
            }
            let (target, level) = match item.rsplit_once(':') {
                Some((t, "read")) => (t, Level::Read),
                Some((t, "write")) => (t, Level::Write),
                Some(_) => {
                    tracing::warn!(
                        grant = item,
                        "ignoring an access grant with an unknown level"
                    );
                    continue;
                }
                None => (item, Level::Write),
            };
            if target == "*" {
                grants.every_log = grants.every_log.max(Some(level));
            } else if let Some(id) = log_target(target) {
                let slot = grants.logs.entry(id).or_insert(level);
                *slot = (*slot).max(level);
            } else {
                tracing::warn!(grant = item, "ignoring an access grant that names no log");
            }
        }
        grants
    }

    /// Whether these grants allow `need` on `log` (ignored for [`Need::Create`]).
    pub fn allows(&self, need: Need, log: Option<Uuid>) -> bool {
        let level = match need {
            Need::Create => return self.create || self.every_log == Some(Level::Write),
            Need::SignedIn => return true,
            Need::Read => Level::Read,
            Need::Write | Need::Delete | Need::Share => Level::Write,
        };
        let on_log = log.and_then(|id| self.logs.get(&id).copied());
        self.every_log.max(on_log).is_some_and(|l| l >= level)
    }
}

/// A log id as a grant or a poke channel names it: a UUID in its hyphenated form (36
/// characters, any case). The other forms `Uuid::parse_str` reads (simple, braced, URN) are no
/// grant: the poke channel's onSubscribe handler compares the grant with the channel's text, so
/// both sides read one form (`cdk/test/fixtures/grants.json` is the table both must pass).
pub fn log_target(target: &str) -> Option<Uuid> {
    if target.len() != 36 {
        return None;
    }
    Uuid::try_parse(target).ok()
}

/// What a request may do: everything (IAM authorization, the local stack) or what its token grants.
#[derive(Debug, Clone)]
pub enum Access {
    Unrestricted,
    Token {
        claim: String,
        grants: Grants,
    },
    /// Cognito authorization: what the caller (its `subject`) may do is its role in the
    /// catalog, read per request ([`check`]).
    Member,
}

/// Who sent a request and what it may do.
#[derive(Debug, Clone)]
pub struct Caller {
    pub access: Access,
    /// Who the caller is, as API Gateway proved it: the token's `sub` claim under JWT
    /// authorization, the calling principal's ARN under IAM authorization; `None` when nothing
    /// proved an identity (the local stack without `--auth jwt`). Sync client groups belong to it.
    pub subject: Option<String>,
}

impl Caller {
    /// A caller that may use every log, with no proven identity.
    pub fn unrestricted() -> Self {
        Self {
            access: Access::Unrestricted,
            subject: None,
        }
    }

    /// Whether the caller may delete a log created by `creator`: any caller without a token
    /// (IAM authorization, the local stack), a token with the `*` write grant, or the creator
    /// itself (its proven subject; it also holds a write grant, checked before the handler).
    pub fn may_delete(&self, creator: Option<&str>) -> bool {
        match &self.access {
            // The middleware required the owner role before the handler ran.
            Access::Unrestricted | Access::Member => true,
            Access::Token { grants, .. } => {
                grants.every_log == Some(Level::Write)
                    || (self.subject.is_some() && self.subject.as_deref() == creator)
            }
        }
    }

    /// The error for a caller that may not delete a log.
    pub fn delete_forbidden(&self) -> ApiError {
        let claim = match &self.access {
            Access::Token { claim, .. } => claim.clone(),
            Access::Unrestricted | Access::Member => String::new(),
        };
        ApiError::Forbidden {
            need: Need::Delete.name(),
            claim,
        }
    }

    /// Checks one need; the error says which grant is missing and nothing about the log.
    pub fn require(&self, need: Need, log: Option<Uuid>) -> Result<(), ApiError> {
        match &self.access {
            Access::Unrestricted => Ok(()),
            Access::Token { grants, .. } if grants.allows(need, log) => Ok(()),
            Access::Token { claim, .. } => Err(ApiError::Forbidden {
                need: need.name(),
                claim: claim.clone(),
            }),
            // Needs the catalog: see [`check`].
            Access::Member => Err(ApiError::NotMember { need: need.name() }),
        }
    }
}

/// Checks one need of `caller` on `log` (or on no log), reading the catalog under Cognito
/// authorization: a non-member, or a member whose role is too small, gets the same 403 whether
/// or not the sheet exists.
pub async fn check(
    state: &AppState,
    caller: &Caller,
    need: Need,
    log: Option<Uuid>,
) -> Result<(), ApiError> {
    if !matches!(caller.access, Access::Member) {
        return caller.require(need, log);
    }
    let Some(subject) = caller.subject.as_deref() else {
        return Err(ApiError::NotMember { need: need.name() });
    };
    let Some(log) = log else {
        // Creating a sheet, listing mine, who am I: any signed-in user.
        return Ok(());
    };
    let log = sheetlog_core::LogId::from_uuid(log);
    match state.role(subject, log, need.role()).await {
        Ok(Some(role)) if role >= need.role() => Ok(()),
        // Refused, unless the caller holds an invitation to the sheet that grants enough.
        Ok(_) => match crate::invitations::claim_on_refusal(state, subject, log).await? {
            Some(role) if role >= need.role() => Ok(()),
            _ => Err(ApiError::NotMember { need: need.name() }),
        },
        Err(e) => Err(ApiError::from_catalog(e)),
    }
}

/// Whether `caller` may repeat the delete of a deleted sheet that the catalog no longer lists
/// (Cognito authorization): it was an owner when the delete finished, or it created the sheet.
/// A late writer or snapshot build can leave items after a delete finished; repeating it
/// removes them, and the catalog's members went with the first complete delete.
async fn former_owner(state: &AppState, caller: &Caller, log: Uuid) -> Result<bool, ApiError> {
    let Some(subject) = caller.subject.as_deref() else {
        return Ok(false);
    };
    let meta = state
        .purge
        .log_meta(sheetlog_core::LogId::from_uuid(log))
        .await
        .map_err(ApiError::from_store)?;
    Ok(meta.is_some_and(|m| {
        m.deleted.is_some()
            && (m.creator.as_deref() == Some(subject) || m.owners.iter().any(|o| o == subject))
    }))
}

/// The authorizer's part of the API Gateway request context `lambda_http` attached, if any. Only
/// API Gateway writes it: it comes from the invocation event, never from the HTTP request.
fn authorizer(
    req: &Request<Body>,
) -> Option<&lambda_http::aws_lambda_events::apigw::ApiGatewayRequestAuthorizer> {
    req.extensions()
        .get::<lambda_http::request::RequestContext>()
        .and_then(|ctx| match ctx {
            lambda_http::request::RequestContext::ApiGatewayV2(c) => c.authorizer.as_ref(),
            #[allow(unreachable_patterns)]
            _ => None,
        })
}

/// The IAM principal a caller's ARN stands for. An assumed role's session ARN
/// (`arn:<partition>:sts::<account>:assumed-role/<role>/<session>`) is the role
/// (`arn:<partition>:iam::<account>:role/<role>`): the session name changes with every
/// credential refresh on EC2, ECS or Lambda, and a caller that keeps its sync client group
/// across refreshes must keep its identity. Any other ARN (an IAM user, a federated user) is
/// itself. Sessions of one role are one caller.
pub fn iam_principal(arn: &str) -> String {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    if let [_arn, partition, "sts", _region, account, resource] = parts[..]
        && let Some(rest) = resource.strip_prefix("assumed-role/")
        && let Some((role, session)) = rest.split_once('/')
        && !role.is_empty()
        && !session.is_empty()
    {
        return format!("arn:{partition}:iam::{account}:role/{role}");
    }
    arn.to_owned()
}

/// The caller of a request: with an access claim configured, the grants in the JWT claims API
/// Gateway passed along (none when the request carries no token claims: then nothing is allowed).
pub fn caller(claim_name: Option<&str>, cognito: bool, req: &Request<Body>) -> Caller {
    let auth = authorizer(req);
    let jwt = auth.and_then(|a| a.jwt.as_ref());
    let subject = match (jwt, auth.and_then(|a| a.iam.as_ref())) {
        (Some(jwt), _) => jwt.claims.get("sub").cloned(),
        (None, Some(iam)) => iam.user_arn.as_deref().map(iam_principal),
        (None, None) => None,
    }
    .filter(|s| !s.is_empty());
    if cognito {
        // Identity is the verified token's `sub`, and only that (an IAM caller is no member).
        return Caller {
            access: Access::Member,
            subject: jwt
                .and_then(|jwt| jwt.claims.get("sub").cloned())
                .filter(|s| !s.is_empty()),
        };
    }
    let Some(name) = claim_name else {
        return Caller {
            access: Access::Unrestricted,
            subject,
        };
    };
    let raw = jwt
        .and_then(|jwt| jwt.claims.get(name))
        .map(String::as_str)
        .unwrap_or("");
    Caller {
        access: Access::Token {
            claim: name.to_owned(),
            grants: Grants::parse(raw),
        },
        subject,
    }
}

/// The members of a sheet, and one member (Cognito authorization).
pub const MEMBERS_ROUTE: &str = "/logs/{log_id}/members";
pub const MEMBER_ROUTE: &str = "/logs/{log_id}/members/{user_id}";

/// Replicache's pull route, which checks for a deleted log itself (`sync::pull`).
pub const PULL_ROUTE: &str = "/logs/{log_id}/replicache/pull";

/// Replicache's push route.
pub const PUSH_ROUTE: &str = "/logs/{log_id}/replicache/push";

/// What a matched route needs, and of which log. The routes API Gateway serves without an
/// authorizer need nothing and never get here ([`crate::open_routes`], checked first).
fn route_need(method: &Method, path: &str) -> Option<Need> {
    match (method, path) {
        (_, "/me" | "/sheets") => Some(Need::SignedIn),
        (&Method::PATCH, "/logs/{log_id}") => Some(Need::Write),
        (&Method::POST, MEMBERS_ROUTE)
        | (&Method::PUT, MEMBER_ROUTE)
        | (&Method::DELETE, crate::invitations::INVITATION_ROUTE) => Some(Need::Share),
        // Any member may leave; the handler lets owners remove others.
        (&Method::DELETE, MEMBER_ROUTE) => Some(Need::Read),
        (&Method::POST, "/logs") => Some(Need::Create),
        (&Method::DELETE, "/logs/{log_id}") => Some(Need::Delete),
        // A pull only reads, although it is a POST (Replicache's protocol).
        (&Method::POST, PULL_ROUTE) => Some(Need::Read),
        // Anything else by its method: only a GET (or HEAD) reads. A route added later without
        // a rule of its own is then at least an editor's, never a viewer's.
        (&Method::GET | &Method::HEAD, _) => Some(Need::Read),
        _ => Some(Need::Write),
    }
}

/// Middleware on every matched route: checks the caller's grant for the route's log before the
/// handler runs, and hands the caller to handlers that check more (a fork's source log).
pub async fn enforce(
    State(state): State<SharedState>,
    matched: MatchedPath,
    params: RawPathParams,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    let cognito = state.cfg.auth_mode == crate::config::AuthMode::Cognito;
    let caller = caller(state.cfg.access_claim.as_deref(), cognito, &req);
    let mut touch = None;
    let mut deleting = None;
    // A route without an authorizer carries no token, so it can need no grant.
    let need = if crate::open_routes::is_open(req.method().as_str(), req.uri().path()) {
        None
    } else {
        route_need(req.method(), matched.as_str())
    };
    if let Some(need) = need {
        let log = params
            .iter()
            .find(|(k, _)| *k == "log_id")
            .map(|(_, v)| v.to_owned());
        // An id that is not a UUID is the handler's 400; it names no log anyone may hold.
        let parsed = log.as_deref().and_then(|l| Uuid::parse_str(l).ok());
        let mut checked = match (need, &log, parsed) {
            (_, Some(_), None) => Ok(()),
            (Need::Create | Need::SignedIn, _, _) => check(&state, &caller, need, None).await,
            (_, _, id) => check(&state, &caller, need, id).await,
        };
        if let (Err(ApiError::NotMember { .. }), Need::Delete, Some(id)) = (&checked, need, parsed)
        {
            match former_owner(&state, &caller, id).await {
                Ok(true) => checked = Ok(()),
                Ok(false) => {}
                Err(e) => checked = Err(e),
            }
        }
        if let Err(e) = checked {
            return e.into_response();
        }
        // A deleted log answers 410 on every route but its DELETE (which finishes the purge).
        // A pull checks for itself, and only when its answer carries something: the check is a
        // strong read (1 RRU), twice what an unchanged pull otherwise costs (docs/sync.md).
        // A queued push may trust this instance's finding of the last second: on a hot sheet
        // every push read the tombstone strongly, and the push is only enqueued (its writer
        // applies it later anyway, so a deletion can always overtake it).
        let pull = matched.as_str() == PULL_ROUTE;
        let queued_push = matched.as_str() == PUSH_ROUTE && state.push_queue.is_some();
        if let (Some(id), false, false) = (parsed, need == Need::Delete, pull) {
            let id = sheetlog_core::LogId::from_uuid(id);
            let live = if queued_push {
                state.check_live_recent(id).await
            } else {
                sheetlog_core::log::purge::check_live(&*state.purge, id).await
            };
            if let Err(e) = live {
                return ApiError::from_log(&id.to_string(), e).into_response();
            }
        }
        if need == Need::Delete {
            deleting = parsed.map(sheetlog_core::LogId::from_uuid);
        }
        if need == Need::Write && req.method() == Method::POST {
            touch = parsed.map(sheetlog_core::LogId::from_uuid);
        }
    }
    req.extensions_mut().insert(caller);
    let resp = next.run(req).await;
    // This instance no longer trusts its last finding that the log is live.
    if let Some(log) = deleting {
        state.set_live(log, false);
    }
    // A write to the sheet moves its last-changed time in the catalog (rate-limited per sheet).
    if let Some(log) = touch
        && resp.status().is_success()
    {
        state.touch(log).await;
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0b5c4a6e-41b5-4f4e-9c57-8a40f9a1c001";
    const B: &str = "0b5c4a6e-41b5-4f4e-9c57-8a40f9a1c002";

    fn id(s: &str) -> Option<Uuid> {
        Uuid::parse_str(s).ok()
    }

    #[test]
    fn a_route_without_its_own_rule_needs_write_unless_it_is_a_get() {
        let unlisted = "/logs/{log_id}/something-new";
        assert_eq!(route_need(&Method::GET, unlisted), Some(Need::Read));
        assert_eq!(route_need(&Method::HEAD, unlisted), Some(Need::Read));
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert_eq!(route_need(&m, unlisted), Some(Need::Write), "{m}");
        }
        // The listed exceptions keep their rules.
        assert_eq!(route_need(&Method::POST, PULL_ROUTE), Some(Need::Read));
        assert_eq!(route_need(&Method::DELETE, MEMBER_ROUTE), Some(Need::Read));
        assert_eq!(route_need(&Method::PUT, MEMBER_ROUTE), Some(Need::Share));
        assert_eq!(
            route_need(&Method::DELETE, "/logs/{log_id}"),
            Some(Need::Delete)
        );
    }

    #[test]
    fn a_bare_id_grants_read_and_write_and_read_grants_read_only() {
        let g = Grants::parse(&format!("{A} {B}:read"));
        assert!(g.allows(Need::Read, id(A)) && g.allows(Need::Write, id(A)));
        assert!(g.allows(Need::Read, id(B)) && !g.allows(Need::Write, id(B)));
        assert!(!g.allows(Need::Create, None));
    }

    #[test]
    fn api_gateway_array_and_comma_forms_parse_alike() {
        let spaced = Grants::parse(&format!("{A}:write create"));
        assert_eq!(Grants::parse(&format!("[{A}:write create]")), spaced);
        assert_eq!(
            Grants::parse(&format!("[\"{A}:write\",\"create\"]")),
            spaced
        );
        assert_eq!(Grants::parse(&format!("{A}:write, create")), spaced);
        assert!(spaced.allows(Need::Create, None));
    }

    #[test]
    fn a_wildcard_covers_every_log_and_the_stronger_grant_wins() {
        let g = Grants::parse(&format!("*:read {A}"));
        assert!(g.allows(Need::Read, id(B)) && !g.allows(Need::Write, id(B)));
        assert!(g.allows(Need::Write, id(A)));
        let all = Grants::parse("*");
        assert!(all.allows(Need::Write, id(B)) && all.allows(Need::Create, None));
        let both = Grants::parse(&format!("{A}:read {A}:write"));
        assert!(both.allows(Need::Write, id(A)));
    }

    #[test]
    fn nothing_is_granted_by_an_empty_or_malformed_claim() {
        for raw in ["", "[]", "not-a-uuid", &format!("{A}:admin"), "*:owner"] {
            let g = Grants::parse(raw);
            assert!(!g.allows(Need::Read, id(A)), "{raw:?}");
            assert!(!g.allows(Need::Create, None), "{raw:?}");
        }
    }

    /// The one table of grant cases (`cdk/test/fixtures/grants.json`), which the synthesized
    /// onSubscribe handler must pass too (`cdk/test/stack.test.ts`).
    #[test]
    fn grants_read_as_the_shared_table_of_cases_says() {
        let table: serde_json::Value =
            serde_json::from_str(include_str!("../../../cdk/test/fixtures/grants.json"))
                .expect("the grants fixture is JSON");
        let logs: Vec<Uuid> = table["logs"]
            .as_array()
            .expect("logs")
            .iter()
            .map(|l| Uuid::parse_str(l.as_str().unwrap_or_default()).expect("a log id"))
            .collect();
        let cases = table["cases"].as_array().expect("cases");
        assert!(cases.len() > 20, "the table lost its cases");
        let mut failures = Vec::new();
        for case in cases {
            let name = case["name"].as_str().unwrap_or_default();
            // API Gateway hands a JSON array claim to the function as `[a b c]`.
            let raw = match &case["claim"] {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(items) => format!(
                    "[{}]",
                    items
                        .iter()
                        .map(|i| i.as_str().unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                other => panic!("{name}: a claim of {other}"),
            };
            let grants = Grants::parse(&raw);
            let listed = |level: &str| -> Vec<Uuid> {
                case[level]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|l| Uuid::parse_str(l.as_str()?).ok())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for (level, need) in [("read", Need::Read), ("write", Need::Write)] {
                let want = listed(level);
                for log in &logs {
                    let got = grants.allows(need, Some(*log));
                    if got != want.contains(log) {
                        failures.push(format!("{name} ({raw:?}): {level} {log}: got {got}"));
                    }
                }
            }
            let create = case["create"].as_bool().unwrap_or_default();
            if grants.allows(Need::Create, None) != create {
                failures.push(format!("{name} ({raw:?}): create should be {create}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    fn request_with(authorizer: serde_json::Value) -> Request<Body> {
        let context: lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequestContext =
            serde_json::from_value(serde_json::json!({
                "routeKey": "$default",
                "http": {"method": "POST", "path": "/logs"},
                "authorizer": authorizer,
            }))
            .unwrap();
        let mut req = Request::new(Body::empty());
        req.extensions_mut()
            .insert(lambda_http::request::RequestContext::ApiGatewayV2(context));
        req
    }

    #[test]
    fn the_subject_is_the_token_sub_or_the_iam_caller_arn() {
        let jwt =
            request_with(serde_json::json!({"jwt": {"claims": {"sub": "u1"}, "scopes": null}}));
        let c = caller(Some(DEFAULT_ACCESS_CLAIM), false, &jwt);
        assert_eq!(c.subject.as_deref(), Some("u1"));
        assert!(c.require(Need::Read, id(A)).is_err());
        let arn = "arn:aws:sts::123456789012:assumed-role/app/session";
        let iam = request_with(serde_json::json!({"iam": {"userArn": arn}}));
        let c = caller(None, false, &iam);
        // An assumed role's sessions are the role.
        assert_eq!(
            c.subject.as_deref(),
            Some("arn:aws:iam::123456789012:role/app")
        );
        assert!(c.require(Need::Write, id(A)).is_ok());
        // A header can never stand in for the authorizer's context.
        let mut plain = Request::new(Body::empty());
        plain
            .headers_mut()
            .insert("x-test-jwt-claims", "{\"sub\":\"u1\"}".parse().unwrap());
        assert_eq!(caller(None, false, &plain).subject, None);
        // Under Cognito authorization only a token's `sub` is an identity.
        let c = caller(None, true, &jwt);
        assert!(matches!(c.access, Access::Member));
        assert_eq!(c.subject.as_deref(), Some("u1"));
        assert_eq!(caller(None, true, &iam).subject, None);
    }

    #[test]
    fn an_assumed_roles_sessions_are_the_role_and_other_arns_themselves() {
        assert_eq!(
            iam_principal("arn:aws:sts::123456789012:assumed-role/ecs-task/1f2e3d"),
            "arn:aws:iam::123456789012:role/ecs-task"
        );
        assert_eq!(
            iam_principal("arn:aws-cn:sts::123456789012:assumed-role/r/i-0abc"),
            "arn:aws-cn:iam::123456789012:role/r"
        );
        for same in [
            "arn:aws:iam::123456789012:user/alice",
            "arn:aws:sts::123456789012:federated-user/bob",
            "arn:aws:sts::123456789012:assumed-role/no-session",
            "arn:aws:sts::123456789012:assumed-role//s",
            "not an arn",
        ] {
            assert_eq!(iam_principal(same), same);
        }
    }

    #[test]
    fn routes_need_what_they_do() {
        assert_eq!(route_need(&Method::POST, "/logs"), Some(Need::Create));
        assert_eq!(
            route_need(&Method::POST, "/logs/{log_id}/entries"),
            Some(Need::Write)
        );
        assert_eq!(
            route_need(&Method::GET, "/logs/{log_id}/entries"),
            Some(Need::Read)
        );
        assert_eq!(
            route_need(&Method::POST, "/logs/{log_id}/replicache/pull"),
            Some(Need::Read)
        );
        assert_eq!(
            route_need(&Method::POST, "/logs/{log_id}/replicache/push"),
            Some(Need::Write)
        );
        assert_eq!(
            route_need(&Method::DELETE, "/logs/{log_id}"),
            Some(Need::Delete)
        );
    }

    fn token(grants: &str, subject: Option<&str>) -> Caller {
        Caller {
            access: Access::Token {
                claim: DEFAULT_ACCESS_CLAIM.into(),
                grants: Grants::parse(grants),
            },
            subject: subject.map(str::to_owned),
        }
    }

    #[test]
    fn the_creator_or_a_wildcard_writer_may_delete() {
        assert!(Caller::unrestricted().may_delete(None));
        assert!(token("*", None).may_delete(Some("alice")));
        assert!(!token("*:read", Some("bob")).may_delete(Some("alice")));
        assert!(token(A, Some("alice")).may_delete(Some("alice")));
        assert!(!token(A, Some("bob")).may_delete(Some("alice")));
        // A log created without a proven subject has no creator to match.
        assert!(!token(A, None).may_delete(None));
        assert!(!token(A, Some("bob")).may_delete(None));
        // Deleting needs the write level on the log before the creator is even looked at.
        assert!(Grants::parse(A).allows(Need::Delete, id(A)));
        assert!(!Grants::parse(&format!("{A}:read")).allows(Need::Delete, id(A)));
    }
}
