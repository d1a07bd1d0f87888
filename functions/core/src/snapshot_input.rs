//! What a snapshot is built from, found in the log: the previous completed snapshot (its Snapshot
//! entry and manifest) and every entry from it up to the Snapshot entry being built.
//!
//! The snapshot worker uses [`target`] and [`locate`] for each job. The read path uses
//! [`sheet_as_of`]: [`as_of`] (the newest completed snapshot at or before a sequence, and the
//! entries after it), then [`base_manifest`] and [`log_entries`], ready for `snapshot::read_range`.
//!
//! Ordering (`docs/design.md`, Pending Snapshots protocol): snapshot N is built from snapshot N-1, so N can only be
//! built once every earlier Snapshot entry of the log is complete. The previous completed one is
//! the segment's Last Snapshot, or for a segment whose first snapshot is still pending the
//! previous segment's (a segment is only started once its predecessor has one). Any Snapshot
//! entry between that base and the target is an earlier snapshot still to be built:
//! [`Located::EarlierUnprocessed`].

use bytes::Bytes;

use crate::domain::{Entry, EntryRecord, EntryType, LogId, RequestUnits, SegmentRecord};
use crate::error::LogError;
use crate::log::{EventLog, SegmentHint};
use crate::ports::{Consistency, LogEntries, PayloadStore};
use crate::sheet::entry::EntryBody;
use crate::sheet::event::DecodeError;
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
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A read as of sequence `at` would hold more than the read budget: the bodies of the
    /// entries from the nearest completed snapshot (at `snapshot_seq`) up to `at` pass `budget`
    /// bytes (`SHEETLOG_READ_BUDGET_BYTES`) before reaching `at`.
    #[error(
        "the sheet as of sequence {at} is built from the snapshot at sequence {snapshot_seq} and the entries after it, whose bodies pass the read budget of {budget} bytes; read as of a sequence nearer a completed snapshot, or retry once a newer snapshot is built"
    )]
    TooLarge {
        at: u64,
        snapshot_seq: u64,
        budget: usize,
    },
}

/// Everything a build of the snapshot at `target` needs. The entries between the two are not
/// held: [`InputPages`] reads them a page at a time, so a build holds one page of bodies at once
/// (`docs/operations.md`, "Memory per request").
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotInput {
    /// The Snapshot entry being built; its sequence is the snapshot's.
    pub target: Entry,
    /// The previous completed Snapshot entry. Its root names its manifest, except for the log's
    /// very first entry (the empty sheet), which has none.
    pub base: Entry,
}

/// Reads the entries of a snapshot's input, from its base (included) up to its target
/// (excluded), in order and gapless, a page at a time: at most `page_size` entries per page,
/// ending once their bodies reach the read budget (`SHEETLOG_READ_BUDGET_BYTES`; offloaded
/// bodies still in flight then complete the page). Every page holds at least one entry, so a
/// build always moves on, whatever the entries' sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputPages {
    hint: SegmentHint,
    num: u64,
    next_seq: u64,
    end_seq: u64,
}

impl InputPages {
    pub fn new(input: &SnapshotInput) -> Self {
        Self {
            hint: SegmentHint {
                segment: input.base.segment,
                base_seq: input.base.seq - input.base.num,
            },
            num: input.base.num,
            next_seq: input.base.seq,
            end_seq: input.target.seq,
        }
    }

    /// The sequence of the first entry not read yet: where the next page starts.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Whether every entry has been read.
    pub fn is_done(&self) -> bool {
        self.next_seq >= self.end_seq
    }

    /// The next page, or `None` once every entry has been read.
    pub async fn next_page<S: LogEntries, P: PayloadStore>(
        &mut self,
        log: &EventLog<S, P>,
        id: LogId,
    ) -> Result<Option<Vec<Entry>>, InputError> {
        if self.is_done() {
            return Ok(None);
        }
        let left = self.end_seq - self.next_seq;
        let limit = usize::try_from(left)
            .unwrap_or(usize::MAX)
            .min(log.config().page_size);
        let budget = log.config().read_budget_bytes;
        let (page, _) = log
            .read_from_within(id, self.hint, self.num, limit, budget)
            .await?;
        let short = || InputError::ShortRead {
            from: self.next_seq,
            expected: limit as u64,
            got: page.entries.len() as u64,
        };
        let gapless = page
            .entries
            .iter()
            .zip(self.next_seq..)
            .all(|(e, seq)| e.seq == seq);
        let Some(last) = page.entries.last() else {
            return Err(short());
        };
        if !gapless || last.seq >= self.end_seq {
            return Err(short());
        }
        self.hint = SegmentHint {
            segment: last.segment,
            base_seq: last.seq - last.num,
        };
        self.num = last.num + 1;
        self.next_seq = last.seq + 1;
        Ok(Some(page.entries))
    }
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
pub async fn target<S: LogEntries, P: PayloadStore>(
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
pub async fn locate<S: LogEntries, P: PayloadStore>(
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
    // The positions from the base to the target, a page at a time and without bodies (offloaded
    // ones are never fetched): gapless, starting at a Snapshot entry, with no other Snapshot entry
    // before the target. The entries themselves are read later, a page at a time ([`InputPages`]).
    let mut hint = SegmentHint {
        segment: base_seg.num,
        base_seq: base_seg.base_seq,
    };
    let mut num = base_num;
    let mut next = from;
    while next <= target_seq {
        let left = target_seq - next + 1;
        let limit = usize::try_from(left)
            .unwrap_or(usize::MAX)
            .min(log.config().page_size);
        let page = log.scan_from(id, hint, num, limit).await?;
        let short = InputError::ShortRead {
            from,
            expected,
            got: next - from,
        };
        let Some(last) = page.marks.last() else {
            return Err(short);
        };
        for m in &page.marks {
            if m.seq != next || m.seq > target_seq {
                return Err(short);
            }
            if m.seq == from && m.kind != EntryType::SNAPSHOT {
                return Err(LogError::CorruptLog {
                    log: id,
                    detail: format!(
                        "Last Snapshot {base_num} of segment {} is not a Snapshot entry",
                        base_seg.num
                    ),
                }
                .into());
            }
            if m.seq != from && m.seq != target_seq && m.kind == EntryType::SNAPSHOT {
                return Ok(Located::EarlierUnprocessed {
                    segment: m.segment,
                    entry: m.num,
                    seq: m.seq,
                });
            }
            next += 1;
        }
        hint = SegmentHint {
            segment: last.segment,
            base_seq: last.seq - last.num,
        };
        num = last.num + 1;
    }
    // The two Snapshot entries themselves (bodies empty).
    let base = entry_at(log, id, &base_seg, base_num).await?;
    let target = entry_at(log, id, &seg, entry).await?;
    Ok(Located::Ready(Box::new(SnapshotInput { target, base })))
}

/// Entry `num` of segment `seg`, read alone.
async fn entry_at<S: LogEntries, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    seg: &SegmentRecord,
    num: u64,
) -> Result<Entry, InputError> {
    let seq = seg.seq_of(num);
    let hint = SegmentHint {
        segment: seg.num,
        base_seq: seg.base_seq,
    };
    log.read_from(id, hint, num, 1)
        .await?
        .entries
        .into_iter()
        .next()
        .filter(|e| e.seq == seq)
        .ok_or(InputError::ShortRead {
            from: seq,
            expected: 1,
            got: 0,
        })
}

/// The previous completed snapshot's position: this segment's Last Snapshot when it is before
/// the entry, else the previous segment's.
async fn base_position<S: LogEntries, P: PayloadStore>(
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
                entry: EntryBody::decode(e.kind.0, e.version, &e.body)
                    .map_err(|source| InputError::Decode { seq: e.seq, source })?,
                payload: e.payload.clone(),
            })
        })
        .collect()
}

/// As [`log_entries`], consuming the entries: each raw body is dropped once decoded, so the two
/// forms of a range are never held whole at once.
pub fn into_log_entries(entries: Vec<Entry>) -> Result<Vec<LogEntry>, InputError> {
    entries
        .into_iter()
        .map(|e| {
            Ok(LogEntry {
                seq: e.seq,
                entry: EntryBody::decode(e.kind.0, e.version, &e.body)
                    .map_err(|source| InputError::Decode { seq: e.seq, source })?,
                payload: e.payload,
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

/// What a read of the sheet as of sequence `at` needs: the newest completed snapshot at or
/// before `at`, and the entries from it (included) up to `at` (excluded).
#[derive(Debug, Clone, PartialEq)]
pub struct AsOf {
    /// The Snapshot entry; [`base_manifest`] loads its manifest (`None` for the log's first).
    pub base: Entry,
    /// From `base` (included) to `at` (excluded): pass them to the read path as they are.
    pub entries: Vec<Entry>,
}

/// Finds the newest completed snapshot at or before sequence `at` and reads the entries from it
/// up to `at` — for a range read "as of" a past sequence (the newest one is simply
/// [`EventLog::load`]). Completed means the segment's Last Snapshot covers it, or (for an older
/// one in the same segment) its root is set, which completion writes first.
/// [`LogError::OutOfRange`] when `at` is past the end of the log.
pub async fn as_of<S: LogEntries, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    at: u64,
) -> Result<AsOf, InputError> {
    // Refuse a sequence past the end before reading anything: every length below is then
    // bounded by the log itself (and `at + 1` cannot overflow).
    let (next_seq, _) = log.next_seq(id).await?;
    if at > next_seq {
        return Err(LogError::OutOfRange { from: at, next_seq }.into());
    }
    let (segments, _) = log.segments(id).await?;
    let Some(start) = segments.iter().rposition(|s| s.base_seq <= at) else {
        return Err(LogError::CorruptLog {
            log: id,
            detail: "no segment starts at sequence 0".into(),
        }
        .into());
    };
    let (seg, num) = completed_snapshot_at(log, id, &segments[..=start], at).await?;
    entries_from(log, id, &seg, num, at).await
}

/// The newest completed snapshot at or before `at` in `segments` (the log's, up to the one
/// holding `at`): its segment and entry number. The scan for an older completed snapshot only
/// needs each entry's kind and root: it reads positions a page at a time, without bodies, and
/// keeps only the newest match.
async fn completed_snapshot_at<S: LogEntries, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    segments: &[SegmentRecord],
    at: u64,
) -> Result<(SegmentRecord, u64), InputError> {
    for seg in segments.iter().rev() {
        if let Some(l) = seg.last_snapshot
            && seg.seq_of(l) <= at
        {
            return Ok((seg.clone(), l));
        }
        // The segment's newest completed snapshot is after `at` (or there is none yet): look for
        // an older completed one in the segment, before `at`.
        if let Some(n) = older_completed_in(log, id, seg, at).await? {
            return Ok((seg.clone(), n));
        }
    }
    Err(LogError::CorruptLog {
        log: id,
        detail: format!("no completed snapshot at or before sequence {at}"),
    }
    .into())
}

/// The newest completed snapshot of segment `seg` at or before `at`: a Snapshot entry whose root
/// is set (completion writes it first), or the log's entry 0.
async fn older_completed_in<S: LogEntries, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    seg: &SegmentRecord,
    at: u64,
) -> Result<Option<u64>, InputError> {
    let page_size = log.config().page_size;
    let mut found = None;
    let mut num = 0u64;
    while seg.base_seq + num <= at {
        let upto = at - (seg.base_seq + num) + 1;
        let limit = usize::try_from(upto).unwrap_or(usize::MAX).min(page_size);
        let hint = SegmentHint {
            segment: seg.num,
            base_seq: seg.base_seq,
        };
        let page = log.scan_from(id, hint, num, limit).await?;
        let mut left_segment = false;
        for m in &page.marks {
            if m.segment != seg.num || m.seq > at {
                left_segment = true;
                break;
            }
            if m.kind == EntryType::SNAPSHOT && (m.snapshot_root.is_some() || m.seq == 0) {
                found = Some(m.num);
            }
        }
        let Some(last) = page.marks.last() else { break };
        if left_segment || page.complete || last.segment != seg.num {
            break;
        }
        num = last.num + 1;
    }
    Ok(found)
}

/// The entries from the snapshot at entry `num` of `seg` (included) up to `at` (excluded), or
/// the snapshot alone when it is at `at`; read a page at a time, their bodies held within the
/// read budget.
async fn entries_from<S: LogEntries, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    seg: &SegmentRecord,
    num: u64,
    at: u64,
) -> Result<AsOf, InputError> {
    let page_size = log.config().page_size;
    let from = seg.seq_of(num);
    let want = at - from;
    let need = want.max(1);
    let budget = log.config().read_budget_bytes;
    let too_large = || InputError::TooLarge {
        at,
        snapshot_seq: from,
        budget,
    };
    let mut entries: Vec<Entry> = Vec::new();
    let mut held = 0usize;
    let mut hint = SegmentHint {
        segment: seg.num,
        base_seq: seg.base_seq,
    };
    let mut next = num;
    // `at` is at or before the end (read strongly above), so every entry up to it exists. A page
    // that stops short was an eventually consistent read that had not caught up: go on from
    // where it stopped, where an empty page is confirmed by a strong read.
    while (entries.len() as u64) < need {
        if held >= budget {
            return Err(too_large());
        }
        let left = need - entries.len() as u64;
        let limit = usize::try_from(left).unwrap_or(usize::MAX).min(page_size);
        let (page, cut) = log
            .read_from_within(id, hint, next, limit, budget - held)
            .await?;
        if page.entries.is_empty() {
            break;
        }
        held = page
            .entries
            .iter()
            .fold(held, |h, e| h.saturating_add(e.body.len()));
        if let Some(last) = page.entries.last() {
            hint = SegmentHint {
                segment: last.segment,
                base_seq: last.seq - last.num,
            };
            next = last.num + 1;
        }
        entries.extend(page.entries);
        if cut && (entries.len() as u64) < need {
            return Err(too_large());
        }
    }
    if (entries.len() as u64) < need {
        let next_seq = from + entries.len() as u64;
        return Err(LogError::OutOfRange { from: at, next_seq }.into());
    }
    let base = entries.first().cloned().ok_or(InputError::ShortRead {
        from,
        expected: 1,
        got: 0,
    })?;
    entries.truncate(usize::try_from(want).unwrap_or(usize::MAX));
    Ok(AsOf { base, entries })
}

/// The sheet as of sequence `at`, ready for the read path (`snapshot::read_rows`, `read_range`,
/// `extent`) and for building from: the newest completed snapshot's manifest at or before `at`
/// (`None` for the empty sheet of sequence 0) and the decoded entries from it up to `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct SheetAsOf {
    pub base: Option<Manifest>,
    pub entries: Vec<LogEntry>,
}

/// [`as_of`], then the base snapshot's manifest ([`base_manifest`]) and the entries decoded
/// ([`log_entries`]): what every read of a past version starts with.
pub async fn sheet_as_of<S: LogEntries, P: PayloadStore>(
    log: &EventLog<S, P>,
    blobs: &dyn BlobStore,
    id: LogId,
    at: u64,
) -> Result<SheetAsOf, InputError> {
    let AsOf { base, entries } = match as_of(log, id, at).await {
        Ok(a) => a,
        // History the `delete` retention policy removed: a named (or restored) version's state
        // was kept when it was named, and is the whole answer (`docs/api.md`, "Named versions").
        Err(InputError::Log(LogError::HistoryDeleted { log: l, segment })) => {
            return match crate::snapshot::restored_manifest(blobs, *id.as_uuid(), at).await {
                Ok(kept) => Ok(SheetAsOf {
                    base: Some(kept),
                    entries: Vec::new(),
                }),
                Err(SnapshotError::MissingObject(_)) => {
                    Err(LogError::HistoryDeleted { log: l, segment }.into())
                }
                Err(e) => Err(e.into()),
            };
        }
        Err(e) => return Err(e),
    };
    let base = base_manifest(blobs, id, &base).await?;
    let entries = into_log_entries(entries)?;
    let (base, entries) =
        crate::snapshot::resolve_restores(blobs, *id.as_uuid(), base, entries).await?;
    Ok(SheetAsOf { base, entries })
}

/// Builds the first snapshot of a fork: the state of `source` as of sequence `at`, written as
/// sequence 0 of `fork` (its manifest under the fork's prefix, the chunks the source's entries
/// after its snapshot leave alone shared, not copied). Pass the result's `manifest_key` to
/// [`EventLog::create_fork`].
pub async fn fork_snapshot<S: LogEntries, P: PayloadStore>(
    log: &EventLog<S, P>,
    blobs: &dyn BlobStore,
    imports: &dyn crate::snapshot::ImportSource,
    config: crate::snapshot::BuildConfig,
    source: LogId,
    at: u64,
    fork: LogId,
) -> Result<crate::snapshot::BuildResult, InputError> {
    let SheetAsOf { base, entries } = sheet_as_of(log, blobs, source, at).await?;
    let result = crate::snapshot::SnapshotBuilder::fork(
        blobs,
        imports,
        config,
        *fork.as_uuid(),
        at,
        base,
        entries,
    )?
    .run(|_| {})
    .await?;
    Ok(result)
}

/// Keeps the state of log `id` as of sequence `at` where a `restore` entry to `at` finds it
/// ([`crate::snapshot::restore_manifest_key`]): built like a fork's first snapshot, from the
/// newest completed snapshot at or before `at` and the entries after it, so the chunks those
/// entries leave alone are shared, not copied. Answers the manifest's key; a state already kept
/// is not built again (it never changes).
pub async fn restore_snapshot<S: LogEntries, P: PayloadStore>(
    log: &EventLog<S, P>,
    blobs: &dyn BlobStore,
    imports: &dyn crate::snapshot::ImportSource,
    config: crate::snapshot::BuildConfig,
    id: LogId,
    at: u64,
) -> Result<String, InputError> {
    let key = crate::snapshot::restore_manifest_key(*id.as_uuid(), at);
    if blobs.exists(&key).await.map_err(SnapshotError::from)? {
        return Ok(key);
    }
    let SheetAsOf { base, entries } = sheet_as_of(log, blobs, id, at).await?;
    let result = crate::snapshot::SnapshotBuilder::restore(
        blobs,
        imports,
        config,
        *id.as_uuid(),
        at,
        base,
        entries,
    )?
    .run(|_| {})
    .await?;
    Ok(result.manifest_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::log::test_support::{entry, mem_log, set, set_a1};
    use crate::memory::{MemLogStore, MemPayloadStore};

    /// `cells?at=18446744073709551615` overflowed computing the read length and dropped the
    /// connection; now it is out of range, like any sequence past the end.
    #[tokio::test]
    async fn a_sequence_far_past_the_end_is_out_of_range() {
        let log = mem_log();
        let id = log.create().await.expect("create").log;
        for at in [u64::MAX, u64::MAX - 1, 2] {
            let err = as_of(&log, id, at).await.expect_err("past the end");
            assert!(
                matches!(
                    err,
                    InputError::Log(LogError::OutOfRange { next_seq: 1, .. })
                ),
                "{at}: {err:?}"
            );
        }
        assert!(as_of(&log, id, 1).await.is_ok());
    }

    /// Appends `n` `set` entries of one cell holding a string of `size` bytes.
    async fn append_sets<S: crate::ports::LogStore, P: PayloadStore>(
        log: &EventLog<S, P>,
        id: LogId,
        n: u64,
        size: usize,
    ) {
        for _ in 0..n {
            log.append(
                id,
                entry(&set("A1", &"x".repeat(size))),
                crate::log::AppendOptions::default(),
            )
            .await
            .expect("append");
        }
    }

    /// A read as of a sequence holds the entries from the nearest completed snapshot up to it;
    /// it used to hold them all whatever their size. Now it stops at the read budget with a
    /// typed error, and a read whose entries fit still works.
    #[tokio::test]
    async fn a_read_as_of_a_sequence_stops_at_the_read_budget() {
        let cfg = LogConfig {
            read_budget_bytes: 10_000,
            ..LogConfig::default()
        };
        let log = EventLog::new(MemLogStore::new(), MemPayloadStore::new(), cfg).expect("config");
        let id = log.create().await.expect("create").log;
        // 40 entries of about 1 KB after the only snapshot (the empty sheet at 0).
        append_sets(&log, id, 40, 1_000).await;
        let ok = as_of(&log, id, 5).await.expect("5 entries fit");
        assert_eq!(ok.entries.len(), 5);
        for at in [20, 40, 41] {
            match as_of(&log, id, at).await {
                Err(InputError::TooLarge {
                    at: a,
                    snapshot_seq: 0,
                    budget: 10_000,
                }) => assert_eq!(a, at),
                other => panic!("as of {at}: {other:?}"),
            }
        }
    }

    /// The search for an older completed snapshot pages through the segment (here pages of 4):
    /// a completed Snapshot entry in a later page than the first is found, and the read from it
    /// fits the budget where a read from the segment's start would not.
    #[tokio::test]
    async fn the_search_for_an_older_snapshot_pages_through_the_segment() {
        let cfg = LogConfig {
            read_budget_bytes: 10_000,
            page_size: 4,
            ..LogConfig::default()
        };
        let log = EventLog::new(MemLogStore::new(), MemPayloadStore::new(), cfg).expect("config");
        let id = log.create().await.expect("create").log;
        append_sets(&log, id, 20, 1_000).await;
        let mid = log
            .append(
                id,
                crate::domain::NewEntry::new(EntryType::SNAPSHOT, 0, Bytes::new()),
                crate::log::AppendOptions::default(),
            )
            .await
            .expect("snapshot entry")
            .seq;
        append_sets(&log, id, 20, 1_000).await;
        let last = log
            .append(
                id,
                crate::domain::NewEntry::new(EntryType::SNAPSHOT, 0, Bytes::new()),
                crate::log::AppendOptions::default(),
            )
            .await
            .expect("snapshot entry")
            .seq;
        // Both complete; the segment's Last Snapshot is the newer, past the sequences read below.
        log.complete_snapshot(id, 0, mid, "root-mid")
            .await
            .expect("complete");
        log.complete_snapshot(id, 0, last, "root-last")
            .await
            .expect("complete");
        let a = as_of(&log, id, mid + 5)
            .await
            .expect("as of after the middle snapshot");
        assert_eq!(a.base.seq, mid);
        assert_eq!(a.entries.len(), 5);
        assert!(matches!(
            as_of(&log, id, mid - 1).await,
            Err(InputError::TooLarge {
                snapshot_seq: 0,
                ..
            })
        ));
    }

    /// Eventually consistent queries that miss the newest entries (as DynamoDB's may, for a
    /// moment after a write) never shorten or reorder a read of a past version: every version of
    /// a log written a moment ago, read through the fault adapter with most reads stale, holds
    /// exactly the entries before it.
    #[cfg(feature = "faults")]
    #[tokio::test]
    async fn reads_of_past_versions_are_whole_under_stale_reads() {
        use crate::faults::{FaultProfile, Faults, FaultyLogStore};
        use crate::snapshot::MemBlobs;

        let mut profile = FaultProfile::named("stale").expect("profile");
        profile.stale_read = 0.8;
        profile.stale_for = std::time::Duration::from_secs(60);
        let faults = Faults::new(profile, 7);
        let log = EventLog::new(
            FaultyLogStore::new(MemLogStore::new(), faults.clone()),
            MemPayloadStore::new(),
            LogConfig::default(),
        )
        .expect("config");
        let id = log.create().await.expect("create").log;
        for i in 1..=40u64 {
            log.append(
                id,
                entry(&set_a1(i as f64)),
                crate::log::AppendOptions::default(),
            )
            .await
            .expect("append");
        }
        let blobs = MemBlobs::new();
        for at in 0..=41u64 {
            let sheet = sheet_as_of(&log, &blobs, id, at)
                .await
                .unwrap_or_else(|e| panic!("as of {at}: {e}"));
            assert!(sheet.base.is_none(), "no snapshot was built");
            let seqs: Vec<u64> = sheet.entries.iter().map(|e| e.seq).collect();
            assert_eq!(seqs, (0..at).collect::<Vec<_>>(), "as of {at}");
        }
        assert!(
            faults
                .counts
                .stale_reads
                .load(std::sync::atomic::Ordering::Relaxed)
                > 0,
            "the adapter served no stale read"
        );
    }
}
