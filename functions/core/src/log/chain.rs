//! The read chain: records in sequence order from a position, hopping over End Segment entries
//! into later segments, reading a segment's archive once its entry items are gone.

#[cfg(feature = "archive")]
use super::archive;
use super::{EventLog, SegmentHint, corrupt};
use crate::domain::{EntryRecord, LogId, RequestUnits};
use crate::error::LogError;
#[cfg(feature = "archive")]
use crate::error::StoreError;
use crate::ports::{Consistency, EntryPage, LogEntries, PayloadStore};

impl<S: LogEntries, P: PayloadStore> EventLog<S, P> {
    /// Reads records in sequence order from `(start.segment, num)`, hopping over End Segment
    /// entries into the following segment, until `limit` records or the end of the log.
    pub(super) async fn read_chain(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
        units: &mut RequestUnits,
    ) -> Result<Chain, LogError> {
        let mut records: Vec<(u64, EntryRecord)> = Vec::new();
        let (mut at, mut num) = (start, num);
        // Eventually consistent first; after a read that may have been stale, strongly.
        let mut consistency = Consistency::Eventual;
        // Re-reads after an entry appeared between two reads; each is answered by a strong read,
        // which cannot be stale, so a handful is plenty.
        let mut rereads = 0u32;
        // A segment whose entry items are gone (archived), read from its archive for the rest
        // of this read.
        let mut archived: Option<Archived> = None;
        loop {
            let remaining = limit - records.len();
            if remaining == 0 {
                return Ok(Chain {
                    records,
                    complete: false,
                });
            }
            let page = self
                .segment_page(
                    log,
                    at.segment,
                    num,
                    remaining,
                    consistency,
                    units,
                    &mut archived,
                )
                .await?;
            if page.entries.is_empty() && !page.more {
                // Nothing at or after `num` in this segment: either `num` is the end of the log,
                // or the segment ended earlier (End Segment) and `num` lies in a later segment,
                // or the caller asked past the end.
                let newest = self
                    .newest_in_segment(log, at.segment, units, &mut archived)
                    .await?
                    .ok_or_else(|| {
                        corrupt(log, format!("segment {} has no entries", at.segment))
                    })?;
                if newest.is_end_segment() && newest.num < num {
                    // `num` lies past this segment's end: it is entry `num - (end + 1)` of the
                    // next segment.
                    let skip = newest.num + 1;
                    at = SegmentHint {
                        segment: at.segment + 1,
                        base_seq: at.base_seq + skip,
                    };
                    num -= skip;
                    consistency = Consistency::Eventual;
                    continue;
                }
                if newest.num + 1 == num {
                    return Ok(Chain {
                        records,
                        complete: true,
                    });
                }
                if newest.num + 1 < num {
                    return Err(LogError::OutOfRange {
                        from: at.base_seq + num,
                        next_seq: at.base_seq + newest.num + 1,
                    });
                }
                // Entries `num..=newest` exist but the page did not show them: it was stale, or
                // they appeared between the two reads. Read them again, strongly. (Hopping to
                // the next segment here would skip them.)
                if archived.as_ref().is_some_and(|a| a.segment == at.segment) {
                    // The items are gone and the archive is now at hand: read it, not again.
                    continue;
                }
                rereads += 1;
                if rereads > 3 {
                    return Err(corrupt(
                        log,
                        format!(
                            "segment {} has entries up to {} but reads from {num} return none",
                            at.segment, newest.num
                        ),
                    ));
                }
                consistency = Consistency::Strong;
                continue;
            }
            let mut ended = None;
            for rec in page.entries {
                if rec.is_end_segment() {
                    ended = Some(rec.num);
                }
                records.push((at.base_seq + rec.num, rec));
            }
            match ended {
                Some(end) if records.len() < limit => {
                    at = SegmentHint {
                        segment: at.segment + 1,
                        base_seq: at.base_seq + end + 1,
                    };
                    num = 0;
                    consistency = Consistency::Eventual;
                }
                Some(_) => {
                    return Ok(Chain {
                        records,
                        complete: false,
                    });
                }
                None if page.more => {
                    return Ok(Chain {
                        records,
                        complete: false,
                    });
                }
                None => {
                    return Ok(Chain {
                        records,
                        complete: true,
                    });
                }
            }
        }
    }

    /// One page of a segment's entries from `num`: the Entry table's items, or the segment's
    /// archive when its items are gone. An archived segment's items are deleted in order, so
    /// what is left is a suffix: a page that starts after `num` (a gap), or a strongly read
    /// page that is empty though entries exist, means `num` is archived. Only then is the
    /// Segment item read; a live read pays nothing extra.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn segment_page(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        limit: usize,
        consistency: Consistency,
        units: &mut RequestUnits,
        archived: &mut Option<Archived>,
    ) -> Result<EntryPage, LogError> {
        if let Some(a) = archived.as_ref().filter(|a| a.segment == segment) {
            return Ok(a.page(num, limit));
        }
        let page = self
            .store
            .read_entries(log, segment, num, limit, consistency, units)
            .await?;
        let gap = page.entries.first().is_some_and(|e| e.num != num);
        let gone = page.entries.is_empty() && !page.more && consistency == Consistency::Strong;
        if (gap || gone)
            && let Some(a) = self.archived(log, segment, units).await?
        {
            let p = a.page(num, limit);
            *archived = Some(a);
            return Ok(p);
        }
        if gap {
            return Err(corrupt(
                log,
                format!("segment {segment} has no entry {num} and is not archived"),
            ));
        }
        Ok(page)
    }

    /// The newest entry of a segment, read strongly, or from its archive when its items are gone.
    pub(super) async fn newest_in_segment(
        &self,
        log: LogId,
        segment: u64,
        units: &mut RequestUnits,
        archived: &mut Option<Archived>,
    ) -> Result<Option<EntryRecord>, LogError> {
        if let Some(a) = archived.as_ref().filter(|a| a.segment == segment) {
            return Ok(a.records.last().cloned());
        }
        if let Some(e) = self
            .store
            .newest_entry(log, segment, Consistency::Strong, units)
            .await?
        {
            return Ok(Some(e));
        }
        match self.archived(log, segment, units).await? {
            Some(a) => {
                let last = a.records.last().cloned();
                *archived = Some(a);
                Ok(last)
            }
            None => Ok(None),
        }
    }

    /// The archive of a segment, if the Segment item names one (one strong GetItem, one S3 GET).
    pub(super) async fn archived(
        &self,
        log: LogId,
        segment: u64,
        units: &mut RequestUnits,
    ) -> Result<Option<Archived>, LogError> {
        let Some(seg) = self
            .store
            .segment(log, segment, Consistency::Strong, units)
            .await?
        else {
            return Ok(None);
        };
        let Some(key) = seg.archive else {
            return Ok(None);
        };
        self.read_archive(log, segment, &key).await.map(Some)
    }

    #[cfg(feature = "archive")]
    pub(super) async fn read_archive(
        &self,
        log: LogId,
        segment: u64,
        key: &str,
    ) -> Result<Archived, LogError> {
        if key == archive::DELETED {
            return Err(LogError::HistoryDeleted { log, segment });
        }
        let bytes = self.payloads.get(key).await.map_err(|e| match e {
            StoreError::NotFound { key } => corrupt(
                log,
                format!("segment {segment} names archive {key}, which does not exist"),
            ),
            other => LogError::Store(other),
        })?;
        let records =
            archive::decode(key, log, segment, &bytes).map_err(|e| corrupt(log, e.to_string()))?;
        Ok(Archived { segment, records })
    }

    #[cfg(not(feature = "archive"))]
    pub(super) async fn read_archive(
        &self,
        log: LogId,
        segment: u64,
        key: &str,
    ) -> Result<Archived, LogError> {
        Err(corrupt(
            log,
            format!("segment {segment} is archived in {key}, and this build reads no archives"),
        ))
    }
}

/// Records read from the log, ready to have their bodies resolved.
pub(super) struct Chain {
    pub(super) records: Vec<(u64, EntryRecord)>,
    pub(super) complete: bool,
}

/// A segment read from its archive.
pub(super) struct Archived {
    pub(super) segment: u64,
    pub(super) records: Vec<EntryRecord>,
}

impl Archived {
    fn page(&self, num: u64, limit: usize) -> EntryPage {
        let len = self.records.len();
        let start = usize::try_from(num).unwrap_or(usize::MAX).min(len);
        let end = start.saturating_add(limit).min(len);
        EntryPage {
            entries: self.records[start..end].to_vec(),
            more: end < len,
        }
    }
}
