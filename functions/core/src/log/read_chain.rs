//! The read chain: records in sequence order from a position, hopping over End Segment entries
//! into later segments, reading a segment's archive once its entry items are gone.
//!
//! An archive, once read, is kept by the [`EventLog`] for
//! [`ARCHIVE_KEEP`](super::ARCHIVE_KEEP) (`archive_cache.rs`): a reader paging through an archived segment (the API answering page after page, the snapshot
//! worker scanning and reading one invocation's range) fetches it from S3 once, and the pages
//! after the first ask neither the Entry table nor the Segment table about it.

#[cfg(feature = "archive")]
use super::archive;
use super::archive_cache::Archived;
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
        // A segment whose entry items are gone (archived), read from its archive for the rest
        // of this read, and kept for the next page.
        self.read_chain_as(log, start, num, limit, Consistency::Eventual, units)
            .await
    }

    /// As [`read_chain`](Self::read_chain), every page read with `consistency` (strongly, for a
    /// reader that must see every entry up to a head it read strongly).
    pub(super) async fn read_chain_as(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Chain, LogError> {
        let mut archived = self.archives.get(log);
        let chain = self
            .read_chain_with(log, start, num, limit, consistency, units, &mut archived)
            .await;
        if let Some(a) = archived {
            self.archives.keep(log, a);
        }
        chain
    }

    #[allow(clippy::too_many_arguments)]
    async fn read_chain_with(
        &self,
        log: LogId,
        start: SegmentHint,
        num: u64,
        limit: usize,
        first: Consistency,
        units: &mut RequestUnits,
        archived: &mut Option<Archived>,
    ) -> Result<Chain, LogError> {
        let mut records: Vec<(u64, EntryRecord)> = Vec::new();
        let (mut at, mut num) = (start, num);
        // Eventually consistent first (unless asked otherwise); after a read that may have been
        // stale, strongly.
        let mut consistency = first;
        // Re-reads after an entry appeared between two reads; each is answered by a strong read,
        // which cannot be stale, so a handful is plenty.
        let mut rereads = 0u32;
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
                    archived,
                )
                .await?;
            if page.entries.is_empty() && !page.more {
                match self.after_empty_page(log, at, num, units, archived).await? {
                    AfterEmpty::Next(next_at, next_num) => {
                        (at, num) = (next_at, next_num);
                        consistency = first;
                    }
                    AfterEmpty::End => {
                        return Ok(Chain {
                            records,
                            complete: true,
                        });
                    }
                    AfterEmpty::ArchiveAtHand => {}
                    AfterEmpty::Reread(newest) => {
                        rereads += 1;
                        if rereads > 3 {
                            return Err(corrupt(
                                log,
                                format!(
                                    "segment {} has entries up to {newest} but reads from {num} return none",
                                    at.segment
                                ),
                            ));
                        }
                        consistency = Consistency::Strong;
                    }
                }
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
                    consistency = first;
                }
                Some(_) => {
                    return Ok(Chain {
                        records,
                        complete: false,
                    });
                }
                // The segment goes on: complete unless the page stopped short of its end.
                None => {
                    return Ok(Chain {
                        records,
                        complete: !page.more,
                    });
                }
            }
        }
    }

    /// What an empty last page of segment `at` from `num` means: nothing at or after `num` in this
    /// segment, so either `num` is the end of the log, or the segment ended earlier (End Segment)
    /// and `num` lies in a later segment, or the caller asked past the end (an error), or the
    /// page was stale.
    async fn after_empty_page(
        &self,
        log: LogId,
        at: SegmentHint,
        num: u64,
        units: &mut RequestUnits,
        archived: &mut Option<Archived>,
    ) -> Result<AfterEmpty, LogError> {
        let newest = self
            .newest_in_segment(log, at.segment, units, archived)
            .await?
            .ok_or_else(|| corrupt(log, format!("segment {} has no entries", at.segment)))?;
        if newest.is_end_segment() && newest.num < num {
            // `num` lies past this segment's end: it is entry `num - (end + 1)` of the next
            // segment.
            let skip = newest.num + 1;
            let next = SegmentHint {
                segment: at.segment + 1,
                base_seq: at.base_seq + skip,
            };
            return Ok(AfterEmpty::Next(next, num - skip));
        }
        if newest.num + 1 == num {
            return Ok(AfterEmpty::End);
        }
        if newest.num + 1 < num {
            return Err(LogError::OutOfRange {
                from: at.base_seq + num,
                next_seq: at.base_seq + newest.num + 1,
            });
        }
        // Entries `num..=newest` exist but the page did not show them: it was stale, or they
        // appeared between the two reads. Read them again, strongly. (Hopping to the next
        // segment here would skip them.)
        if archived.as_ref().is_some_and(|a| a.segment == at.segment) {
            // The items are gone and the archive is now at hand: read it, not again.
            return Ok(AfterEmpty::ArchiveAtHand);
        }
        Ok(AfterEmpty::Reread(newest.num))
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
        Ok(Archived {
            segment,
            records: records.into(),
        })
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

/// What an empty last page of a segment means for the chain's read ([`EventLog::read_chain`]).
enum AfterEmpty {
    /// The position read lies in the next segment: there, at this entry number.
    Next(SegmentHint, u64),
    /// The position read is the end of the log.
    End,
    /// The segment's items are gone and its archive is now at hand: read that.
    ArchiveAtHand,
    /// Entries up to this number exist but the page did not show them: read again, strongly.
    Reread(u64),
}

#[cfg(all(test, feature = "engine"))]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::super::archive_cache::ARCHIVE_KEEP;
    use std::sync::atomic::Ordering;

    use super::super::test_support::raw_set_entry;
    use super::super::{AppendOptions, archive};
    use super::*;
    use crate::config::LogConfig;
    use crate::faults::{FaultProfile, Faults, FaultyLogStore, FaultyPayloadStore};
    use crate::memory::{MemLogStore, MemPayloadStore};

    type Log = EventLog<FaultyLogStore<MemLogStore>, FaultyPayloadStore<MemPayloadStore>>;

    /// A log whose segment 0 (`entries` entries and its End Segment) is archived and its items
    /// deleted, as `sheetlog-maintenance archive` leaves it.
    async fn archived_log(entries: u64) -> (Log, Arc<Faults>, LogId) {
        let faults = Faults::new(FaultProfile::named("none").expect("profile"), 1);
        let payloads = MemPayloadStore::default();
        let log = EventLog::new(
            FaultyLogStore::new(MemLogStore::new(), faults.clone()),
            FaultyPayloadStore::new(payloads, faults.clone()),
            LogConfig::default(),
        )
        .unwrap();
        let id = log.create().await.unwrap().log;
        let mut hint = None;
        for _ in 1..entries {
            let a = log
                .append(
                    id,
                    raw_set_entry(b"x"),
                    AppendOptions {
                        expected_seq: None,
                        segment_hint: hint,
                    },
                )
                .await
                .unwrap();
            hint = Some(a.hint);
        }
        log.start_segment(id).await.unwrap();
        let mem = log.store.inner();
        let seg0: Vec<EntryRecord> = mem
            .entries(id)
            .unwrap()
            .into_iter()
            .filter(|e| e.segment == 0)
            .collect();
        let enc = archive::encode(id, 0, &seg0).unwrap();
        log.payloads
            .put_discardable(&enc.key, enc.bytes.clone())
            .await
            .unwrap();
        assert!(mem.set_archive(id, 0, &enc.key).unwrap());
        let nums: Vec<u64> = seg0.iter().map(|e| e.num).collect();
        mem.delete_entries(id, 0, &nums).unwrap();
        (log, faults, id)
    }

    #[tokio::test]
    async fn pages_of_an_archived_segment_fetch_its_archive_once() {
        let (log, faults, id) = archived_log(2_500).await;
        let calls = || faults.counts.calls.load(Ordering::Relaxed);
        let start = SegmentHint {
            segment: 0,
            base_seq: 0,
        };
        let mut seqs = Vec::new();
        let mut per_page = Vec::new();
        while seqs.len() < 2_501 {
            let before = calls();
            let page = log
                .read_from(id, start, seqs.len() as u64, 1000)
                .await
                .unwrap();
            per_page.push(calls() - before);
            seqs.extend(page.entries.iter().map(|e| e.seq));
        }
        // Every entry of the archive, in order, then segment 1 (its Snapshot entry).
        assert_eq!(seqs[..2_502], (0..2_502).collect::<Vec<u64>>()[..]);
        // Page 1: entry query, newest-entry query, Segment item, one S3 GET. Page 2 comes from
        // the archive in hand; page 3 ends the archive and reads segment 1 (one query).
        assert_eq!(per_page, vec![4, 0, 1], "requests per page");
    }

    #[tokio::test]
    async fn another_log_or_an_old_archive_is_fetched_again() {
        let (log, faults, id) = archived_log(10).await;
        let calls = || faults.counts.calls.load(Ordering::Relaxed);
        let start = SegmentHint {
            segment: 0,
            base_seq: 0,
        };
        log.read_from(id, start, 0, 5).await.unwrap();
        let a = calls();
        log.read_from(id, start, 5, 5).await.unwrap();
        assert_eq!(calls() - a, 0, "the kept archive serves the next page");
        // Another log's reads never see it.
        assert!(log.archives.get(LogId::new_random()).is_none());
        // Once it is older than ARCHIVE_KEEP it is read again.
        if let Ok(mut slot) = log.archives.0.lock()
            && let Some((_, _, at)) = slot.as_mut()
        {
            *at = Instant::now() - ARCHIVE_KEEP - Duration::from_secs(1);
        }
        let b = calls();
        log.read_from(id, start, 5, 5).await.unwrap();
        assert_eq!(calls() - b, 4, "an expired archive is fetched again");
    }
}
