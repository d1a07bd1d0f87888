//! Cognito authorization on the local stack (`./scripts/dev --auth cognito`): a user pool and
//! app client on the emulator (moto implements Cognito user pools and signs real RS256 JWTs),
//! demo users, and the settings the local authorizer needs to verify those tokens the way API
//! Gateway's JWT authorizer verifies the deployed pool's.
//!
//! moto's tokens name the issuer `https://cognito-idp.<region>.amazonaws.com/<poolId>`, as
//! Cognito does, but it serves the pool's JWKS at `<endpoint>/<poolId>/.well-known/jwks.json`:
//! the authorizer checks `iss` against the first and fetches keys from the second.

use anyhow::Context;
use aws_sdk_cognitoidentityprovider::types::{
    AdminCreateUserConfigType, AttributeType, ExplicitAuthFlowsType, MessageActionType,
    VerifiedAttributeType,
};

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
    let conf = aws_sdk_cognitoidentityprovider::config::Builder::from(sdk)
        .endpoint_url(endpoint.trim_end_matches('/'))
        .build();
    let idp = aws_sdk_cognitoidentityprovider::Client::from_conf(conf);
    let on_emulator = |op: &str| format!("Cognito {op} on the emulator");
    let pool = idp
        .create_user_pool()
        .pool_name(name)
        .auto_verified_attributes(VerifiedAttributeType::Email)
        .admin_create_user_config(
            AdminCreateUserConfigType::builder()
                .allow_admin_create_user_only(true)
                .build(),
        )
        .send()
        .await
        .with_context(|| on_emulator("CreateUserPool"))?;
    let pool_id = pool
        .user_pool()
        .and_then(|p| p.id())
        .context("CreateUserPool answered no pool id")?
        .to_owned();
    let client = idp
        .create_user_pool_client()
        .user_pool_id(&pool_id)
        .client_name(format!("{name}-web"))
        .generate_secret(false)
        .explicit_auth_flows(ExplicitAuthFlowsType::AllowUserSrpAuth)
        .explicit_auth_flows(ExplicitAuthFlowsType::AllowRefreshTokenAuth)
        .send()
        .await
        .with_context(|| on_emulator("CreateUserPoolClient"))?;
    let client_id = client
        .user_pool_client()
        .and_then(|c| c.client_id())
        .context("CreateUserPoolClient answered no client id")?
        .to_owned();
    let attribute = |name: &str, value: &str| {
        AttributeType::builder()
            .name(name)
            .value(value)
            .build()
            .with_context(|| format!("the attribute {name}"))
    };
    for user in users {
        idp.admin_create_user()
            .user_pool_id(&pool_id)
            .username(*user)
            .message_action(MessageActionType::Suppress)
            .user_attributes(attribute("email", user)?)
            .user_attributes(attribute("email_verified", "true")?)
            .send()
            .await
            .with_context(|| on_emulator("AdminCreateUser"))?;
        idp.admin_set_user_password()
            .user_pool_id(&pool_id)
            .username(*user)
            .password(password)
            .permanent(true)
            .send()
            .await
            .with_context(|| on_emulator("AdminSetUserPassword"))?;
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
