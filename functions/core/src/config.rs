//! Typed configuration, read once at start-up. The CDK stack owns the environment variable names;
//! every one has a default that suits production.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
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
        Self::from_vars(&Env::process())
    }

    /// What [`LogConfig::from_vars`] reads: tuning, every one with a default.
    pub const ENVIRONMENT: &[EnvVar] = &[
        EnvVar::optional("SHEETLOG_INLINE_BODY_MAX_BYTES"),
        EnvVar::optional("SHEETLOG_MAX_ENTRY_BYTES"),
        EnvVar::optional("SHEETLOG_READ_BUDGET_BYTES"),
        EnvVar::optional("SHEETLOG_DEDUPE_KEYS_PER_MONTH"),
    ];

    /// [`LogConfig::from_env`] from any [`Env`].
    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        let mut cfg = Self::default();
        if let Some(v) = env.parse::<usize>("SHEETLOG_INLINE_BODY_MAX_BYTES")? {
            cfg.inline_body_max_bytes = v;
        }
        if let Some(v) = env.parse::<usize>("SHEETLOG_MAX_ENTRY_BYTES")? {
            cfg.max_body_bytes = v;
        }
        if let Some(v) = env.parse::<usize>("SHEETLOG_READ_BUDGET_BYTES")? {
            cfg.read_budget_bytes = v;
        }
        if let Some(rate) = env.parse::<u64>("SHEETLOG_DEDUPE_KEYS_PER_MONTH")? {
            cfg.dedupe_prefix_bits = crate::domain::dedupe::prefix_bits_for_rate(rate);
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

/// How a variable in a function's environment reaches it; each function declares what it reads
/// (its crate's `ENVIRONMENT`), and `tests/tests/integration/function_environment.rs` holds the
/// declarations against the template and against what the function's loader asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Given {
    /// The stack sets it, in every configuration: the function needs it.
    Stack,
    /// A setting with a default, or one only some configurations need (the loader says which
    /// when it is missing). The stack may set it or leave it out.
    Optional,
    /// Set by Lambda's runtime (a reserved name the template cannot set).
    Lambda,
    /// Read only on the local stack, never set by the template.
    Local,
}

/// One variable a function reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvVar {
    pub name: &'static str,
    pub given: Given,
}

impl EnvVar {
    pub const fn stack(name: &'static str) -> Self {
        Self {
            name,
            given: Given::Stack,
        }
    }
    pub const fn optional(name: &'static str) -> Self {
        Self {
            name,
            given: Given::Optional,
        }
    }
    pub const fn lambda(name: &'static str) -> Self {
        Self {
            name,
            given: Given::Lambda,
        }
    }
    pub const fn local(name: &'static str) -> Self {
        Self {
            name,
            given: Given::Local,
        }
    }
}

/// A function's declaration from parts: each part's variables in turn, a later part's entry
/// replacing an earlier one of the same name (a function that needs what a shared loader takes as
/// optional says so in a later part).
pub fn environment(parts: &[&[EnvVar]]) -> Vec<EnvVar> {
    let mut out: Vec<EnvVar> = Vec::new();
    for var in parts.iter().flat_map(|p| p.iter()) {
        match out.iter_mut().find(|v| v.name == var.name) {
            Some(v) => *v = *var,
            None => out.push(*var),
        }
    }
    out
}

/// Where settings are read from: the process's environment (a function's start-up), or a given
/// set of variables (a test loading a function's settings from the template's environment).
/// Remembers every name it was asked for, present or not.
#[derive(Debug)]
pub struct Env {
    vars: Option<BTreeMap<String, String>>,
    asked: RefCell<BTreeSet<String>>,
}

impl Env {
    pub fn process() -> Self {
        Self {
            vars: None,
            asked: RefCell::default(),
        }
    }

    pub fn from_map(vars: BTreeMap<String, String>) -> Self {
        Self {
            vars: Some(vars),
            asked: RefCell::default(),
        }
    }

    /// The raw value; a value that is not Unicode is an error naming the variable.
    pub fn lookup(&self, name: &str) -> Result<Option<String>, ConfigError> {
        self.asked.borrow_mut().insert(name.to_owned());
        match &self.vars {
            Some(vars) => Ok(vars.get(name).cloned()),
            None => match std::env::var(name) {
                Ok(v) => Ok(Some(v)),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(e) => Err(ConfigError(format!("{name}: {e}"))),
            },
        }
    }

    /// The value trimmed; unset and blank are both `None`.
    pub fn text(&self, name: &str) -> Result<Option<String>, ConfigError> {
        Ok(self
            .lookup(name)?
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty()))
    }

    /// An optional value parsed, failing with the variable's name on bad input.
    pub fn parse<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        match self.lookup(name)? {
            Some(raw) => raw
                .trim()
                .parse::<T>()
                .map(Some)
                .map_err(|e| ConfigError(format!("{name}={raw:?}: {e}"))),
            None => Ok(None),
        }
    }

    /// A value the function cannot start without.
    pub fn required(&self, name: &str) -> Result<String, ConfigError> {
        self.text(name)?
            .ok_or_else(|| ConfigError(format!("{name} is not set")))
    }

    /// Every name asked for so far.
    pub fn asked(&self) -> BTreeSet<String> {
        self.asked.borrow().clone()
    }
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
        Self::from_vars(&Env::process())
    }

    /// What [`Resources::from_vars`] reads. The three tables only some functions use are
    /// optional here; a function that needs one declares it [`Given::Stack`].
    pub const ENVIRONMENT: &[EnvVar] = &[
        EnvVar::stack("SHEETLOG_ENTRY_TABLE"),
        EnvVar::stack("SHEETLOG_SEGMENT_TABLE"),
        EnvVar::optional("SHEETLOG_PENDING_TABLE"),
        EnvVar::optional("SHEETLOG_DEDUPE_TABLE"),
        EnvVar::optional("SHEETLOG_CLIENTS_TABLE"),
        EnvVar::stack("SHEETLOG_BUCKET"),
    ];

    /// [`Resources::from_env`] from any [`Env`].
    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        Ok(Self {
            entry_table: env.required("SHEETLOG_ENTRY_TABLE")?,
            segment_table: env.required("SHEETLOG_SEGMENT_TABLE")?,
            pending_table: env.text("SHEETLOG_PENDING_TABLE")?,
            dedupe_table: env.text("SHEETLOG_DEDUPE_TABLE")?,
            clients_table: env.text("SHEETLOG_CLIENTS_TABLE")?,
            bucket: env.required("SHEETLOG_BUCKET")?,
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
