//! S3 adapters of the blob-store and payload ports. The client is built by the caller (so the
//! endpoint, region and credentials come from the environment, as everywhere else) and the bucket
//! is configuration.

use std::io::{Seek, SeekFrom, Write};

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;
use tracing::instrument;

use super::store::{BlobStore, PayloadSource, StoreError};
use crate::sheet::import::ReadSeek;

/// Snapshot blobs in an S3 bucket.
#[derive(Debug, Clone)]
pub struct S3Store {
    client: Client,
    bucket: String,
}

impl S3Store {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        S3Store {
            client,
            bucket: bucket.into(),
        }
    }
}

fn describe<E: std::error::Error + 'static, R: std::fmt::Debug>(e: &SdkError<E, R>) -> String {
    use std::error::Error as _;
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

#[async_trait]
impl BlobStore for S3Store {
    #[instrument(skip(self, bytes), fields(bucket = %self.bucket, len = bytes.len()))]
    async fn put(&self, key: &str, bytes: Bytes) -> Result<(), StoreError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| StoreError::new("put", key, describe(&e)))?;
        Ok(())
    }

    #[instrument(skip(self), fields(bucket = %self.bucket))]
    async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(o) => o,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => return Ok(None),
            Err(e) => return Err(StoreError::new("get", key, describe(&e))),
        };
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::new("get", key, e))?;
        Ok(Some(body.into_bytes()))
    }

    #[instrument(skip(self), fields(bucket = %self.bucket))]
    async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(false),
            Err(e) => Err(StoreError::new("exists", key, describe(&e))),
        }
    }
}

/// Import payloads in an S3 bucket. Each is streamed to an anonymous temporary file (Lambda's
/// `/tmp`), which is then read and sought like any file: the import never sits in memory.
#[derive(Debug, Clone)]
pub struct S3Payloads {
    client: Client,
    bucket: String,
}

impl S3Payloads {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        S3Payloads {
            client,
            bucket: bucket.into(),
        }
    }
}

#[async_trait]
impl PayloadSource for S3Payloads {
    #[instrument(skip(self), fields(bucket = %self.bucket))]
    async fn open(&self, key: &str) -> Result<Box<dyn ReadSeek>, StoreError> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| StoreError::new("open", key, describe(&e)))?;
        let err = |e: &dyn std::fmt::Display| StoreError::new("open", key, e);
        let mut file = tempfile::tempfile().map_err(|e| err(&e))?;
        let mut body = out.body;
        while let Some(chunk) = body.try_next().await.map_err(|e| err(&e))? {
            file.write_all(&chunk).map_err(|e| err(&e))?;
        }
        file.seek(SeekFrom::Start(0)).map_err(|e| err(&e))?;
        Ok(Box::new(std::io::BufReader::with_capacity(
            256 * 1024,
            file,
        )))
    }
}
