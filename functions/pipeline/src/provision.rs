//! Creates the tables, bucket and queues the way the CDK stack defines them (keys, attribute
//! types, stream view type, lifecycle rules, CORS, redrive). Used by the local stack and the
//! tests; in AWS, CloudFormation owns these resources, and this crate is not deployed.
//! `tests/tests/integration/local_stack_matches_template.rs` compares what this creates with the synthesized template.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
};
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, CorsConfiguration, CorsRule,
    ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, Tag,
};

use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use sheetlog_core::config::Resources;
use sheetlog_core::domain::keys::{AUTO_DELETE_TAG_KEY, AUTO_DELETE_TAG_VALUE};
use sheetlog_core::error::StoreError;

const SQS: &str = "SQS";

/// A table's key layout: (name, type) of the partition and sort keys, and whether it streams.
#[derive(Debug, Clone, Copy)]
pub struct TableSpec {
    pub partition: (&'static str, ScalarAttributeTypeName),
    /// `None` for a table with a partition key only.
    pub sort: Option<(&'static str, ScalarAttributeTypeName)>,
    pub stream_new_image: bool,
    /// Global secondary indexes, keys only.
    pub indexes: &'static [IndexSpec],
}

/// A global secondary index that projects keys only.
#[derive(Debug, Clone, Copy)]
pub struct IndexSpec {
    pub name: &'static str,
    pub partition: (&'static str, ScalarAttributeTypeName),
}

/// DynamoDB scalar key types, spelled as in CloudFormation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarAttributeTypeName {
    B,
    N,
    S,
}

impl ScalarAttributeTypeName {
    fn sdk(self) -> ScalarAttributeType {
        match self {
            Self::B => ScalarAttributeType::B,
            Self::N => ScalarAttributeType::N,
            Self::S => ScalarAttributeType::S,
        }
    }
}

use ScalarAttributeTypeName::{B, N};

pub const ENTRY_TABLE: TableSpec = TableSpec {
    partition: ("s", B),
    sort: Some(("n", N)),
    stream_new_image: true,
    indexes: &[],
};
pub const SEGMENT_TABLE: TableSpec = TableSpec {
    partition: ("l", B),
    sort: Some(("n", N)),
    stream_new_image: false,
    indexes: &[],
};
pub const PENDING_TABLE: TableSpec = TableSpec {
    partition: ("l", B),
    sort: Some(("n", B)),
    stream_new_image: false,
    indexes: &[],
};
/// Idempotency keys (`docs/storage.md`, "Dedupe table"): one item per hash prefix.
pub const DEDUPE_TABLE: TableSpec = TableSpec {
    partition: ("p", B),
    sort: None,
    stream_new_image: false,
    indexes: &[],
};

/// Sync clients (`docs/sync.md`): a client's mutation ranges under (log ‖ client, first id), a
/// client group's members under (log ‖ group, 0).
pub const CLIENTS_TABLE: TableSpec = TableSpec {
    partition: ("k", B),
    sort: Some(("m", N)),
    stream_new_image: false,
    indexes: &[IndexSpec {
        name: sheetlog_core::aws::items::CLIENTS_BY_LOG,
        partition: (sheetlog_core::aws::items::client_attr::LOG, B),
    }],
};

/// Days after which the lifecycle rule expires objects still tagged for auto-delete.
pub const DEFAULT_AUTO_DELETE_DAYS: i32 = 3;

/// Days a deleted object is kept as a noncurrent version (the CDK stack's
/// `noncurrentVersionDays` default; the bucket is versioned).
pub const DEFAULT_NONCURRENT_VERSION_DAYS: i32 = 30;

/// The bucket's CORS rule, as the CDK stack's with `corsAllowedOrigins=*` (`LOCAL_STACK_CONTEXT`
/// in `cdk/lib/resources.ts`; a deployment has none unless configured): browsers PUT payloads
/// to, and GET snapshots from, URLs the API presigns (the signature is the authorization), and
/// read the `ETag` of what they uploaded.
pub const CORS_ALLOWED_METHODS: [&str; 3] = ["PUT", "GET", "HEAD"];
pub const CORS_ALLOWED_ORIGINS: [&str; 1] = ["*"];
pub const CORS_ALLOWED_HEADERS: [&str; 1] = ["*"];
pub const CORS_EXPOSED_HEADERS: [&str; 1] = ["ETag"];
pub const CORS_MAX_AGE_SECS: i32 = 3600;

pub async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    spec: TableSpec,
) -> Result<(), StoreError> {
    let mut req = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest);
    let keys = std::iter::once((spec.partition.0, spec.partition.1, KeyType::Hash))
        .chain(spec.sort.map(|(attr, ty)| (attr, ty, KeyType::Range)));
    for (attr, ty, key_type) in keys {
        let def = AttributeDefinition::builder()
            .attribute_name(attr)
            .attribute_type(ty.sdk())
            .build()
            .map_err(|e| StoreError::service("DynamoDB", "CreateTable", e))?;
        let key = KeySchemaElement::builder()
            .attribute_name(attr)
            .key_type(key_type)
            .build()
            .map_err(|e| StoreError::service("DynamoDB", "CreateTable", e))?;
        req = req.attribute_definitions(def).key_schema(key);
    }
    for index in spec.indexes {
        let (attr, ty) = index.partition;
        let err = |e| StoreError::service("DynamoDB", "CreateTable", e);
        req = req
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(attr)
                    .attribute_type(ty.sdk())
                    .build()
                    .map_err(err)?,
            )
            .global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(index.name)
                    .key_schema(
                        KeySchemaElement::builder()
                            .attribute_name(attr)
                            .key_type(KeyType::Hash)
                            .build()
                            .map_err(err)?,
                    )
                    .projection(
                        Projection::builder()
                            .projection_type(ProjectionType::KeysOnly)
                            .build(),
                    )
                    .build()
                    .map_err(err)?,
            );
    }
    if spec.stream_new_image {
        req = req.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewImage)
                .build()
                .map_err(|e| StoreError::service("DynamoDB", "CreateTable", e))?,
        );
    }
    req.send()
        .await
        .map_err(|e| StoreError::service("DynamoDB", "CreateTable", e))?;
    Ok(())
}

/// Creates the bucket with the auto-delete lifecycle rule and the browser-upload CORS rule.
pub async fn create_bucket(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    auto_delete_days: i32,
) -> Result<(), StoreError> {
    client
        .create_bucket()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| StoreError::service("S3", "CreateBucket", e))?;
    client
        .put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .map_err(|e| StoreError::service("S3", "PutBucketVersioning", e))?;
    put_lifecycle(client, bucket, auto_delete_days).await?;
    put_cors(client, bucket).await
}

/// The bucket's lifecycle: objects tagged for auto-delete expire after `auto_delete_days`,
/// incomplete multipart uploads are aborted after a day, noncurrent versions expire.
async fn put_lifecycle(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    auto_delete_days: i32,
) -> Result<(), StoreError> {
    let err = |e| StoreError::service("S3", "PutBucketLifecycleConfiguration", e);
    let rules = lifecycle_rules(auto_delete_days)?;
    client
        .put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .set_rules(Some(rules))
                .build()
                .map_err(err)?,
        )
        .send()
        .await
        .map_err(|e| StoreError::service("S3", "PutBucketLifecycleConfiguration", e))?;
    Ok(())
}

/// The rules of [`put_lifecycle`].
fn lifecycle_rules(auto_delete_days: i32) -> Result<Vec<LifecycleRule>, StoreError> {
    let err = |e| StoreError::service("S3", "PutBucketLifecycleConfiguration", e);
    let tag = Tag::builder()
        .key(AUTO_DELETE_TAG_KEY)
        .value(AUTO_DELETE_TAG_VALUE)
        .build()
        .map_err(err)?;
    Ok(vec![
        LifecycleRule::builder()
            .id("expire-auto-delete-tagged")
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().tag(tag).build())
            .expiration(
                LifecycleExpiration::builder()
                    .days(auto_delete_days)
                    .build(),
            )
            .build()
            .map_err(err)?,
        LifecycleRule::builder()
            .id("abort-incomplete-multipart-uploads")
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().prefix("").build())
            .abort_incomplete_multipart_upload(
                AbortIncompleteMultipartUpload::builder()
                    .days_after_initiation(1)
                    .build(),
            )
            .build()
            .map_err(err)?,
        LifecycleRule::builder()
            .id("expire-noncurrent-versions")
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().prefix("").build())
            .noncurrent_version_expiration(
                aws_sdk_s3::types::NoncurrentVersionExpiration::builder()
                    .noncurrent_days(DEFAULT_NONCURRENT_VERSION_DAYS)
                    .build(),
            )
            .expiration(
                LifecycleExpiration::builder()
                    .expired_object_delete_marker(true)
                    .build(),
            )
            .build()
            .map_err(err)?,
    ])
}

/// The bucket's CORS rule for browser uploads and downloads.
async fn put_cors(client: &aws_sdk_s3::Client, bucket: &str) -> Result<(), StoreError> {
    let cors = CorsRule::builder()
        .set_allowed_methods(Some(CORS_ALLOWED_METHODS.map(String::from).to_vec()))
        .set_allowed_origins(Some(CORS_ALLOWED_ORIGINS.map(String::from).to_vec()))
        .set_allowed_headers(Some(CORS_ALLOWED_HEADERS.map(String::from).to_vec()))
        .set_expose_headers(Some(CORS_EXPOSED_HEADERS.map(String::from).to_vec()))
        .max_age_seconds(CORS_MAX_AGE_SECS)
        .build()
        .map_err(|e| StoreError::service("S3", "PutBucketCors", e))?;
    client
        .put_bucket_cors()
        .bucket(bucket)
        .cors_configuration(
            CorsConfiguration::builder()
                .cors_rules(cors)
                .build()
                .map_err(|e| StoreError::service("S3", "PutBucketCors", e))?,
        )
        .send()
        .await
        .map_err(|e| StoreError::service("S3", "PutBucketCors", e))?;
    Ok(())
}

/// Creates every table and the bucket named by `resources`.
pub async fn create_all(
    dynamo: &aws_sdk_dynamodb::Client,
    s3: &aws_sdk_s3::Client,
    resources: &Resources,
) -> Result<(), StoreError> {
    create_table(dynamo, &resources.entry_table, ENTRY_TABLE).await?;
    create_table(dynamo, &resources.segment_table, SEGMENT_TABLE).await?;
    if let Some(pending) = &resources.pending_table {
        create_table(dynamo, pending, PENDING_TABLE).await?;
    }
    if let Some(dedupe) = &resources.dedupe_table {
        create_table(dynamo, dedupe, DEDUPE_TABLE).await?;
    }
    if let Some(clients) = &resources.clients_table {
        create_table(dynamo, clients, CLIENTS_TABLE).await?;
    }
    create_bucket(s3, &resources.bucket, DEFAULT_AUTO_DELETE_DAYS).await?;
    Ok(())
}

/// Settings of the snapshot queue pair. The defaults are the CDK stack's `TIMINGS`
/// (`cdk/lib/stack/names.ts`); the local stack uses them so jobs behave as they do in AWS.
#[derive(Debug, Clone, Copy)]
pub struct QueueSettings {
    /// How long a received job stays invisible: six times the worker's 5-minute timeout.
    pub visibility_timeout: Duration,
    /// Receives after which SQS moves a job to the dead-letter queue.
    pub max_receive_count: u32,
    pub retention: Duration,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            visibility_timeout: Duration::from_secs(30 * 60),
            max_receive_count: 100,
            retention: Duration::from_secs(14 * 24 * 3600),
        }
    }
}

/// URLs of a snapshot queue and its dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueUrls {
    pub snapshot_queue: String,
    pub dead_letter_queue: String,
}

/// Creates the snapshot queue and its dead-letter queue with the redrive policy, named
/// `<prefix>-snapshots` and `<prefix>-snapshots-dlq` (the local stack and tests; in AWS the CDK
/// stack owns them). Creating a queue that exists with the same attributes is a no-op in SQS.
pub async fn create_snapshot_queues(
    client: &aws_sdk_sqs::Client,
    prefix: &str,
    settings: QueueSettings,
) -> Result<QueueUrls, StoreError> {
    let retention = settings.retention.as_secs().to_string();
    let dlq = client
        .create_queue()
        .queue_name(format!("{prefix}-snapshots-dlq"))
        .attributes(QueueAttributeName::MessageRetentionPeriod, &retention)
        .send()
        .await
        .map_err(|e| StoreError::service(SQS, "CreateQueue", e))?
        .queue_url
        .ok_or_else(|| StoreError::corrupt("CreateQueue response", "no queue URL"))?;
    let dlq_arn = client
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| StoreError::service(SQS, "GetQueueAttributes", e))?
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| StoreError::corrupt("GetQueueAttributes response", "no queue ARN"))?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": settings.max_receive_count,
    })
    .to_string();
    let queue = client
        .create_queue()
        .queue_name(format!("{prefix}-snapshots"))
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            settings.visibility_timeout.as_secs().to_string(),
        )
        .attributes(QueueAttributeName::MessageRetentionPeriod, &retention)
        .attributes(QueueAttributeName::RedrivePolicy, redrive)
        .send()
        .await
        .map_err(|e| StoreError::service(SQS, "CreateQueue", e))?
        .queue_url
        .ok_or_else(|| StoreError::corrupt("CreateQueue response", "no queue URL"))?;
    Ok(QueueUrls {
        snapshot_queue: queue,
        dead_letter_queue: dlq,
    })
}

/// The sync FIFO queue and its dead-letter queue, as the CDK stack defines them (`SyncQueue`,
/// `SyncDeadLetterQueue`).
#[derive(Debug, Clone)]
pub struct SyncQueueUrls {
    pub queue: String,
    pub dead_letter_queue: String,
}

/// The sync queue's attributes in the CDK stack: six times the writer's 30 s timeout of
/// visibility (AWS's advice for an SQS event source), five receives before the dead-letter queue,
/// 14 days of retention.
#[derive(Debug, Clone, Copy)]
pub struct SyncQueueSettings {
    pub visibility_timeout: Duration,
    pub retention: Duration,
    pub max_receive_count: u32,
}

impl Default for SyncQueueSettings {
    fn default() -> Self {
        Self {
            visibility_timeout: Duration::from_secs(180),
            retention: Duration::from_secs(14 * 24 * 3600),
            max_receive_count: 5,
        }
    }
}

/// Creates the sync FIFO queue `<prefix>-sync.fifo` (content-based deduplication off: the API
/// sets each message's deduplication id) and its FIFO dead-letter queue `<prefix>-sync-dlq.fifo`.
pub async fn create_sync_queues(
    client: &aws_sdk_sqs::Client,
    prefix: &str,
    settings: SyncQueueSettings,
) -> Result<SyncQueueUrls, StoreError> {
    let retention = settings.retention.as_secs().to_string();
    let dlq = client
        .create_queue()
        .queue_name(format!("{prefix}-sync-dlq.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .attributes(QueueAttributeName::MessageRetentionPeriod, &retention)
        .send()
        .await
        .map_err(|e| StoreError::service(SQS, "CreateQueue", e))?
        .queue_url
        .ok_or_else(|| StoreError::corrupt("CreateQueue response", "no queue URL"))?;
    let dlq_arn = client
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| StoreError::service(SQS, "GetQueueAttributes", e))?
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| StoreError::corrupt("GetQueueAttributes response", "no queue ARN"))?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": settings.max_receive_count,
    })
    .to_string();
    let queue = client
        .create_queue()
        .queue_name(format!("{prefix}-sync.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            settings.visibility_timeout.as_secs().to_string(),
        )
        .attributes(QueueAttributeName::MessageRetentionPeriod, &retention)
        .attributes(QueueAttributeName::RedrivePolicy, redrive)
        .send()
        .await
        .map_err(|e| StoreError::service(SQS, "CreateQueue", e))?
        .queue_url
        .ok_or_else(|| StoreError::corrupt("CreateQueue response", "no queue URL"))?;
    Ok(SyncQueueUrls {
        queue,
        dead_letter_queue: dlq,
    })
}

/// Creates the stream router's failure queue (the stack's on-failure destination for Entry-stream
/// records given up on), named `<prefix>-stream-failures`, with the snapshot queues' retention as
/// in the CDK stack. Returns its URL.
pub async fn create_stream_failure_queue(
    client: &aws_sdk_sqs::Client,
    prefix: &str,
    settings: QueueSettings,
) -> Result<String, StoreError> {
    client
        .create_queue()
        .queue_name(format!("{prefix}-stream-failures"))
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            settings.retention.as_secs().to_string(),
        )
        .send()
        .await
        .map_err(|e| StoreError::service(SQS, "CreateQueue", e))?
        .queue_url
        .ok_or_else(|| StoreError::corrupt("CreateQueue response", "no queue URL"))
}
