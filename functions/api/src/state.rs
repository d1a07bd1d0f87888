//! What every request handler shares: the event log, the bucket (presigning, uploads, snapshots),
//! settings, and a per-log cache of segment hints (so most appends skip the Segment query).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sheetlog_core::LogId;
use sheetlog_core::aws::{DynamoLogStore, S3Bucket, SqsPushQueue, s3_client};
use sheetlog_core::config::{LogConfig, Resources};
use sheetlog_core::log::{EventLog, SegmentHint};
use sheetlog_core::ports::{LogStore, PayloadStore, PushQueue};

use crate::config::{ApiConfig, SyncWrites};

/// The API's log: the stores are chosen at start-up (the AWS adapters, or the same wrapped in
/// the fault-injecting adapter by `sheetlog dev --faults`).
pub type ApiLog = EventLog<Arc<dyn LogStore>, Arc<dyn PayloadStore>>;

/// Hints kept per warm process; cleared wholesale past this many logs (a stale or missing hint
/// only costs one extra query).
const MAX_HINTS: usize = 10_000;

#[derive(Debug)]
pub struct AppState {
    pub log: ApiLog,
    /// The stack's bucket: presigned URLs, uploads, snapshot manifests and chunks, and import
    /// files streamed for reads that replay an import.
    pub bucket: S3Bucket,
    pub cfg: ApiConfig,
    /// The sync FIFO queue, when pushes are queued (`docs/sync.md`, "Queued pushes").
    pub push_queue: Option<Arc<dyn PushQueue>>,
    hints: Mutex<HashMap<LogId, SegmentHint>>,
}

pub type SharedState = Arc<AppState>;

impl AppState {
    pub fn new(log: ApiLog, bucket: S3Bucket, cfg: ApiConfig) -> Self {
        Self {
            bucket,
            log,
            cfg,
            push_queue: None,
            hints: Mutex::new(HashMap::new()),
        }
    }

    /// Queues pushes on `queue` instead of applying them (the sync writer applies them).
    pub fn with_push_queue(mut self, queue: Arc<dyn PushQueue>) -> Self {
        self.push_queue = Some(queue);
        self
    }

    /// Builds the state from SDK configuration and resource names.
    pub fn from_sdk(
        sdk: &aws_config::SdkConfig,
        resources: &Resources,
        log_cfg: LogConfig,
        cfg: ApiConfig,
    ) -> anyhow::Result<Self> {
        Self::from_sdk_wrapped(sdk, resources, log_cfg, cfg, |s, p| (s, p))
    }

    /// As [`from_sdk`](Self::from_sdk), with the log's stores passed through `wrap` first (the
    /// local stack wraps them in the fault-injecting adapter).
    pub fn from_sdk_wrapped(
        sdk: &aws_config::SdkConfig,
        resources: &Resources,
        log_cfg: LogConfig,
        cfg: ApiConfig,
        wrap: impl FnOnce(
            Arc<dyn LogStore>,
            Arc<dyn PayloadStore>,
        ) -> (Arc<dyn LogStore>, Arc<dyn PayloadStore>),
    ) -> anyhow::Result<Self> {
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let store = DynamoLogStore::new(dynamo, &resources.entry_table, &resources.segment_table)
            .with_dedupe_table(resources.require_dedupe_table()?)
            .with_clients_table(resources.require_clients_table()?);
        let bucket = S3Bucket::new(s3_client(sdk), &resources.bucket);
        let (store, payloads) = wrap(Arc::new(store), Arc::new(bucket.clone()));
        let log = EventLog::new(store, payloads, log_cfg)?;
        let queue = match (cfg.sync_writes, &cfg.sync_queue_url) {
            (SyncWrites::Queued, Some(url)) => Some(SqsPushQueue::new(
                aws_sdk_sqs::Client::new(sdk),
                url.clone(),
            )),
            (SyncWrites::Queued, None) => {
                anyhow::bail!("queued sync writes need the sync queue's URL")
            }
            (SyncWrites::Direct, _) => None,
        };
        let state = Self::new(log, bucket, cfg);
        Ok(match queue {
            Some(q) => state.with_push_queue(Arc::new(q)),
            None => state,
        })
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
