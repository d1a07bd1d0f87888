//! JWT authorization for the local stack (`./scripts/dev --auth jwt`, `docs/operations.md`,
//! "Local JWT authorization"): a token issuer and a stand-in for API Gateway's JWT authorizer.
//!
//! - **The issuer.** `sheetlog dev --auth jwt` generates an RSA key (RS256, what API Gateway's JWT
//!   authorizer verifies), serves its OpenID discovery document and JWKS under `/local-issuer`
//!   on the dev server, and saves the key where `sheetlog dev-token` finds it.
//! - **The authorizer.** Middleware in front of the API router that does what API Gateway's JWT
//!   authorizer does before a request reaches the Lambda function: it takes the token from the
//!   `Authorization` header, fetches the issuer's JWKS through its discovery document, checks
//!   the signature, `iss`, `aud` (or `client_id`), `exp` and `nbf`, answers `401
//!   {"message":"Unauthorized"}` otherwise, and hands the claims to the function as API Gateway
//!   does: `requestContext.authorizer.jwt.claims`, every value a string (an array as `[a b c]`).
//!   The routes without an authorizer in the deployed stack (the page, `/config.json`,
//!   `/health`, `/openapi.json`: `functions/api/src/open_routes.json`) carry none here either.
//!
//! None of this is in the Lambda function: there, claims come only from API Gateway's event.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::KeyPair as _;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

/// Where the issuer's documents live on the dev server.
pub const ISSUER_PATH: &str = "/local-issuer";
/// The audience of local tokens (API Gateway's `jwtAudience`, an app client id).
pub const LOCAL_AUDIENCE: &str = "sheetlog-local";

/// The local issuer's key and settings, as saved for `sheetlog dev-token`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IssuerKey {
    pub issuer: String,
    pub audience: String,
    /// The claim that lists a token's grants (`SHEETLOG_ACCESS_CLAIM`).
    pub access_claim: String,
    pub kid: String,
    /// The private key, PKCS#8 PEM.
    pub private_key_pem: String,
    /// The public key's modulus and exponent, base64url (the JWK's `n` and `e`).
    pub n: String,
    pub e: String,
}

impl IssuerKey {
    /// A new 2048-bit RSA key for an issuer at `issuer`.
    pub fn generate(issuer: &str, access_claim: &str) -> anyhow::Result<Self> {
        let pair = KeyPair::generate(KeySize::Rsa2048)
            .map_err(|_| anyhow::anyhow!("could not generate an RSA key"))?;
        let der = pair
            .as_der()
            .map_err(|_| anyhow::anyhow!("could not encode the RSA key"))?;
        let body = STANDARD.encode(der.as_ref());
        let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
        for line in body.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END PRIVATE KEY-----\n");
        let public = pair.public_key();
        let n = URL_SAFE_NO_PAD.encode(public.modulus().big_endian_without_leading_zero());
        let e = URL_SAFE_NO_PAD.encode(public.exponent().big_endian_without_leading_zero());
        let kid = format!("local-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        Ok(Self {
            issuer: issuer.to_owned(),
            audience: LOCAL_AUDIENCE.to_owned(),
            access_claim: access_claim.to_owned(),
            kid,
            private_key_pem: pem,
            n,
            e,
        })
    }

    /// The JWKS document (`{"keys": [...]}`) with the public key.
    pub fn jwks(&self) -> Value {
        json!({"keys": [{
            "kty": "RSA", "use": "sig", "alg": "RS256",
            "kid": self.kid, "n": self.n, "e": self.e,
        }]})
    }

    /// Signs a token for `subject` with `grants` in the access claim, valid for `ttl_secs`.
    pub fn mint(&self, subject: &str, grants: &str, ttl_secs: u64) -> anyhow::Result<String> {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let ttl = i64::try_from(ttl_secs).context("--ttl is too large")?;
        let mut claims = serde_json::Map::new();
        claims.insert("iss".into(), json!(self.issuer));
        claims.insert("aud".into(), json!(self.audience));
        claims.insert("sub".into(), json!(subject));
        claims.insert("iat".into(), json!(now));
        claims.insert("nbf".into(), json!(now));
        claims.insert("exp".into(), json!(now + ttl));
        claims.insert("token_use".into(), json!("id"));
        claims.insert(self.access_claim.clone(), json!(grants));
        let mut head = Header::new(Algorithm::RS256);
        head.kid = Some(self.kid.clone());
        let key = EncodingKey::from_rsa_pem(self.private_key_pem.as_bytes())
            .context("the issuer's key file holds no RSA key")?;
        jsonwebtoken::encode(&head, &Value::Object(claims), &key).context("signing the token")
    }

    /// Saves the key readable by its owner only.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        sheetlog_client::private_file::write_private(path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "no local token issuer at {} (start the local stack with `./scripts/dev --auth jwt`)",
                path.display()
            )
        })?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not an issuer key", path.display()))
    }
}

/// Where `sheetlog dev --auth jwt` on `port` saves its issuer key (and `dev-token` looks for it):
/// `$SHEETLOG_DEV_AUTH_DIR`, else a directory per port under the system's temporary directory.
pub fn key_path(port: u16) -> PathBuf {
    let dir = std::env::var_os("SHEETLOG_DEV_AUTH_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("sheetlog-dev-{port}")));
    dir.join("issuer-key.json")
}

/// The issuer's routes: its OpenID discovery document and JWKS, as an identity provider serves
/// them (API Gateway finds the JWKS through `jwks_uri`).
pub fn issuer_routes(key: Arc<IssuerKey>) -> axum::Router {
    let discovery = {
        let key = key.clone();
        move || async move {
            axum::Json(json!({
                "issuer": key.issuer,
                "jwks_uri": format!("{}/.well-known/jwks.json", key.issuer),
                "id_token_signing_alg_values_supported": ["RS256"],
                "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"],
            }))
        }
    };
    let jwks = move || async move { axum::Json(key.jwks()) };
    axum::Router::new()
        .route(
            &format!("{ISSUER_PATH}/.well-known/openid-configuration"),
            axum::routing::get(discovery),
        )
        .route(
            &format!("{ISSUER_PATH}/.well-known/jwks.json"),
            axum::routing::get(jwks),
        )
}

/// API Gateway's JWT authorizer, locally: an issuer URL and audiences, as `jwtIssuer` and
/// `jwtAudience` configure it. The JWKS is fetched once, on the first request that needs it.
#[derive(Debug)]
pub struct JwtAuthorizer {
    issuer: String,
    audience: Vec<String>,
    /// Where the keys are, when not found through the issuer's discovery document (the
    /// emulator's Cognito serves them at its endpoint, not at the issuer's address).
    jwks_url: Option<String>,
    http: reqwest::Client,
    keys: OnceCell<JwkSet>,
}

/// Why a token was refused (logged; the caller only sees 401, as from API Gateway).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("no Authorization header")]
    Missing,
    #[error("the token is not a JWT: {0}")]
    Malformed(String),
    #[error("no key {0:?} in the issuer's JWKS")]
    UnknownKey(String),
    #[error("the token failed validation: {0}")]
    Invalid(String),
    #[error("the issuer's JWKS could not be fetched: {0}")]
    Jwks(String),
}

impl JwtAuthorizer {
    pub fn new(issuer: &str, audience: Vec<String>) -> Self {
        Self {
            issuer: issuer.trim_end_matches('/').to_owned(),
            audience,
            jwks_url: None,
            http: reqwest::Client::new(),
            keys: OnceCell::new(),
        }
    }

    /// An authorizer that takes the keys from `jwks_url` (and still checks `iss` is `issuer`).
    pub fn with_jwks_url(issuer: &str, audience: Vec<String>, jwks_url: &str) -> Self {
        Self {
            jwks_url: Some(jwks_url.to_owned()),
            ..Self::new(issuer, audience)
        }
    }

    async fn jwks(&self) -> Result<&JwkSet, Refused> {
        self.keys
            .get_or_try_init(|| async {
                let get = |url: String| async move {
                    let resp = self.http.get(&url).send().await?.error_for_status()?;
                    resp.json::<Value>().await
                };
                let uri = match &self.jwks_url {
                    Some(url) => url.clone(),
                    None => {
                        let discovery =
                            get(format!("{}/.well-known/openid-configuration", self.issuer))
                                .await
                                .map_err(|e| Refused::Jwks(e.to_string()))?;
                        discovery["jwks_uri"]
                            .as_str()
                            .ok_or_else(|| {
                                Refused::Jwks("the discovery document has no jwks_uri".into())
                            })?
                            .to_owned()
                    }
                };
                let keys = get(uri).await.map_err(|e| Refused::Jwks(e.to_string()))?;
                serde_json::from_value(keys).map_err(|e| Refused::Jwks(e.to_string()))
            })
            .await
    }

    /// The verified claims of a token as AppSync Events takes it for Cognito and OIDC
    /// authorization: the bare JWT. A `Bearer ` scheme (which API Gateway's JWT authorizer
    /// strips) is not a JWT to AppSync, which refuses it ("Unable to parse JWT token").
    pub async fn verify_appsync(
        &self,
        authorization: Option<&str>,
    ) -> Result<HashMap<String, String>, Refused> {
        if let Some(raw) = authorization
            && raw.trim_start().contains(char::is_whitespace)
        {
            return Err(Refused::Malformed(
                "Unable to parse JWT token (AppSync takes the bare token, without `Bearer `)"
                    .to_owned(),
            ));
        }
        self.verify(authorization).await
    }

    /// The verified token's claims, as API Gateway passes them to the function.
    pub async fn verify(
        &self,
        authorization: Option<&str>,
    ) -> Result<HashMap<String, String>, Refused> {
        let raw = authorization
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or(Refused::Missing)?;
        let token = raw
            .strip_prefix("Bearer ")
            .or_else(|| raw.strip_prefix("bearer "))
            .unwrap_or(raw)
            .trim();
        let head =
            jsonwebtoken::decode_header(token).map_err(|e| Refused::Malformed(e.to_string()))?;
        if head.alg != Algorithm::RS256 {
            return Err(Refused::Invalid(format!(
                "algorithm {:?} (only RS256)",
                head.alg
            )));
        }
        let kid = head.kid.unwrap_or_default();
        let jwk = self
            .jwks()
            .await?
            .find(&kid)
            .ok_or_else(|| Refused::UnknownKey(kid.clone()))?;
        let key = DecodingKey::from_jwk(jwk).map_err(|e| Refused::Invalid(e.to_string()))?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[&self.issuer]);
        validation.set_required_spec_claims(&["exp", "iss"]);
        validation.validate_nbf = true;
        // API Gateway accepts a token whose `aud` or, failing that, `client_id` (Cognito access
        // tokens) is one of the configured audiences.
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &validation)
            .map_err(|e| Refused::Invalid(e.to_string()))?;
        let claims = data.claims;
        let audiences: Vec<&str> = match claims.get("aud").or_else(|| claims.get("client_id")) {
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !audiences
            .iter()
            .any(|a| self.audience.iter().any(|b| b == a))
        {
            return Err(Refused::Invalid(format!(
                "audience {audiences:?} is not one of {:?}",
                self.audience
            )));
        }
        Ok(claims
            .into_iter()
            .map(|(k, v)| (k, claim_string(&v)))
            .collect())
    }
}

/// A claim's value as API Gateway hands it to the function: strings as they are, an array as
/// `[a b c]`, anything else as its JSON text.
fn claim_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(claim_string).collect();
            format!("[{}]", parts.join(" "))
        }
        other => other.to_string(),
    }
}

/// The routes API Gateway serves without an authorizer, read from the one list the CDK stack
/// creates them from (`functions/api/src/open_routes.json`, [`sheetlog_api::open_routes`]); and,
/// locally, the issuer's own documents.
fn open_route(method: &Method, path: &str) -> bool {
    sheetlog_api::open_routes::is_open(method.as_str(), path)
        || path.starts_with(&format!("{ISSUER_PATH}/"))
}

fn unauthorized() -> Response {
    let mut resp = (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"message": "Unauthorized"})),
    )
        .into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer error=\"invalid_token\""),
    );
    resp
}

/// Middleware: verifies the request's token and attaches the request context API Gateway
/// would, or answers 401 as API Gateway would. CORS preflights pass, as API Gateway answers
/// them before any authorizer runs.
pub async fn authorize(
    State(auth): State<Arc<JwtAuthorizer>>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    // Whatever the client sent, only this layer writes the context.
    req.extensions_mut()
        .remove::<lambda_http::request::RequestContext>();
    if req.method() == Method::OPTIONS || open_route(req.method(), req.uri().path()) {
        return next.run(req).await;
    }
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let claims = match auth.verify(authorization).await {
        Ok(claims) => claims,
        Err(e) => {
            tracing::info!(path = req.uri().path(), reason = %e, "401: token refused");
            return unauthorized();
        }
    };
    match sheetlog_pipeline::authorizer::jwt_request_context(
        req.method().as_str(),
        req.uri().path(),
        &claims,
    ) {
        Ok(context) => {
            req.extensions_mut().insert(context);
            next.run(req).await
        }
        Err(e) => {
            tracing::error!(error = %e, "building the authorizer context");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_reach_the_function_as_api_gateway_writes_them() {
        assert_eq!(claim_string(&json!("a b")), "a b");
        assert_eq!(claim_string(&json!(["x", "y:read"])), "[x y:read]");
        assert_eq!(claim_string(&json!(42)), "42");
        assert_eq!(claim_string(&json!(true)), "true");
    }

    #[test]
    fn web_routes_and_the_issuer_need_no_token() {
        let get = |p| open_route(&Method::GET, p);
        assert!(get("/") && get("/sheets/abc") && get("/app/main.js"));
        assert!(get("/local-issuer/.well-known/jwks.json"));
        assert!(get("/config.json") && get("/health") && get("/openapi.json"));
        assert!(!open_route(&Method::POST, "/config.json"));
        for path in ["/logs", "/logs/x/entries", "/sheets", "/sheets/a/b", "/me"] {
            assert!(!get(path), "{path}");
        }
    }
}
