//! Who is in the user pool (Cognito authorization): the API reads a signed-in person's email
//! (and whether the pool verified it) for `GET /me` and to claim the invitations sent to it.
//!
//! - [`UserDirectory`] — the port.
//! - [`CognitoDirectory`] — the adapter: the AWS SDK's Cognito client, `ListUsers` with the
//!   filter `sub = "…"`. The local stack points it at the emulator.
//! - [`MemDirectory`] — a fixed list, for tests.

use std::fmt;

use async_trait::async_trait;

/// A person in the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The token's `sub`: what the catalog keys members by.
    pub id: String,
    pub email: Option<String>,
    /// Whether the pool has verified `email` (`email_verified`): only a verified address
    /// claims the invitations sent to it.
    pub email_verified: bool,
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
    async fn by_id(&self, id: &str) -> Result<Option<User>, DirectoryError>;
}

/// The Cognito endpoint of a region (`SHEETLOG_COGNITO_ENDPOINT` overrides it).
pub fn default_endpoint(region: &str) -> String {
    format!("https://cognito-idp.{region}.amazonaws.com/")
}

/// The user pool through the AWS SDK's Cognito client (`ListUsers`).
#[derive(Debug, Clone)]
pub struct CognitoDirectory {
    client: aws_sdk_cognitoidentityprovider::Client,
    pool_id: String,
}

impl CognitoDirectory {
    /// A directory of `pool_id` at `endpoint` (the region's Cognito endpoint, or the emulator).
    pub fn new(sdk: &aws_config::SdkConfig, endpoint: &str, pool_id: &str) -> Self {
        let conf = aws_sdk_cognitoidentityprovider::config::Builder::from(sdk)
            .endpoint_url(endpoint.trim_end_matches('/'))
            .build();
        Self {
            client: aws_sdk_cognitoidentityprovider::Client::from_conf(conf),
            pool_id: pool_id.to_owned(),
        }
    }

    async fn find(&self, attribute: &str, value: &str) -> Result<Option<User>, DirectoryError> {
        // The filter language quotes with `"`; a value holding one cannot name a user.
        if value.contains('"') || value.contains('\\') || value.is_empty() {
            return Ok(None);
        }
        let answer = self
            .client
            .list_users()
            .user_pool_id(&self.pool_id)
            .filter(format!("{attribute} = \"{value}\""))
            .limit(2)
            .send()
            .await
            .map_err(|e| {
                let e = e.into_service_error();
                if e.is_too_many_requests_exception() {
                    DirectoryError::Throttled("ListUsers")
                } else {
                    DirectoryError::Service {
                        operation: "ListUsers",
                        message: e.to_string(),
                    }
                }
            })?;
        Ok(answer.users().first().and_then(|u| {
            let attr = |name: &str| {
                u.attributes()
                    .iter()
                    .find(|a| a.name() == name)
                    .and_then(|a| a.value())
                    .map(str::to_owned)
            };
            Some(User {
                id: attr("sub")?,
                email: attr("email"),
                email_verified: attr("email_verified").as_deref() == Some("true"),
            })
        }))
    }
}

#[async_trait]
impl UserDirectory for CognitoDirectory {
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
    async fn by_id(&self, id: &str) -> Result<Option<User>, DirectoryError> {
        Ok(self.users.iter().find(|u| u.id == id).cloned())
    }
}
