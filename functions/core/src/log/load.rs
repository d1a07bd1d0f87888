//! Reading for callers (`docs/design.md`, "Load and update"): load from the newest completed
//! snapshot, read since a sequence, read or scan from any segment, and resolving offloaded
//! bodies from the payload bucket.

use bytes::Bytes;
use futures::StreamExt;

use super::{EntriesPage, EntryMark, EventLog, Loaded, ScanPage, SegmentHint, corrupt};
use crate::domain::{Entry, EntryRecord, EntryType, LogId, RequestUnits};
use crate::error::{LogError, StoreError};
use crate::ports::{Consistency, LogEntries, PayloadStore};

impl<S: LogEntries, P: PayloadStore> EventLog<S, P> {
    /// Loads a log (`docs/design.md`, "Load and update").
    pub async fn load(&self, log: LogId) -> Result<Loaded, LogError> {
        let mut units = RequestUnits::default();
        let segments = self
            .store
            .newest_segments(log, 2, Consistency::Eventual, &mut units)
            .await?;
        let current = segments.first().ok_or(LogError::LogNotFound(log))?;
        let (from_segment, from_num) = match (current.last_snapshot, segments.get(1)) {
            (Some(n), _) => (current, n),
            (None, Some(previous)) => match previous.last_snapshot {
                Some(n) => (previous, n),
                None => {
                    return Err(corrupt(
                        log,
                        format!(
                            "neither segment {} nor segment {} has a completed snapshot",
                            current.num, previous.num
                        ),
                    ));
                }
            },
            (None, None) => {
                return Err(corrupt(
                    log,
                    format!("segment {} has no completed snapshot", current.num),
                ));
            }
        };
        let start = SegmentHint {
            segment: from_segment.num,
            base_seq: from_segment.base_seq,
        };
        // The snapshot entry plus at most a page of entries after it: a reader that is further
        // behind continues with `read_since` from `next_seq` (`complete` is false), so a load
        // never holds an unbounded tail in memory.
        let mut chain = self
            .read_chain(
                log,
                start,
                from_num,
                self.cfg.page_size.saturating_add(1),
                &mut units,
            )
            .await?;
        if let Some((_, first)) = chain.records.first_mut()
            && first.kind == EntryType::SNAPSHOT
            && first.snapshot_root.is_none()
            && !(start.segment == 0 && from_num == 0)
        {
            // The segment says this snapshot is complete, but an eventually consistent read can
            // miss the root written just before: read the entry again, strongly.
            let page = self
                .store
                .read_entries(
                    log,
                    start.segment,
                    from_num,
                    1,
                    Consistency::Strong,
                    &mut units,
                )
                .await?;
            if let Some(fresh) = page.entries.into_iter().next() {
                *first = fresh;
            }
        }
        let (entries, cut) = self
            .resolve_within(log, chain.records, self.cfg.read_budget_bytes)
            .await?;
        let complete = chain.complete && !cut;
        let mut entries = entries.into_iter();
        let snapshot = entries
            .next()
            .filter(|e| e.kind == EntryType::SNAPSHOT)
            .ok_or_else(|| {
                corrupt(
                    log,
                    format!(
                        "Last Snapshot of segment {} is not a Snapshot entry",
                        start.segment
                    ),
                )
            })?;
        let entries: Vec<Entry> = entries.collect();
        let next_seq = entries.last().map_or(snapshot.seq, |e| e.seq) + 1;
        Ok(Loaded {
            snapshot,
            entries,
            next_seq,
            complete,
            units,
        })
    }

    /// Updates a loaded log (`docs/design.md`, "Load and update"): up to `limit` entries from sequence `from` on, across
    /// a segment boundary. [`LogError::ReloadRequired`] when `from` is older than the two newest
    /// segments; [`LogError::OutOfRange`] when it is past the end.
    pub async fn read_since(
        &self,
        log: LogId,
        from: u64,
        limit: usize,
    ) -> Result<EntriesPage, LogError> {
        let mut units = RequestUnits::default();
        let limit = limit.max(1);
        let segments = self
            .store
            .newest_segments(log, 2, Consistency::Eventual, &mut units)
            .await?;
        let current = segments.first().ok_or(LogError::LogNotFound(log))?;
        let oldest = segments.last().unwrap_or(current);
        let seg = segments
            .iter()
            .find(|s| from >= s.base_seq)
            .ok_or(LogError::ReloadRequired {
                from,
                first_retained: oldest.base_seq,
            })?;
        let start = SegmentHint {
            segment: seg.num,
            base_seq: seg.base_seq,
        };
        self.read_since_from(log, start, from, limit, units).await
    }

    /// As [`read_since`](Self::read_since), starting from a segment hint when it covers
    /// `from` (the hint a head read just gave): one Query instead of two, as the Segment table
    /// is not read. Without a hint, or when `from` lies before the hinted segment, it is
    /// [`read_since`](Self::read_since).
    pub async fn read_since_at(
        &self,
        log: LogId,
        from: u64,
        limit: usize,
        hint: Option<SegmentHint>,
    ) -> Result<EntriesPage, LogError> {
        let Some(start) = hint.filter(|h| from >= h.base_seq) else {
            return self.read_since(log, from, limit).await;
        };
        self.read_since_from(log, start, from, limit.max(1), RequestUnits::default())
            .await
    }

    /// The entries from sequence `from` on, read from segment `start` (which holds `from` or
    /// ends before it), their bodies resolved within the read budget.
    async fn read_since_from(
        &self,
        log: LogId,
        start: SegmentHint,
        from: u64,
        limit: usize,
        mut units: RequestUnits,
    ) -> Result<EntriesPage, LogError> {
        let chain = self
            .read_chain(log, start, from - start.base_seq, limit, &mut units)
            .await?;
        let (entries, cut) = self
            .resolve_within(log, chain.records, self.cfg.read_budget_bytes)
            .await?;
        let complete = chain.complete && !cut;
        let next_seq = from + entries.len() as u64;
        Ok(EntriesPage {
            entries,
            next_seq,
            complete,
            units,
        })
    }

    /// A pull's whole read in one eventually consistent Query: the entries from `cookie` on (at
    /// most `limit`) and the log's next sequence as that read shows it, read from the entry
    /// before the cookie in the hinted segment. Finding that entry shows the cookie is one this
    /// log gave out; the entries after it are contiguous (a replica shows a prefix of a
    /// partition's writes, and a gap is checked for), so the next sequence is the last one's
    /// plus one. An unchanged pull reads just the entry before the cookie, which is the newest:
    /// what a head check reads.
    ///
    /// `None` when this read cannot answer alone, for the caller's head check and
    /// [`read_since_at`](Self::read_since_at): no cookie to stand on (`cookie` 0), the entry
    /// before the cookie in another segment than the hint's or not shown, a segment end among the
    /// entries, or more than `limit` entries since the cookie.
    pub async fn pull_since(
        &self,
        log: LogId,
        cookie: u64,
        limit: usize,
        hint: SegmentHint,
    ) -> Result<Option<EntriesPage>, LogError> {
        let Some(before) = cookie.checked_sub(1).filter(|b| *b >= hint.base_seq) else {
            return Ok(None);
        };
        let mut units = RequestUnits::default();
        let page = self
            .store
            .read_entries(
                log,
                hint.segment,
                before - hint.base_seq,
                limit.saturating_add(1),
                Consistency::Eventual,
                &mut units,
            )
            .await?;
        if page.more
            || page
                .entries
                .first()
                .is_none_or(|e| e.num != before - hint.base_seq)
            || page.entries.iter().any(EntryRecord::is_end_segment)
            || page.entries.windows(2).any(|w| w[1].num != w[0].num + 1)
        {
            return Ok(None);
        }
        let records: Vec<(u64, EntryRecord)> = page
            .entries
            .into_iter()
            .skip(1)
            .map(|e| (hint.base_seq + e.num, e))
            .collect();
        let (entries, cut) = self
            .resolve_within(log, records, self.cfg.read_budget_bytes)
            .await?;
        if cut {
            return Ok(None);
        }
        let next_seq = cookie + entries.len() as u64;
        Ok(Some(EntriesPage {
            entries,
            next_seq,
            complete: true,
            units,
        }))
    }

    /// Up to `limit` entries in sequence order starting at entry `num` of the segment `start`
    /// names, following End Segment entries into later segments. Unlike [`read_since`]
    /// (which serves readers and only looks at the two newest segments), this reads from any
    /// segment the caller has located, so the snapshot worker can read behind a log that has
    /// moved on.
    ///
    /// It holds every body of the range: the caller bounds it by `limit` (the snapshot worker
    /// reads one snapshot interval). Readers that serve requests use [`read_from_within`].
    ///
    /// [`read_since`]: Self::read_since
    /// [`read_from_within`]: Self::read_from_within
    pub async fn read_from(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
    ) -> Result<EntriesPage, LogError> {
        self.read_from_within(log, start, num, limit, usize::MAX)
            .await
            .map(|(page, _)| page)
    }

    /// As [`read_from`](Self::read_from), stopping once the bodies held reach `budget` bytes
    /// (always keeping the first entry), as [`read_since`](Self::read_since) stops at the read
    /// budget. The second value is true when it stopped for the budget: the page then says it is
    /// not complete, and `next_seq` is where to go on from.
    pub async fn read_from_within(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
        budget: usize,
    ) -> Result<(EntriesPage, bool), LogError> {
        let mut units = RequestUnits::default();
        let chain = self
            .read_chain(log, start, num, limit.max(1), &mut units)
            .await?;
        let (entries, cut) = self.resolve_within(log, chain.records, budget).await?;
        let complete = chain.complete && !cut;
        let next_seq = entries.last().map_or(start.base_seq + num, |e| e.seq + 1);
        Ok((
            EntriesPage {
                entries,
                next_seq,
                complete,
                units,
            },
            cut,
        ))
    }

    /// Up to `limit` entries from entry `num` of the segment `start` names (following End
    /// Segment entries, as [`read_from`](Self::read_from)), without their bodies: what a search
    /// for a Snapshot entry needs. Offloaded bodies are not fetched and inline ones are dropped
    /// at once, so a scan of a whole segment in pages holds one page of positions at a time.
    pub async fn scan_from(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
    ) -> Result<ScanPage, LogError> {
        let mut units = RequestUnits::default();
        let chain = self
            .read_chain(log, start, num, limit.max(1), &mut units)
            .await?;
        let marks: Vec<EntryMark> = chain
            .records
            .into_iter()
            .map(|(seq, rec)| EntryMark {
                seq,
                segment: rec.segment,
                num: rec.num,
                kind: rec.kind,
                snapshot_root: rec.snapshot_root,
            })
            .collect();
        Ok(ScanPage {
            marks,
            complete: chain.complete,
        })
    }

    /// Turns records into entries, fetching offloaded bodies from S3 (a few at a time), stopping
    /// once the bodies held reach `budget` bytes (always keeping the first entry; `usize::MAX`
    /// for no limit): the entries, in order, and whether it stopped early. At most
    /// [`RESOLVE_CONCURRENCY`] offloaded bodies are fetched past the budget, then dropped.
    pub(super) async fn resolve_within(
        &self,
        log: LogId,
        records: Vec<(u64, EntryRecord)>,
        budget: usize,
    ) -> Result<(Vec<Entry>, bool), LogError> {
        let total = records.len();
        let mut stream = self.resolve_stream(log, records);
        let mut out = Vec::new();
        let mut held = 0usize;
        while let Some(entry) = stream.next().await {
            let entry = entry?;
            held = held.saturating_add(entry.body.len());
            out.push(entry);
            if held >= budget && out.len() < total {
                return Ok((out, true));
            }
        }
        Ok((out, false))
    }

    pub(super) fn resolve_stream(
        &self,
        log: LogId,
        records: Vec<(u64, EntryRecord)>,
    ) -> impl futures::Stream<Item = Result<Entry, LogError>> + '_ {
        futures::stream::iter(records)
            .map(move |(seq, rec)| async move {
                let payload = rec.payload_key().map(str::to_owned);
                let body = match (rec.body, &rec.external) {
                    (Some(body), _) => body,
                    (None, Some(key)) => self.payloads.get(key).await.map_err(|e| match e {
                        StoreError::NotFound { key } => corrupt(
                            log,
                            format!("body object {key} of sequence {seq} is missing"),
                        ),
                        other => LogError::Store(other),
                    })?,
                    (None, None) => Bytes::new(),
                };
                Ok::<Entry, LogError>(Entry {
                    seq,
                    segment: rec.segment,
                    num: rec.num,
                    created: rec.created,
                    kind: rec.kind,
                    version: rec.version,
                    body,
                    payload,
                    snapshot_root: rec.snapshot_root,
                })
            })
            .buffered(RESOLVE_CONCURRENCY)
    }
}

/// Offloaded bodies fetched from S3 at once while resolving a page.
pub const RESOLVE_CONCURRENCY: usize = 8;
