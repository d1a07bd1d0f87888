//! Pure domain types of the event log: identifiers, entries, segments and request-unit costs.
//! Nothing here knows about the AWS SDK; adapters in `crate::aws` map these to items.
//!
//! Layout:
//! - `mod.rs`  — ids, entry types, stored records and decoded entries
//! - `clients.rs` — sync clients: mutation ranges and client groups
//! - `cost.rs` — DynamoDB request-unit arithmetic from AWS's documented rules
//! - `dedupe.rs` — idempotency keys: hashing, month columns, stored values
//! - `job.rs`  — the snapshot job message the stream router, worker and reprocess tool share
//! - `keys.rs` — S3 key layout, the auto-delete tag, item size limits, the clock
//! - `pending.rs` — Pending Snapshots items: key, state, and guarded-write results
//! - `versions.rs` — named versions: their key, name rules and limits

pub mod clients;
pub mod cost;
pub mod dedupe;
pub mod job;
pub mod keys;
pub mod pending;
pub mod versions;

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use cost::RequestUnits;
pub use job::SnapshotJob;
pub use keys::now_secs;
pub use pending::{Guarded, PendingKey, PendingSnapshot};

/// Identifies one log (one spreadsheet). A random v4 UUID, stored as its 16 raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LogId(Uuid);

impl LogId {
    pub fn new_random() -> Self {
        Self(Uuid::new_v4())
    }
    pub fn from_uuid(id: Uuid) -> Self {
        Self(id)
    }
    pub fn as_uuid(&self) -> &Uuid {
        &self.0
    }
    pub fn as_bytes(&self) -> &[u8; 16] {
        self.0.as_bytes()
    }
    /// Parses the 16 raw bytes stored in a key attribute.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        Uuid::from_slice(bytes).ok().map(Self)
    }
}

impl fmt::Display for LogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for LogId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

/// The partition key of the Entry table: the log UUID followed by the segment number as a
/// big-endian integer without leading zero bytes (segment 0 is a single zero byte). The UUID has a
/// fixed length, so the encoding is unambiguous, and early segments cost one byte, not eight.
pub fn segment_id(log: LogId, segment: u64) -> Vec<u8> {
    let be = segment.to_be_bytes();
    let skip = be.iter().take_while(|b| **b == 0).count().min(7);
    let mut id = Vec::with_capacity(16 + 8 - skip);
    id.extend_from_slice(log.as_bytes());
    id.extend_from_slice(&be[skip..]);
    id
}

/// Inverse of [`segment_id`]; `None` when the bytes are not a valid segment id.
pub fn parse_segment_id(bytes: &[u8]) -> Option<(LogId, u64)> {
    if bytes.len() < 17 || bytes.len() > 24 {
        return None;
    }
    let (log, num) = bytes.split_at(16);
    if num.len() > 1 && num[0] == 0 {
        return None; // not canonical: leading zero byte
    }
    let mut be = [0u8; 8];
    be[8 - num.len()..].copy_from_slice(num);
    Some((LogId::from_slice(log)?, u64::from_be_bytes(be)))
}

/// An entry's type code. The log reserves 0 and 1 for its own entries; callers (the spreadsheet
/// model) use 16 and up. Stored as a DynamoDB number so the stream filter can match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EntryType(pub u16);

impl EntryType {
    /// A snapshot is (or will be) taken of the state of every entry before this one.
    pub const SNAPSHOT: EntryType = EntryType(0);
    /// Closes a segment; the next segment starts at the following sequence number.
    pub const END_SEGMENT: EntryType = EntryType(1);
    /// The first code available to callers.
    pub const FIRST_USER: u16 = 16;

    pub fn is_log_internal(self) -> bool {
        self.0 < Self::FIRST_USER
    }
}

/// An entry as stored in one Entry item, before any external body is fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryRecord {
    pub segment: u64,
    pub num: u64,
    /// Unix epoch seconds.
    pub created: i64,
    pub kind: EntryType,
    pub version: u16,
    /// `Some` when the body is stored in the item (possibly empty for an entry with a payload).
    pub body: Option<Bytes>,
    /// External S3 object: the offloaded body when `body` is `None`, else an attached payload.
    pub external: Option<String>,
    /// Snapshot entries: root manifest key once the snapshot is complete.
    pub snapshot_root: Option<String>,
    /// Identifies the append call that wrote the item (random per call). Only a retry of the same
    /// call is recognised as "already written": two callers appending equal bodies in the same
    /// second are two entries (`docs/design.md`, "Append"). `None` on entries the log writes
    /// itself (Snapshot, End Segment), which are written by transactions.
    pub attempt: Option<u64>,
}

impl EntryRecord {
    pub fn is_end_segment(&self) -> bool {
        self.kind == EntryType::END_SEGMENT
    }
    /// The key of the object holding this entry's body, when the body was offloaded to S3.
    pub fn offloaded_body_key(&self) -> Option<&str> {
        match (&self.body, &self.external) {
            (None, Some(key)) => Some(key),
            _ => None,
        }
    }
    /// The key of an attached payload (an uploaded file), when there is one.
    pub fn payload_key(&self) -> Option<&str> {
        match (&self.body, &self.external) {
            (Some(_), Some(key)) => Some(key),
            _ => None,
        }
    }
}

/// One Segment item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SegmentRecord {
    pub num: u64,
    /// Unix epoch seconds.
    pub created: i64,
    /// Sequence number of this segment's entry 0.
    pub base_seq: u64,
    /// Entry number of the newest completed snapshot in this segment.
    pub last_snapshot: Option<u64>,
    pub archive: Option<String>,
}

impl SegmentRecord {
    pub fn seq_of(&self, num: u64) -> u64 {
        self.base_seq + num
    }
}

/// What a caller appends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    pub kind: EntryType,
    pub version: u16,
    pub body: Bytes,
    /// Key of an already uploaded object this entry commits (the upload flow). The body stays inline.
    pub payload: Option<String>,
}

impl NewEntry {
    pub fn new(kind: EntryType, version: u16, body: impl Into<Bytes>) -> Self {
        Self {
            kind,
            version,
            body: body.into(),
            payload: None,
        }
    }
    pub fn with_payload(mut self, key: impl Into<String>) -> Self {
        self.payload = Some(key.into());
        self
    }
}

/// A log entry as readers see it: global sequence number and the full body, fetched from S3 if
/// it was offloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub segment: u64,
    pub num: u64,
    pub created: i64,
    pub kind: EntryType,
    pub version: u16,
    pub body: Bytes,
    /// Attached payload object (uploads), if any.
    pub payload: Option<String>,
    /// Snapshot entries: root manifest key once complete.
    pub snapshot_root: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn segment_zero_costs_one_byte() {
        let log = LogId::new_random();
        assert_eq!(segment_id(log, 0).len(), 17);
        assert_eq!(segment_id(log, 255).len(), 17);
        assert_eq!(segment_id(log, 256).len(), 18);
    }

    #[test]
    fn non_canonical_segment_ids_are_rejected() {
        let log = LogId::new_random();
        let mut id = log.as_bytes().to_vec();
        id.extend_from_slice(&[0, 1]);
        assert_eq!(parse_segment_id(&id), None);
        assert_eq!(parse_segment_id(&id[..10]), None);
    }

    proptest! {
        #[test]
        fn segment_id_round_trips(n in any::<u64>(), raw in any::<u128>()) {
            let log = LogId::from_uuid(Uuid::from_u128(raw));
            prop_assert_eq!(parse_segment_id(&segment_id(log, n)), Some((log, n)));
        }
    }
}
