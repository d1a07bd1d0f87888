//! What every request handler shares: the event log, the bucket (presigning, uploads, snapshots),
//! settings, and a per-log cache of segment hints (so most appends skip the Segment query).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sheetlog_core::LogId;
use sheetlog_core::aws::{DynamoLogStore, S3Bucket, s3_client};
use sheetlog_core::config::{LogConfig, Resources};
use sheetlog_core::log::{EventLog, SegmentHint};

use crate::config::ApiConfig;

pub type AwsLog = EventLog<DynamoLogStore, S3Bucket>;

/// Hints kept per warm process; cleared wholesale past this many logs (a stale or missing hint
/// only costs one extra query).
const MAX_HINTS: usize = 10_000;

#[derive(Debug)]
pub struct AppState {
    pub log: AwsLog,
    /// The stack's bucket: presigned URLs, uploads, snapshot manifests and chunks, and import
    /// files streamed for reads that replay an import.
    pub bucket: S3Bucket,
    pub cfg: ApiConfig,
    hints: Mutex<HashMap<LogId, SegmentHint>>,
}

pub type SharedState = Arc<AppState>;

impl AppState {
    pub fn new(log: AwsLog, cfg: ApiConfig) -> Self {
        Self {
            bucket: log.payloads().clone(),
            log,
            cfg,
            hints: Mutex::new(HashMap::new()),
        }
    }

    /// Builds the state from SDK configuration and resource names.
    pub fn from_sdk(
        sdk: &aws_config::SdkConfig,
        resources: &Resources,
        log_cfg: LogConfig,
        cfg: ApiConfig,
    ) -> anyhow::Result<Self> {
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let store = DynamoLogStore::new(dynamo, &resources.entry_table, &resources.segment_table);
        let bucket = S3Bucket::new(s3_client(sdk), &resources.bucket);
        let log = EventLog::new(store, bucket, log_cfg)?;
        Ok(Self::new(log, cfg))
    }

    pub fn hint(&self, log: LogId) -> Option<SegmentHint> {
        self.hints.lock().ok().and_then(|h| h.get(&log).copied())
    }

    pub fn remember_hint(&self, log: LogId, hint: SegmentHint) {
        if let Ok(mut h) = self.hints.lock() {
            if h.len() >= MAX_HINTS {
                h.clear();
            }
            h.insert(log, hint);
        }
    }
}
