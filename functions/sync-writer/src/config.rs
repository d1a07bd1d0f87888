//! The writer's settings, read once at start-up from the variables the CDK stack sets (the
//! snapshot trigger's, shared with the API).

use std::time::Duration;

use sheetlog_core::config::{ConfigError, Env, EnvVar, LogConfig, Resources, environment};
use sheetlog_core::log::SnapshotTrigger;
use sheetlog_core::poke::PokeConfig;

#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// When a Snapshot entry or a new segment is due after an append.
    pub trigger: SnapshotTrigger,
    /// Tries at a log's group commit within one invocation when the store fails transiently
    /// (throttled, timed out, contention), before its messages are reported as failures. A
    /// failure blocks the log's message group for the queue's visibility timeout, so retrying
    /// here first keeps a sheet from stalling for minutes.
    pub attempts: u32,
    /// First wait between those tries; doubles each time (to at most 5 s), each wait a random
    /// part of it (full jitter, the core's `Backoff`).
    pub retry_delay: Duration,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            trigger: SnapshotTrigger {
                interval: 100,
                segment_max_entries: 10_000,
            },
            attempts: 4,
            retry_delay: Duration::from_millis(100),
        }
    }
}

impl WriterConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&Env::process())
    }

    /// What [`WriterConfig::from_vars`] reads: the snapshot trigger's settings, as the API's.
    pub const ENVIRONMENT: &[EnvVar] = &[
        EnvVar::optional("SHEETLOG_SNAPSHOT_INTERVAL"),
        EnvVar::optional("SHEETLOG_SEGMENT_MAX_ENTRIES"),
    ];

    /// [`WriterConfig::from_env`] from any [`Env`].
    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        let mut c = Self::default();
        if let Some(v) = env.parse::<u64>("SHEETLOG_SNAPSHOT_INTERVAL")? {
            c.trigger.interval = v;
        }
        if let Some(v) = env.parse::<u64>("SHEETLOG_SEGMENT_MAX_ENTRIES")? {
            c.trigger.segment_max_entries = v;
        }
        if c.trigger.interval < 2 {
            return Err(ConfigError(
                "SHEETLOG_SNAPSHOT_INTERVAL must be at least 2".into(),
            ));
        }
        if c.trigger.segment_max_entries < c.trigger.interval {
            return Err(ConfigError(
                "SHEETLOG_SEGMENT_MAX_ENTRIES must be at least SHEETLOG_SNAPSHOT_INTERVAL".into(),
            ));
        }
        Ok(c)
    }
}

/// Everything the writer function reads at start-up, from one [`Env`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub resources: Resources,
    pub log: LogConfig,
    pub writer: WriterConfig,
    pub pokes: Option<PokeConfig>,
}

impl Settings {
    /// The writer's declaration of the variables it reads (`sheetlog_core::config::Given`).
    pub fn environment() -> Vec<EnvVar> {
        environment(&[
            sheetlog_core::telemetry::LAMBDA_ENVIRONMENT,
            Resources::ENVIRONMENT,
            LogConfig::ENVIRONMENT,
            WriterConfig::ENVIRONMENT,
            PokeConfig::ENVIRONMENT,
            &[
                // It keeps sync clients' ranges and pokes the sheet after each commit.
                EnvVar::stack("SHEETLOG_CLIENTS_TABLE"),
                EnvVar::stack("SHEETLOG_EVENTS_HTTP_URL"),
            ],
        ])
    }

    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        Ok(Self {
            resources: Resources::from_vars(env)?,
            log: LogConfig::from_vars(env)?,
            writer: WriterConfig::from_vars(env)?,
            pokes: PokeConfig::from_vars(env)?,
        })
    }
}
