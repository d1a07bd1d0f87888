//! Request parsing shared by the route handlers and sync: log ids, bodies, JSON, query strings.
//! Every failure is an [`ApiError`] with the code a client can act on.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use sheetlog_core::domain::LogId;

use crate::error::ApiError;

pub type ApiResult<T> = Result<T, ApiError>;

/// A log id from a path: a UUID, else `invalid-log-id`.
pub fn parse_log_id(raw: &str) -> ApiResult<LogId> {
    raw.parse::<LogId>()
        .map_err(|_| ApiError::InvalidLogId(raw.to_owned()))
}

/// The request body, mapping axum's rejections (too large, unreadable) to our JSON errors.
pub(crate) fn body_bytes(body: Result<Bytes, BytesRejection>, limit: usize) -> ApiResult<Bytes> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::RequestTooLarge { limit }
        } else {
            ApiError::InvalidJson(format!("could not read the request body: {e}"))
        }
    })
}

/// Parses a JSON body: malformed JSON is `invalid-json`, well-formed JSON of the wrong shape
/// (unknown or missing fields, wrong types) is `invalid-entry`.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        let msg = e.to_string();
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_owned();
        match e.classify() {
            serde_json::error::Category::Data => ApiError::InvalidEntry(msg),
            _ => ApiError::InvalidJson(format!("the request body is not valid JSON: {msg}")),
        }
    })
}

/// A JSON request body of `limit` bytes at most ([`body_bytes`], then [`parse_json`]).
pub(crate) fn parse_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
) -> ApiResult<T> {
    parse_json(&body_bytes(body, limit)?)
}

/// Refuses a query parameter the route does not know.
pub(crate) fn reject_unknown_params(q: &HashMap<String, String>, known: &[&str]) -> ApiResult<()> {
    match q.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ApiError::InvalidQuery(format!(
            "unknown query parameter {k:?} (expected {})",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}
