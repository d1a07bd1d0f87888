//! Cognito authorization on the local stack (`./scripts/dev --auth cognito`): a user pool and
//! app client on the emulator (moto implements Cognito user pools and signs real RS256 JWTs),
//! demo users, and the settings the local authorizer needs to verify those tokens the way API
//! Gateway's JWT authorizer verifies the deployed pool's.
//!
//! moto's tokens name the issuer `https://cognito-idp.<region>.amazonaws.com/<poolId>`, as
//! Cognito does, but it serves the pool's JWKS at `<endpoint>/<poolId>/.well-known/jwks.json`:
//! the authorizer checks `iss` against the first and fetches keys from the second.

use anyhow::Context;
use serde_json::{Value, json};
use sheetlog_core::users::CognitoDirectory;

/// The demo users `sheetlog dev --auth cognito` creates.
pub const DEMO_USERS: [&str; 2] = ["alice@example.com", "bob@example.com"];
/// Their password (printed; the emulator holds nothing else).
pub const DEMO_PASSWORD: &str = "Sheetlog-demo-1";

/// A user pool on the emulator.
#[derive(Debug, Clone)]
pub struct LocalPool {
    pub pool_id: String,
    pub client_id: String,
    pub region: String,
    /// The emulator's endpoint, with a trailing `/` (Cognito's JSON API).
    pub endpoint: String,
    /// What the tokens' `iss` says.
    pub issuer: String,
    /// Where the pool's keys are served.
    pub jwks_url: String,
}

impl LocalPool {
    /// The API's settings for this pool (`SHEETLOG_USER_POOL_ID` and the rest).
    pub fn api_config(&self) -> sheetlog_api::config::CognitoConfig {
        sheetlog_api::config::CognitoConfig {
            region: self.region.clone(),
            user_pool_id: self.pool_id.clone(),
            client_id: self.client_id.clone(),
            endpoint: self.endpoint.clone(),
        }
    }

    /// The stand-in for API Gateway's JWT authorizer that accepts this pool's access tokens.
    pub fn authorizer(&self) -> crate::local_auth::JwtAuthorizer {
        crate::local_auth::JwtAuthorizer::with_jwks_url(
            &self.issuer,
            vec![self.client_id.clone()],
            &self.jwks_url,
        )
    }
}

/// Creates a pool named `name`, an app client without a secret that allows SRP and refresh-token
/// sign-in (as the deployed stack's; the emulator enforces both the flows and the SRP proof,
/// scripts/lib/moto_server.py), and `users` with `password` (permanent, confirmed).
pub async fn create_pool(
    sdk: &aws_config::SdkConfig,
    endpoint: &str,
    name: &str,
    users: &[&str],
    password: &str,
) -> anyhow::Result<LocalPool> {
    let endpoint = format!("{}/", endpoint.trim_end_matches('/'));
    let region = sdk
        .region()
        .map(|r| r.to_string())
        .unwrap_or_else(|| "us-east-1".into());
    let idp = CognitoDirectory::new(sdk, &endpoint, "");
    let call = |op: &'static str, body: Value| {
        let idp = &idp;
        async move {
            idp.call(op, &body)
                .await
                .with_context(|| format!("Cognito {op} on the emulator"))
        }
    };
    let pool = call(
        "CreateUserPool",
        json!({"PoolName": name, "AutoVerifiedAttributes": ["email"],
               "AdminCreateUserConfig": {"AllowAdminCreateUserOnly": true}}),
    )
    .await?;
    let pool_id = pool["UserPool"]["Id"]
        .as_str()
        .context("CreateUserPool answered no pool id")?
        .to_owned();
    let client = call(
        "CreateUserPoolClient",
        json!({"UserPoolId": pool_id, "ClientName": format!("{name}-web"), "GenerateSecret": false,
               "ExplicitAuthFlows": ["ALLOW_USER_SRP_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"]}),
    )
    .await?;
    let client_id = client["UserPoolClient"]["ClientId"]
        .as_str()
        .context("CreateUserPoolClient answered no client id")?
        .to_owned();
    for user in users {
        call(
            "AdminCreateUser",
            json!({"UserPoolId": pool_id, "Username": user, "MessageAction": "SUPPRESS",
                   "UserAttributes": [{"Name": "email", "Value": user},
                                      {"Name": "email_verified", "Value": "true"}]}),
        )
        .await?;
        call(
            "AdminSetUserPassword",
            json!({"UserPoolId": pool_id, "Username": user, "Password": password,
                   "Permanent": true}),
        )
        .await?;
    }
    Ok(LocalPool {
        issuer: format!("https://cognito-idp.{region}.amazonaws.com/{pool_id}"),
        jwks_url: format!("{endpoint}{pool_id}/.well-known/jwks.json"),
        pool_id,
        client_id,
        region,
        endpoint,
    })
}
