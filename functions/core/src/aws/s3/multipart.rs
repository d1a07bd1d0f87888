//! [`BlobStore::put_parts`](sheetlog_sheet::snapshot::BlobStore::put_parts) on S3: an object
//! written as its parts are produced (a large snapshot manifest), through a multipart upload once
//! it outgrows one part, so the writer holds at most a part of it.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::Bytes;
use sheetlog_sheet::snapshot::{BlobError, BlobParts};
use tracing::{instrument, warn};

use super::{S3Bucket, s3_error};
use crate::error::StoreError;

/// The part size of a multipart upload: S3's least for every part but the last (5 MiB). An
/// object that ends before filling one part is written with one PutObject instead.
pub const UPLOAD_PART_BYTES: usize = 5 << 20;

/// A multipart upload under way: its id and the parts uploaded so far.
#[derive(Debug)]
struct Upload {
    id: String,
    parts: Vec<CompletedPart>,
}

impl S3Bucket {
    /// Writes `key` from `parts`, collected into [`UPLOAD_PART_BYTES`] at a time: one PutObject
    /// if the object ends within the first, else CreateMultipartUpload, an UploadPart per part,
    /// CompleteMultipartUpload; the object appears whole, at the end, or not at all. A failure
    /// aborts the upload (best effort: the bucket's lifecycle rule removes an incomplete upload
    /// after a day).
    #[instrument(skip(self, parts), fields(bucket = %self.bucket))]
    pub async fn put_in_parts(
        &self,
        key: &str,
        parts: &mut dyn BlobParts,
    ) -> Result<(), BlobError> {
        let mut upload = None;
        let result = self.upload_parts(key, parts, &mut upload).await;
        if result.is_err()
            && let Some(u) = upload
        {
            let aborted = self
                .client
                .abort_multipart_upload()
                .bucket(&self.bucket)
                .key(key)
                .upload_id(&u.id)
                .send()
                .await;
            if let Err(e) = aborted {
                warn!(key, error = %s3_error("AbortMultipartUpload", e), "could not abort a failed multipart upload");
            }
        }
        result
    }

    async fn upload_parts(
        &self,
        key: &str,
        parts: &mut dyn BlobParts,
        upload: &mut Option<Upload>,
    ) -> Result<(), BlobError> {
        let err = |e: StoreError| BlobError::new("put", key, e);
        let mut buf: Vec<u8> = Vec::new();
        while let Some(p) = parts.next_part().await? {
            buf.extend_from_slice(&p);
            while buf.len() >= UPLOAD_PART_BYTES {
                let rest = buf.split_off(UPLOAD_PART_BYTES);
                let part = std::mem::replace(&mut buf, rest);
                let u = match upload {
                    Some(u) => u,
                    None => upload.insert(self.create_upload(key).await.map_err(err)?),
                };
                self.upload_part(key, u, part).await.map_err(err)?;
            }
        }
        let Some(u) = upload else {
            return self
                .put_object(key, Bytes::from(buf), false)
                .await
                .map_err(err);
        };
        if !buf.is_empty() {
            self.upload_part(key, u, buf).await.map_err(err)?;
        }
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(&u.id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(std::mem::take(&mut u.parts)))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| err(s3_error("CompleteMultipartUpload", e)))?;
        Ok(())
    }

    async fn create_upload(&self, key: &str) -> Result<Upload, StoreError> {
        let out = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| s3_error("CreateMultipartUpload", e))?;
        let id = out.upload_id.ok_or_else(|| {
            StoreError::service(
                super::SERVICE,
                "CreateMultipartUpload",
                "the answer has no upload id",
            )
        })?;
        Ok(Upload {
            id,
            parts: Vec::new(),
        })
    }

    async fn upload_part(
        &self,
        key: &str,
        u: &mut Upload,
        bytes: Vec<u8>,
    ) -> Result<(), StoreError> {
        let number = i32::try_from(u.parts.len() + 1)
            .map_err(|_| StoreError::service(super::SERVICE, "UploadPart", "too many parts"))?;
        let out = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(&u.id)
            .part_number(number)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| s3_error("UploadPart", e))?;
        u.parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag)
                .build(),
        );
        Ok(())
    }
}
