//! `sheetlog login` / `logout` for a stack with Cognito authorization: sign in with email and
//! password (Cognito's SRP flow, `USER_SRP_AUTH`, so the password never leaves the machine; plain
//! HTTP JSON to the pool's endpoint, which the API names in `GET /config.json`; the math is in
//! `srp.rs`), keep the refresh token in the user's config directory
//! (`$XDG_CONFIG_HOME/sheetlog/credentials.json`, else `~/.config/sheetlog/credentials.json`,
//! mode 0600), one entry per API URL, and trade it for a fresh access token
//! (`REFRESH_TOKEN_AUTH`) when the stored one is about to expire.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::CliError;
use crate::srp::{SrpClient, SrpError};

/// One signed-in API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub email: String,
    pub endpoint: String,
    pub client_id: String,
    pub refresh_token: String,
    #[serde(default)]
    pub access_token: Option<String>,
    /// Unix seconds when `access_token` expires.
    #[serde(default)]
    pub expires_at: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Credentials {
    /// By API URL (no trailing slash).
    pub apis: BTreeMap<String, Session>,
}

/// Where the credentials live.
pub fn credentials_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|d| !d.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("sheetlog").join("credentials.json"))
}

fn key(api: &str) -> String {
    api.trim_end_matches('/').to_owned()
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> CliError {
    move |e| CliError::Other(format!("{what}: {e}"))
}

impl Credentials {
    pub fn load() -> Credentials {
        credentials_path()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// Writes the file readable by its owner only (created so, never widened).
    pub fn save(&self) -> Result<PathBuf, CliError> {
        let path = credentials_path().ok_or_else(|| {
            CliError::Other(
                "neither XDG_CONFIG_HOME nor HOME is set: nowhere to keep the sign-in".into(),
            )
        })?;
        let text =
            serde_json::to_string_pretty(self).map_err(|e| CliError::Other(e.to_string()))?;
        crate::private_file::write_private(&path, text.as_bytes())
            .map_err(io(format!("writing {}", path.display())))?;
        Ok(path)
    }
}

/// One call of Cognito's JSON API without credentials (sign-in needs none).
async fn cognito(endpoint: &str, operation: &str, body: Value) -> Result<Value, CliError> {
    let resp = reqwest::Client::new()
        .post(endpoint)
        .header("content-type", "application/x-amz-json-1.1")
        .header(
            "x-amz-target",
            format!("AWSCognitoIdentityProviderService.{operation}"),
        )
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| CliError::Other(format!("reaching the user pool at {endpoint}: {e}")))?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| CliError::Other(format!("reading the user pool's answer: {e}")))?;
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() {
        let kind = v["__type"].as_str().unwrap_or("error");
        let message = v["message"].as_str().unwrap_or(&text);
        return Err(CliError::Input(format!(
            "sign-in refused ({kind}): {message}"
        )));
    }
    Ok(v)
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Cognito's SRP sign-in: `InitiateAuth` (`USER_SRP_AUTH`) sends `A`, the pool answers with a
/// `PASSWORD_VERIFIER` challenge, and `RespondToAuthChallenge` sends the password claim. Returns
/// the last answer: tokens, or the next challenge (`NEW_PASSWORD_REQUIRED`, MFA).
pub async fn srp_sign_in(
    endpoint: &str,
    pool_id: &str,
    client_id: &str,
    email: &str,
    password: &str,
) -> Result<Value, CliError> {
    let srp = SrpClient::new(pool_id).map_err(srp_error)?;
    let v = cognito(
        endpoint,
        "InitiateAuth",
        json!({"AuthFlow": "USER_SRP_AUTH", "ClientId": client_id,
               "AuthParameters": {"USERNAME": email, "SRP_A": srp.srp_a()}}),
    )
    .await?;
    if v["ChallengeName"] != "PASSWORD_VERIFIER" {
        return Ok(v);
    }
    let p = &v["ChallengeParameters"];
    let param = |name: &'static str| {
        p[name]
            .as_str()
            .ok_or_else(|| srp_error(SrpError::Challenge(name)))
    };
    let user_id = param("USER_ID_FOR_SRP")?;
    let secret_block = param("SECRET_BLOCK")?;
    let timestamp = crate::srp::timestamp(time::OffsetDateTime::now_utc());
    let signature = srp
        .password_claim(
            user_id,
            password,
            param("SALT")?,
            param("SRP_B")?,
            secret_block,
            &timestamp,
        )
        .map_err(srp_error)?;
    let mut body = json!({"ChallengeName": "PASSWORD_VERIFIER", "ClientId": client_id,
        "ChallengeResponses": {"USERNAME": user_id, "PASSWORD_CLAIM_SECRET_BLOCK": secret_block,
                               "PASSWORD_CLAIM_SIGNATURE": signature, "TIMESTAMP": timestamp}});
    if let Some(session) = v["Session"].as_str() {
        body["Session"] = json!(session);
    }
    cognito(endpoint, "RespondToAuthChallenge", body).await
}

fn srp_error(e: SrpError) -> CliError {
    CliError::Other(format!("signing in with SRP: {e}"))
}

/// Signs in to the stack at `api` and stores the session; returns where.
pub async fn login(api: &str, email: &str, password: &str) -> Result<PathBuf, CliError> {
    let config: Value = reqwest::get(format!("{}/config.json", key(api)))
        .await
        .map_err(|e| CliError::Other(format!("reading {api}/config.json: {e}")))?
        .json()
        .await
        .map_err(|e| CliError::Other(format!("reading {api}/config.json: {e}")))?;
    if config["auth"] != "cognito" {
        return Err(CliError::Input(format!(
            "the API at {api} does not use Cognito sign-in (its auth mode is {}); use --token or --iam",
            config["auth"]
        )));
    }
    let field = |name: &str| {
        config["cognito"][name]
            .as_str()
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| CliError::Other(format!("{api}/config.json names no cognito.{name}")))
    };
    let endpoint = field("endpoint")?;
    let client_id = field("clientId")?;
    let pool_id = field("userPoolId")?;
    let v = srp_sign_in(&endpoint, &pool_id, &client_id, email, password).await?;
    let result = &v["AuthenticationResult"];
    let refresh = result["RefreshToken"].as_str().ok_or_else(|| {
        CliError::Other(format!(
            "the user pool asked for more than a password ({}); sign in on the web page first",
            v["ChallengeName"].as_str().unwrap_or("a challenge")
        ))
    })?;
    let mut creds = Credentials::load();
    creds.apis.insert(
        key(api),
        Session {
            email: email.to_owned(),
            endpoint,
            client_id,
            refresh_token: refresh.to_owned(),
            access_token: result["AccessToken"].as_str().map(str::to_owned),
            expires_at: now() + result["ExpiresIn"].as_i64().unwrap_or(0),
        },
    );
    creds.save()
}

/// Forgets the session for `api`; whether there was one.
pub fn logout(api: &str) -> Result<bool, CliError> {
    let mut creds = Credentials::load();
    let had = creds.apis.remove(&key(api)).is_some();
    if had {
        creds.save()?;
    }
    Ok(had)
}

/// A valid access token for `api` from the stored session (refreshed when it expires within a
/// minute); `None` when not signed in.
pub async fn access_token(api: &str) -> Result<Option<String>, CliError> {
    let mut creds = Credentials::load();
    let Some(session) = creds.apis.get_mut(&key(api)) else {
        return Ok(None);
    };
    if let Some(token) = &session.access_token
        && session.expires_at > now() + 60
    {
        return Ok(Some(token.clone()));
    }
    let v = cognito(
        &session.endpoint,
        "InitiateAuth",
        json!({"AuthFlow": "REFRESH_TOKEN_AUTH", "ClientId": session.client_id,
               "AuthParameters": {"REFRESH_TOKEN": session.refresh_token}}),
    )
    .await
    .map_err(|e| CliError::Input(format!("{e}; sign in again with `sheetlog login`")))?;
    let result = &v["AuthenticationResult"];
    let token = result["AccessToken"]
        .as_str()
        .ok_or_else(|| CliError::Other("the refresh answered no access token".into()))?
        .to_owned();
    session.access_token = Some(token.clone());
    session.expires_at = now() + result["ExpiresIn"].as_i64().unwrap_or(0);
    creds.save()?;
    Ok(Some(token))
}
