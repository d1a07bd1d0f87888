//! `GET /logs/{logId}/export?format=xlsx&at=`: a version of the sheet as an XLSX workbook, handed
//! out as a presigned S3 download (docs/api.md, "Export").
//!
//! The workbook is written by `snapshot::xlsx_export` (windows of rows, a constant-memory writer
//! on a blocking thread) into the function's temporary storage, then streamed to
//! `payloads/<log>/exports/<seq>-v<n>.xlsx` tagged for auto-delete. A version never changes, so
//! a later request for the same one finds that object and only signs a URL. Every answer goes
//! through S3, small or large: Lambda's 6 MB response could not carry a large workbook, and the
//! answer's shape does not depend on the size. Writing stops at `export_budget` (below the API's
//! timeout) with `413 export-too-large`.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::time::Instant;

use axum::Json;
use axum::extract::{Path, Query, State};
use sheetlog_core::domain::keys::export_key;
use sheetlog_core::snapshot::diff::Version;
use sheetlog_core::snapshot::xlsx_export::{EXPORT_VERSION, ExportError, export_xlsx};

use crate::cells::base_and_entries;
use crate::dto::{ErrorResponse, ExportResponse};
use crate::error::ApiError;
use crate::request::{parse_log_id, reject_unknown_params};
use crate::routes::{ApiResult, query_u64};
use crate::state::SharedState;

/// The formats the server exports.
pub const FORMATS: &[&str] = &["xlsx"];

/// A version of the sheet as an XLSX workbook: a presigned URL to download it from.
#[utoipa::path(get, path = "/logs/{logId}/export",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("format" = Option<String>, Query, description = "`xlsx` (the default and the only one)"),
        ("at" = Option<u64>, Query, description = "the sheet as of every entry before this sequence (default: the whole log)")),
    responses((status = 200, body = ExportResponse), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 410, body = ErrorResponse),
        (status = 413, body = ErrorResponse)))]
pub async fn export(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<ExportResponse>> {
    let started = Instant::now();
    let log = parse_log_id(&log_id)?;
    reject_unknown_params(&q, &["format", "at"])?;
    let format = q.get("format").map_or("xlsx", String::as_str);
    if !FORMATS.contains(&format) {
        return Err(ApiError::InvalidQuery(format!(
            "format={format:?}: the server exports xlsx; a CSV is written from range reads (GET /logs/{{logId}}/cells), as `sheetlog export` and the page's Export CSV do"
        )));
    }
    // The log's end, read strongly: an export is kept under its sequence, so it must never be of
    // a version still to be written.
    let next = state
        .log
        .next_seq(log)
        .await
        .map_err(|e| ApiError::from_log(&log_id, e))?
        .0;
    let at = match query_u64(&q, "at")? {
        None => next,
        Some(at) if at <= next => at,
        Some(at) => {
            return Err(ApiError::InvalidQuery(format!(
                "at={at} is past the log's end (its next sequence is {next})"
            )));
        }
    };
    let key = export_key(log, at, EXPORT_VERSION);
    let ttl = state.cfg.upload_url_ttl;
    let (bytes, cached) = match state.bucket.head(&key).await {
        Ok(head) => (head.size, true),
        Err(sheetlog_core::StoreError::NotFound { .. }) => {
            (write(&state, log, &log_id, at, &key, started).await?, false)
        }
        Err(e) => return Err(ApiError::Internal(format!("looking for {key}: {e}"))),
    };
    let filename = format!("sheet-{}-v{at}.xlsx", &log_id[..8.min(log_id.len())]);
    let url = state
        .bucket
        .presign_download(&key, ttl, Some(&filename))
        .await
        .map_err(|e| ApiError::Internal(format!("signing the download: {e}")))?;
    Ok(Json(ExportResponse {
        seq: at,
        format: format.to_owned(),
        url,
        expires_in: ttl.as_secs(),
        bytes,
        cached,
    }))
}

/// Writes version `at` to `key`; the file's size.
async fn write(
    state: &SharedState,
    log: sheetlog_core::LogId,
    log_id: &str,
    at: u64,
    key: &str,
    started: Instant,
) -> Result<u64, ApiError> {
    let (base, entries) = base_and_entries(state, log, log_id, at).await?;
    let dir = tempfile::Builder::new()
        .prefix("sheetlog-export-")
        .tempdir()
        .map_err(|e| ApiError::Internal(format!("making a temporary directory: {e}")))?;
    let path = dir.path().join("export.xlsx");
    let budget = state.cfg.export_budget;
    let stats = export_xlsx(
        &state.bucket,
        &state.bucket,
        *log.as_uuid(),
        Version {
            base: base.as_ref(),
            entries: &entries,
        },
        (&path, dir.path()),
        &mut |_, _| {
            if started.elapsed() < budget {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        },
    )
    .await
    .map_err(|e| match e {
        ExportError::Stopped { rows_done, rows } => ApiError::ExportTooLarge {
            rows_done,
            rows,
            budget_secs: budget.as_secs(),
        },
        ExportError::Formulas(sheetlog_core::snapshot::ShownError::TooManyCells { cells }) => {
            ApiError::FormulasTooLarge {
                cells,
                limit: sheetlog_core::sheet::formula::MAX_EVAL_CELLS,
            }
        }
        e => ApiError::Internal(format!("exporting sequence {at}: {e}")),
    })?;
    state
        .bucket
        .put_file(key, &path, true)
        .await
        .map_err(|e| ApiError::Internal(format!("storing the export: {e}")))?;
    tracing::info!(
        log = %log,
        seq = at,
        cells = stats.cells,
        bytes = stats.bytes,
        ms = started.elapsed().as_millis() as u64,
        "exported"
    );
    Ok(stats.bytes)
}
