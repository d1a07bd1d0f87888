//! [`PayloadStore`] over S3.

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
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

/// What removing the auto-delete tag found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untagged {
    /// The object has no tags now (whether or not it had the tag before: the call is idempotent).
    Done,
    /// There is no such object. Retrying cannot make it appear, so callers log it and move on.
    Missing,
}

impl S3PayloadStore {
    /// Commits a payload by removing its auto-delete tag, so the lifecycle rule no longer expires
    /// it. One DeleteObjectTagging request, idempotent. It removes the whole tag set: objects
    /// under `payloads/` are written only by this stack (directly, or through a URL the API
    /// presigns with exactly this tagging), so the auto-delete tag is the only tag they carry,
    /// and a read-modify-write of the tag set would cost a second request per record and race.
    #[instrument(skip(self))]
    pub async fn remove_auto_delete_tag(&self, key: &str) -> Result<Untagged, StoreError> {
        match self
            .client
            .delete_object_tagging()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(Untagged::Done),
            Err(e) if is_no_such_key(&e) => Ok(Untagged::Missing),
            Err(e) => Err(StoreError::service(SERVICE, "DeleteObjectTagging", e)),
        }
    }

    /// Whether the object still carries the auto-delete tag; `None` when it does not exist.
    #[instrument(skip(self))]
    pub async fn has_auto_delete_tag(&self, key: &str) -> Result<Option<bool>, StoreError> {
        match self
            .client
            .get_object_tagging()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(Some(out.tag_set().iter().any(|t| {
                t.key() == AUTO_DELETE_TAG_KEY && t.value() == AUTO_DELETE_TAG_VALUE
            }))),
            Err(e) if is_no_such_key(&e) => Ok(None),
            Err(e) => Err(StoreError::service(SERVICE, "GetObjectTagging", e)),
        }
    }
}

/// S3 reports a missing key on the tagging calls as a 404 with code `NoSuchKey` (the SDK has no
/// modelled error for these operations, so look at the code and status).
fn is_no_such_key<E>(e: &SdkError<E, HttpResponse>) -> bool
where
    E: aws_sdk_s3::error::ProvideErrorMetadata,
{
    match e {
        SdkError::ServiceError(se) => {
            se.err().code() == Some("NoSuchKey") || se.raw().status().as_u16() == 404
        }
        _ => false,
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
