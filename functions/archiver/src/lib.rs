//! `sheetlog-archiver`: the scheduled function that applies the stack's segment retention
//! policy (`sheetlog_maintenance::archive`). `main.rs` wires it to Lambda; this is what it reads
//! at start-up.

use sheetlog_core::config::{ConfigError, Env, EnvVar, environment};
use sheetlog_maintenance::archive::{POLICY_ENVIRONMENT, Policy, policy_from_vars};

/// Everything the archiver reads at start-up, from one [`Env`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub policy: Policy,
    pub entry_table: String,
    pub segment_table: String,
    pub bucket: String,
}

impl Settings {
    /// The archiver's declaration of the variables it reads (`sheetlog_core::config::Given`).
    pub fn environment() -> Vec<EnvVar> {
        environment(&[
            sheetlog_core::telemetry::LAMBDA_ENVIRONMENT,
            POLICY_ENVIRONMENT,
            &[
                EnvVar::stack("SHEETLOG_ENTRY_TABLE"),
                EnvVar::stack("SHEETLOG_SEGMENT_TABLE"),
                EnvVar::stack("SHEETLOG_BUCKET"),
            ],
        ])
    }

    pub fn from_vars(env: &Env) -> Result<Self, ConfigError> {
        Ok(Self {
            policy: policy_from_vars(env)?,
            entry_table: env.required("SHEETLOG_ENTRY_TABLE")?,
            segment_table: env.required("SHEETLOG_SEGMENT_TABLE")?,
            bucket: env.required("SHEETLOG_BUCKET")?,
        })
    }
}
