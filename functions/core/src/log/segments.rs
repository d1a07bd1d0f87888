//! Creating a log, starting a new segment and recording completed snapshots on the Segment
//! table (`docs/design.md`, "New segment").

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tracing::info;

use super::{Created, EventLog, SegmentHint, SegmentStarted, corrupt, internal_entry, retry};
use crate::domain::{Entry, EntryRecord, EntryType, LogId, RequestUnits, SegmentRecord};
use crate::error::LogError;
use crate::ports::{Consistency, LogEntries, PayloadStore, TxOutcome};

/// Where a fork came from: the body of its entry 0, `{"source":"<log-uuid>","at":<seq>}`
/// (`docs/storage.md`, "Entry 0 of a fork"). Entry 0 of any other log has an empty body, and so
/// does that of a fork made before the origin was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkOrigin {
    /// The log forked from.
    pub source: LogId,
    /// The fork holds the source's state as of this sequence (entries `0..at`).
    pub at: u64,
}

impl ForkOrigin {
    fn to_body(self) -> Bytes {
        // A struct of a UUID and an integer always serializes.
        Bytes::from(serde_json::to_vec(&self).unwrap_or_default())
    }

    /// The origin recorded on a log's entry 0, if it is a fork that records one.
    pub fn of_first_entry(entry: &Entry) -> Option<Self> {
        if entry.seq != 0 || entry.kind != EntryType::SNAPSHOT || entry.body.is_empty() {
            return None;
        }
        serde_json::from_slice(&entry.body).ok()
    }
}

impl<S: LogEntries, P: PayloadStore> EventLog<S, P> {
    /// Creates a new log: segment 0 and its entry 0 (the Snapshot of the empty sheet) in one
    /// transaction. The empty snapshot needs no work, so segment 0 starts with it completed.
    pub async fn create(&self) -> Result<Created, LogError> {
        self.create_with_id(LogId::new_random()).await
    }

    pub async fn create_with_id(&self, log: LogId) -> Result<Created, LogError> {
        self.create_inner(log, None, None).await
    }

    /// Creates a log whose entry 0 is a completed snapshot already written under `root` (a
    /// fork: the state of another log at some sequence, `snapshot_input::fork_snapshot`). With
    /// an `origin`, entry 0's body records it, so the fork's first snapshot can be built again
    /// from its source if its objects are lost (`sheetlog-maintenance rebuild-snapshots`).
    pub async fn create_fork(
        &self,
        log: LogId,
        root: String,
        origin: Option<ForkOrigin>,
    ) -> Result<Created, LogError> {
        self.create_inner(log, Some(root), origin).await
    }

    async fn create_inner(
        &self,
        log: LogId,
        root: Option<String>,
        origin: Option<ForkOrigin>,
    ) -> Result<Created, LogError> {
        let mut units = RequestUnits::default();
        let created = self.clock.now();
        let segment = SegmentRecord {
            num: 0,
            created,
            base_seq: 0,
            last_snapshot: Some(0),
            archive: None,
        };
        let mut first = EntryRecord {
            snapshot_root: root,
            ..internal_entry(0, 0, created, EntryType::SNAPSHOT)
        };
        if let Some(origin) = origin {
            first.body = Some(origin.to_body());
        }
        let mut backoff = retry::Backoff::new(&self.cfg);
        for _ in 0..self.cfg.max_attempts {
            match self
                .store
                .create_log(log, &segment, &first, &mut units)
                .await?
            {
                TxOutcome::Committed => {
                    info!(log = %log, "created log");
                    return Ok(Created { log, seq: 0, units });
                }
                TxOutcome::Conflict => {
                    return Err(LogError::InvalidEntry(format!("log {log} already exists")));
                }
                // Cancelled by a concurrent request on the same items; nothing was written.
                TxOutcome::Interrupted => backoff.sleep().await,
            }
        }
        Err(LogError::Contention {
            log,
            attempts: self.cfg.max_attempts,
        })
    }

    /// Starts a new segment (`docs/design.md`, "New segment"): End Segment into the current segment, the new Segment item
    /// and its Snapshot entry, in one conditional transaction. Refused until the current segment
    /// has a completed snapshot, so snapshots never pile up behind each other.
    pub async fn start_segment(&self, log: LogId) -> Result<SegmentStarted, LogError> {
        let mut units = RequestUnits::default();
        let mut consistency = Consistency::Eventual;
        let mut backoff = retry::Backoff::new(&self.cfg);
        for _ in 0..self.cfg.max_attempts {
            let current = self
                .store
                .newest_segments(log, 1, consistency, &mut units)
                .await?
                .into_iter()
                .next()
                .ok_or(LogError::LogNotFound(log))?;
            if current.last_snapshot.is_none() {
                return Err(LogError::SnapshotIncomplete {
                    log,
                    segment: current.num,
                });
            }
            let newest = self
                .store
                .newest_entry(log, current.num, consistency, &mut units)
                .await?
                .ok_or_else(|| corrupt(log, format!("segment {} has no entries", current.num)))?;
            if newest.is_end_segment() {
                // Our segment read was stale: a newer segment exists. Look again, consistently.
                consistency = Consistency::Strong;
                continue;
            }
            let created = self.clock.now();
            let end = internal_entry(current.num, newest.num + 1, created, EntryType::END_SEGMENT);
            let next = SegmentRecord {
                num: current.num + 1,
                created,
                base_seq: current.seq_of(newest.num + 2),
                last_snapshot: None,
                archive: None,
            };
            let first = internal_entry(next.num, 0, created, EntryType::SNAPSHOT);
            match self
                .store
                .start_segment(log, &end, &next, &first, &mut units)
                .await?
            {
                TxOutcome::Committed => {
                    info!(log = %log, segment = next.num, base_seq = next.base_seq, "started segment");
                    let hint = SegmentHint {
                        segment: next.num,
                        base_seq: next.base_seq,
                    };
                    return Ok(SegmentStarted {
                        segment: next.num,
                        end_seq: current.seq_of(end.num),
                        snapshot_seq: next.base_seq,
                        next_seq: next.base_seq + 1,
                        hint,
                        units,
                    });
                }
                // Lost to another writer (Conflict), or cancelled by a concurrent request on the
                // same items (Interrupted): either way nothing was written; look again.
                TxOutcome::Conflict | TxOutcome::Interrupted => {
                    consistency = Consistency::Strong;
                    backoff.sleep().await;
                }
            }
        }
        Err(LogError::Contention {
            log,
            attempts: self.cfg.max_attempts,
        })
    }

    /// Records a completed snapshot: the root on the Snapshot entry, then the segment's Last
    /// Snapshot (only ever moved forward). Both writes are idempotent.
    pub async fn complete_snapshot(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        root: &str,
    ) -> Result<RequestUnits, LogError> {
        let mut units = RequestUnits::default();
        self.store
            .set_snapshot_root(log, segment, num, root, &mut units)
            .await?;
        self.store
            .advance_last_snapshot(log, segment, num, &mut units)
            .await?;
        Ok(units)
    }

    /// One segment of the log, read consistently; `None` when it does not exist.
    pub async fn segment(
        &self,
        log: LogId,
        num: u64,
    ) -> Result<(Option<SegmentRecord>, RequestUnits), LogError> {
        let mut units = RequestUnits::default();
        let seg = self
            .store
            .segment(log, num, Consistency::Strong, &mut units)
            .await?;
        Ok((seg, units))
    }

    /// Every segment of the log, oldest first.
    pub async fn segments(
        &self,
        log: LogId,
    ) -> Result<(Vec<SegmentRecord>, RequestUnits), LogError> {
        let mut units = RequestUnits::default();
        let all = self.store.all_segments(log, &mut units).await?;
        if all.is_empty() {
            return Err(LogError::LogNotFound(log));
        }
        Ok((all, units))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_support::mem_log;
    use crate::memory::{MemLogStore, MemPayloadStore};

    async fn first_entry(log: &EventLog<MemLogStore, MemPayloadStore>, id: LogId) -> Entry {
        let page = log
            .read_from(
                id,
                SegmentHint {
                    segment: 0,
                    base_seq: 0,
                },
                0,
                1,
            )
            .await
            .expect("read entry 0");
        page.entries.into_iter().next().expect("entry 0")
    }

    /// A fork's entry 0 records where it came from (the rebuild builds a lost first snapshot
    /// again from it); any other log's entry 0, and a fork made without an origin, have none.
    #[tokio::test]
    async fn a_forks_first_entry_records_its_source_and_sequence() {
        let log = mem_log();
        let source = log.create().await.expect("create").log;
        let origin = ForkOrigin { source, at: 7 };
        let fork = LogId::new_random();
        log.create_fork(fork, "snapshots/x/manifest".into(), Some(origin))
            .await
            .expect("fork");
        let first = first_entry(&log, fork).await;
        assert_eq!(ForkOrigin::of_first_entry(&first), Some(origin));
        assert_eq!(first.snapshot_root.as_deref(), Some("snapshots/x/manifest"));
        assert_eq!(
            ForkOrigin::of_first_entry(&first_entry(&log, source).await),
            None
        );
        let old = LogId::new_random();
        log.create_fork(old, "snapshots/y/manifest".into(), None)
            .await
            .expect("fork without origin");
        assert_eq!(
            ForkOrigin::of_first_entry(&first_entry(&log, old).await),
            None
        );
    }
}
