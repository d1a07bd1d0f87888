//! Pending Snapshots items as the worker sees them: which snapshot, who holds it, how far it got.
//! The DynamoDB mapping is in `crate::aws::pending`; the port is `crate::ports::PendingSnapshots`.

use super::LogId;

/// Which snapshot: the Snapshot entry `entry` of segment `segment` of `log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PendingKey {
    pub log: LogId,
    pub segment: u64,
    pub entry: u64,
}

impl PendingKey {
    pub fn new(log: LogId, segment: u64, entry: u64) -> Self {
        Self {
            log,
            segment,
            entry,
        }
    }

    /// The sort key: segment then entry, each 8 bytes big-endian, so byte order is log order.
    pub fn sort_key(&self) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&self.segment.to_be_bytes());
        k[8..].copy_from_slice(&self.entry.to_be_bytes());
        k
    }

    /// (segment, entry), for ordering against another snapshot of the same log.
    pub fn position(&self) -> (u64, u64) {
        (self.segment, self.entry)
    }
}

/// One Pending Snapshots item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSnapshot {
    pub key: PendingKey,
    /// Unix epoch seconds.
    pub created: i64,
    /// Unix epoch seconds of the last write: a claim, checkpoint, heartbeat or release.
    pub modified: i64,
    /// An invocation is working on it (until `modified` is older than the pending timeout).
    pub active: bool,
    pub increment: u64,
    /// How many times an invocation has taken over the item (resumes after a hand-off or crash).
    pub retries: u64,
    /// The builder's last checkpoint, JSON; `None` until the first chunk is written.
    pub state: Option<String>,
}

impl PendingSnapshot {
    /// Whether its holder has gone quiet for longer than `timeout_secs` (assumed dead).
    pub fn is_stale(&self, now: i64, timeout_secs: i64) -> bool {
        now.saturating_sub(self.modified) >= timeout_secs
    }
}

/// Result of a conditional write that only the current holder may make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guarded<T> {
    /// Written; carries the item (or value) after the write.
    Done(T),
    /// The item moved on (another invocation claimed or finished it) or is gone.
    Lost,
}
