//! `sheetlog-pipeline`: runs the side-effect pipeline on one machine. The emulator runs no Lambda
//! event-source mappings, so this crate plays their part: it polls the Entry table's stream
//! (every shard, the stack's filter applied) into the stream router's handler, and the snapshot
//! queue into the snapshot worker's handler, and the sync FIFO queue into the sync writer's
//! handler, honouring visibility timeouts, per-record failures and a per-invocation time budget.
//! The handlers are exactly the ones deployed to Lambda.
//!
//! Layout:
//! - [`authorizer`] — the request context API Gateway's JWT authorizer passes, built locally
//! - [`events`] — [`LocalEvents`](events::LocalEvents): the AppSync Events subset pokes use (publish, WebSocket)
//! - [`filter`] — the Lambda filter-pattern subset `stream_filter.json` uses
//! - [`stream`] — [`StreamDriver`]: ListStreams / DescribeStream / GetShardIterator / GetRecords → router
//! - [`provision`] — tables, bucket and queues created as the CDK stack defines them
//! - [`local_stack`] — creates every local resource (what `sheetlog dev` runs on)
//! - [`roles`]  — [`Roles`]: each function's own credentials, and the stack's line for the IAM check
//! - [`queue`]  — [`QueueDriver`]: ReceiveMessage → worker handler → DeleteMessage
//! - [`sync`]   — [`SyncDriver`]: ReceiveMessage (FIFO, batches of ten) → sync writer → DeleteMessageBatch
//! - `lib.rs`   — [`LocalPipeline`], the drivers until shutdown
//!
//! Nothing here is deployed: it is the local stand-in for what Lambda and CloudFormation do.

pub mod authorizer;
pub mod events;
pub mod filter;
pub mod local_stack;
pub mod provision;
pub mod queue;
pub mod roles;
pub mod stream;
pub mod sync;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use filter::FilterPatterns;
pub use local_stack::{LocalStack, create_local_stack};
pub use provision::{
    QueueSettings, QueueUrls, SyncQueueSettings, SyncQueueUrls, create_snapshot_queues,
    create_sync_queues,
};
pub use queue::QueueDriver;
pub use roles::{Counterparts, Roles};
use sheetlog_core::aws::{S3Bucket, SqsJobQueue, s3_client};
use sheetlog_core::config::{LogConfig, Resources};
use sheetlog_snapshot_worker::{Handler, Worker, WorkerConfig};
use sheetlog_stream_router::AwsEffects;
use sheetlog_sync_writer::WriterConfig;
pub use stream::StreamDriver;
pub use sync::SyncDriver;
use tracing::{info, warn};

/// How long one of the snapshot queue driver's receives waits for a job (a long poll: it
/// returns as soon as one is there).
const QUEUE_LONG_POLL: Duration = Duration::from_secs(1);

/// Settings of the local pipeline.
#[derive(Debug, Clone)]
pub struct LocalPipelineConfig {
    /// Each worker invocation's time; it hands off (after at least one chunk) once it is used up.
    /// Lambda's is the function timeout less a reserve; make it small to exercise hand-off.
    pub worker_time_budget: Duration,
    /// Worker invocations at once.
    pub worker_concurrency: usize,
    /// How often the stream driver looks again once it has caught up (Lambda polls a stream's
    /// shards four times a second). The queue drivers long-poll instead, as Lambda's SQS event
    /// source does: a job is taken as soon as it is sent.
    pub poll_interval: Duration,
    /// Retries of a failing stream record before it is dropped. The stack's is 10,000, which in
    /// practice means "until the record is 23 hours old"; locally, with backoff capped at 5 s, a
    /// record that always fails holds its shard for about 14 hours, as it would on AWS.
    pub stream_retry_attempts: u32,
    /// The queue that dropped stream records are described on (the stack's on-failure
    /// destination; [`LocalStack::stream_failure_queue`]). None: they are only logged.
    pub stream_failure_queue: Option<String>,
    pub worker: WorkerConfig,
    /// The sync writer's settings (its snapshot trigger should match the API's).
    pub writer: WriterConfig,
    pub log: LogConfig,
    /// Each function's timeout (the template's), past which the driver cuts an invocation off
    /// as Lambda does; `None`: no limit.
    pub timeouts: FunctionTimeouts,
}

/// The functions' timeouts, as the template sets them (`sheetlog dev` reads them from its
/// description). An invocation still running at its function's timeout is cut off, as Lambda
/// cuts it off, and fails: a stream batch is retried from its first record, a queue message
/// comes back after its visibility timeout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FunctionTimeouts {
    pub stream_router: Option<Duration>,
    pub snapshot_worker: Option<Duration>,
    pub sync_writer: Option<Duration>,
}

/// Runs one invocation's future, cut off at `limit` when there is one: `None` when it was.
pub async fn within<T>(limit: Option<Duration>, invocation: impl Future<Output = T>) -> Option<T> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, invocation).await.ok(),
        None => Some(invocation.await),
    }
}

/// What Lambda checks when it creates an SQS event-source mapping, with the function's role (the
/// reason that role holds `sqs:GetQueueAttributes`): a queue whose visibility timeout is shorter
/// than the function's timeout is refused, since a message could come back while its invocation
/// still runs. The local drivers look once when they start and warn, as the queue is the test's.
pub async fn check_queue_visibility(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    timeout: Option<Duration>,
    function: &str,
) {
    let found = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout)
        .send()
        .await;
    let visibility = match found {
        Ok(out) => out
            .attributes
            .and_then(|a| {
                a.get(&aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout)
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .map(Duration::from_secs),
        Err(e) => {
            warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), url, "reading the queue's attributes failed");
            return;
        }
    };
    if let (Some(visibility), Some(timeout)) = (visibility, timeout)
        && visibility < timeout
    {
        warn!(
            url,
            function,
            ?visibility,
            ?timeout,
            "the queue's visibility timeout is shorter than the function's: Lambda would refuse this event source mapping"
        );
    }
}

impl Default for LocalPipelineConfig {
    fn default() -> Self {
        Self {
            worker_time_budget: Duration::from_secs(4 * 60),
            worker_concurrency: 2,
            poll_interval: Duration::from_millis(200),
            stream_retry_attempts: 10_000,
            stream_failure_queue: None,
            worker: WorkerConfig::default(),
            writer: WriterConfig::default(),
            log: LogConfig::default(),
            timeouts: FunctionTimeouts::default(),
        }
    }
}

/// The two drivers over one stack's resources.
#[derive(Debug)]
pub struct LocalPipeline {
    pub stream: StreamDriver,
    pub queue: QueueDriver,
    /// The sync writer on the sync FIFO queue, when pushes are queued ([`Self::with_sync_writer`]).
    pub sync: Option<SyncDriver>,
    poll_interval: Duration,
    sync_timeout: Option<Duration>,
}

impl LocalPipeline {
    /// Builds the router's effects, the worker and both drivers from each function's SDK
    /// configuration (pointed at the emulator through `AWS_ENDPOINT_URL` or an explicit
    /// endpoint). The drivers stand in for Lambda's event-source mappings, which read with the
    /// consuming function's role: the stream driver and its failure queue with the router's, the
    /// queue driver with the worker's.
    pub fn new(
        roles: &Roles,
        resources: &Resources,
        queues: &QueueUrls,
        cfg: LocalPipelineConfig,
    ) -> anyhow::Result<Self> {
        let worker = Worker::from_sdk(
            &roles.snapshot_worker,
            resources,
            cfg.log.clone(),
            cfg.worker.clone(),
        )?;
        Self::with_worker(roles, resources, queues, cfg, worker)
    }

    /// As [`new`](Self::new), with a worker the caller built (tests pass one with a step hook).
    pub fn with_worker(
        roles: &Roles,
        resources: &Resources,
        queues: &QueueUrls,
        cfg: LocalPipelineConfig,
        worker: Worker,
    ) -> anyhow::Result<Self> {
        let router_sqs = aws_sdk_sqs::Client::new(&roles.stream_router);
        let effects = Arc::new(AwsEffects::new(
            SqsJobQueue::new(router_sqs.clone(), &queues.snapshot_queue),
            S3Bucket::new(s3_client(&roles.stream_router), &resources.bucket),
        ));
        let mut stream = StreamDriver::new(
            &roles.stream_router,
            &resources.entry_table,
            effects,
            FilterPatterns::entry_stream()?,
            cfg.stream_retry_attempts,
        )
        .with_timeout(cfg.timeouts.stream_router);
        if let Some(url) = &cfg.stream_failure_queue {
            stream = stream.with_failure_queue(router_sqs, url);
        }
        let worker_sqs = aws_sdk_sqs::Client::new(&roles.snapshot_worker);
        let job_queue = SqsJobQueue::new(worker_sqs.clone(), &queues.snapshot_queue);
        let queue = QueueDriver::new(
            worker_sqs,
            &queues.snapshot_queue,
            Handler::new(worker, job_queue),
            cfg.worker_time_budget,
            cfg.worker_concurrency,
        )
        .with_timeout(cfg.timeouts.snapshot_worker);
        Ok(Self {
            stream,
            queue,
            sync: None,
            poll_interval: cfg.poll_interval,
            sync_timeout: cfg.timeouts.sync_writer,
        })
    }

    /// Also runs the sync writer on the sync FIFO queue at `url`, with `writer` (build it with
    /// [`sheetlog_sync_writer::Handler::from_sdk`] or `from_sdk_wrapped`); `sdk` is the writer's
    /// (the queue's event-source mapping reads with its role).
    pub fn with_sync_writer(
        mut self,
        sdk: &aws_config::SdkConfig,
        url: &str,
        writer: sheetlog_sync_writer::Handler,
    ) -> Self {
        self.sync = Some(
            SyncDriver::new(aws_sdk_sqs::Client::new(sdk), url, Arc::new(writer))
                .with_timeout(self.sync_timeout),
        );
        self
    }

    /// Runs both drivers until `shutdown` resolves.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let poll = self.poll_interval;
        let stream_task = async {
            let mut stop = stop_rx.clone();
            loop {
                match self.stream.poll_once().await {
                    Ok(r) if r.jobs_sent + r.payloads_committed > 0 => {
                        info!(
                            jobs = r.jobs_sent,
                            payloads = r.payloads_committed,
                            "stream records routed"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => warn!(error = %format!("{e:#}"), "polling the Entry stream failed"),
                }
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(poll) => {}
                }
            }
        };
        let queue = &self.queue;
        let queue_task = async {
            let mut stop = stop_rx.clone();
            queue
                .run(QUEUE_LONG_POLL, async move {
                    let _ = stop.changed().await;
                })
                .await;
        };
        let sync = self.sync.as_ref();
        let sync_task = async {
            let mut stop = stop_rx.clone();
            if let Some(sync) = sync {
                sync.run(poll.min(Duration::from_millis(20)), async move {
                    let _ = stop.changed().await;
                })
                .await;
            }
        };
        let stopper = async {
            shutdown.await;
            let _ = stop_tx.send(true);
        };
        tokio::join!(stream_task, queue_task, sync_task, stopper);
    }
}
