//! [`PayloadStore`] over S3.

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;
use tracing::instrument;

use crate::config::{AUTO_DELETE_TAG_KEY, AUTO_DELETE_TAG_VALUE};
use crate::error::StoreError;
use crate::ports::PayloadStore;

const SERVICE: &str = "S3";

/// Entry payloads in one bucket.
#[derive(Debug, Clone)]
pub struct S3PayloadStore {
    client: Client,
    bucket: String,
}

impl S3PayloadStore {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }
    pub fn client(&self) -> &Client {
        &self.client
    }
    pub fn bucket(&self) -> &str {
        &self.bucket
    }
}

/// The `x-amz-tagging` value that marks an object for auto-delete.
pub fn auto_delete_tagging() -> String {
    format!("{AUTO_DELETE_TAG_KEY}={AUTO_DELETE_TAG_VALUE}")
}

#[async_trait]
impl PayloadStore for S3PayloadStore {
    #[instrument(skip(self, bytes), fields(bytes = bytes.len()))]
    async fn put_discardable(&self, key: &str, bytes: Bytes) -> Result<(), StoreError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .tagging(auto_delete_tagging())
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| StoreError::service(SERVICE, "PutObject", e))?;
        Ok(())
    }

    #[instrument(skip(self))]
    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(SdkError::ServiceError(e)) if matches!(e.err(), GetObjectError::NoSuchKey(_)) => {
                return Err(StoreError::NotFound {
                    key: key.to_owned(),
                });
            }
            Err(e) => return Err(StoreError::service(SERVICE, "GetObject", e)),
        };
        let data = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::service(SERVICE, "GetObject", e))?;
        Ok(data.into_bytes())
    }
}
