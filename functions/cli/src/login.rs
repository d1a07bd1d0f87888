//! `sheetlog login` / `logout` for a stack with Cognito authorization: sign in with email and
//! password (Cognito's `USER_PASSWORD_AUTH`, plain HTTP JSON to the pool's endpoint, which the
//! API names in `GET /config.json`), keep the refresh token in the user's config directory
//! (`$XDG_CONFIG_HOME/sheetlog/credentials.json`, else `~/.config/sheetlog/credentials.json`,
//! mode 0600), one entry per API URL, and trade it for a fresh access token
//! (`REFRESH_TOKEN_AUTH`) when the stored one is about to expire.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::CliError;

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
    let text = resp.text().await.unwrap_or_default();
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
    let endpoint = config["cognito"]["endpoint"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let client_id = config["cognito"]["clientId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let v = cognito(
        &endpoint,
        "InitiateAuth",
        json!({"AuthFlow": "USER_PASSWORD_AUTH", "ClientId": client_id,
               "AuthParameters": {"USERNAME": email, "PASSWORD": password}}),
    )
    .await?;
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
