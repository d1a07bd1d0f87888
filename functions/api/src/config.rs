//! The API's settings, read once at start-up from the variables the CDK stack sets.

use std::time::Duration;

use sheetlog_core::config::{ConfigError, Env, EnvVar, LogConfig, Resources, environment};
use sheetlog_core::poke::PokeConfig;

/// How requests are authorized (`SHEETLOG_AUTH_MODE`; `docs/api.md`, "Access to logs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// Nothing proves who calls (the local stack's default): every caller may use every log.
    None,
    /// IAM (SigV4) on the API: IAM policies decide who may call it; every caller may use every
    /// log. What a deployment without `SHEETLOG_AUTH_MODE` and without an access claim is.
    #[default]
    Iam,
    /// A bring-your-own issuer's JWT; per-log access from the token's access claim.
    Jwt,
    /// The stack's Cognito user pool; identity is the token's `sub`, access from the catalog.
    Cognito,
}

impl AuthMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::None => "none",
            AuthMode::Iam => "iam",
            AuthMode::Jwt => "jwt",
            AuthMode::Cognito => "cognito",
        }
    }
}

impl std::str::FromStr for AuthMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "none" => Ok(Self::None),
            "iam" => Ok(Self::Iam),
            "jwt" => Ok(Self::Jwt),
            "cognito" => Ok(Self::Cognito),
            other => Err(ConfigError(format!(
                "SHEETLOG_AUTH_MODE={other:?}: expected none, iam, jwt or cognito"
            ))),
        }
    }
}

/// The stack's user pool (Cognito authorization), as the web page and CLI need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CognitoConfig {
    pub region: String,
    /// `SHEETLOG_USER_POOL_ID`.
    pub user_pool_id: String,
    /// `SHEETLOG_USER_POOL_CLIENT_ID`.
    pub client_id: String,
    /// The Cognito endpoint (`SHEETLOG_COGNITO_ENDPOINT`; default the region's).
    pub endpoint: String,
}

/// How a Replicache push is written (`SHEETLOG_SYNC_WRITES`, `docs/sync.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncWrites {
    /// Checked, enqueued on the sync FIFO queue and answered; the sync writer applies it.
    Queued,
    /// Applied by the API before it answers, racing other pushes for the log's next entry.
    #[default]
    Direct,
}

impl std::str::FromStr for SyncWrites {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "queued" => Ok(Self::Queued),
            "direct" => Ok(Self::Direct),
            other => Err(ConfigError(format!(
                "SHEETLOG_SYNC_WRITES={other:?}: expected queued or direct"
            ))),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Append a Snapshot entry once this many entries have gone by since the last one.
    pub snapshot_interval: u64,
    /// Start a new segment (instead of a Snapshot entry) once the current one holds this many.
    pub segment_max_entries: u64,
    /// How long presigned upload and download URLs stay valid.
    pub upload_url_ttl: Duration,
    /// Largest HTTP request body read at all.
    pub max_request_bytes: usize,
    /// Largest uploaded file: upload URLs are signed for at most this length and a commit
    /// refuses anything larger.
    pub max_upload_bytes: u64,
    /// Largest response a route that can grow with the sheet (the Replicache pull) may build:
    /// AWS Lambda's 6 MB response limit, less room for headers.
    pub max_response_bytes: usize,
    /// With JWT authorization: the token claim that lists the logs a caller may use
    /// (`SHEETLOG_ACCESS_CLAIM`; `access.rs`). `None`: every caller may use every log.
    pub access_claim: Option<String>,
    /// How pushes are written (`SHEETLOG_SYNC_WRITES`; without it, directly: the stack and
    /// `sheetlog dev` always set it, to `queued` unless configured otherwise).
    pub sync_writes: SyncWrites,
    /// The sync FIFO queue (`SHEETLOG_SYNC_QUEUE_URL`), required for queued writes.
    pub sync_queue_url: Option<String>,
    /// How long one `DELETE /logs/{logId}` keeps deleting before it answers `202` (more is left;
    /// the client repeats the request). Below the API function's 25 s timeout.
    pub delete_budget: Duration,
    /// How long one `GET /logs/{logId}/export` may spend writing a workbook before it answers
    /// `413 export-too-large` (below the API function's 25 s timeout, leaving time to store it).
    pub export_budget: Duration,
    /// Pokes on AppSync Events after each commit (`SHEETLOG_EVENTS_*`; `docs/sync.md`, "Pokes").
    /// `None`: no pokes, and the web page polls.
    pub pokes: Option<PokeConfig>,
    /// How requests are authorized (`SHEETLOG_AUTH_MODE`).
    pub auth_mode: AuthMode,
    /// The catalog table (`SHEETLOG_CATALOG_TABLE`), required under Cognito authorization.
    pub catalog_table: Option<String>,
    /// How long an instance trusts a role it read from the catalog
    /// (`SHEETLOG_CATALOG_CACHE_SECS`, default 30): the bound on revocation.
    pub catalog_cache: Duration,
    /// The user pool, under Cognito authorization.
    pub cognito: Option<CognitoConfig>,
    /// Most members a sheet has (1,000; smaller in tests): its members list is one response,
    /// far under Lambda's 6 MB.
    pub max_members: usize,
    /// Most `DELETE /logs/{logId}` requests one caller (its proven subject) makes a minute,
    /// counted across instances in the Clients table (30; a caller without a proven subject,
    /// as on the local stack without `--auth`, is not counted). Past it: `429 rate-limited`.
    pub deletes_per_minute: u32,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            snapshot_interval: 100,
            segment_max_entries: 10_000,
            upload_url_ttl: Duration::from_secs(15 * 60),
            max_request_bytes: 6 * 1024 * 1024,
            max_upload_bytes: 256 * 1024 * 1024,
            max_response_bytes: 6 * 1024 * 1024 - 16 * 1024,
            access_claim: None,
            sync_writes: SyncWrites::Direct,
            sync_queue_url: None,
            delete_budget: Duration::from_secs(15),
            export_budget: Duration::from_secs(18),
            pokes: None,
            auth_mode: AuthMode::Iam,
            catalog_table: None,
            catalog_cache: Duration::from_secs(30),
            cognito: None,
            max_members: 1000,
            deletes_per_minute: 30,
        }
    }
}

/// Everything the API function reads at start-up, from one [`Env`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub resources: Resources,
    pub log: LogConfig,
    pub api: ApiConfig,
}

impl Settings {
    /// The API function's declaration of the variables it reads (see [`sheetlog_core::config::Given`]).
    pub fn environment() -> Vec<EnvVar> {
        environment(&[
            sheetlog_core::telemetry::LAMBDA_ENVIRONMENT,
            Resources::ENVIRONMENT,
            LogConfig::ENVIRONMENT,
            ApiConfig::ENVIRONMENT,
            PokeConfig::ENVIRONMENT,
            &[
                // The API appends (pending snapshots, idempotency keys, sync clients) and gives
                // pages the Event API's addresses.
                EnvVar::stack("SHEETLOG_PENDING_TABLE"),
                EnvVar::stack("SHEETLOG_DEDUPE_TABLE"),
                EnvVar::stack("SHEETLOG_CLIENTS_TABLE"),
                EnvVar::stack("SHEETLOG_EVENTS_HTTP_URL"),
                EnvVar::stack("SHEETLOG_EVENTS_REALTIME_URL"),
                // `sheetlog dev` serves the page from its build directory (`web.rs`).
                EnvVar::local("SHEETLOG_WEB_DIR"),
            ],
        ])
    }

    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        Ok(Self {
            resources: Resources::from_vars(env)?,
            log: LogConfig::from_vars(env)?,
            api: ApiConfig::from_vars(env)?,
        })
    }
}

/// The environment variable that names the catalog table (Cognito authorization); the local
/// stack maps the template's reference to it onto its own catalog table.
pub const CATALOG_TABLE_VAR: &str = "SHEETLOG_CATALOG_TABLE";

impl ApiConfig {
    /// The authorization mode as callers see it: IAM with an access claim is JWT.
    pub fn effective_auth_mode(&self) -> AuthMode {
        match self.auth_mode {
            AuthMode::Iam if self.access_claim.is_some() => AuthMode::Jwt,
            m => m,
        }
    }

    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&Env::process())
    }

    /// What [`ApiConfig::from_vars`] reads. The Cognito variables are needed only with
    /// `SHEETLOG_AUTH_MODE=cognito` (the loader fails without them then), the catalog only with
    /// a mode that has users, the sync queue only with queued writes.
    pub const ENVIRONMENT: &[EnvVar] = &[
        EnvVar::optional("SHEETLOG_SNAPSHOT_INTERVAL"),
        EnvVar::optional("SHEETLOG_SEGMENT_MAX_ENTRIES"),
        EnvVar::optional("SHEETLOG_UPLOAD_URL_TTL_SECS"),
        EnvVar::optional("SHEETLOG_MAX_UPLOAD_BYTES"),
        EnvVar::optional("SHEETLOG_ACCESS_CLAIM"),
        EnvVar::optional("SHEETLOG_SYNC_WRITES"),
        EnvVar::optional("SHEETLOG_SYNC_QUEUE_URL"),
        EnvVar::optional("SHEETLOG_AUTH_MODE"),
        EnvVar::optional(CATALOG_TABLE_VAR),
        EnvVar::optional("SHEETLOG_CATALOG_CACHE_SECS"),
        EnvVar::optional("SHEETLOG_USER_POOL_ID"),
        EnvVar::optional("SHEETLOG_USER_POOL_CLIENT_ID"),
        EnvVar::optional("SHEETLOG_COGNITO_ENDPOINT"),
        EnvVar::lambda("AWS_REGION"),
        EnvVar::lambda("AWS_DEFAULT_REGION"),
    ];

    /// [`ApiConfig::from_env`] from any [`Env`].
    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        let mut c = Self::default();
        if let Some(v) = env.parse::<u64>("SHEETLOG_SNAPSHOT_INTERVAL")? {
            c.snapshot_interval = v;
        }
        if let Some(v) = env.parse::<u64>("SHEETLOG_SEGMENT_MAX_ENTRIES")? {
            c.segment_max_entries = v;
        }
        if let Some(v) = env.parse::<u64>("SHEETLOG_UPLOAD_URL_TTL_SECS")? {
            c.upload_url_ttl = Duration::from_secs(v);
        }
        if let Some(v) = env.parse::<u64>("SHEETLOG_MAX_UPLOAD_BYTES")? {
            c.max_upload_bytes = v;
        }
        c.access_claim = env.text("SHEETLOG_ACCESS_CLAIM")?;
        if let Some(v) = env.text("SHEETLOG_SYNC_WRITES")? {
            c.sync_writes = v.parse()?;
        }
        c.sync_queue_url = env.text("SHEETLOG_SYNC_QUEUE_URL")?;
        c.pokes = PokeConfig::from_vars(env)?;
        if c.access_claim.is_some() {
            c.auth_mode = AuthMode::Jwt;
        }
        if let Some(v) = env.text("SHEETLOG_AUTH_MODE")? {
            c.auth_mode = v.parse()?;
        }
        c.catalog_table = env.text(CATALOG_TABLE_VAR)?;
        if let Some(v) = env.parse::<u64>("SHEETLOG_CATALOG_CACHE_SECS")? {
            c.catalog_cache = Duration::from_secs(v);
        }
        // Read in every mode, so what the function reads does not depend on the mode.
        let pool_id = env.text("SHEETLOG_USER_POOL_ID")?;
        let client_id = env.text("SHEETLOG_USER_POOL_CLIENT_ID")?;
        let endpoint = env.text("SHEETLOG_COGNITO_ENDPOINT")?;
        let region = match env.text("AWS_REGION")? {
            Some(r) => Some(r),
            None => env.text("AWS_DEFAULT_REGION")?,
        };
        if c.auth_mode == AuthMode::Cognito {
            let region = region.unwrap_or_else(|| "us-east-1".into());
            let need = |name: &str, v: Option<String>| {
                v.ok_or_else(|| ConfigError(format!("SHEETLOG_AUTH_MODE=cognito needs {name}")))
            };
            c.cognito = Some(CognitoConfig {
                user_pool_id: need("SHEETLOG_USER_POOL_ID", pool_id)?,
                client_id: need("SHEETLOG_USER_POOL_CLIENT_ID", client_id)?,
                endpoint: endpoint
                    .unwrap_or_else(|| sheetlog_core::users::default_endpoint(&region)),
                region,
            });
        }
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.snapshot_interval < 2 {
            return Err(ConfigError(
                "SHEETLOG_SNAPSHOT_INTERVAL must be at least 2".into(),
            ));
        }
        if self.segment_max_entries < self.snapshot_interval {
            return Err(ConfigError(
                "SHEETLOG_SEGMENT_MAX_ENTRIES must be at least SHEETLOG_SNAPSHOT_INTERVAL".into(),
            ));
        }
        let ttl = self.upload_url_ttl.as_secs();
        if !(60..=7 * 24 * 3600).contains(&ttl) {
            return Err(ConfigError(
                "SHEETLOG_UPLOAD_URL_TTL_SECS must be between 60 and 604800 (S3's limit)".into(),
            ));
        }
        if !(1..=5 * 1024 * 1024 * 1024).contains(&self.max_upload_bytes) {
            return Err(ConfigError(
                "SHEETLOG_MAX_UPLOAD_BYTES must be between 1 and 5368709120 (S3's CopyObject limit)"
                    .into(),
            ));
        }
        if self.sync_writes == SyncWrites::Queued && self.sync_queue_url.is_none() {
            return Err(ConfigError(
                "SHEETLOG_SYNC_WRITES=queued needs SHEETLOG_SYNC_QUEUE_URL (the sync FIFO queue)"
                    .into(),
            ));
        }
        if let Some(p) = &self.pokes {
            p.validate()?;
        }
        if self.auth_mode == AuthMode::Cognito
            && (self.catalog_table.is_none() || self.cognito.is_none())
        {
            return Err(ConfigError(
                "SHEETLOG_AUTH_MODE=cognito needs SHEETLOG_CATALOG_TABLE, SHEETLOG_USER_POOL_ID and SHEETLOG_USER_POOL_CLIENT_ID".into(),
            ));
        }
        // Per-log access under JWT authorization is the claim's: without one every token would
        // use every log (`access.rs`), so that setting is refused rather than run open.
        if self.auth_mode == AuthMode::Jwt && self.access_claim.is_none() {
            return Err(ConfigError(
                "SHEETLOG_AUTH_MODE=jwt needs SHEETLOG_ACCESS_CLAIM (the claim that lists a token's logs)".into(),
            ));
        }
        if self.catalog_cache > Duration::from_secs(3600) {
            return Err(ConfigError(
                "SHEETLOG_CATALOG_CACHE_SECS must be at most 3600 (it bounds how long a removed member keeps access)".into(),
            ));
        }
        if let Some(claim) = &self.access_claim
            && !claim
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_:-./".contains(c))
        {
            return Err(ConfigError(format!(
                "SHEETLOG_ACCESS_CLAIM={claim:?}: expected a claim name (letters, digits, _ : - . /)"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_authorization_without_an_access_claim_is_refused() {
        let open = ApiConfig {
            auth_mode: AuthMode::Jwt,
            ..ApiConfig::default()
        };
        let err = open.validate().expect_err("JWT mode without a claim");
        assert!(err.0.contains("SHEETLOG_ACCESS_CLAIM"), "{err}");
        let claimed = ApiConfig {
            auth_mode: AuthMode::Jwt,
            access_claim: Some("sheetlog_logs".into()),
            ..ApiConfig::default()
        };
        claimed.validate().expect("JWT mode with a claim");
    }
}
