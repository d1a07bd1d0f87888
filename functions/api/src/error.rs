//! Every failure the API reports, each with its HTTP status and kebab-case code. The body is
//! always `{"error": {"code", "message", ...details}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use sheetlog_core::{LogError, StoreError};
use tracing::error;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidJson(String),
    #[error("{0}")]
    InvalidEntry(String),
    /// An edit sent with `baseSeq` has nothing left to apply on the current sheet.
    #[error("the edit no longer applies: {0}")]
    EditRejected(String),
    #[error("{0}")]
    InvalidQuery(String),
    #[error("{0:?} is not a valid log id (expected a UUID)")]
    InvalidLogId(String),
    #[error("log {0} does not exist")]
    LogNotFound(String),
    #[error("log {0} was deleted")]
    LogDeleted(String),
    #[error(
        "upload {0} has no file here: it was never created for this log, its file was not PUT to the upload URL yet, or it expired"
    )]
    UploadNotFound(String),
    #[error("no route for {method} {path}")]
    RouteNotFound { method: String, path: String },
    #[error("{method} is not allowed here")]
    MethodNotAllowed { method: String },
    #[error("expected to append at sequence {expected}, but the log's next sequence is {next_seq}")]
    Conflict { expected: u64, next_seq: u64 },
    #[error(
        "the file of upload {upload_id} was replaced while it was being committed; commit again"
    )]
    UploadChanged { upload_id: String },
    #[error("the uploaded file is not a valid {format} file: {reason}")]
    InvalidPayload {
        format: &'static str,
        reason: String,
        /// The limit the file broke, when it broke one: its name in docs/api.md and its value.
        limit: Option<(&'static str, u64)>,
    },
    #[error(
        "the entry body is {size} bytes; entries above {limit} bytes must use the upload flow (POST /logs/{{logId}}/uploads)"
    )]
    EntryTooLarge { size: usize, limit: usize },
    #[error("the request body exceeds {limit} bytes")]
    RequestTooLarge { limit: usize },
    /// A Replicache push over the push limits (`docs/sync.md`, "Push limits"): refused before
    /// anything is claimed, enqueued or written.
    #[error("{0}")]
    PushTooLarge(sheetlog_core::sync_queue::PushTooLarge),
    #[error("the file is {size} bytes; the upload limit is {limit} bytes")]
    UploadTooLarge { size: u64, limit: u64 },
    #[error(
        "sequence {from} is no longer available (the oldest retained is {first_seq}); load the log again with GET /logs/{{logId}}"
    )]
    Truncated { from: u64, first_seq: u64 },
    #[error("sequence {from} is past the end of the log (next sequence is {next_seq})")]
    OutOfRange { from: u64, next_seq: u64 },
    #[error("the log is busy with other writers; retry shortly")]
    Busy,
    /// AWS asked us to slow down (DynamoDB throughput, S3 `SlowDown`) beyond the SDK's retries.
    #[error("the service is throttling requests ({operation}); retry shortly")]
    Throttled { operation: &'static str },
    #[error("a storage call timed out ({operation}); retry shortly")]
    TimedOut { operation: &'static str },
    #[error("{0}")]
    InvalidHeader(String),
    #[error(
        "this Idempotency-Key was already used for a different request (which appended sequence {seq}); use a new key for a new request"
    )]
    KeyReused { seq: u64 },
    #[error("this request was already applied at sequence {seq}, which the log no longer retains")]
    ReplayUnavailable { seq: u64 },
    #[error(
        "this part of the log's history was deleted by the stack's retention policy; read from a later sequence"
    )]
    HistoryDeleted,
    #[error("client {client} has no applied mutations in this log")]
    ClientNotFound { client: String },
    #[error("mutation {id} of client {client} has not been applied")]
    MutationNotFound { client: String, id: u64 },
    #[error(
        "client {client}: mutation {got} arrived, but the next one expected is {expected}; nothing from mutation {got} on was applied"
    )]
    MutationGap {
        client: String,
        expected: u64,
        got: u64,
    },
    #[error("client {client} belongs to client group {group}, not {claimed}")]
    ClientGroupMismatch {
        client: String,
        group: String,
        claimed: String,
    },
    #[error(
        "the client view is at least {size} bytes, over the {limit}-byte response limit of AWS Lambda; read the sheet by range (GET /logs/{{logId}}/cells) instead"
    )]
    ViewTooLarge { size: usize, limit: usize },
    #[error(
        "the range's values are at least {size} bytes, over the {limit}-byte response limit of AWS Lambda; read a smaller range"
    )]
    RangeTooLarge { size: usize, limit: usize },
    /// The formulas of a read range read, directly or through other formulas, more cells than
    /// one evaluation may load (`sheetlog_core::sheet::formula::MAX_EVAL_CELLS` and
    /// `MAX_EVAL_BYTES`).
    #[error(
        "evaluating the formulas in this range reads more than one read may load ({limit} cells, 256 MiB of them); read a range whose formulas read fewer cells"
    )]
    FormulasTooLarge { cells: usize, limit: usize },
    /// An XLSX export that did not finish writing within the API's time for one
    /// (`ApiConfig::export_budget`).
    #[error(
        "this version of the sheet did not finish exporting within the API's {budget_secs} s ({rows_done} of {rows} rows written); export it as CSV (sheetlog export, or the page's Export CSV), which reads the sheet a range at a time"
    )]
    ExportTooLarge {
        rows_done: u32,
        rows: u32,
        budget_secs: u64,
    },
    /// Reading the sheet as of a sequence would hold more entry bytes than the read budget
    /// (`SHEETLOG_READ_BUDGET_BYTES`): the entries after the nearest completed snapshot.
    #[error(
        "the sheet as of sequence {at} is the snapshot at sequence {snapshot_seq} plus the entries after it, whose bodies pass the {budget}-byte read budget; read as of a sequence nearer a completed snapshot (GET /logs/{{logId}}/segments lists them), or retry once the snapshot being built completes"
    )]
    HistoryTooLarge {
        at: u64,
        snapshot_seq: u64,
        budget: usize,
    },
    /// A handler built an answer AWS Lambda could not return: a bug, reported locally the way
    /// the deployed API would fail it (there, API Gateway answers 502).
    #[error(
        "the response is {size} bytes, over the {limit}-byte response limit of AWS Lambda; the deployed API would fail this request"
    )]
    ResponseTooLarge { size: usize, limit: usize },
    /// The caller's token lacks the grant (`access.rs`). Said the same way whether or not the
    /// log exists.
    #[error(
        "the token's {claim} claim does not grant {need} access to this log; ask whoever issues your tokens for it"
    )]
    Forbidden { need: &'static str, claim: String },
    /// A sync client group belongs to the subject that first pushed or pulled it (`sync.rs`);
    /// another subject may neither push as its clients nor pull its state.
    #[error("{0}")]
    GroupForbidden(String),
    /// Cognito authorization: the caller is no member of the sheet, or its role is too small.
    /// Said the same way whether or not the sheet exists.
    #[error("you may not {need} this sheet: it is not shared with you, or not with that role")]
    NotMember { need: &'static str },
    /// A catalog route on a stack without Cognito authorization.
    #[error(
        "this API has no catalog of sheets (its authorization mode is {mode}; sign-in and sharing need SHEETLOG_AUTH_MODE=cognito)"
    )]
    NoCatalog { mode: &'static str },
    #[error("user {0} is not a member of this sheet")]
    MemberNotFound(String),
    #[error("{0} has no invitation to this sheet")]
    InvitationNotFound(String),
    #[error("version {0} of this sheet has no name")]
    VersionNotFound(u64),
    /// Naming a version past the most a sheet keeps (the list must fit one response).
    #[error("a sheet keeps at most {limit} named versions; delete one first")]
    TooManyVersions { limit: usize },
    #[error("the sheet would have no owner left; make someone else owner first")]
    LastOwner,
    /// A share past the most members a sheet has: the members list must fit one response.
    #[error("a sheet has at most {limit} members; remove someone first")]
    TooManyMembers { limit: usize },
    /// A caller past its share of deletes (`ApiConfig::deletes_per_minute`).
    #[error("at most {limit} deletes a minute per caller; retry in {retry_after} s")]
    TooManyDeletes { limit: u32, retry_after: u64 },
    /// An undo or redo with no step of the group's left to act on among the entries it reads.
    #[error("nothing to {what} for this client group in the sheet's last {window} entries")]
    NothingToUndo { what: &'static str, window: u64 },
    /// An undo whose events would not fit one entry (a very large deleted range).
    #[error("{0}")]
    UndoTooLarge(String),
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        use ApiError::*;
        match self {
            InvalidJson(_)
            | InvalidEntry(_)
            | InvalidQuery(_)
            | InvalidLogId(_)
            | InvalidHeader(_)
            | ClientGroupMismatch { .. } => StatusCode::BAD_REQUEST,
            ClientNotFound { .. } | MutationNotFound { .. } => StatusCode::NOT_FOUND,
            MutationGap { .. } => StatusCode::CONFLICT,
            ViewTooLarge { .. }
            | RangeTooLarge { .. }
            | HistoryTooLarge { .. }
            | ExportTooLarge { .. }
            | FormulasTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ResponseTooLarge { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            LogNotFound(_) | UploadNotFound(_) | RouteNotFound { .. } => StatusCode::NOT_FOUND,
            MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Forbidden { .. } | GroupForbidden(_) | NotMember { .. } => StatusCode::FORBIDDEN,
            NoCatalog { .. } | MemberNotFound(_) | InvitationNotFound(_) | VersionNotFound(_) => {
                StatusCode::NOT_FOUND
            }
            LastOwner | TooManyMembers { .. } | TooManyVersions { .. } | NothingToUndo { .. } => {
                StatusCode::CONFLICT
            }
            UndoTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            TooManyDeletes { .. } => StatusCode::TOO_MANY_REQUESTS,
            Conflict { .. } | UploadChanged { .. } | KeyReused { .. } | EditRejected(_) => {
                StatusCode::CONFLICT
            }
            InvalidPayload { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            EntryTooLarge { .. }
            | RequestTooLarge { .. }
            | UploadTooLarge { .. }
            | PushTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Truncated { .. } | ReplayUnavailable { .. } | HistoryDeleted | LogDeleted(_) => {
                StatusCode::GONE
            }
            OutOfRange { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            Busy | Throttled { .. } | TimedOut { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        use ApiError::*;
        match self {
            InvalidJson(_) => "invalid-json",
            InvalidEntry(_) => "invalid-entry",
            EditRejected(_) => "edit-rejected",
            InvalidQuery(_) => "invalid-query",
            InvalidLogId(_) => "invalid-log-id",
            LogNotFound(_) => "log-not-found",
            LogDeleted(_) => "log-deleted",
            UploadNotFound(_) => "upload-not-found",
            RouteNotFound { .. } => "not-found",
            MethodNotAllowed { .. } => "method-not-allowed",
            Conflict { .. } => "conflict",
            UploadChanged { .. } => "upload-changed",
            InvalidPayload { .. } => "invalid-payload",
            EntryTooLarge { .. } => "entry-too-large",
            RequestTooLarge { .. } => "request-too-large",
            PushTooLarge(_) => "push-too-large",
            UploadTooLarge { .. } => "upload-too-large",
            Truncated { .. } => "truncated",
            OutOfRange { .. } => "out-of-range",
            Busy => "busy",
            Throttled { .. } => "throttled",
            TimedOut { .. } => "timed-out",
            InvalidHeader(_) => "invalid-header",
            KeyReused { .. } => "idempotency-key-reused",
            ReplayUnavailable { .. } => "replay-unavailable",
            HistoryDeleted => "history-deleted",
            ClientNotFound { .. } => "client-not-found",
            MutationNotFound { .. } => "mutation-not-found",
            MutationGap { .. } => "mutation-gap",
            ClientGroupMismatch { .. } => "client-group-mismatch",
            ViewTooLarge { .. } => "view-too-large",
            RangeTooLarge { .. } => "range-too-large",
            FormulasTooLarge { .. } => "formulas-too-large",
            ExportTooLarge { .. } => "export-too-large",
            HistoryTooLarge { .. } => "history-too-large",
            ResponseTooLarge { .. } => "response-too-large",
            Forbidden { .. } => "forbidden",
            GroupForbidden(_) => "client-group-forbidden",
            NotMember { .. } => "forbidden",
            NoCatalog { .. } => "no-catalog",
            MemberNotFound(_) => "member-not-found",
            VersionNotFound(_) => "version-not-found",
            TooManyVersions { .. } => "too-many-versions",
            InvitationNotFound(_) => "invitation-not-found",
            LastOwner => "last-owner",
            TooManyMembers { .. } => "too-many-members",
            TooManyDeletes { .. } => "rate-limited",
            NothingToUndo { what: "redo", .. } => "nothing-to-redo",
            NothingToUndo { .. } => "nothing-to-undo",
            UndoTooLarge(_) => "undo-too-large",
            Internal(_) => "internal",
        }
    }

    fn details(&self) -> Map<String, Value> {
        let mut m = Map::new();
        match self {
            ApiError::Conflict { expected, next_seq } => {
                m.insert("expectedSeq".into(), json!(expected));
                m.insert("nextSeq".into(), json!(next_seq));
            }
            ApiError::OutOfRange { next_seq, .. } => {
                m.insert("nextSeq".into(), json!(next_seq));
            }
            ApiError::KeyReused { seq } | ApiError::ReplayUnavailable { seq } => {
                m.insert("seq".into(), json!(seq));
            }
            ApiError::Truncated { first_seq, .. } => {
                m.insert("firstSeq".into(), json!(first_seq));
            }
            ApiError::MutationGap { expected, got, .. } => {
                m.insert("expectedMutationID".into(), json!(expected));
                m.insert("mutationID".into(), json!(got));
            }
            ApiError::ViewTooLarge { size, limit }
            | ApiError::RangeTooLarge { size, limit }
            | ApiError::ResponseTooLarge { size, limit } => {
                m.insert("size".into(), json!(size));
                m.insert("limit".into(), json!(limit));
            }
            ApiError::HistoryTooLarge {
                snapshot_seq,
                budget,
                ..
            } => {
                m.insert("snapshotSeq".into(), json!(snapshot_seq));
                m.insert("limit".into(), json!(budget));
            }
            ApiError::UploadTooLarge { size, limit } => {
                m.insert("size".into(), json!(size));
                m.insert("limit".into(), json!(limit));
            }
            ApiError::FormulasTooLarge { cells, limit } => {
                m.insert("cells".into(), json!(cells));
                m.insert("limit".into(), json!(limit));
            }
            ApiError::InvalidPayload {
                limit: Some((name, value)),
                ..
            } => {
                m.insert("limit".into(), json!(value));
                m.insert("limitName".into(), json!(name));
            }
            ApiError::PushTooLarge(p) => {
                m.insert("count".into(), json!(p.count));
                m.insert("limit".into(), json!(p.limit));
                m.insert(
                    "limitName".into(),
                    json!(if p.what == "mutations" {
                        "maxPushMutations"
                    } else {
                        "maxPushClients"
                    }),
                );
            }
            ApiError::TooManyMembers { limit } | ApiError::TooManyVersions { limit } => {
                m.insert("limit".into(), json!(limit));
            }
            ApiError::TooManyDeletes { limit, retry_after } => {
                m.insert("limit".into(), json!(limit));
                m.insert("retryAfter".into(), json!(retry_after));
            }
            ApiError::NotMember { need } => {
                m.insert("need".into(), json!(need));
            }
            ApiError::Forbidden { need, claim } => {
                m.insert("need".into(), json!(need));
                m.insert("claim".into(), json!(claim));
            }
            ApiError::EntryTooLarge { limit, .. } => {
                m.insert("limit".into(), json!(limit));
                m.insert("uploadPath".into(), json!("/logs/{logId}/uploads"));
            }
            _ => {}
        }
        m
    }

    /// Maps an error from reading the log as of a sequence (`snapshot_input`) for a request
    /// about `log`.
    pub fn from_input(log: &str, e: sheetlog_core::snapshot_input::InputError) -> Self {
        use sheetlog_core::snapshot_input::InputError;
        match e {
            InputError::Log(e) => Self::from_log(log, e),
            // A read that has not caught up with the log yet: retry shortly.
            InputError::ShortRead { .. } => ApiError::Busy,
            InputError::TooLarge {
                at,
                snapshot_seq,
                budget,
            } => ApiError::HistoryTooLarge {
                at,
                snapshot_seq,
                budget,
            },
            other => ApiError::Internal(other.to_string()),
        }
    }

    /// Maps an event-log error for a request about `log`.
    pub fn from_log(log: &str, e: LogError) -> Self {
        match e {
            LogError::LogNotFound(_) => ApiError::LogNotFound(log.to_owned()),
            LogError::LogDeleted(_) => ApiError::LogDeleted(log.to_owned()),
            LogError::Conflict { expected, next_seq } => ApiError::Conflict { expected, next_seq },
            LogError::Contention { .. } => ApiError::Busy,
            LogError::ReloadRequired {
                from,
                first_retained,
            } => ApiError::Truncated {
                from,
                first_seq: first_retained,
            },
            LogError::OutOfRange { from, next_seq } => ApiError::OutOfRange { from, next_seq },
            LogError::HistoryDeleted { .. } => ApiError::HistoryDeleted,
            LogError::BodyTooLarge { size, limit } => ApiError::EntryTooLarge { size, limit },
            LogError::InvalidEntry(m) => ApiError::InvalidEntry(m),
            LogError::EditRejected(m) => ApiError::EditRejected(m),
            LogError::KeyReused { seq } => ApiError::KeyReused { seq },
            LogError::MutationGap {
                client,
                expected,
                got,
            } => ApiError::MutationGap {
                client,
                expected,
                got,
            },
            // Answered by the sync routes themselves (Replicache's `ClientStateNotFound`).
            LogError::ClientUnknown { client, .. } => ApiError::ClientNotFound { client },
            LogError::ClientGroupMismatch {
                client,
                group,
                claimed,
            } => ApiError::ClientGroupMismatch {
                client,
                group,
                claimed,
            },
            LogError::Store(e) => Self::from_store(e),
            other => ApiError::Internal(other.to_string()),
        }
    }

    /// Maps a catalog failure.
    pub fn from_catalog(e: sheetlog_core::catalog::CatalogError) -> Self {
        use sheetlog_core::catalog::CatalogError;
        match e {
            CatalogError::SheetNotFound(log) => ApiError::LogNotFound(log.to_string()),
            CatalogError::LastOwner(_) => ApiError::LastOwner,
            CatalogError::Exists(log) => ApiError::Internal(format!("sheet {log} created twice")),
            CatalogError::Contention(_) => ApiError::Busy,
            CatalogError::BadCursor(c) => {
                ApiError::InvalidQuery(format!("cursor {c:?} is not one this API handed out"))
            }
            CatalogError::Store(e) => Self::from_store(e),
        }
    }

    /// Maps a user-pool failure.
    pub fn from_directory(e: sheetlog_core::users::DirectoryError) -> Self {
        use sheetlog_core::users::DirectoryError;
        match e {
            DirectoryError::Throttled(operation) => ApiError::Throttled { operation },
            other => ApiError::Internal(other.to_string()),
        }
    }

    /// Maps a store failure: throttling is "retry shortly" (503), anything else internal.
    pub fn from_store(e: StoreError) -> Self {
        match e {
            StoreError::Throttled { operation, .. } => ApiError::Throttled { operation },
            StoreError::TimedOut { operation, .. } => ApiError::TimedOut { operation },
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = self.to_string();
        if let ApiError::Internal(detail) = &self {
            // The detail goes to the logs, not to the client.
            error!(detail = %detail, "internal error");
        }
        let mut body = Map::new();
        body.insert("code".into(), json!(self.code()));
        body.insert("message".into(), json!(message));
        body.extend(self.details());
        let mut resp = (status, axum::Json(json!({ "error": body }))).into_response();
        if matches!(
            self,
            ApiError::Busy | ApiError::Throttled { .. } | ApiError::TimedOut { .. }
        ) {
            resp.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        if let ApiError::TooManyDeletes { retry_after, .. } = &self {
            resp.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from(*retry_after));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sheetlog_core::LogId;
    use sheetlog_core::catalog::CatalogError;
    use sheetlog_core::users::DirectoryError;

    #[test]
    fn catalog_and_user_pool_failures_answer_like_the_log_stores() {
        let log = LogId::new_random();
        let store = |e: fn(&'static str, &'static str) -> StoreError| {
            ApiError::from_catalog(CatalogError::Store(e("DynamoDB", "GetItem")))
        };
        // Retry shortly: 503 with Retry-After, as a throttled or contended log write answers.
        for (e, code) in [
            (
                store(|service, operation| StoreError::Throttled { service, operation }),
                "throttled",
            ),
            (
                store(|service, operation| StoreError::TimedOut { service, operation }),
                "timed-out",
            ),
            (
                ApiError::from_catalog(CatalogError::Contention(log)),
                "busy",
            ),
            (
                ApiError::from_directory(DirectoryError::Throttled("ListUsers")),
                "throttled",
            ),
        ] {
            assert_eq!(e.code(), code);
            let resp = e.into_response();
            assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE, "{code}");
            assert_eq!(resp.headers()["retry-after"], "1", "{code}");
        }
        for (e, status, code) in [
            (
                ApiError::from_catalog(CatalogError::SheetNotFound(log)),
                StatusCode::NOT_FOUND,
                "log-not-found",
            ),
            (
                ApiError::from_catalog(CatalogError::LastOwner(log)),
                StatusCode::CONFLICT,
                "last-owner",
            ),
            (
                ApiError::from_catalog(CatalogError::BadCursor("x".into())),
                StatusCode::BAD_REQUEST,
                "invalid-query",
            ),
        ] {
            assert_eq!((e.status(), e.code()), (status, code));
        }
    }
}
