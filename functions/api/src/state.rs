//! What every request handler shares: the event log, the S3 client for presigning and payloads,
//! settings, and a per-log cache of segment hints (so most appends skip the Segment query).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sheetlog_core::LogId;
use sheetlog_core::aws::{DynamoLogStore, S3PayloadStore};
use sheetlog_core::config::{LogConfig, Resources};
use sheetlog_core::log::{EventLog, SegmentHint};
use sheetlog_core::snapshot::s3::{S3Payloads, S3Store};

use crate::config::ApiConfig;

pub type AwsLog = EventLog<DynamoLogStore, S3PayloadStore>;

/// Hints kept per warm process; cleared wholesale past this many logs (a stale or missing hint
/// only costs one extra query).
const MAX_HINTS: usize = 10_000;

#[derive(Debug)]
pub struct AppState {
    pub log: AwsLog,
    pub s3: aws_sdk_s3::Client,
    pub bucket: String,
    pub cfg: ApiConfig,
    /// Snapshot manifests and chunks.
    pub blobs: S3Store,
    /// Uploaded files, streamed for reads that replay an import.
    pub payload_source: S3Payloads,
    hints: Mutex<HashMap<LogId, SegmentHint>>,
}

pub type SharedState = Arc<AppState>;

impl AppState {
    pub fn new(log: AwsLog, s3: aws_sdk_s3::Client, bucket: String, cfg: ApiConfig) -> Self {
        let blobs = S3Store::new(s3.clone(), &bucket);
        let payload_source = S3Payloads::new(s3.clone(), &bucket);
        Self {
            log,
            s3,
            bucket,
            cfg,
            blobs,
            payload_source,
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
        // Path-style addressing works against AWS and against a local emulator alike.
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(sdk)
                .force_path_style(true)
                .build(),
        );
        let store = DynamoLogStore::new(dynamo, &resources.entry_table, &resources.segment_table);
        let payloads = S3PayloadStore::new(s3.clone(), &resources.bucket);
        let log = EventLog::new(store, payloads, log_cfg)?;
        Ok(Self::new(log, s3, resources.bucket.clone(), cfg))
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
