//! Large entries: an upload's presigned PUT, and the commit that appends the entry referencing
//! the uploaded file (`docs/api.md`, "Large entries").

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sheetlog_core::StoreError;
use sheetlog_core::aws::s3::{Copied, ObjectHead, UploadSpec};
use sheetlog_core::domain::keys::{file_key, upload_key};
use sheetlog_core::domain::{EntryType, NewEntry};
use sheetlog_core::log::IdempotencyKey;
use sheetlog_core::sheet::event::{Import, ImportFormat};
use sheetlog_core::sheet::{Event, import};
use tracing::info;
use uuid::Uuid;

use crate::append;
use crate::dto::*;
use crate::error::ApiError;
use crate::request::{ApiResult, body_bytes, parse_body, parse_json, parse_log_id};
use crate::routes::{created, idempotency_key};
use crate::state::SharedState;

const XLSX_MEDIA_TYPE: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
/// Object metadata recording what an upload is for (sent by the client as signed headers).
const META_TYPE: &str = "sheetlog-type";
const META_FORMAT: &str = "sheetlog-format";
const META_SIZE: &str = "sheetlog-size";

/// Start a large-entry upload: returns a presigned PUT for the file.
#[utoipa::path(post, path = "/logs/{logId}/uploads",
    params(("logId" = String, Path, description = "the log's UUID")),
    request_body = UploadRequest,
    responses((status = 201, body = UploadCreated), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 413, body = ErrorResponse)))]
pub async fn create_upload(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<UploadCreated>)> {
    let log = parse_log_id(&log_id)?;
    let req: UploadRequest = parse_body(body, state.cfg.max_request_bytes)?;
    if req.kind != "import" {
        return Err(ApiError::InvalidEntry(format!(
            "type: {:?} cannot be uploaded; only \"import\" entries carry a file",
            req.kind
        )));
    }
    let format = match (&req.body, req.content_type.as_deref()) {
        (Some(body), _) => match Event::from_parts("import", body.clone()) {
            Ok(Event::Import(Import { format, .. })) => format,
            Ok(_) => return Err(ApiError::InvalidEntry("body: not an import body".into())),
            Err(e) => return Err(ApiError::InvalidEntry(e.to_string())),
        },
        (None, Some(ct)) if ct.starts_with(XLSX_MEDIA_TYPE) => ImportFormat::Xlsx,
        (None, _) => ImportFormat::Csv,
    };
    let content_type = req.content_type.clone().unwrap_or_else(|| match format {
        ImportFormat::Csv => "text/csv".into(),
        ImportFormat::Xlsx => XLSX_MEDIA_TYPE.into(),
    });
    check_content_type(&content_type)?;
    if req.size > state.cfg.max_upload_bytes {
        return Err(ApiError::UploadTooLarge {
            size: req.size,
            limit: state.cfg.max_upload_bytes,
        });
    }
    // The log must exist (an upload for a missing log would fail only at commit).
    let (from_seq, _) = state
        .log
        .next_seq(log)
        .await
        .map_err(|e| ApiError::from_log(&log_id, e))?;
    let upload_id = format!("u{from_seq}-{}", Uuid::new_v4().simple());
    let key = upload_key(log, &upload_id);
    let format_name = format_name(format);
    let size = req.size.to_string();
    let spec = UploadSpec {
        content_type: &content_type,
        discardable: true,
        metadata: &[
            (META_TYPE, "import"),
            (META_FORMAT, format_name),
            (META_SIZE, &size),
        ],
        content_length: Some(req.size),
    };
    let presigned = state
        .bucket
        .presign_put(&key, state.cfg.upload_url_ttl, &spec)
        .await
        .map_err(ApiError::from_store)?;
    let headers: BTreeMap<String, String> = presigned.headers.into_iter().collect();
    let expires = time::OffsetDateTime::now_utc() + state.cfg.upload_url_ttl;
    let expires_at = expires
        .replace_nanosecond(0)
        .unwrap_or(expires)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    Ok((
        StatusCode::CREATED,
        Json(UploadCreated {
            upload_id,
            url: presigned.url,
            method: "PUT".into(),
            headers,
            expires_at,
        }),
    ))
}

/// A `contentType` must be one valid MIME type (`type/subtype` with optional parameters, no
/// control characters), at most 255 bytes: it is signed into the upload URL as a header.
fn check_content_type(ct: &str) -> ApiResult<()> {
    let bad = |why: &str| {
        ApiError::InvalidEntry(format!(
            "contentType: {why}; expected a MIME type such as \"text/csv\""
        ))
    };
    if ct.is_empty() || ct.len() > 255 {
        return Err(bad("must be 1 to 255 characters"));
    }
    if ct.bytes().any(|b| b.is_ascii_control() || !b.is_ascii()) {
        return Err(bad("contains control or non-ASCII characters"));
    }
    let parsed = ct
        .parse::<mime::Mime>()
        .map_err(|e| bad(&format!("is not a valid MIME type ({e})")))?;
    // The mime crate takes "text/" as a type with an empty subtype; a MIME type has both.
    if parsed.subtype().as_str().is_empty() {
        return Err(bad("has no subtype"));
    }
    Ok(())
}

fn format_name(f: ImportFormat) -> &'static str {
    match f {
        ImportFormat::Csv => "csv",
        ImportFormat::Xlsx => "xlsx",
    }
}

/// `u<seq>-<32 hex>` → the sequence the log was at when the upload started.
fn parse_upload_id(raw: &str) -> Option<u64> {
    let rest = raw.strip_prefix('u')?;
    let (seq, rand) = rest.split_once('-')?;
    if rand.len() != 32
        || !rand
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return None;
    }
    if seq.is_empty() || seq.len() > 20 || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    seq.parse().ok()
}

/// Commit an upload: the linchpin write of an entry that references the uploaded file. The
/// upload id is the commit's idempotency key: committing one upload again, or twice at once,
/// appends one entry, and every commit answers its sequence (a repeat with
/// `Idempotent-Replayed: true`).
#[utoipa::path(post, path = "/logs/{logId}/uploads/{uploadId}/commit",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("uploadId" = String, Path, description = "from POST /logs/{logId}/uploads"),
        ("Idempotency-Key" = Option<String>, Header,
            description = "accepted and validated; a commit is already keyed by its upload id")),
    request_body = CommitRequest,
    responses((status = 201, body = AppendResponse, description = "committed, now or by an earlier request",
            headers(("Idempotent-Replayed" = String,
                description = "`true` when an earlier commit of this upload made the entry"))),
        (status = 400, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 410, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 422, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub async fn commit_upload(
    State(state): State<SharedState>,
    Path((log_id, upload_id)): Path<(String, String)>,
    caller: Option<axum::Extension<crate::access::Caller>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let log = parse_log_id(&log_id)?;
    // Validated like everywhere else; the upload id below is what makes the commit idempotent.
    idempotency_key(&headers)?;
    let bytes = body_bytes(body, state.cfg.max_request_bytes)?;
    let req: CommitRequest = if bytes.iter().all(u8::is_ascii_whitespace) {
        CommitRequest::default()
    } else {
        parse_json(&bytes)?
    };
    if parse_upload_id(&upload_id).is_none() {
        return Err(ApiError::UploadNotFound(upload_id));
    }
    if let Some(group) = &req.client_group_id {
        crate::sync::check("clientGroupId", group)?;
        crate::sync::check_group_owner(&state, log, &log_id, group, caller.as_deref()).await?;
    }
    // Committed before? Answer with that sequence, whatever happened to the log or the uploaded
    // object since. One Dedupe read: a made-up id costs this and the HEAD below, nothing more.
    if let Some(done) = state
        .log
        .find_upload(log, &upload_id)
        .await
        .map_err(|e| ApiError::from_log(&log_id, e))?
    {
        return Ok(created(
            append::replay(&state, log, &log_id, done.seq()).await?,
        ));
    }
    let upload = upload_key(log, &upload_id);
    let head = checked_upload(&state, &upload, &upload_id).await?;
    let file = file_key(log, &upload_id, head.etag.as_deref());
    copy_upload(&state, &upload, &file, head.etag.as_deref(), &upload_id).await?;
    let format = match head.metadata.get(META_FORMAT).map(String::as_str) {
        Some("xlsx") => ImportFormat::Xlsx,
        Some("csv") => ImportFormat::Csv,
        _ => sniff_format(&state, &file).await?,
    };
    let (summary, layout) = validate_copy(&state, &file, format, &upload_id).await?;
    let group = req.client_group_id.clone();
    let (code, version, encoded) = Event::Import(Import {
        format,
        group,
        layout,
    })
    .encode();
    let entry = NewEntry::new(EntryType(code), version, encoded).with_payload(&file);
    // Two commits racing to here still append once: the upload id's key and the entry are
    // written in one transaction, and the key stands for the upload, not for the copy.
    let once = IdempotencyKey::upload(&upload_id);
    let out = append::append_and_trigger(
        &state,
        log,
        &log_id,
        entry,
        req.expected_seq,
        None,
        Some(&once),
    )
    .await?;
    info!(log = %log, upload = %upload_id, file = %file, seq = out.body.seq,
        replayed = out.replayed, rows = ?summary, "upload committed");
    Ok(created(out))
}

/// The uploaded object's head, once it is known to exist within the upload limit and to be the
/// size its upload declared.
async fn checked_upload(
    state: &SharedState,
    upload: &str,
    upload_id: &str,
) -> ApiResult<ObjectHead> {
    let head = match state.bucket.head(upload).await {
        Ok(h) => h,
        Err(StoreError::NotFound { .. }) => return Err(ApiError::UploadNotFound(upload_id.into())),
        Err(e) => return Err(ApiError::from_store(e)),
    };
    let limit = state.cfg.max_upload_bytes;
    if head.size > limit {
        return Err(ApiError::UploadTooLarge {
            size: head.size,
            limit,
        });
    }
    // S3 enforces the signed length; this catches a store that does not (an emulator).
    if let Some(declared) = head.metadata.get(META_SIZE)
        && declared.parse::<u64>().ok() != Some(head.size)
    {
        return Err(ApiError::InvalidPayload {
            format: "upload",
            reason: format!(
                "the file is {} bytes, the upload declared {declared}",
                head.size
            ),
            limit: None,
        });
    }
    Ok(head)
}

/// Copies the upload to `file`, the key the entry will name: nobody holds a URL for it, so a
/// second PUT to the upload URL after the commit changes nothing the log refers to. The copy is
/// pinned to the version just checked (`etag`), born discardable (if this commit loses or fails,
/// the lifecycle rule removes it), and its tag is removed by the stream router once the entry
/// exists.
///
/// The copy's key names the upload and the version copied (`file_key`): a commit retried after a
/// failure or a timeout finds the copy an earlier try made and does not copy again, so retries
/// cost one copy, not one per attempt. (Writing the same key again would also re-tag a copy that
/// a committed entry already names.)
async fn copy_upload(
    state: &SharedState,
    upload: &str,
    file: &str,
    etag: Option<&str>,
    upload_id: &str,
) -> ApiResult<()> {
    let copied_before = etag.is_some()
        && state
            .bucket
            .object_exists(file)
            .await
            .map_err(ApiError::from_store)?;
    if copied_before {
        return Ok(());
    }
    match state
        .bucket
        .copy_discardable(upload, file, etag)
        .await
        .map_err(ApiError::from_store)?
    {
        Copied::Done => Ok(()),
        Copied::Missing => Err(ApiError::UploadNotFound(upload_id.into())),
        Copied::Changed => Err(ApiError::UploadChanged {
            upload_id: upload_id.into(),
        }),
    }
}

/// Validates the copy (the bytes the entry will name) before the linchpin write: a file that will
/// not import never enters the log. Streamed to a temporary file and read from there, so memory
/// stays bounded whatever the file's size.
/// Checks the committed copy against the import limits, and reads the layout it brings (an XLSX
/// file's widths, heights and frozen panes).
async fn validate_copy(
    state: &SharedState,
    file: &str,
    format: ImportFormat,
    upload_id: &str,
) -> ApiResult<(
    import::ImportSummary,
    Option<sheetlog_core::sheet::layout::LayoutRuns>,
)> {
    let local = match state
        .bucket
        .download(file, state.cfg.max_upload_bytes)
        .await
    {
        Ok(f) => f,
        // The copy was pinned to the version whose size was checked, so a longer one was
        // replaced in between (possible only where copies are not pinned: the emulator).
        Err(StoreError::TooLarge { .. }) => {
            return Err(ApiError::UploadChanged {
                upload_id: upload_id.into(),
            });
        }
        Err(e) => return Err(ApiError::from_store(e)),
    };
    let checked = move || {
        let copy = local.try_clone()?;
        let reader = Box::new(std::io::BufReader::with_capacity(256 * 1024, local));
        let summary = import::validate(format, reader)?;
        let layout = import::layout_of(format, std::io::BufReader::new(copy))?;
        Ok::<_, import::ImportError>((summary, layout))
    };
    tokio::task::spawn_blocking(checked)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(|e| ApiError::InvalidPayload {
            format: format_name(format),
            limit: e.limit(),
            reason: e.to_string(),
        })
}

async fn sniff_format(state: &SharedState, key: &str) -> ApiResult<ImportFormat> {
    let head = state
        .bucket
        .get_range(key, 0, 4)
        .await
        .map_err(ApiError::from_store)?;
    // XLSX files are ZIP archives.
    Ok(if head.starts_with(b"PK\x03\x04") {
        ImportFormat::Xlsx
    } else {
        ImportFormat::Csv
    })
}

#[cfg(test)]
mod tests {
    use super::check_content_type;

    #[test]
    fn content_types_must_be_mime_types() {
        for ok in [
            "text/csv",
            "text/csv; charset=utf-8",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ] {
            assert!(check_content_type(ok).is_ok(), "{ok}");
        }
        for bad in [
            "text/csv\r\nx-amz-acl: public-read",
            "text/csv\nx: y",
            "csv",
            "text/",
            "text/csv é",
            "",
        ] {
            assert!(check_content_type(bad).is_err(), "{bad:?}");
        }
    }
}
