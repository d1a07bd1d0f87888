//! The local stand-in for API Gateway's IAM authorization (`sheetlog dev --auth iam`, the mode a
//! stack deploys with by default): every request but the open routes and CORS preflights must be
//! SigV4-signed for `execute-api` by a known user, or it is refused with API Gateway's `403`
//! and `{"message"}`; a signed one reaches the API with the request context API Gateway writes
//! (`requestContext.authorizer.iam`, the caller's ARN), as `sheetlog_pipeline::authorizer`
//! builds it.
//!
//! The signature is checked as AWS checks it: the request is signed again with the user's
//! secret, over the headers it names (`SignedHeaders`), its body and its `x-amz-date`, and the
//! two signatures must be equal; the date must be within 15 minutes of now; the credential's
//! scope must be this region's `execute-api`. What AWS does beyond that and this stand-in does
//! not: an IAM policy allowing `execute-api:Invoke` (every known user may call every route), and
//! temporary credentials of STS (a session token is signed over, not checked).
//!
//! The users are the machine's own credentials (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`,
//! which `./scripts/dev` sets to `local`/`local`) and the demo users of [`DEMO_USERS`], each an
//! IAM user of the emulator's account.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use axum::body::Body;
use axum::extract::State;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, Request, StatusCode, header};
use serde_json::json;
use sheetlog_pipeline::authorizer::SigV4Header;
pub use sheetlog_pipeline::roles::LOCAL_ACCOUNT;

/// How far a request's `x-amz-date` may be from now (AWS: 15 minutes, "Signature expired").
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(15 * 60);
/// Demo users besides the machine's own credentials: (name, access key id, secret). A name
/// `role/session` is a session of an assumed role, as code on EC2, ECS or Lambda calls: its ARN
/// is the session's (`arn:aws:sts::…:assumed-role/role/session`), and the two `editor` sessions
/// stand for one role whose session name changed (a credential refresh).
pub const DEMO_USERS: [(&str, &str, &str); 4] = [
    ("alice", "AKIALOCALALICE000001", "alice-local-secret"),
    ("bob", "AKIALOCALBOB00000001", "bob-local-secret"),
    (
        "editor/session-1",
        "ASIALOCALEDITOR00001",
        "editor-1-local-secret",
    ),
    (
        "editor/session-2",
        "ASIALOCALEDITOR00002",
        "editor-2-local-secret",
    ),
];

/// One local IAM user.
#[derive(Debug, Clone)]
pub struct IamUser {
    pub access_key: String,
    secret: String,
    pub arn: String,
}

impl IamUser {
    /// An IAM user `name`, or a session of an assumed role when `name` is `role/session`.
    pub fn new(name: &str, access_key: &str, secret: &str) -> Self {
        let arn = match name.split_once('/') {
            Some((role, session)) => {
                format!("arn:aws:sts::{LOCAL_ACCOUNT}:assumed-role/{role}/{session}")
            }
            None => format!("arn:aws:iam::{LOCAL_ACCOUNT}:user/{name}"),
        };
        Self {
            access_key: access_key.to_owned(),
            secret: secret.to_owned(),
            arn,
        }
    }
}

/// Why a request was refused; each is API Gateway's `403` with its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("Missing Authentication Token")]
    Unsigned,
    #[error("Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' ({0})")]
    Malformed(&'static str),
    #[error("The security token included in the request is invalid.")]
    UnknownKey,
    #[error("Credential should be scoped to a valid region and to the service 'execute-api'.")]
    WrongScope,
    #[error("Signature expired: the request's x-amz-date is more than 15 minutes from now")]
    Expired,
    #[error(
        "The request signature we calculated does not match the signature you provided. Check \
         your AWS Secret Access Key and signing method."
    )]
    BadSignature,
}

/// Verifies SigV4 signatures of requests to the local API.
#[derive(Debug)]
pub struct IamAuthorizer {
    users: HashMap<String, IamUser>,
    region: String,
}

/// The signature's parts, or API Gateway's refusal of a header that is not one.
fn parse(authorization: &str) -> Result<SigV4Header<'_>, Refusal> {
    if !authorization.starts_with(SigV4Header::SCHEME) {
        return Err(Refusal::Unsigned);
    }
    SigV4Header::parse(authorization).map_err(Refusal::Malformed)
}

/// `x-amz-date` (`20261127T230000Z`) as a time.
fn amz_date(value: &str) -> Option<SystemTime> {
    let digits = |range: std::ops::Range<usize>| value.get(range)?.parse::<u32>().ok();
    if value.len() != 16 || value.as_bytes()[8] != b'T' || !value.ends_with('Z') {
        return None;
    }
    let month = time::Month::try_from(u8::try_from(digits(4..6)?).ok()?).ok()?;
    let date = time::Date::from_calendar_date(
        i32::try_from(digits(0..4)?).ok()?,
        month,
        u8::try_from(digits(6..8)?).ok()?,
    )
    .ok()?;
    let clock = time::Time::from_hms(
        u8::try_from(digits(9..11)?).ok()?,
        u8::try_from(digits(11..13)?).ok()?,
        u8::try_from(digits(13..15)?).ok()?,
    )
    .ok()?;
    let secs = u64::try_from(date.with_time(clock).assume_utc().unix_timestamp()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

impl IamAuthorizer {
    /// Exactly `users`, checking signatures for `region`.
    pub fn new(region: &str, users: Vec<IamUser>) -> Self {
        Self {
            users: users
                .into_iter()
                .map(|u| (u.access_key.clone(), u))
                .collect(),
            region: region.to_owned(),
        }
    }

    /// The demo users and the machine's own credentials (`AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY`, as the user `local`).
    pub fn local(region: &str) -> Self {
        let mut users: Vec<IamUser> = DEMO_USERS
            .iter()
            .map(|(name, key, secret)| IamUser::new(name, key, secret))
            .collect();
        if let (Ok(key), Ok(secret)) = (
            std::env::var("AWS_ACCESS_KEY_ID"),
            std::env::var("AWS_SECRET_ACCESS_KEY"),
        ) && !key.is_empty()
        {
            users.push(IamUser::new("local", &key, &secret));
        }
        Self::new(region, users)
    }

    /// The user who signed a `method` request for `uri` (path and query) with `headers` and
    /// `body`, checked at `now`.
    pub fn verify(
        &self,
        method: &Method,
        uri: &http::Uri,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<&IamUser, Refusal> {
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(Refusal::Unsigned)?;
        let p = parse(authorization)?;
        let user = self.users.get(p.key).ok_or(Refusal::UnknownKey)?;
        if p.service != "execute-api" || p.region != self.region {
            return Err(Refusal::WrongScope);
        }
        let header_str = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let at = header_str("x-amz-date")
            .and_then(amz_date)
            .ok_or(Refusal::Malformed("no valid x-amz-date"))?;
        if !header_str("x-amz-date").is_some_and(|d| d.starts_with(p.date)) {
            return Err(Refusal::Malformed(
                "the credential's date is not the x-amz-date's",
            ));
        }
        let skew = now.duration_since(at).unwrap_or_else(|e| e.duration());
        if skew > MAX_CLOCK_SKEW {
            return Err(Refusal::Expired);
        }
        if !p.signed_headers.contains(&"host") {
            return Err(Refusal::Malformed("SignedHeaders must include host"));
        }
        // Sign the same request again: the signed headers but those the signer adds itself
        // (the date, the session token), the body, at the request's own time.
        let mut signed: Vec<(&str, &str)> = Vec::new();
        for name in &p.signed_headers {
            if matches!(*name, "x-amz-date" | "x-amz-security-token") {
                continue;
            }
            let value = header_str(name).ok_or(Refusal::BadSignature)?;
            signed.push((name, value));
        }
        let host = header_str("host").ok_or(Refusal::BadSignature)?;
        let path_and_query = uri.path_and_query().map_or("/", |pq| pq.as_str());
        let url = format!("http://{host}{path_and_query}");
        let identity = Credentials::new(
            &user.access_key,
            &user.secret,
            header_str("x-amz-security-token").map(str::to_owned),
            None,
            "sheetlog-local-iam",
        )
        .into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("execute-api")
            .time(at)
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| Refusal::BadSignature)?
            .into();
        let signable = SignableRequest::new(
            method.as_str(),
            &url,
            signed.into_iter(),
            SignableBody::Bytes(body),
        )
        .map_err(|_| Refusal::BadSignature)?;
        let (_, expected) = sign(signable, &params)
            .map_err(|_| Refusal::BadSignature)?
            .into_parts();
        if expected != p.signature {
            return Err(Refusal::BadSignature);
        }
        Ok(user)
    }
}

fn forbidden(refusal: &Refusal) -> Response {
    (
        StatusCode::FORBIDDEN,
        axum::Json(json!({"message": refusal.to_string()})),
    )
        .into_response()
}

/// Middleware: verifies the request's signature and attaches the request context API Gateway
/// would, or answers its `403`. CORS preflights and the open routes pass, as on AWS.
pub async fn authorize(
    State(auth): State<Arc<IamAuthorizer>>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    // Whatever the client sent, only this layer writes the context.
    req.extensions_mut()
        .remove::<lambda_http::request::RequestContext>();
    if req.method() == Method::OPTIONS
        || sheetlog_api::open_routes::is_open(req.method().as_str(), req.uri().path())
    {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    // The signature covers the body: read it whole, as the gateway does, within its bound.
    let bytes = match crate::local_gateway::buffer_body(body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let user = match auth.verify(
        &parts.method,
        &parts.uri,
        &parts.headers,
        &bytes,
        SystemTime::now(),
    ) {
        Ok(user) => user.clone(),
        Err(refusal) => {
            tracing::info!(path = parts.uri.path(), reason = %refusal, "403: signature refused");
            return forbidden(&refusal);
        }
    };
    let context = match sheetlog_pipeline::authorizer::iam_request_context(
        parts.method.as_str(),
        parts.uri.path(),
        LOCAL_ACCOUNT,
        &user.arn,
    ) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "building the authorizer context");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(context);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::provider::SharedCredentialsProvider;
    use sheetlog_core::sigv4::Signer;

    const REGION: &str = "us-east-1";

    fn alice() -> IamUser {
        IamUser::new("alice", "AKIATESTALICE", "alice-secret")
    }

    async fn signed(
        user: &IamUser,
        secret: &str,
        method: &str,
        url: &str,
        body: &[u8],
    ) -> (HeaderMap, http::Uri) {
        let signer = Signer::new(
            SharedCredentialsProvider::new(Credentials::new(
                &user.access_key,
                secret,
                None,
                None,
                "test",
            )),
            REGION,
            "execute-api",
        );
        let uri: http::Uri = url.parse().expect("uri");
        let host = uri
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        let base = [
            ("content-type", "application/json"),
            ("host", host.as_str()),
        ];
        let added = signer
            .headers(method, url, base.iter().copied(), body)
            .await
            .expect("sign");
        let mut headers = HeaderMap::new();
        for (k, v) in base
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .chain(added)
        {
            headers.insert(
                http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                v.parse().expect("value"),
            );
        }
        (headers, uri)
    }

    #[tokio::test]
    async fn a_request_signed_by_a_known_user_passes_and_a_changed_one_does_not() {
        let auth = IamAuthorizer::new(REGION, vec![alice()]);
        let url = "http://127.0.0.1:8080/logs/abc/entries?from=2&limit=5";
        let body = br#"{"type":"set"}"#;
        let (headers, uri) = signed(&alice(), "alice-secret", "POST", url, body).await;
        let now = SystemTime::now();
        let who = auth.verify(&Method::POST, &uri, &headers, body, now);
        assert_eq!(
            who.map(|u| u.arn.clone()),
            Ok(format!("arn:aws:iam::{LOCAL_ACCOUNT}:user/alice"))
        );

        // Another body, method, query or signed header's value: the signature no longer matches.
        let refused = |r: Result<&IamUser, Refusal>| r.err();
        assert_eq!(
            refused(auth.verify(&Method::POST, &uri, &headers, b"{}", now)),
            Some(Refusal::BadSignature)
        );
        assert_eq!(
            refused(auth.verify(&Method::PUT, &uri, &headers, body, now)),
            Some(Refusal::BadSignature)
        );
        let other: http::Uri = "http://127.0.0.1:8080/logs/abc/entries?from=3&limit=5"
            .parse()
            .expect("uri");
        assert_eq!(
            refused(auth.verify(&Method::POST, &other, &headers, body, now)),
            Some(Refusal::BadSignature)
        );
        let mut changed = headers.clone();
        changed.insert("content-type", "text/plain".parse().expect("value"));
        assert_eq!(
            refused(auth.verify(&Method::POST, &uri, &changed, body, now)),
            Some(Refusal::BadSignature)
        );

        // The wrong secret, an unknown key, no signature, an old one.
        let (wrong, _) = signed(&alice(), "not-her-secret", "POST", url, body).await;
        assert_eq!(
            refused(auth.verify(&Method::POST, &uri, &wrong, body, now)),
            Some(Refusal::BadSignature)
        );
        let stranger = IamUser::new("eve", "AKIATESTEVE", "eve-secret");
        let (unknown, _) = signed(&stranger, "eve-secret", "POST", url, body).await;
        assert_eq!(
            refused(auth.verify(&Method::POST, &uri, &unknown, body, now)),
            Some(Refusal::UnknownKey)
        );
        assert_eq!(
            refused(auth.verify(&Method::POST, &uri, &HeaderMap::new(), body, now)),
            Some(Refusal::Unsigned)
        );
        let later = now + MAX_CLOCK_SKEW + Duration::from_secs(60);
        assert_eq!(
            refused(auth.verify(&Method::POST, &uri, &headers, body, later)),
            Some(Refusal::Expired)
        );
    }

    #[tokio::test]
    async fn a_body_past_the_gateways_bound_is_refused_before_it_is_read_whole() {
        use tower::ServiceExt;
        let app = axum::Router::new().fallback(|| async { "passed" }).layer(
            axum::middleware::from_fn_with_state(
                Arc::new(IamAuthorizer::new(REGION, vec![alice()])),
                authorize,
            ),
        );
        let huge = vec![b'x'; 16 * crate::local_gateway::LAMBDA_REQUEST_LIMIT + 1];
        let req = Request::post("/logs/x/entries")
            .body(Body::from(huge))
            .expect("request");
        let resp = app.oneshot(req).await.expect("answer");
        assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn a_role_session_is_an_sts_arn_and_a_user_an_iam_one() {
        assert_eq!(
            IamUser::new("editor/session-1", "K", "S").arn,
            "arn:aws:sts::123456789012:assumed-role/editor/session-1"
        );
        assert_eq!(
            IamUser::new("bob", "K", "S").arn,
            "arn:aws:iam::123456789012:user/bob"
        );
    }

    #[test]
    fn x_amz_date_reads_as_sigv4_writes_it() {
        let at = amz_date("20261127T230000Z").expect("a date");
        assert_eq!(
            at,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_820_400)
        );
        for bad in [
            "",
            "2026-11-27T23:00:00Z",
            "20261327T230000Z",
            "20261127T230000",
            "20261127X230000Z",
        ] {
            assert_eq!(amz_date(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn a_signature_for_another_region_or_service_is_refused() {
        let auth = IamAuthorizer::new("eu-west-1", vec![alice()]);
        let url = "http://127.0.0.1:8080/logs";
        let (headers, uri) = signed(&alice(), "alice-secret", "GET", url, b"").await;
        assert_eq!(
            auth.verify(&Method::GET, &uri, &headers, b"", SystemTime::now())
                .err(),
            Some(Refusal::WrongScope)
        );
    }
}
