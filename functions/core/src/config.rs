//! Typed configuration, read once at start-up. The CDK stack owns the environment variable names;
//! every one has a default that suits production.

use std::time::Duration;

use crate::domain::keys::MAX_ITEM_ATTRIBUTE_BYTES;

#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

/// Tuning of the event-log algorithms.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Bodies larger than this are written to S3 and referenced from the entry. The default,
    /// 16 KB, is where S3's flat per-request read price drops below DynamoDB's per-4 KB price.
    pub inline_body_max_bytes: usize,
    /// The entry-size rule: the largest body any entry may have, whichever way it comes in (an
    /// append, a sync client's mutation or run of mutations, a replayed run; inline or offloaded
    /// to S3). Readers hold bodies in memory, so this also bounds what one entry costs a reader
    /// (`docs/operations.md`, "Memory per request"). `SHEETLOG_MAX_ENTRY_BYTES`.
    pub max_body_bytes: usize,
    /// Bytes of entry bodies a load or a `read_since` page holds before it ends early (the page
    /// then says it is not complete and the reader continues from its `next_seq`), so what one
    /// request holds is bounded by configuration (`docs/operations.md`, "Memory per request").
    /// `SHEETLOG_READ_BUDGET_BYTES`.
    pub read_budget_bytes: usize,
    /// Attempts at the read-then-conditional-write loop before giving up.
    pub max_attempts: u32,
    /// First backoff delay; doubles per attempt up to `max_backoff`, with full jitter.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
    /// Entries fetched per query page when a caller asks for "everything".
    pub page_size: usize,
    /// Bits of an idempotency key's hash that pick its Dedupe item, from the expected number of
    /// keys per month (`crate::domain::dedupe::prefix_bits_for_rate`).
    pub dedupe_prefix_bits: u8,
}

/// The default entry-size rule: 1 MiB of body per entry (larger data goes through the upload flow).
pub const DEFAULT_MAX_ENTRY_BYTES: usize = 1024 * 1024;

/// The default expected rate of idempotent appends across a stack, per month.
pub const DEFAULT_DEDUPE_KEYS_PER_MONTH: u64 = 1_000_000;

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            inline_body_max_bytes: 16 * 1024,
            max_body_bytes: DEFAULT_MAX_ENTRY_BYTES,
            read_budget_bytes: 64 * 1024 * 1024,
            // Measured on the emulator with 8 writers appending to one log as fast as they can:
            // 3.6 attempts per append on average, the longest 30 (a loser races the winners
            // afresh each time, roughly a 1-in-8 chance). Real edits arrive far slower; the API
            // answers 503 with Retry-After when this runs out.
            max_attempts: 30,
            min_backoff: Duration::from_millis(5),
            // A low cap keeps writers that lost several times from falling behind the ones
            // that just won (exponential backoff is otherwise unfair to them).
            max_backoff: Duration::from_millis(200),
            page_size: 1000,
            dedupe_prefix_bits: crate::domain::dedupe::prefix_bits_for_rate(
                DEFAULT_DEDUPE_KEYS_PER_MONTH,
            ),
        }
    }
}

impl LogConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.inline_body_max_bytes > MAX_ITEM_ATTRIBUTE_BYTES {
            return Err(ConfigError(format!(
                "inline body threshold {} exceeds {} bytes (DynamoDB items are limited to 400 KB)",
                self.inline_body_max_bytes, MAX_ITEM_ATTRIBUTE_BYTES
            )));
        }
        if self.max_attempts == 0 {
            return Err(ConfigError("max_attempts must be at least 1".into()));
        }
        if !(1..=64).contains(&self.dedupe_prefix_bits) {
            return Err(ConfigError(format!(
                "dedupe prefix bits {} outside 1..=64",
                self.dedupe_prefix_bits
            )));
        }
        if self.max_body_bytes == 0 {
            return Err(ConfigError("max_body_bytes must be at least 1".into()));
        }
        if self.read_budget_bytes == 0 {
            return Err(ConfigError("read_budget_bytes must be at least 1".into()));
        }
        if self.page_size == 0 {
            return Err(ConfigError("page_size must be at least 1".into()));
        }
        Ok(())
    }

    /// Reads the settings the CDK stack passes (`SHEETLOG_INLINE_BODY_MAX_BYTES`,
    /// `SHEETLOG_MAX_ENTRY_BYTES`, `SHEETLOG_DEDUPE_KEYS_PER_MONTH`), keeping defaults
    /// for anything unset.
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut cfg = Self::default();
        if let Some(v) = env_parse::<usize>("SHEETLOG_INLINE_BODY_MAX_BYTES")? {
            cfg.inline_body_max_bytes = v;
        }
        if let Some(v) = env_parse::<usize>("SHEETLOG_MAX_ENTRY_BYTES")? {
            cfg.max_body_bytes = v;
        }
        if let Some(v) = env_parse::<usize>("SHEETLOG_READ_BUDGET_BYTES")? {
            cfg.read_budget_bytes = v;
        }
        if let Some(rate) = env_parse::<u64>("SHEETLOG_DEDUPE_KEYS_PER_MONTH")? {
            cfg.dedupe_prefix_bits = crate::domain::dedupe::prefix_bits_for_rate(rate);
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Parses an optional environment variable, failing with the variable's name on bad input.
pub fn env_parse<T: std::str::FromStr>(name: &str) -> Result<Option<T>, ConfigError>
where
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(raw) => raw
            .trim()
            .parse::<T>()
            .map(Some)
            .map_err(|e| ConfigError(format!("{name}={raw:?}: {e}"))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(ConfigError(format!("{name}: {e}"))),
    }
}

/// Reads a required environment variable.
pub fn env_required(name: &str) -> Result<String, ConfigError> {
    std::env::var(name).map_err(|_| ConfigError(format!("{name} is not set")))
}

/// Names of the tables and bucket, as the CDK stack passes them.
#[derive(Debug, Clone)]
pub struct Resources {
    pub entry_table: String,
    pub segment_table: String,
    /// Only the snapshot worker (and tools) use it; the CDK stack passes it only to them.
    pub pending_table: Option<String>,
    /// Idempotency keys; only the API appends with them, so only it is given the name.
    pub dedupe_table: Option<String>,
    /// Sync clients' mutation ranges and groups; only the API uses it.
    pub clients_table: Option<String>,
    pub bucket: String,
}

impl Resources {
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            entry_table: env_required("SHEETLOG_ENTRY_TABLE")?,
            segment_table: env_required("SHEETLOG_SEGMENT_TABLE")?,
            pending_table: std::env::var("SHEETLOG_PENDING_TABLE")
                .ok()
                .filter(|s| !s.is_empty()),
            dedupe_table: std::env::var("SHEETLOG_DEDUPE_TABLE")
                .ok()
                .filter(|s| !s.is_empty()),
            clients_table: std::env::var("SHEETLOG_CLIENTS_TABLE")
                .ok()
                .filter(|s| !s.is_empty()),
            bucket: env_required("SHEETLOG_BUCKET")?,
        })
    }

    /// Names derived from one prefix (the local stack and tests).
    pub fn with_prefix(prefix: &str) -> Self {
        Self {
            entry_table: format!("{prefix}-entry"),
            segment_table: format!("{prefix}-segment"),
            pending_table: Some(format!("{prefix}-pending")),
            dedupe_table: Some(format!("{prefix}-dedupe")),
            clients_table: Some(format!("{prefix}-clients")),
            bucket: format!("{prefix}-data"),
        }
    }
}

impl Resources {
    /// The Pending Snapshots table, for the functions that need it.
    pub fn require_pending_table(&self) -> Result<&str, ConfigError> {
        self.pending_table
            .as_deref()
            .ok_or_else(|| ConfigError("SHEETLOG_PENDING_TABLE is not set".into()))
    }

    /// The Dedupe table, for the API.
    pub fn require_dedupe_table(&self) -> Result<&str, ConfigError> {
        self.dedupe_table
            .as_deref()
            .ok_or_else(|| ConfigError("SHEETLOG_DEDUPE_TABLE is not set".into()))
    }

    /// The Clients table, for the API.
    pub fn require_clients_table(&self) -> Result<&str, ConfigError> {
        self.clients_table
            .as_deref()
            .ok_or_else(|| ConfigError("SHEETLOG_CLIENTS_TABLE is not set".into()))
    }
}
