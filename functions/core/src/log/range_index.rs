//! Range items written later (`docs/sync.md`, "Range items written later"): the sync writer's
//! group commit writes its entry alone, and the clients' range items follow once a window of
//! [`INDEX_WINDOW`] sequences is complete.
//!
//! The log is the authority on which mutations applied; range items are an index of it. The
//! log's *index mark* says how far the index is complete: every client run in an entry at or
//! before the mark has a range item, and every client with a run there is in its group's item.
//! Past the mark, a deferred batch (`mutations` body version 5) records runs that may have
//! neither yet. A reader of a client's last mutation (or of a group's clients) therefore reads, in
//! this order: the head (strongly), the mark, then the range items (or the group's item) and the
//! runs of the entries past the mark. Read in that order nothing is missed:
//! the mark is set before the first deferred entry exists, and moves only after the items it
//! covers are written.
//!
//! Indexing is deterministic, so any number of writers may do it at once and agree: only complete
//! windows are indexed, and a complete window's entries never change, so the runs of a client in
//! one window that no other item records become the same item, keyed by the first of them,
//! whoever writes it (which is why the items are written unconditionally, 25 to a request). Windows are
//! the sequences `[k·W, (k+1)·W)`, the first cut at the mark where the mark was first set; the
//! mark only ever takes its first value and window ends, so every indexer cuts the same windows.

use std::collections::BTreeMap;

use tracing::debug;

use super::append::Head;
use super::{EventLog, SegmentHint, corrupt};
use crate::domain::clients::ClientRange;
use crate::domain::{Entry, LogId, RequestUnits};

use crate::error::LogError;
use crate::ports::{ClientRuns, Consistency, LogEntries, PayloadStore};
use crate::sheet::entry::EntryBody;
use crate::sheet::mutations::{TYPE_MUTATIONS, is_deferred_version};

/// Sequences per indexing window: a writer indexes a window's deferred runs once the log has
/// passed its end, one item per client that pushed in it.
pub const INDEX_WINDOW: u64 = 64;

/// Entries read (and held, bodies and all) at once while reading past the mark.
const TAIL_PAGE: usize = 32;

/// A client run as an entry records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRun {
    pub seq: u64,
    pub group: String,
    pub client: String,
    pub first: u64,
    pub last: u64,
    pub rejected: Vec<u64>,
    /// Whether the run's range item may not exist: a run of a deferred batch.
    pub deferred: bool,
}

impl LoggedRun {
    /// The run as a one-run range (the item a direct push would have written for it).
    pub fn as_range(&self) -> ClientRange {
        ClientRange {
            group: self.group.clone(),
            client: self.client.clone(),
            key: self.first,
            first: self.first,
            last: self.last,
            seq: self.seq,
            rejected: self.rejected.clone(),
            runs: Vec::new(),
        }
    }
}

/// The client runs recorded in `entries`, in order.
pub(super) fn logged_runs(log: LogId, entries: &[Entry]) -> Result<Vec<LoggedRun>, LogError> {
    let mut out = Vec::new();
    for e in entries {
        let body = EntryBody::decode(e.kind.0, e.version, &e.body)
            .map_err(|err| corrupt(log, format!("entry {} does not decode: {err}", e.seq)))?;
        let deferred = is_deferred_version(e.version);
        for run in body.runs() {
            out.push(LoggedRun {
                seq: e.seq,
                group: run.group.clone(),
                client: run.client.clone(),
                first: run.first,
                last: run.last,
                rejected: run.rejected(),
                deferred,
            });
        }
    }
    Ok(out)
}

/// What the log records past its index mark, as of a strongly read head.
#[derive(Debug, Clone)]
pub struct Tail {
    /// The index mark (`None`: never set, so no entry defers its range items).
    pub mark: Option<u64>,
    /// The log's next sequence when the tail was read.
    pub next_seq: u64,
    /// The runs of the entries after the mark, in order.
    pub runs: Vec<LoggedRun>,
}

impl Tail {
    /// The client's newest run past the mark, as a range.
    pub fn newest(&self, client: &str) -> Option<ClientRange> {
        self.runs
            .iter()
            .rev()
            .find(|r| r.client == client)
            .map(LoggedRun::as_range)
    }

    /// The newest of the client's runs past the mark and its newest range item (read after the
    /// mark): its last applied mutation.
    pub fn newest_with(&self, client: &str, item: Option<ClientRange>) -> Option<ClientRange> {
        self.newest(client).or(item)
    }

    /// The clients of `group` with a run past the mark (their group's item may not name them
    /// yet).
    pub fn group_clients<'a>(&'a self, group: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.runs
            .iter()
            .filter(move |r| r.group == group)
            .map(|r| r.client.as_str())
    }
}

/// Whether a window past `mark` ends before `next_seq`: something to index.
pub fn index_due(mark: u64, next_seq: u64) -> bool {
    window_end(mark + 1) < next_seq
}

/// The last sequence of the window that holds `seq`.
fn window_end(seq: u64) -> u64 {
    (seq / INDEX_WINDOW) * INDEX_WINDOW + INDEX_WINDOW - 1
}

impl<S: LogEntries + ClientRuns, P: PayloadStore> EventLog<S, P> {
    /// The client runs of every entry from `from` to before `next_seq`, read strongly (from the
    /// segment `at` names when it holds `from`, else from the Segment table) a page at a time, so
    /// that only a page of bodies is held: all of them, or an error. A throttled or timed-out
    /// page is read again (with backoff, within the log's attempt budget) rather than failing
    /// the whole read: past a stalled index mark the read is long, and one throttle in it must
    /// not cost the caller a round. Only `mutations` entries' bodies are fetched, since only
    /// they record runs.
    pub(super) async fn runs_between(
        &self,
        log: LogId,
        from: u64,
        next_seq: u64,
        at: SegmentHint,
        units: &mut RequestUnits,
    ) -> Result<Vec<LoggedRun>, LogError> {
        let mut runs = Vec::new();
        let mut start = self
            .retrying(
                || async move {
                    let mut u = RequestUnits::default();
                    let s = self.segment_of(log, from, at, &mut u).await?;
                    Ok((s, u))
                },
                units,
            )
            .await?;
        let mut seq = from;
        while seq < next_seq {
            let (page, next_start, read) = self
                .retrying(
                    || async move {
                        let mut u = RequestUnits::default();
                        let page = self.tail_page(log, start, seq, next_seq, &mut u).await?;
                        Ok((page, u))
                    },
                    units,
                )
                .await?;
            runs.extend(page);
            start = next_start;
            seq += read;
        }
        Ok(runs)
    }

    /// One page of [`runs_between`](Self::runs_between): the runs of up to [`TAIL_PAGE`]
    /// entries from `seq` (in segment `start`), where the next page starts, and how many
    /// entries were read.
    async fn tail_page(
        &self,
        log: LogId,
        start: SegmentHint,
        seq: u64,
        next_seq: u64,
        units: &mut RequestUnits,
    ) -> Result<(Vec<LoggedRun>, SegmentHint, u64), LogError> {
        let want = ((next_seq - seq) as usize).min(TAIL_PAGE);
        let chain = self
            .read_chain_as(
                log,
                start,
                seq - start.base_seq,
                want,
                Consistency::Strong,
                units,
            )
            .await?;
        let records: Vec<_> = chain
            .records
            .into_iter()
            .filter(|(s, _)| *s < next_seq)
            .collect();
        if records.is_empty() || records.iter().zip(seq..).any(|((s, _), want)| *s != want) {
            return Err(corrupt(
                log,
                format!("entries {seq}..{next_seq} are not all readable past the index mark"),
            ));
        }
        let read = records.len() as u64;
        // Where the next page starts: the segment of the page's last entry, or the next one
        // after an End Segment entry.
        let next_start = match records.last() {
            Some((last, rec)) if rec.is_end_segment() => SegmentHint {
                segment: rec.segment + 1,
                base_seq: last + 1,
            },
            Some((last, rec)) => SegmentHint {
                segment: rec.segment,
                base_seq: last - rec.num,
            },
            None => start,
        };
        let with_runs: Vec<_> = records
            .into_iter()
            .filter(|(_, rec)| rec.kind.0 == TYPE_MUTATIONS)
            .collect();
        let (entries, _) = self.resolve_within(log, with_runs, usize::MAX).await?;
        Ok((logged_runs(log, &entries)?, next_start, read))
    }

    /// The segment that holds sequence `seq`: `at` when it does, else from the Segment table.
    async fn segment_of(
        &self,
        log: LogId,
        seq: u64,
        at: SegmentHint,
        units: &mut RequestUnits,
    ) -> Result<SegmentHint, LogError> {
        if seq >= at.base_seq {
            return Ok(at);
        }
        // Usually within the few newest segments; a log whose segments roll fast (or whose
        // indexing fell behind) may need them all.
        let mut segments = self
            .store
            .newest_segments(log, 4, Consistency::Strong, units)
            .await?;
        if !segments.iter().any(|s| seq >= s.base_seq) {
            segments = self.store.all_segments(log, units).await?;
            segments.reverse();
        }
        let s = segments.iter().find(|s| seq >= s.base_seq).ok_or_else(|| {
            corrupt(
                log,
                format!("sequence {seq} past the index mark is in no segment"),
            )
        })?;
        Ok(SegmentHint {
            segment: s.num,
            base_seq: s.base_seq,
        })
    }

    /// The runs past the index mark as of `head`. The mark is read after the head, so a mark
    /// set after this head's entries were written cannot hide deferred runs among them.
    pub(super) async fn tail_at(
        &self,
        log: LogId,
        head: &Head,
        units: &mut RequestUnits,
    ) -> Result<Tail, LogError> {
        let next_seq = head.next_seq();
        let mark = self.store.index_mark(log, units).await?;
        let runs = match mark {
            Some(m) if m + 1 < next_seq => {
                self.runs_between(log, m + 1, next_seq, head.at, units)
                    .await?
            }
            _ => Vec::new(),
        };
        Ok(Tail {
            mark,
            next_seq,
            runs,
        })
    }

    /// The runs past the index mark, from a strong head read.
    pub async fn tail(&self, log: LogId, units: &mut RequestUnits) -> Result<Tail, LogError> {
        let head = self.head(log, None, Consistency::Strong, units).await?;
        self.tail_at(log, &head, units).await
    }

    /// Indexes the deferred runs of every window past `mark` that ends before `next_seq`, one
    /// window at a time, moving the mark after each: the new mark. Safe to run concurrently
    /// with anyone, including itself (see the module).
    pub async fn index_deferred(
        &self,
        log: LogId,
        mark: u64,
        next_seq: u64,
        at: SegmentHint,
        units: &mut RequestUnits,
    ) -> Result<u64, LogError> {
        let mut mark = mark;
        while window_end(mark + 1) < next_seq {
            let end = window_end(mark + 1);
            let from = mark + 1;
            // Its pages are retried on their own.
            let runs = self.runs_between(log, from, end + 1, at, units).await?;
            let items = window_items(log, &runs)?;
            let written = items.len();
            // A client's first run also puts it in its group's item, before the mark moves.
            let mut joining: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for item in items.iter().filter(|i| i.first == 1) {
                joining
                    .entry(item.group.clone())
                    .or_default()
                    .push(item.client.clone());
            }
            for (group, clients) in &joining {
                self.retrying(
                    || async move {
                        let mut u = RequestUnits::default();
                        self.store.add_to_group(log, group, clients, &mut u).await?;
                        Ok(((), u))
                    },
                    units,
                )
                .await?;
            }
            let items = &items;
            self.retrying(
                || async move {
                    let mut u = RequestUnits::default();
                    self.store.put_deferred_ranges(log, items, &mut u).await?;
                    Ok(((), u))
                },
                units,
            )
            .await?;
            self.retrying(
                || async move {
                    let mut u = RequestUnits::default();
                    let moved = self.store.advance_index_mark(log, end, &mut u).await?;
                    Ok((moved, u))
                },
                units,
            )
            .await?;
            debug!(log = %log, from = mark + 1, to = end, items = written, "deferred runs indexed");
            mark = end;
        }
        Ok(mark)
    }
}

impl<S: LogEntries + ClientRuns, P: PayloadStore> EventLog<S, P> {
    /// Runs `call` again after a throttled or timed-out store call, with backoff, up to the
    /// log's attempt budget: indexing is idempotent, and a window left half done costs every
    /// reader a longer read past the mark. `call` answers with the units it used.
    async fn retrying<T, F, Fut>(
        &self,
        mut call: F,
        units: &mut RequestUnits,
    ) -> Result<T, LogError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(T, RequestUnits), LogError>>,
    {
        let mut backoff = super::retry::Backoff::new(&self.cfg);
        let mut attempt = 1;
        loop {
            match call().await {
                Ok((out, u)) => {
                    *units += u;
                    return Ok(out);
                }
                Err(LogError::Store(e)) if e.is_retryable() && attempt < self.cfg.max_attempts => {
                    attempt += 1;
                    backoff.sleep().await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The range items that index one window's deferred runs: per client, each stretch of deferred
/// runs not interrupted by a run that has its own item, as one item keyed by its first id.
pub fn window_items(log: LogId, runs: &[LoggedRun]) -> Result<Vec<ClientRange>, LogError> {
    let mut by_client: BTreeMap<&str, Vec<&LoggedRun>> = BTreeMap::new();
    for r in runs {
        by_client.entry(r.client.as_str()).or_default().push(r);
    }
    let mut items = Vec::new();
    for (client, runs) in by_client {
        let mut open: Option<ClientRange> = None;
        for r in runs {
            if !r.deferred {
                items.extend(open.take());
                continue;
            }
            match open.as_mut() {
                Some(item) => {
                    if r.first != item.last + 1 || r.group != item.group {
                        return Err(corrupt(
                            log,
                            format!(
                                "client {client}'s run {}..={} at {} does not follow {}",
                                r.first, r.last, r.seq, item.last
                            ),
                        ));
                    }
                    if item.runs.is_empty() {
                        item.runs.push((item.first, item.seq));
                    }
                    item.runs.push((r.first, r.seq));
                    item.last = r.last;
                    item.seq = r.seq;
                    item.rejected.extend(&r.rejected);
                }
                None => open = Some(r.as_range()),
            }
        }
        items.extend(open);
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seq: u64, client: &str, first: u64, last: u64, deferred: bool) -> LoggedRun {
        LoggedRun {
            seq,
            group: "g".into(),
            client: client.into(),
            first,
            last,
            rejected: if first == 3 { vec![3] } else { vec![] },
            deferred,
        }
    }

    #[test]
    fn a_windows_deferred_runs_become_one_item_per_uninterrupted_stretch() {
        let log = LogId::new_random();
        let runs = vec![
            run(64, "a", 2, 2, true),
            run(65, "b", 1, 1, false),
            run(66, "a", 3, 4, true),
            run(67, "a", 5, 5, false),
            run(68, "a", 6, 6, true),
            run(69, "b", 2, 3, true),
        ];
        let items = window_items(log, &runs).unwrap();
        assert_eq!(items.len(), 3, "{items:?}");
        let a1 = &items[0];
        assert_eq!((a1.key, a1.first, a1.last, a1.seq), (2, 2, 4, 66));
        assert_eq!(a1.runs, vec![(2, 64), (3, 66)]);
        assert_eq!(a1.rejected, vec![3]);
        assert_eq!(a1.seq_of(2), Some(64));
        assert_eq!(a1.seq_of(4), Some(66));
        let a2 = &items[1];
        assert_eq!((a2.key, a2.first, a2.last, a2.seq), (6, 6, 6, 68));
        assert!(a2.runs.is_empty());
        let b = &items[2];
        assert_eq!((b.client.as_str(), b.key, b.last), ("b", 2, 3));
    }

    #[test]
    fn a_gap_between_a_clients_runs_is_corruption_not_an_item() {
        let log = LogId::new_random();
        let runs = vec![run(64, "a", 2, 2, true), run(65, "a", 4, 4, true)];
        assert!(matches!(
            window_items(log, &runs),
            Err(LogError::CorruptLog { .. })
        ));
    }

    #[test]
    fn windows_end_on_multiples_of_the_window() {
        assert_eq!(window_end(0), INDEX_WINDOW - 1);
        assert_eq!(window_end(INDEX_WINDOW - 1), INDEX_WINDOW - 1);
        assert_eq!(window_end(INDEX_WINDOW), 2 * INDEX_WINDOW - 1);
        assert_eq!(window_end(100), 127);
    }
}
