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
    PasswordPolicyType, SoftwareTokenMfaConfigType, UserPoolMfaType, UserPoolPolicyType,
    UsernameConfigurationType, VerifiedAttributeType,
};
use serde::Deserialize;

/// What the local pool takes from the template's user pool (`userPool` in the description
/// `cdk/bin/local-resources.ts` prints): MFA, the password policy, who creates accounts, and
/// whether user names are case-sensitive. The deployed pool signs people in by their email as
/// an alias of a generated user name (`usernameAttributes`); the local pool names each user by
/// their email, which signs in the same way with the same SRP exchange.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolSettings {
    /// `OFF`, `OPTIONAL` or `ON`.
    pub mfa_configuration: String,
    /// `SOFTWARE_TOKEN_MFA` (an authenticator app); `SMS_MFA` is not used.
    pub enabled_mfas: Vec<String>,
    pub username_attributes: Vec<String>,
    pub case_sensitive: bool,
    pub allow_admin_create_user_only: bool,
    pub password_policy: PasswordPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PasswordPolicy {
    pub minimum_length: i32,
    pub require_lowercase: bool,
    pub require_uppercase: bool,
    pub require_numbers: bool,
    pub require_symbols: bool,
}

impl Default for PoolSettings {
    /// A plain pool (no MFA, Cognito's default password length, no character rules) for tests
    /// that need only signed tokens. Not the template's pool: `sheetlog dev` and every test of
    /// sign-in take that from the description ([`PoolSettings::from_description`]).
    fn default() -> Self {
        Self {
            mfa_configuration: "OFF".into(),
            enabled_mfas: Vec::new(),
            username_attributes: Vec::new(),
            case_sensitive: true,
            allow_admin_create_user_only: true,
            password_policy: PasswordPolicy {
                minimum_length: 8,
                require_lowercase: false,
                require_uppercase: false,
                require_numbers: false,
                require_symbols: false,
            },
        }
    }
}

impl PoolSettings {
    /// The user pool of a template's description; `None` when the template has none (a stack
    /// described without `-c authMode=cognito`).
    pub fn from_description(json: &[u8]) -> anyhow::Result<Option<Self>> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Description {
            #[serde(default)]
            user_pool: Option<PoolSettings>,
        }
        let d: Description = serde_json::from_slice(json)
            .context("reading the user pool of the template's description")?;
        Ok(d.user_pool)
    }

    /// Whether a person signs in with an authenticator app's code (`ON`: everyone, set up at
    /// the first sign-in; `OPTIONAL`: those who set one up).
    pub fn totp(&self) -> bool {
        self.mfa_configuration != "OFF"
            && self.enabled_mfas.iter().any(|m| m == "SOFTWARE_TOKEN_MFA")
    }
}

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
    create_pool_with(
        sdk,
        endpoint,
        name,
        users,
        password,
        &PoolSettings::default(),
    )
    .await
}

/// [`create_pool`] with the template's `settings`.
pub async fn create_pool_with(
    sdk: &aws_config::SdkConfig,
    endpoint: &str,
    name: &str,
    users: &[&str],
    password: &str,
    settings: &PoolSettings,
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
    let pool_id = create_user_pool(&idp, name, settings).await?;
    let client_id = create_app_client(&idp, &pool_id, name).await?;
    for user in users {
        create_user(&idp, &pool_id, user, password).await?;
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

/// The context of a failed call: which Cognito operation, on the emulator.
fn on_emulator(op: &str) -> String {
    format!("Cognito {op} on the emulator")
}

/// Creates the pool itself as `settings` describe it (with TOTP MFA when they ask for it);
/// returns its id.
async fn create_user_pool(
    idp: &aws_sdk_cognitoidentityprovider::Client,
    name: &str,
    settings: &PoolSettings,
) -> anyhow::Result<String> {
    let mfa = UserPoolMfaType::from(settings.mfa_configuration.as_str());
    let pool = idp
        .create_user_pool()
        .pool_name(name)
        .auto_verified_attributes(VerifiedAttributeType::Email)
        .admin_create_user_config(
            AdminCreateUserConfigType::builder()
                .allow_admin_create_user_only(settings.allow_admin_create_user_only)
                .build(),
        )
        .policies(pool_policies(&settings.password_policy))
        .username_configuration(
            UsernameConfigurationType::builder()
                .case_sensitive(settings.case_sensitive)
                .build()
                .context("the pool's username configuration")?,
        )
        .mfa_configuration(mfa.clone())
        .send()
        .await
        .with_context(|| on_emulator("CreateUserPool"))?;
    let pool_id = pool
        .user_pool()
        .and_then(|p| p.id())
        .context("CreateUserPool answered no pool id")?
        .to_owned();
    if settings.totp() {
        idp.set_user_pool_mfa_config()
            .user_pool_id(&pool_id)
            .mfa_configuration(mfa)
            .software_token_mfa_configuration(
                SoftwareTokenMfaConfigType::builder().enabled(true).build(),
            )
            .send()
            .await
            .with_context(|| on_emulator("SetUserPoolMfaConfig"))?;
    }
    Ok(pool_id)
}

/// The pool's password policy.
fn pool_policies(policy: &PasswordPolicy) -> UserPoolPolicyType {
    UserPoolPolicyType::builder()
        .password_policy(
            PasswordPolicyType::builder()
                .minimum_length(policy.minimum_length)
                .require_lowercase(policy.require_lowercase)
                .require_uppercase(policy.require_uppercase)
                .require_numbers(policy.require_numbers)
                .require_symbols(policy.require_symbols)
                .build(),
        )
        .build()
}

/// The pool's app client `<name>-web`: no secret, SRP and refresh-token sign-in; returns its id.
async fn create_app_client(
    idp: &aws_sdk_cognitoidentityprovider::Client,
    pool_id: &str,
    name: &str,
) -> anyhow::Result<String> {
    let client = idp
        .create_user_pool_client()
        .user_pool_id(pool_id)
        .client_name(format!("{name}-web"))
        .generate_secret(false)
        .explicit_auth_flows(ExplicitAuthFlowsType::AllowUserSrpAuth)
        .explicit_auth_flows(ExplicitAuthFlowsType::AllowRefreshTokenAuth)
        .send()
        .await
        .with_context(|| on_emulator("CreateUserPoolClient"))?;
    Ok(client
        .user_pool_client()
        .and_then(|c| c.client_id())
        .context("CreateUserPoolClient answered no client id")?
        .to_owned())
}

/// A user whose name is their (verified) email, with `password` set permanently.
async fn create_user(
    idp: &aws_sdk_cognitoidentityprovider::Client,
    pool_id: &str,
    user: &str,
    password: &str,
) -> anyhow::Result<()> {
    let attribute = |name: &str, value: &str| {
        AttributeType::builder()
            .name(name)
            .value(value)
            .build()
            .with_context(|| format!("the attribute {name}"))
    };
    idp.admin_create_user()
        .user_pool_id(pool_id)
        .username(user)
        .message_action(MessageActionType::Suppress)
        .user_attributes(attribute("email", user)?)
        .user_attributes(attribute("email_verified", "true")?)
        .send()
        .await
        .with_context(|| on_emulator("AdminCreateUser"))?;
    idp.admin_set_user_password()
        .user_pool_id(pool_id)
        .username(user)
        .password(password)
        .permanent(true)
        .send()
        .await
        .with_context(|| on_emulator("AdminSetUserPassword"))?;
    Ok(())
}
