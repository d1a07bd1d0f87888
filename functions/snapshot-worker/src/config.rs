//! The worker's settings, read once at cold start. `SHEETLOG_PENDING_TIMEOUT_SECS` is set by the
//! CDK stack; the rest are timings that must agree with the stack's `TIMINGS` and have defaults
//! that do.

use std::time::Duration;

use sheetlog_core::config::{ConfigError, Env, EnvVar, LogConfig, Resources, environment};
use sheetlog_core::snapshot::BuildConfig;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// A pending snapshot whose holder has written nothing (checkpoint or heartbeat) for this
    /// long is presumed dead and may be claimed by another invocation. It only has to cover the
    /// time between two writes, not a whole build: the holder heartbeats at a third of it.
    pub pending_timeout: Duration,
    /// Hand the job off when this little of the invocation's time is left (checked after each
    /// checkpoint), leaving room for one more chunk and the hand-off writes.
    pub handoff_reserve: Duration,
    /// Deferral backoff: the first wait behind an earlier snapshot, doubling per deferral up to
    /// `defer_max`, half of it random so deferred jobs spread out.
    pub defer_min: Duration,
    pub defer_max: Duration,
    /// After an unexpected error the message comes back after this long (times the receive
    /// count, capped at `defer_max`) instead of the queue's 30-minute visibility timeout.
    pub error_retry: Duration,
    /// Hand-offs one job may make (its hop count) before it is parked: left with its checkpoint
    /// for an operator (`sheetlog-maintenance reprocess` sends it again), counted in the
    /// `SnapshotJobsParked` metric. Guards against a build that never finishes sending itself
    /// round for ever now that Lambda's recursive-loop detection is off for this function.
    pub max_handoffs: u32,
    /// Checkpoints larger than this spill to S3 and the pending item keeps a pointer. DynamoDB
    /// items are limited to 400 KB, so the default is the largest attribute we store. At ~60
    /// bytes per new chunk it is only reached by a from-scratch build of well over 5,000 chunks
    /// (a sheet of over a gigabyte of raw cells).
    pub max_inline_checkpoint_bytes: usize,
    /// Chunking parameters; every build of a log must use the same ones to reuse chunks.
    pub build: BuildConfig,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            pending_timeout: Duration::from_secs(120),
            handoff_reserve: Duration::from_secs(60),
            defer_min: Duration::from_secs(5),
            defer_max: Duration::from_secs(300),
            error_retry: Duration::from_secs(30),
            // At the stack's 5-minute timeout, a day of building.
            max_handoffs: 288,
            max_inline_checkpoint_bytes: sheetlog_core::domain::keys::MAX_ITEM_ATTRIBUTE_BYTES,
            build: BuildConfig::default(),
        }
    }
}

impl WorkerConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&Env::process())
    }

    /// What [`WorkerConfig::from_vars`] reads.
    pub const ENVIRONMENT: &[EnvVar] = &[
        EnvVar::stack("SHEETLOG_PENDING_TIMEOUT_SECS"),
        EnvVar::optional("SHEETLOG_MAX_HANDOFFS"),
    ];

    /// [`WorkerConfig::from_env`] from any [`Env`].
    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        let mut c = Self::default();
        if let Some(v) = env.parse::<u64>("SHEETLOG_PENDING_TIMEOUT_SECS")? {
            c.pending_timeout = Duration::from_secs(v);
        }
        if let Some(v) = env.parse::<u32>("SHEETLOG_MAX_HANDOFFS")? {
            c.max_handoffs = v;
        }
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.pending_timeout < Duration::from_secs(1) {
            return Err(ConfigError(
                "SHEETLOG_PENDING_TIMEOUT_SECS must be at least 1".into(),
            ));
        }
        if self.defer_min.is_zero() || self.defer_max < self.defer_min {
            return Err(ConfigError(
                "deferral backoff needs 0 < defer_min <= defer_max".into(),
            ));
        }
        Ok(())
    }

    /// Whole seconds of the pending timeout, as the Pending Snapshots timestamps count.
    pub fn pending_timeout_secs(&self) -> i64 {
        i64::try_from(self.pending_timeout.as_secs().max(1)).unwrap_or(i64::MAX)
    }
}

/// Everything the worker function reads at start-up, from one [`Env`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub resources: Resources,
    pub log: LogConfig,
    pub worker: WorkerConfig,
    /// The snapshot queue, which a job is handed off (sent again) to.
    pub queue_url: String,
}

impl Settings {
    /// The worker's declaration of the variables it reads (`sheetlog_core::config::Given`).
    pub fn environment() -> Vec<EnvVar> {
        environment(&[
            sheetlog_core::telemetry::LAMBDA_ENVIRONMENT,
            Resources::ENVIRONMENT,
            LogConfig::ENVIRONMENT,
            WorkerConfig::ENVIRONMENT,
            &[
                EnvVar::stack("SHEETLOG_PENDING_TABLE"),
                // Window indexing reads sync clients' ranges.
                EnvVar::stack("SHEETLOG_CLIENTS_TABLE"),
                EnvVar::stack("SHEETLOG_SNAPSHOT_QUEUE_URL"),
            ],
        ])
    }

    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        Ok(Self {
            resources: Resources::from_vars(env)?,
            log: LogConfig::from_vars(env)?,
            worker: WorkerConfig::from_vars(env)?,
            queue_url: env.required("SHEETLOG_SNAPSHOT_QUEUE_URL")?,
        })
    }
}
