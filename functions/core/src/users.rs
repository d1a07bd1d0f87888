//! Who is in the user pool (Cognito authorization): the API finds a person by email when a sheet
//! is shared with them, and a signed-in user's email for `GET /me`.
//!
//! - [`UserDirectory`] — the port.
//! - [`CognitoDirectory`] — the adapter: Cognito user pools' JSON API (`ListUsers` with the
//!   filter `email = "…"` or `sub = "…"`), signed with SigV4 for the service `cognito-idp`
//!   ([`crate::sigv4`]).
//!   Plain HTTP rather than the SDK crate: one operation does not justify another large SDK
//!   dependency in every function. The local stack points it at the emulator.
//! - [`MemDirectory`] — a fixed list, for tests.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::sigv4::Signer;

/// A person in the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The token's `sub`: what the catalog keys members by.
    pub id: String,
    pub email: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    #[error("the user pool could not be asked ({operation}): {message}")]
    Service {
        operation: &'static str,
        message: String,
    },
    #[error("the user pool throttled {0}; retry shortly")]
    Throttled(&'static str),
}

#[async_trait]
pub trait UserDirectory: Send + Sync + fmt::Debug {
    async fn by_email(&self, email: &str) -> Result<Option<User>, DirectoryError>;
    async fn by_id(&self, id: &str) -> Result<Option<User>, DirectoryError>;
}

/// The Cognito endpoint of a region (`SHEETLOG_COGNITO_ENDPOINT` overrides it).
pub fn default_endpoint(region: &str) -> String {
    format!("https://cognito-idp.{region}.amazonaws.com/")
}

/// Cognito's JSON API, for one user pool.
pub struct CognitoDirectory {
    http: reqwest::Client,
    endpoint: String,
    pool_id: String,
    /// `None` without credentials (a local endpoint).
    signer: Option<Signer>,
}

impl fmt::Debug for CognitoDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CognitoDirectory")
            .field("endpoint", &self.endpoint)
            .field("pool_id", &self.pool_id)
            .finish_non_exhaustive()
    }
}

impl CognitoDirectory {
    pub fn new(sdk: &aws_config::SdkConfig, endpoint: &str, pool_id: &str) -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
            endpoint: endpoint.to_owned(),
            pool_id: pool_id.to_owned(),
            signer: Signer::from_sdk(sdk, "cognito-idp"),
        }
    }

    /// One call of the JSON API: `operation` with `body`, signed when there are credentials.
    pub async fn call(
        &self,
        operation: &'static str,
        body: &Value,
    ) -> Result<Value, DirectoryError> {
        let fail = |message: String| DirectoryError::Service { operation, message };
        let bytes = serde_json::to_vec(body).map_err(|e| fail(e.to_string()))?;
        let mut headers = vec![
            (
                "content-type".to_owned(),
                "application/x-amz-json-1.1".to_owned(),
            ),
            (
                "x-amz-target".to_owned(),
                format!("AWSCognitoIdentityProviderService.{operation}"),
            ),
        ];
        if let Some(signer) = &self.signer {
            let added = signer
                .headers(
                    "POST",
                    &self.endpoint,
                    headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                    &bytes,
                )
                .await
                .map_err(|e| fail(e.to_string()))?;
            headers.extend(added);
        }
        let mut req = self.http.post(&self.endpoint);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let resp = req
            .body(bytes)
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| fail(e.to_string()))?;
        if status.as_u16() == 429 || text.contains("TooManyRequestsException") {
            return Err(DirectoryError::Throttled(operation));
        }
        if !status.is_success() {
            return Err(fail(format!("HTTP {status}: {text}")));
        }
        serde_json::from_str(&text).map_err(|e| fail(format!("unreadable answer: {e}")))
    }

    async fn find(&self, attribute: &str, value: &str) -> Result<Option<User>, DirectoryError> {
        // The filter language quotes with `"`; a value holding one cannot name a user.
        if value.contains('"') || value.contains('\\') || value.is_empty() {
            return Ok(None);
        }
        let answer = self
            .call(
                "ListUsers",
                &json!({
                    "UserPoolId": self.pool_id,
                    "Filter": format!("{attribute} = \"{value}\""),
                    "Limit": 2,
                }),
            )
            .await?;
        Ok(answer["Users"]
            .as_array()
            .and_then(|u| u.first())
            .and_then(user_of))
    }
}

/// A `UserType` of the answer: its `sub` and `email` attributes.
fn user_of(u: &Value) -> Option<User> {
    let attrs: HashMap<&str, &str> = u["Attributes"]
        .as_array()?
        .iter()
        .filter_map(|a| Some((a["Name"].as_str()?, a["Value"].as_str()?)))
        .collect();
    Some(User {
        id: attrs.get("sub")?.to_string(),
        email: attrs.get("email").map(|e| e.to_string()),
    })
}

#[async_trait]
impl UserDirectory for CognitoDirectory {
    async fn by_email(&self, email: &str) -> Result<Option<User>, DirectoryError> {
        self.find("email", email.trim()).await
    }
    async fn by_id(&self, id: &str) -> Result<Option<User>, DirectoryError> {
        self.find("sub", id).await
    }
}

/// A fixed directory, for tests.
#[derive(Debug, Default)]
pub struct MemDirectory {
    pub users: Vec<User>,
}

#[async_trait]
impl UserDirectory for MemDirectory {
    async fn by_email(&self, email: &str) -> Result<Option<User>, DirectoryError> {
        Ok(self
            .users
            .iter()
            .find(|u| u.email.as_deref() == Some(email))
            .cloned())
    }
    async fn by_id(&self, id: &str) -> Result<Option<User>, DirectoryError> {
        Ok(self.users.iter().find(|u| u.id == id).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_its_sub_and_email_attributes() {
        let u = json!({"Username": "x", "Attributes": [
            {"Name": "sub", "Value": "u-1"}, {"Name": "email", "Value": "a@example.com"}]});
        assert_eq!(
            user_of(&u),
            Some(User {
                id: "u-1".into(),
                email: Some("a@example.com".into())
            })
        );
        assert_eq!(user_of(&json!({"Attributes": []})), None);
    }
}
