//! Creates the tables and bucket the way the CDK stack defines them (keys, attribute types, stream
//! view type, lifecycle rules, CORS). Used by the local stack and the tests; in AWS, CloudFormation
//! owns these resources and this code never runs. `tests/tests/local_stack_matches_template.rs`
//! compares what this creates with the synthesized template.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    StreamSpecification, StreamViewType,
};
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, CorsConfiguration, CorsRule,
    ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, Tag,
};

use crate::config::{AUTO_DELETE_TAG_KEY, AUTO_DELETE_TAG_VALUE, Resources};
use crate::error::StoreError;

/// A table's key layout: (name, type) of the partition and sort keys, and whether it streams.
#[derive(Debug, Clone, Copy)]
pub struct TableSpec {
    pub partition: (&'static str, ScalarAttributeTypeName),
    pub sort: (&'static str, ScalarAttributeTypeName),
    pub stream_new_image: bool,
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
    sort: ("n", N),
    stream_new_image: true,
};
pub const SEGMENT_TABLE: TableSpec = TableSpec {
    partition: ("l", B),
    sort: ("n", N),
    stream_new_image: false,
};
pub const PENDING_TABLE: TableSpec = TableSpec {
    partition: ("l", B),
    sort: ("n", B),
    stream_new_image: false,
};

/// Days after which the lifecycle rule expires objects still tagged for auto-delete.
pub const DEFAULT_AUTO_DELETE_DAYS: i32 = 3;

/// The bucket's CORS rule, as the CDK stack's default: browsers PUT payloads to, and GET
/// snapshots from, URLs the API presigns (the signature is the authorization), and read the
/// `ETag` of what they uploaded.
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
    for (attr, ty, key_type) in [
        (spec.partition.0, spec.partition.1, KeyType::Hash),
        (spec.sort.0, spec.sort.1, KeyType::Range),
    ] {
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
    let tag = Tag::builder()
        .key(AUTO_DELETE_TAG_KEY)
        .value(AUTO_DELETE_TAG_VALUE)
        .build()
        .map_err(|e| StoreError::service("S3", "PutBucketLifecycleConfiguration", e))?;
    let rules = vec![
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
            .map_err(|e| StoreError::service("S3", "PutBucketLifecycleConfiguration", e))?,
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
            .map_err(|e| StoreError::service("S3", "PutBucketLifecycleConfiguration", e))?,
    ];
    client
        .put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .set_rules(Some(rules))
                .build()
                .map_err(|e| StoreError::service("S3", "PutBucketLifecycleConfiguration", e))?,
        )
        .send()
        .await
        .map_err(|e| StoreError::service("S3", "PutBucketLifecycleConfiguration", e))?;
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
    create_bucket(s3, &resources.bucket, DEFAULT_AUTO_DELETE_DAYS).await?;
    Ok(())
}
