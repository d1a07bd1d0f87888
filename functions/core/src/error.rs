//! Error types at the core's boundaries: [`StoreError`] for adapters (what went wrong talking to
//! a store), [`LogError`] for the event-log operations (what the caller did or must do next).

use crate::domain::LogId;

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A failure inside a storage adapter.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The service call failed (network, throttling after the SDK's own retries, permissions).
    #[error("{service} {operation} failed: {source}")]
    Service {
        service: &'static str,
        operation: &'static str,
        source: BoxError,
    },
    /// An item or object read back does not have the shape we write.
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: &'static str, detail: String },
    /// A referenced object does not exist.
    #[error("object {key} not found")]
    NotFound { key: String },
    /// An object is larger than the reader allows; reading stopped at the limit.
    #[error("object {key} is larger than {limit} bytes")]
    TooLarge { key: String, limit: u64 },
    /// The service asked us to slow down (DynamoDB throughput or request-rate limits, S3
    /// `SlowDown`) and the SDK's own retries did not get through. Worth retrying later.
    #[error("{service} {operation} was throttled; retry later")]
    Throttled {
        service: &'static str,
        operation: &'static str,
    },
    /// The call timed out (the SDK's timeouts, after its retries). Whether it was applied is
    /// unknown; worth retrying later.
    #[error("{service} {operation} timed out; retry later")]
    TimedOut {
        service: &'static str,
        operation: &'static str,
    },
}

impl StoreError {
    pub fn service(
        service: &'static str,
        operation: &'static str,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::Service {
            service,
            operation,
            source: source.into(),
        }
    }
    pub fn not_found(key: impl Into<String>) -> Self {
        Self::NotFound { key: key.into() }
    }
    pub fn corrupt(what: &'static str, detail: impl Into<String>) -> Self {
        Self::Corrupt {
            what,
            detail: detail.into(),
        }
    }
    /// Throttling and timeouts: the same request may succeed later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Throttled { .. } | Self::TimedOut { .. })
    }
}

/// What an event-log operation reports when it cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("log {0} does not exist")]
    LogNotFound(LogId),
    /// The log was deleted (`DELETE /logs/{logId}`): its tombstone remains.
    #[error("log {0} was deleted")]
    LogDeleted(LogId),
    /// The caller's expected sequence is stale (or ahead of the log).
    #[error("expected to append at sequence {expected}, but the log's next sequence is {next_seq}")]
    Conflict { expected: u64, next_seq: u64 },
    /// Every attempt lost a race with another writer.
    #[error("gave up appending to log {log} after {attempts} attempts under contention")]
    Contention { log: LogId, attempts: u32 },
    #[error(
        "cannot start a new segment of log {log}: segment {segment} has no completed snapshot yet"
    )]
    SnapshotIncomplete { log: LogId, segment: u64 },
    /// The log's items break an invariant (for example no completed snapshot in either of the
    /// two newest segments). Nothing is written when this is reported.
    #[error("log {log} is corrupt: {detail}")]
    CorruptLog { log: LogId, detail: String },
    /// The reader is too far behind: the entries after `from` are no longer in the retained
    /// segments, so it must load the log again from its newest snapshot.
    #[error("sequence {from} is before the first retained entry {first_retained}; reload the log")]
    ReloadRequired { from: u64, first_retained: u64 },
    #[error("sequence {from} is past the end of the log (next sequence is {next_seq})")]
    OutOfRange { from: u64, next_seq: u64 },
    /// The retention policy deleted this segment's entries (no archive was kept).
    #[error("the history of log {log} in segment {segment} was deleted by the retention policy")]
    HistoryDeleted { log: LogId, segment: u64 },
    #[error("entry body is {size} bytes; the largest accepted is {limit} bytes")]
    BodyTooLarge { size: usize, limit: usize },
    #[error("invalid entry: {0}")]
    InvalidEntry(String),
    /// An edit made against an older view has nothing left to apply on the current sheet (its
    /// cells' rows or columns were deleted, or an import replaced the sheet); the reason is for a
    /// person.
    #[error("the edit no longer applies: {0}")]
    EditRejected(String),
    /// The idempotency key was used before, by a request with a different body.
    #[error(
        "this idempotency key was already used for a different request (appended at sequence {seq}); use a new key for a new request"
    )]
    KeyReused { seq: u64 },
    /// A client's mutation arrived before the one after its last applied mutation.
    #[error(
        "client {client}: mutation {got} arrived, but the next one this log expects from it is {expected}; nothing from mutation {got} on was applied"
    )]
    MutationGap {
        client: String,
        expected: u64,
        got: u64,
    },
    /// A client this log has never heard of sent a mutation other than its first: the client's
    /// state was lost (or it belongs to another log).
    #[error(
        "client {client} is unknown to this log, but sent mutation {got} (a new client starts at 1)"
    )]
    ClientUnknown { client: String, got: u64 },
    /// The client is registered in another client group.
    #[error("client {client} belongs to client group {group}, not {claimed}")]
    ClientGroupMismatch {
        client: String,
        group: String,
        claimed: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}
