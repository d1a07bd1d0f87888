//! The snapshot trigger that runs after every append (the design's "doesn't need to be reliable"
//! logic), shared by the API and the sync writer: when the segment's entry number has just
//! passed a multiple of the snapshot interval and no Snapshot entry sits in between, append one —
//! or, when the segment is big enough and its snapshot is complete, start a new segment instead
//! (which begins with one).
//!
//! If the process dies right after the append, the next few appends run the same check and catch
//! up, so a snapshot comes a few entries late rather than never. Two writers can both decide a
//! snapshot is due; the extra Snapshot entry costs one cheap incremental snapshot.

use tracing::info;

use super::{AppendOptions, Appended, EventLog, SegmentHint};
use crate::domain::{EntryType, LogId, NewEntry};
use crate::error::LogError;
use crate::ports::{DedupeKeys, LogEntries, PayloadStore};

/// How many entries past each interval boundary the check keeps running.
const CATCH_UP_WINDOW: u64 = 5;

/// When snapshots and new segments are due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotTrigger {
    /// Append a Snapshot entry once this many entries have gone by since the last one.
    pub interval: u64,
    /// Start a new segment (instead of a Snapshot entry) once the current one holds this many.
    pub segment_max_entries: u64,
}

/// What the trigger wrote: the log's next sequence after it, and the segment hint to remember
/// when it appended or started a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Triggered {
    pub next_seq: u64,
    pub hint: Option<SegmentHint>,
}

impl<S: LogEntries + DedupeKeys, P: PayloadStore> EventLog<S, P> {
    /// Runs the snapshot trigger after the append `a`.
    pub async fn snapshot_if_due(
        &self,
        log: LogId,
        a: &Appended,
        trigger: SnapshotTrigger,
    ) -> Result<Triggered, LogError> {
        let interval = trigger.interval.max(1);
        let past = a.entry % interval;
        let nothing = Triggered {
            next_seq: a.next_seq,
            hint: None,
        };
        if a.entry < interval || past >= CATCH_UP_WINDOW {
            return Ok(nothing);
        }
        // Entries since the boundary (at most CATCH_UP_WINDOW of them): is one a Snapshot entry?
        let recent = self
            .read_since(log, a.seq - past, (past + 1) as usize)
            .await?;
        if recent.entries.iter().any(|e| e.kind == EntryType::SNAPSHOT) {
            return Ok(nothing);
        }
        if a.entry + 1 >= trigger.segment_max_entries {
            match self.start_segment(log).await {
                Ok(s) => {
                    info!(log = %log, segment = s.segment, "started a new segment");
                    return Ok(Triggered {
                        next_seq: s.next_seq,
                        hint: Some(s.hint),
                    });
                }
                // The current segment's snapshot is still being built: take a plain snapshot
                // now and roll the segment at a later boundary.
                Err(LogError::SnapshotIncomplete { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let snap = NewEntry::new(EntryType::SNAPSHOT, 0, bytes::Bytes::new());
        let opts = AppendOptions {
            expected_seq: None,
            segment_hint: Some(a.hint),
        };
        let s = self.append(log, snap, opts).await?;
        info!(log = %log, seq = s.seq, "snapshot entry appended");
        Ok(Triggered {
            next_seq: s.next_seq,
            hint: Some(s.hint),
        })
    }
}
