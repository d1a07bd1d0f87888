//! Creates every resource of the local stack on the endpoint the SDK configuration points at
//! (the emulator): the tables (the Entry table with its stream), the bucket with its lifecycle
//! rules and CORS, the snapshot queue with its dead-letter queue, the sync FIFO queue with its
//! dead-letter queue, and the stream router's failure queue. `sheetlog dev` and the test that
//! compares the local stack with the CDK template both call this, so they cannot drift apart.

use sheetlog_core::aws::s3_client;
use sheetlog_core::config::Resources;

use crate::provision::{
    self, QueueSettings, QueueUrls, SyncQueueSettings, SyncQueueUrls, create_snapshot_queues,
    create_stream_failure_queue, create_sync_queues,
};

/// The names and URLs of a created local stack.
#[derive(Debug, Clone)]
pub struct LocalStack {
    pub resources: Resources,
    pub queues: QueueUrls,
    /// Where the stream driver describes records it gave up on (pass it as
    /// [`LocalPipelineConfig::stream_failure_queue`](crate::LocalPipelineConfig)).
    pub stream_failure_queue: String,
    /// The sync FIFO queue (queued pushes) and its dead-letter queue.
    pub sync_queues: SyncQueueUrls,
}

pub async fn create_local_stack(
    sdk: &aws_config::SdkConfig,
    prefix: &str,
) -> anyhow::Result<LocalStack> {
    let resources = Resources::with_prefix(prefix);
    let dynamo = aws_sdk_dynamodb::Client::new(sdk);
    let s3 = s3_client(sdk);
    provision::create_all(&dynamo, &s3, &resources).await?;
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let queues = create_snapshot_queues(&sqs, prefix, QueueSettings::default()).await?;
    let stream_failure_queue =
        create_stream_failure_queue(&sqs, prefix, QueueSettings::default()).await?;
    let sync_queues = create_sync_queues(&sqs, prefix, SyncQueueSettings::default()).await?;
    Ok(LocalStack {
        resources,
        queues,
        stream_failure_queue,
        sync_queues,
    })
}
