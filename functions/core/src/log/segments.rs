//! Creating a log, starting a new segment and recording completed snapshots on the Segment
//! table (`docs/design.md`, "New segment").

use tracing::info;

use super::{Created, EventLog, SegmentHint, SegmentStarted, corrupt, internal_entry, retry};
use crate::domain::{EntryRecord, EntryType, LogId, RequestUnits, SegmentRecord};
use crate::error::LogError;
use crate::ports::{Consistency, LogEntries, PayloadStore, TxOutcome};

impl<S: LogEntries, P: PayloadStore> EventLog<S, P> {
    /// Creates a new log: segment 0 and its entry 0 (the Snapshot of the empty sheet) in one
    /// transaction. The empty snapshot needs no work, so segment 0 starts with it completed.
    pub async fn create(&self) -> Result<Created, LogError> {
        self.create_with_id(LogId::new_random()).await
    }

    pub async fn create_with_id(&self, log: LogId) -> Result<Created, LogError> {
        self.create_inner(log, None).await
    }

    /// Creates a log whose entry 0 is a completed snapshot already written under `root` (a
    /// fork: the state of another log at some sequence, `snapshot_input::fork_snapshot`).
    pub async fn create_fork(&self, log: LogId, root: String) -> Result<Created, LogError> {
        self.create_inner(log, Some(root)).await
    }

    async fn create_inner(&self, log: LogId, root: Option<String>) -> Result<Created, LogError> {
        let mut units = RequestUnits::default();
        let created = self.clock.now();
        let segment = SegmentRecord {
            num: 0,
            created,
            base_seq: 0,
            last_snapshot: Some(0),
            archive: None,
        };
        let first = EntryRecord {
            snapshot_root: root,
            ..internal_entry(0, 0, created, EntryType::SNAPSHOT)
        };
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
