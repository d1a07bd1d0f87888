//! What a snapshot is built from, found in the log: the previous completed snapshot (its Snapshot
//! entry and manifest) and every entry from it up to the Snapshot entry being built.
//!
//! The snapshot worker uses this for each job; the read path can use [`log_entries`] and
//! [`base_manifest`] to turn a loaded log into the snapshot engine's input.
//!
//! Ordering (seed: "Snapshot Creation"): snapshot N is built from snapshot N-1, so N can only be
//! built once every earlier Snapshot entry of the log is complete. The previous completed one is
//! the segment's Last Snapshot, or for a segment whose first snapshot is still pending the
//! previous segment's (a segment is only started once its predecessor has one). Any Snapshot
//! entry between that base and the target is an earlier snapshot still to be built:
//! [`Located::EarlierUnprocessed`].

use bytes::Bytes;

use crate::domain::{Entry, EntryRecord, EntryType, LogId, RequestUnits, SegmentRecord};
use crate::error::LogError;
use crate::log::{EventLog, SegmentHint};
use crate::ports::{Consistency, LogStore, PayloadStore};
use crate::sheet::event::{DecodeError, Entry as SheetEntry};
use crate::snapshot::{BlobStore, LogEntry, Manifest, SnapshotError};

/// Why the input of a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Log(#[from] LogError),
    /// Fewer entries came back than the positions say exist: an eventually consistent read that
    /// has not caught up yet. Worth retrying.
    #[error("expected {expected} entries from sequence {from}, read {got}")]
    ShortRead { from: u64, expected: u64, got: u64 },
    #[error("entry at sequence {seq} cannot be decoded: {source}")]
    Decode {
        seq: u64,
        #[source]
        source: DecodeError,
    },
}

/// Everything a build of the snapshot at `target` needs.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotInput {
    /// The Snapshot entry being built; its sequence is the snapshot's.
    pub target: Entry,
    /// The previous completed Snapshot entry. Its root names its manifest, except for the log's
    /// very first entry (the empty sheet), which has none.
    pub base: Entry,
    /// Entries from `base` (included) up to `target` (excluded), in order and gapless.
    pub entries: Vec<Entry>,
}

/// Where the snapshot of one Snapshot entry stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Located {
    /// Boxed: the input holds whole entries, the other variants a few integers.
    Ready(Box<SnapshotInput>),
    /// The segment's Last Snapshot is at or past the entry: already complete.
    AlreadyComplete,
    /// An earlier Snapshot entry (at `seq`) is not complete yet; this one must wait.
    EarlierUnprocessed { segment: u64, entry: u64, seq: u64 },
    /// There is no such entry, or it is not a Snapshot entry: the job is bogus.
    NotASnapshot,
}

/// The Snapshot entry a job names, and whether its snapshot is still to be built.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// There is no such entry, or it is not a Snapshot entry: the job is bogus.
    NotASnapshot,
    /// The segment's Last Snapshot is at or past the entry.
    AlreadyComplete,
    Incomplete {
        segment: SegmentRecord,
        entry: EntryRecord,
    },
}

/// Looks up the Snapshot entry `entry` of segment `segment` and its segment (consistent reads:
/// a job arrives right after the entry is written).
pub async fn target<S: LogStore, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    segment: u64,
    entry: u64,
) -> Result<Target, InputError> {
    let (Some(seg), _) = log.segment(id, segment).await? else {
        return Ok(Target::NotASnapshot);
    };
    if seg.last_snapshot.is_some_and(|l| l >= entry) {
        return Ok(Target::AlreadyComplete);
    }
    let mut units = RequestUnits::default();
    let record = log
        .store()
        .read_entries(id, segment, entry, 1, Consistency::Strong, &mut units)
        .await
        .map_err(LogError::from)?
        .entries
        .into_iter()
        .next()
        .filter(|e| e.num == entry);
    Ok(match record {
        Some(r) if r.kind == EntryType::SNAPSHOT => Target::Incomplete {
            segment: seg,
            entry: r,
        },
        _ => Target::NotASnapshot,
    })
}

/// Finds the input of the snapshot of entry `entry` in segment `segment`.
pub async fn locate<S: LogStore, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    segment: u64,
    entry: u64,
) -> Result<Located, InputError> {
    let seg = match target(log, id, segment, entry).await? {
        Target::NotASnapshot => return Ok(Located::NotASnapshot),
        Target::AlreadyComplete => return Ok(Located::AlreadyComplete),
        Target::Incomplete { segment, .. } => segment,
    };
    let (base_seg, base_num) = base_position(log, id, &seg, entry).await?;
    let from = base_seg.seq_of(base_num);
    let target_seq = seg.seq_of(entry);
    let expected = target_seq - from + 1;
    let start = SegmentHint {
        segment: base_seg.num,
        base_seq: base_seg.base_seq,
    };
    let limit = usize::try_from(expected).unwrap_or(usize::MAX);
    let page = log.read_from(id, start, base_num, limit).await?;
    let got = page.entries.len() as u64;
    let mut entries = page.entries;
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return Err(InputError::ShortRead {
            from,
            expected,
            got,
        });
    };
    if got != expected || first.seq != from || last.seq != target_seq {
        return Err(InputError::ShortRead {
            from,
            expected,
            got,
        });
    }
    if first.kind != EntryType::SNAPSHOT {
        return Err(LogError::CorruptLog {
            log: id,
            detail: format!(
                "Last Snapshot {base_num} of segment {} is not a Snapshot entry",
                base_seg.num
            ),
        }
        .into());
    }
    if let Some(earlier) = entries[1..entries.len() - 1]
        .iter()
        .find(|e| e.kind == EntryType::SNAPSHOT)
    {
        return Ok(Located::EarlierUnprocessed {
            segment: earlier.segment,
            entry: earlier.num,
            seq: earlier.seq,
        });
    }
    let target = entries.pop().ok_or(InputError::ShortRead {
        from,
        expected,
        got,
    })?;
    let base = entries[0].clone();
    Ok(Located::Ready(Box::new(SnapshotInput {
        target,
        base,
        entries,
    })))
}

/// The previous completed snapshot's position: this segment's Last Snapshot when it is before
/// the entry, else the previous segment's.
async fn base_position<S: LogStore, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    seg: &SegmentRecord,
    entry: u64,
) -> Result<(SegmentRecord, u64), InputError> {
    if let Some(l) = seg.last_snapshot.filter(|l| *l < entry) {
        return Ok((seg.clone(), l));
    }
    let corrupt = |detail: String| LogError::CorruptLog { log: id, detail };
    let Some(prev_num) = seg.num.checked_sub(1) else {
        return Err(corrupt("segment 0 has no completed snapshot".into()).into());
    };
    let (prev, _) = log.segment(id, prev_num).await?;
    let prev = prev.ok_or_else(|| corrupt(format!("segment {prev_num} is missing")))?;
    let l = prev.last_snapshot.ok_or_else(|| {
        corrupt(format!(
            "segment {} was started before segment {prev_num} had a completed snapshot",
            seg.num
        ))
    })?;
    Ok((prev, l))
}

/// Log entries as the snapshot engine takes them: decoded, with attached payload keys.
pub fn log_entries(entries: &[Entry]) -> Result<Vec<LogEntry>, InputError> {
    entries
        .iter()
        .map(|e| {
            Ok(LogEntry {
                seq: e.seq,
                entry: SheetEntry::decode(e.kind.0, e.version, &e.body)
                    .map_err(|source| InputError::Decode { seq: e.seq, source })?,
                payload: e.payload.clone(),
            })
        })
        .collect()
}

/// The manifest of a completed Snapshot entry, or `None` for the log's first entry (the empty
/// sheet has no manifest). Checks that the manifest is the one for that entry.
pub async fn base_manifest(
    store: &dyn BlobStore,
    log: LogId,
    base: &Entry,
) -> Result<Option<Manifest>, SnapshotError> {
    let Some(root) = &base.snapshot_root else {
        if base.seq == 0 {
            return Ok(None);
        }
        return Err(SnapshotError::BadInput(format!(
            "the completed snapshot at sequence {} has no root",
            base.seq
        )));
    };
    let bytes: Bytes = store
        .get(root)
        .await?
        .ok_or_else(|| SnapshotError::MissingChunk(root.clone()))?;
    let manifest = Manifest::from_bytes(root, &bytes)?;
    if manifest.seq != base.seq || manifest.log_id != *log.as_uuid() {
        return Err(SnapshotError::BadManifest {
            key: root.clone(),
            reason: format!(
                "manifest is for log {} at {}, expected log {log} at {}",
                manifest.log_id, manifest.seq, base.seq
            ),
        });
    }
    Ok(Some(manifest))
}
