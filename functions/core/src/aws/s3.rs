//! [`S3Bucket`]: the one S3 adapter. Entry bodies and uploaded payloads (the log's
//! [`PayloadStore`] port), snapshot manifests and chunks and import files (the engine's
//! `BlobStore` and `ImportSource` ports), the auto-delete tag, and presigned URLs all go through
//! it, with one error type ([`StoreError`]) and one test for a missing key ([`is_missing`]).
//! `multipart.rs` writes an object as its parts are produced (a multipart upload once it
//! outgrows one part).

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use bytes::Bytes;
use tracing::instrument;

use crate::domain::keys::{AUTO_DELETE_TAG_KEY, AUTO_DELETE_TAG_VALUE};
use crate::error::StoreError;
use crate::ports::PayloadStore;

const SERVICE: &str = "S3";

#[cfg(feature = "engine")]
mod multipart;
#[cfg(feature = "engine")]
pub use multipart::UPLOAD_PART_BYTES;

/// What `x-amz-copy-source` must percent-encode in a key: everything but the unreserved
/// characters and the `/` separators.
const COPY_SOURCE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The S3 client every function uses: path-style addressing, which works against AWS and a
/// local emulator alike (virtual-hosted names would need DNS for every bucket).
pub fn s3_client(sdk: &aws_config::SdkConfig) -> Client {
    Client::from_conf(
        aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(true)
            .build(),
    )
}

/// The stack's bucket.
#[derive(Debug, Clone)]
pub struct S3Bucket {
    client: Client,
    bucket: String,
}

/// What removing the auto-delete tag found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untagged {
    /// The object has no tags now (whether or not it had the tag before: the call is idempotent).
    Done,
    /// There is no such object. Retrying cannot make it appear, so callers log it and move on.
    Missing,
}

/// An object's size and user metadata (`x-amz-meta-*`), from HeadObject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectHead {
    pub size: u64,
    pub metadata: HashMap<String, String>,
    /// The entity tag of this version of the object's bytes.
    pub etag: Option<String>,
}

/// What copying an object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Copied {
    Done,
    /// There is no source object.
    Missing,
    /// The source no longer has the entity tag the copy was pinned to: it was replaced.
    Changed,
}

/// A presigned request: the URL and the headers the client must send with it (they are part of
/// the signature).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresignedRequest {
    pub url: String,
    /// Lower-case header names.
    pub headers: Vec<(String, String)>,
}

/// What a presigned upload PUT pins down.
#[derive(Debug, Clone, Default)]
pub struct UploadSpec<'a> {
    pub content_type: &'a str,
    /// Tag the object for auto-delete, so it expires unless an entry commits it.
    pub discardable: bool,
    pub metadata: &'a [(&'a str, &'a str)],
    /// The exact length of the body, signed into the URL: S3 refuses a body of any other length.
    pub content_length: Option<u64>,
}

/// True when S3 answered that the key (not the bucket) does not exist. GetObject reports this as
/// the modelled `NoSuchKey`, HeadObject as a bare 404 `NotFound`, the tagging calls as a 404
/// with code `NoSuchKey`: the status is the one thing they share.
pub fn is_missing<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> bool {
    match e {
        SdkError::ServiceError(se) => {
            se.raw().status().as_u16() == 404 && se.err().code() != Some("NoSuchBucket")
        }
        _ => false,
    }
}

/// A conditional request refused because its condition failed (412 Precondition Failed): the
/// object exists (`If-None-Match: *`) or has changed (`If-Match`).
fn is_precondition_failed<E>(e: &SdkError<E, HttpResponse>) -> bool {
    matches!(e, SdkError::ServiceError(se) if se.raw().status().as_u16() == 412)
}

/// A conditional write that raced another conditional write on the same key (an SDK retry
/// racing its own first attempt, or two writers of one chunk): S3 answers
/// `409 ConditionalRequestConflict` and asks the caller to try again.
fn is_conditional_conflict<E>(e: &SdkError<E, HttpResponse>) -> bool {
    matches!(e, SdkError::ServiceError(se) if se.raw().status().as_u16() == 409)
}

/// How many times a conditional PUT answered `409 ConditionalRequestConflict` is sent.
const CONDITIONAL_ATTEMPTS: u32 = 6;

/// A failed S3 call as a [`StoreError`]: `SlowDown` (or a bare 503) after the SDK's retries is
/// [`StoreError::Throttled`].
fn s3_error<E>(operation: &'static str, e: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let slow = e.code() == Some("SlowDown")
        || matches!(&e, SdkError::ServiceError(se) if se.raw().status().as_u16() == 503);
    if slow {
        return StoreError::Throttled {
            service: SERVICE,
            operation,
        };
    }
    if matches!(e, SdkError::TimeoutError(_)) {
        return StoreError::TimedOut {
            service: SERVICE,
            operation,
        };
    }
    StoreError::service(SERVICE, operation, e)
}

/// The `x-amz-tagging` value that marks an object for auto-delete.
pub fn auto_delete_tagging() -> String {
    format!("{AUTO_DELETE_TAG_KEY}={AUTO_DELETE_TAG_VALUE}")
}

impl S3Bucket {
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

    /// Writes an object, optionally tagged for auto-delete.
    #[instrument(skip(self, bytes), fields(bucket = %self.bucket, len = bytes.len()))]
    pub async fn put_object(
        &self,
        key: &str,
        bytes: Bytes,
        discardable: bool,
    ) -> Result<(), StoreError> {
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(bytes));
        if discardable {
            req = req.tagging(auto_delete_tagging());
        }
        req.send().await.map_err(|e| s3_error("PutObject", e))?;
        Ok(())
    }

    /// Writes the file at `path` to `key`, streamed from disk (never held in memory), optionally
    /// tagged for auto-delete. For files up to S3's 5 GB single PUT.
    #[instrument(skip(self), fields(bucket = %self.bucket))]
    pub async fn put_file(
        &self,
        key: &str,
        path: &std::path::Path,
        discardable: bool,
    ) -> Result<(), StoreError> {
        let body = ByteStream::from_path(path)
            .await
            .map_err(|e| StoreError::service(SERVICE, "PutObject (reading the file)", e))?;
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(body);
        if discardable {
            req = req.tagging(auto_delete_tagging());
        }
        req.send().await.map_err(|e| s3_error("PutObject", e))?;
        Ok(())
    }

    /// Writes an object unless one is already at `key`, in one request: a PUT with
    /// `If-None-Match: *`, which S3 refuses with 412 when the key exists. `true` when this call
    /// wrote it. A `409 ConditionalRequestConflict` (another conditional write to the key in
    /// flight; the SDK does not retry it) is sent again after a jittered wait, up to
    /// [`CONDITIONAL_ATTEMPTS`] times; the retry then writes, or finds the other write's object.
    #[instrument(skip(self, bytes), fields(bucket = %self.bucket, len = bytes.len()))]
    pub async fn put_object_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool, StoreError> {
        let mut waits = backon::BackoffBuilder::build(
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(50))
                .with_max_delay(Duration::from_secs(2))
                .with_jitter()
                .without_max_times(),
        );
        let mut attempt = 1;
        loop {
            let res = self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .if_none_match("*")
                .body(ByteStream::from(bytes.clone()))
                .send()
                .await;
            match res {
                Ok(_) => return Ok(true),
                Err(e) if is_precondition_failed(&e) => return Ok(false),
                Err(e) if is_conditional_conflict(&e) && attempt < CONDITIONAL_ATTEMPTS => {
                    tracing::debug!(key, attempt, "409 ConditionalRequestConflict; trying again");
                    attempt += 1;
                    let wait = waits.next().unwrap_or(Duration::from_secs(2));
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(s3_error("PutObject", e)),
            }
        }
    }

    /// Reads a whole object; `None` when it does not exist.
    #[instrument(skip(self), fields(bucket = %self.bucket))]
    pub async fn get_object(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if is_missing(&e) => return Ok(None),
            Err(e) => return Err(s3_error("GetObject", e)),
        };
        let data = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::service(SERVICE, "GetObject", e))?;
        Ok(Some(data.into_bytes()))
    }

    /// Reads `len` bytes from `offset` (fewer at the end of the object).
    #[instrument(skip(self), fields(bucket = %self.bucket))]
    pub async fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Bytes, StoreError> {
        let last = offset.saturating_add(len.max(1) - 1);
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .range(format!("bytes={offset}-{last}"))
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if is_missing(&e) => return Err(StoreError::not_found(key)),
            Err(e) => return Err(s3_error("GetObject", e)),
        };
        let data = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::service(SERVICE, "GetObject", e))?;
        Ok(data.into_bytes())
    }

    /// Size and metadata; [`StoreError::NotFound`] when the object does not exist.
    #[instrument(skip(self), fields(bucket = %self.bucket))]
    pub async fn head(&self, key: &str) -> Result<ObjectHead, StoreError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(h) => Ok(ObjectHead {
                size: u64::try_from(h.content_length().unwrap_or(0)).unwrap_or(0),
                metadata: h.metadata().cloned().unwrap_or_default(),
                etag: h.e_tag().map(str::to_owned),
            }),
            Err(e) if is_missing(&e) => Err(StoreError::not_found(key)),
            Err(e) => Err(s3_error("HeadObject", e)),
        }
    }

    /// Whether the object exists.
    #[instrument(skip(self), fields(bucket = %self.bucket))]
    pub async fn object_exists(&self, key: &str) -> Result<bool, StoreError> {
        match self.head(key).await {
            Ok(_) => Ok(true),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// A GET URL valid for `ttl`, for clients that read an object straight from S3. The response
    /// is always `application/octet-stream` with `Content-Disposition: attachment`, whatever
    /// content type the object was stored with (an upload's type is the caller's choice), so a
    /// URL this stack hands out never renders as a page in a browser.
    pub async fn presign_get(&self, key: &str, ttl: Duration) -> Result<String, StoreError> {
        self.presign_download(key, ttl, None).await
    }

    /// As [`presign_get`](Self::presign_get), and a browser saves the object as `filename`
    /// (letters, digits, `.`, `-` and `_` only; anything else is replaced by `_`).
    pub async fn presign_download(
        &self,
        key: &str,
        ttl: Duration,
        filename: Option<&str>,
    ) -> Result<String, StoreError> {
        let disposition = match filename {
            Some(name) => {
                let safe: String = name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                format!("attachment; filename=\"{safe}\"")
            }
            None => "attachment".to_owned(),
        };
        let cfg = PresigningConfig::expires_in(ttl)
            .map_err(|e| StoreError::service(SERVICE, "presign GetObject", e))?;
        let req = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .response_content_type("application/octet-stream")
            .response_content_disposition(disposition)
            .presigned(cfg)
            .await
            .map_err(|e| s3_error("presign GetObject", e))?;
        Ok(req.uri().to_owned())
    }

    /// A PUT URL valid for `ttl` that uploads `key` with exactly the content type, tagging and
    /// metadata in `spec` (the returned headers are signed; the client must send them).
    pub async fn presign_put(
        &self,
        key: &str,
        ttl: Duration,
        spec: &UploadSpec<'_>,
    ) -> Result<PresignedRequest, StoreError> {
        let cfg = PresigningConfig::expires_in(ttl)
            .map_err(|e| StoreError::service(SERVICE, "presign PutObject", e))?;
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(spec.content_type);
        if spec.discardable {
            req = req.tagging(auto_delete_tagging());
        }
        for (k, v) in spec.metadata {
            req = req.metadata(*k, *v);
        }
        if let Some(len) = spec.content_length {
            let len = i64::try_from(len).map_err(|e| {
                StoreError::service(SERVICE, "presign PutObject", format!("length {len}: {e}"))
            })?;
            req = req.content_length(len);
        }
        let presigned = req
            .presigned(cfg)
            .await
            .map_err(|e| s3_error("presign PutObject", e))?;
        Ok(PresignedRequest {
            url: presigned.uri().to_owned(),
            headers: presigned
                .headers()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
                .collect(),
        })
    }

    /// Commits a payload by removing its auto-delete tag, so the lifecycle rule no longer expires
    /// it, and leaves every other tag as it was. Reads the tag set first (GetObjectTagging);
    /// writes only when our tag is there: DeleteObjectTagging when it is the only tag,
    /// PutObjectTagging with the rest otherwise. Idempotent; a replayed record costs one read.
    /// The read-modify-write cannot race a writer: payload keys are chosen by this stack and
    /// never handed out in an upload URL, so nothing else writes their tags.
    #[instrument(skip(self))]
    pub async fn remove_auto_delete_tag(&self, key: &str) -> Result<Untagged, StoreError> {
        let tags = match self
            .client
            .get_object_tagging()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out.tag_set,
            Err(e) if is_missing(&e) => return Ok(Untagged::Missing),
            Err(e) => return Err(s3_error("GetObjectTagging", e)),
        };
        let ours = |t: &aws_sdk_s3::types::Tag| t.key() == AUTO_DELETE_TAG_KEY;
        if !tags.iter().any(ours) {
            return Ok(Untagged::Done);
        }
        let rest: Vec<_> = tags.into_iter().filter(|t| !ours(t)).collect();
        let done = if rest.is_empty() {
            self.client
                .delete_object_tagging()
                .bucket(&self.bucket)
                .key(key)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| (is_missing(&e), s3_error("DeleteObjectTagging", e)))
        } else {
            let tagging = aws_sdk_s3::types::Tagging::builder()
                .set_tag_set(Some(rest))
                .build()
                .map_err(|e| StoreError::service(SERVICE, "PutObjectTagging", e))?;
            self.client
                .put_object_tagging()
                .bucket(&self.bucket)
                .key(key)
                .tagging(tagging)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| (is_missing(&e), s3_error("PutObjectTagging", e)))
        };
        match done {
            Ok(()) => Ok(Untagged::Done),
            Err((true, _)) => Ok(Untagged::Missing),
            Err((false, e)) => Err(e),
        }
    }

    /// Copies `from` to `to` inside the bucket (server-side: no bytes pass through the function),
    /// tagged for auto-delete, keeping the source's content type and metadata. With `if_match`,
    /// only the version of `from` with that entity tag is copied ([`Copied::Changed`] otherwise).
    #[instrument(skip(self))]
    pub async fn copy_discardable(
        &self,
        from: &str,
        to: &str,
        if_match: Option<&str>,
    ) -> Result<Copied, StoreError> {
        let source = format!(
            "{}/{}",
            self.bucket,
            percent_encoding::utf8_percent_encode(from, COPY_SOURCE)
        );
        let res = self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(to)
            .copy_source(source)
            .set_copy_source_if_match(if_match.map(str::to_owned))
            .metadata_directive(aws_sdk_s3::types::MetadataDirective::Copy)
            .tagging_directive(aws_sdk_s3::types::TaggingDirective::Replace)
            .tagging(auto_delete_tagging())
            .send()
            .await;
        match res {
            Ok(_) => Ok(Copied::Done),
            Err(e) if is_missing(&e) => Ok(Copied::Missing),
            Err(e) if is_precondition_failed(&e) => Ok(Copied::Changed),
            Err(e) => Err(s3_error("CopyObject", e)),
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
            Err(e) if is_missing(&e) => Ok(None),
            Err(e) => Err(s3_error("GetObjectTagging", e)),
        }
    }

    /// Streams an object into an anonymous temporary file (Lambda's `/tmp`) and returns it
    /// rewound, so a large import is read and sought like any file and never sits in memory.
    /// Stops with [`StoreError::TooLarge`] past `limit` bytes, whatever the object claims its
    /// length is, so a file that grew after it was checked cannot fill the disk.
    #[cfg(feature = "engine")]
    #[instrument(skip(self), fields(bucket = %self.bucket))]
    pub async fn download(&self, key: &str, limit: u64) -> Result<std::fs::File, StoreError> {
        use std::io::{Seek, SeekFrom, Write};
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if is_missing(&e) => return Err(StoreError::not_found(key)),
            Err(e) => return Err(s3_error("GetObject", e)),
        };
        let io = |e: std::io::Error| StoreError::service("filesystem", "write temporary file", e);
        let mut file = tempfile::tempfile().map_err(io)?;
        let mut body = out.body;
        let mut written = 0u64;
        while let Some(chunk) = body
            .try_next()
            .await
            .map_err(|e| StoreError::service(SERVICE, "GetObject", e))?
        {
            written += chunk.len() as u64;
            if written > limit {
                return Err(StoreError::TooLarge {
                    key: key.to_owned(),
                    limit,
                });
            }
            file.write_all(&chunk).map_err(io)?;
        }
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        Ok(file)
    }
}

#[async_trait]
impl PayloadStore for S3Bucket {
    async fn put_discardable(&self, key: &str, bytes: Bytes) -> Result<(), StoreError> {
        self.put_object(key, bytes, true).await
    }

    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        self.get_object(key)
            .await?
            .ok_or_else(|| StoreError::not_found(key))
    }
}

#[cfg(feature = "engine")]
mod engine {
    use async_trait::async_trait;
    use bytes::Bytes;
    use sheetlog_sheet::import::ReadSeek;
    use sheetlog_sheet::snapshot::{BlobError, BlobParts, BlobStore, ImportSource};

    use super::S3Bucket;

    const IMPORT_READ_LIMIT: u64 = 8 * 1024 * 1024 * 1024;

    /// Snapshot manifests and chunks. Written untagged: they are committed by construction (a
    /// chunk is only referenced once written).
    #[async_trait]
    impl BlobStore for S3Bucket {
        async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
            self.put_object(key, bytes, false)
                .await
                .map_err(|e| BlobError::new("put", key, e))
        }

        async fn get(&self, key: &str) -> Result<Option<Bytes>, BlobError> {
            self.get_object(key)
                .await
                .map_err(|e| BlobError::new("get", key, e))
        }

        async fn exists(&self, key: &str) -> Result<bool, BlobError> {
            self.object_exists(key)
                .await
                .map_err(|e| BlobError::new("exists", key, e))
        }

        async fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool, BlobError> {
            self.put_object_if_absent(key, bytes)
                .await
                .map_err(|e| BlobError::new("put", key, e))
        }

        async fn put_parts(&self, key: &str, parts: &mut dyn BlobParts) -> Result<(), BlobError> {
            self.put_in_parts(key, parts).await
        }
    }

    /// Import files, each streamed to a temporary file first.
    #[async_trait]
    impl ImportSource for S3Bucket {
        async fn open(&self, key: &str) -> Result<Box<dyn ReadSeek>, BlobError> {
            // Imports were size-checked at commit; this bound only keeps a corrupt reference
            // from filling the disk (Lambda's /tmp is at most 10 GB).
            let file = self
                .download(key, IMPORT_READ_LIMIT)
                .await
                .map_err(|e| BlobError::new("open", key, e))?;
            Ok(Box::new(std::io::BufReader::with_capacity(
                256 * 1024,
                file,
            )))
        }
    }
}
