//! Sync clients (`docs/sync.md`): a client's mutations applied in order and exactly once, and the
//! queries "what is the last mutation applied from this client" and "where did mutation n land".
//!
//! A run of mutations becomes one `mutations` entry, written in one transaction with a range item
//! in the Clients table whose condition makes the run unique (`crate::domain::clients`). The
//! client's newest range is always read strongly before a run is built, so a retry, a
//! reconnect days later, or a second request racing the first never applies a mutation twice.

use std::collections::BTreeMap;

use tracing::{debug, warn};

use super::append::{Head, after_lost_race};
use super::pushed_mutation::PushedMutation;
use super::rebase::push::{Caught, PushRebase, Rebased, sent_forms};
use super::{Appended, EventLog, SegmentHint, Tail, corrupt, retry};
use crate::domain::clients::ClientRange;
use crate::domain::{EntryRecord, EntryType, LogId, NewEntry, RequestUnits};
use crate::error::LogError;
use crate::ports::{
    ClientPutOutcome, ClientRuns, Consistency, LogEntries, PayloadStore, single_range,
};
use crate::sheet::event::Event;
use crate::sheet::mutations::{MAX_MUTATIONS_PER_ENTRY, Mutation, Mutations};

/// A mutation a run recorded as rejected (processed, with no effect), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub id: u64,
    pub reason: String,
}

/// What [`EventLog::push_run`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// A run was applied: these mutations are recorded at `range.seq`. Mutations after
    /// `range.last` (over the per-entry limits) are still to push: call again. `rejected` says
    /// why each of `range.rejected` was refused: its arguments, or the entry-size rule.
    Applied {
        range: ClientRange,
        appended: Appended,
        rejected: Vec<Rejected>,
    },
    /// Every mutation given is at or below the client's last applied one; nothing was written.
    /// `newest` is the client's newest range.
    AlreadyApplied {
        newest: ClientRange,
        units: RequestUnits,
    },
}

/// Where a run comes from, which decides how a client the log has not seen may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunSource {
    /// A client's own push: a new client starts at mutation 1.
    Push,
    /// A replay of another log's mutations (a rebase): a client new to this log starts where
    /// the replayed range does, its earlier mutations being part of the state this log was forked
    /// from.
    Replay,
}

/// What one client's push keeps from one [`EventLog::push_run_with`] to the next: the history
/// read for rebasing its mutations, so that a push of many runs reads the window since its
/// oldest `baseSeq` once, and then only what each run (or anyone else) appended.
#[derive(Debug, Default)]
pub struct RunState {
    rebasing: Option<Option<PushRebase>>,
}

/// Body bytes one `mutations` entry may hold before the rest of a run goes into the next entry
/// (unless the entry-size rule is lower).
pub(super) const MAX_RUN_BODY_BYTES: usize = 256 * 1024;

/// An upper bound on the bytes a `mutations` body spends on one mutation besides its event body:
/// the id offset, type code, body version and body length, each a varint.
const PER_MUTATION_OVERHEAD: usize = 4 * 10;

/// An upper bound on a `mutations` body's header: the two ids, length-prefixed, and three varints.
fn run_header_bytes(group: &str, client: &str) -> usize {
    group.len() + client.len() + 2 * 10 + 3 * 10
}

/// Why a mutation with an event body of `size` bytes breaks the entry-size rule, if it does:
/// the run that records it alone would be larger than `limit`.
pub fn oversize_reason(size: usize, header: usize, limit: usize) -> Option<String> {
    let entry = header + PER_MUTATION_OVERHEAD + size;
    (entry > limit).then(|| {
        format!(
            "entry-too-large: the mutation's body is {size} bytes and its entry would exceed the \
             {limit}-byte entry limit; send large data through the upload flow"
        )
    })
}

impl<S: LogEntries + ClientRuns, P: PayloadStore> EventLog<S, P> {
    /// Applies a client's mutations (ids ascending) that it has not applied yet, as one
    /// `mutations` entry: ids at or below the client's last applied one are skipped, the next
    /// ones must follow it without a gap ([`LogError::MutationGap`]; nothing from the gap on is
    /// applied), and a mutation whose event is an `Err` is recorded as rejected (processed, with
    /// no effect). At most [`MAX_MUTATIONS_PER_ENTRY`] mutations or about 256 KB of bodies go
    /// into one entry; call again until [`RunOutcome::AlreadyApplied`] for the rest.
    pub async fn push_run(
        &self,
        log: LogId,
        group: &str,
        client: &str,
        mutations: &[PushedMutation],
        hint: Option<SegmentHint>,
        source: RunSource,
    ) -> Result<RunOutcome, LogError> {
        self.push_run_with(
            log,
            group,
            client,
            mutations,
            hint,
            source,
            &mut RunState::default(),
        )
        .await
    }

    /// As [`push_run`](Self::push_run), for a caller that calls again with the same
    /// `mutations` until they are all applied: `state` carries the history read for rebasing
    /// from one call to the next ([`RunState`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn push_run_with(
        &self,
        log: LogId,
        group: &str,
        client: &str,
        mutations: &[PushedMutation],
        hint: Option<SegmentHint>,
        source: RunSource,
        state: &mut RunState,
    ) -> Result<RunOutcome, LogError> {
        let mut units = RequestUnits::default();
        let mut hint = hint;
        let mut consistency = Consistency::Eventual;
        let mut backoff = retry::Backoff::new(&self.cfg);
        let attempt_id: u64 = rand::random();
        let rebasing = state
            .rebasing
            .get_or_insert_with(|| PushRebase::new(mutations));
        for attempt in 1..=self.cfg.max_attempts {
            // The head, then the runs past the index mark, then the client's range items: in
            // this order nothing applied before the head is missed (`deferred`).
            let head = self.head(log, hint, consistency, &mut units).await?;
            let tail = self.tail_at(log, &head, &mut units).await?;
            let item = self.newest_item(log, client, &mut units).await?;
            let newest = tail.newest_with(client, item);
            let Some(pending) = pending_of(mutations, newest.as_ref(), group, client, source)?
            else {
                let newest = newest
                    .ok_or_else(|| LogError::InvalidEntry("a push run with no mutations".into()))?;
                return Ok(RunOutcome::AlreadyApplied { newest, units });
            };
            let first = pending[0];
            let next_seq = head.next_seq();
            let rebased = match rebasing.as_mut() {
                None => None,
                Some(r) => {
                    let strong = consistency == Consistency::Strong;
                    match r.catch_up(self, log, next_seq, strong, &mut units).await? {
                        Caught::Yes => Some(r.apply(client, &pending, &[])),
                        Caught::NotVisible => {
                            consistency = Consistency::Strong;
                            hint = Some(head.at);
                            backoff.sleep().await;
                            continue;
                        }
                    }
                }
            };
            let (run, rejected) = match &rebased {
                None => self.build_run(group, client, first.id - 1, &pending, &BTreeMap::new())?,
                Some(rebased) => self.build_rebased_run(group, client, first.id - 1, rebased)?,
            };
            let record = self.run_record(log, &head, &run, attempt_id).await?;
            let range = range_for(&run, newest.is_none(), next_seq);
            match self
                .store
                .put_client_entries(
                    log,
                    &record,
                    &single_range(&range, newest.is_none()),
                    &mut units,
                )
                .await?
            {
                ClientPutOutcome::Written => {
                    debug!(log = %log, client, first = range.first, last = range.last, seq = next_seq, "mutations applied");
                    if let Some(mark) = tail.mark {
                        self.index_after_run(log, mark, &head, &mut units).await;
                    }
                    return Ok(RunOutcome::Applied {
                        range,
                        rejected,
                        appended: head.appended(attempt, units),
                    });
                }
                // Someone applied (some of) these mutations first, perhaps our own earlier try
                // whose answer was lost: read the client again and skip what is applied.
                ClientPutOutcome::RangeTaken => {}
                ClientPutOutcome::Taken(winner) => {
                    hint = Some(after_lost_race(head.at, winner.as_ref()));
                    consistency = Consistency::Strong;
                    backoff.sleep().await;
                }
                ClientPutOutcome::Interrupted => {
                    hint = Some(head.at);
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

    /// The next run from mutations the push rebase moved (their sent forms recorded).
    fn build_rebased_run(
        &self,
        group: &str,
        client: &str,
        last: u64,
        rebased: &[Rebased],
    ) -> Result<(Mutations, Vec<Rejected>), LogError> {
        let moved: Vec<&PushedMutation> = rebased.iter().map(|r| &r.mutation).collect();
        self.build_run(group, client, last, &moved, &sent_forms(rebased))
    }

    /// A run's entry item at the head's next number, its body placed.
    async fn run_record(
        &self,
        log: LogId,
        head: &Head,
        run: &Mutations,
        attempt_id: u64,
    ) -> Result<EntryRecord, LogError> {
        let (code, version, body) = run.encode();
        if body.len() > self.cfg.max_body_bytes {
            // `build_run` sizes runs by upper bounds, so this cannot happen; refuse rather than
            // write an entry over the rule.
            return Err(LogError::BodyTooLarge {
                size: body.len(),
                limit: self.cfg.max_body_bytes,
            });
        }
        let entry = NewEntry::new(EntryType(code), version, body);
        let placed = self.place_body(log, &entry).await?;
        Ok(head.record(&entry, placed, self.clock.now(), attempt_id))
    }

    /// After a run written past the index mark: index the deferred runs, to keep the tail short
    /// when no writer indexes (a stack switched to direct pushes). The run is applied whatever
    /// becomes of this, so a failure is only logged.
    async fn index_after_run(&self, log: LogId, mark: u64, head: &Head, units: &mut RequestUnits) {
        let mut u = RequestUnits::default();
        if let Err(e) = self
            .index_deferred(log, mark, head.next_seq() + 1, head.at, &mut u)
            .await
        {
            warn!(log = %log, error = %e, "indexing deferred runs failed");
        }
        *units += u;
    }

    /// The next run from `pending` (which starts at `last + 1`): consecutive ids only, within the
    /// per-entry limits, with the mutations it rejects and why. A mutation whose event alone
    /// would make an entry over the entry-size rule (`LogConfig::max_body_bytes`) is rejected
    /// (recorded as processed, with no effect), so the client moves past it; the run is split so
    /// that no entry exceeds the rule.
    pub(super) fn build_run(
        &self,
        group: &str,
        client: &str,
        last: u64,
        pending: &[&PushedMutation],
        sent: &BTreeMap<u64, Event>,
    ) -> Result<(Mutations, Vec<Rejected>), LogError> {
        let limit = self.cfg.max_body_bytes;
        let header = run_header_bytes(group, client);
        let budget = MAX_RUN_BODY_BYTES.min(limit.saturating_sub(header));
        let mut rejected = Vec::new();
        let mut run = Mutations {
            group: group.to_owned(),
            client: client.to_owned(),
            first: last + 1,
            last,
            applied: Vec::new(),
            sent: Vec::new(),
        };
        let mut bytes = 0usize;
        for m in pending {
            if m.id != run.last + 1 || run.last + 1 - run.first >= MAX_MUTATIONS_PER_ENTRY {
                break;
            }
            // A row or column change as sent, kept beside what applied (`Mutations::sent`):
            // positions only, so a few dozen bytes.
            let as_sent = sent
                .get(&m.id)
                .map(|e| (e.encode().2.len() + PER_MUTATION_OVERHEAD, e));
            let sent_cost = as_sent.map_or(0, |(cost, _)| cost);
            if as_sent.is_some() && m.id != run.first && bytes + sent_cost > budget {
                break;
            }
            match &m.event {
                Ok(event) => {
                    let events = || std::iter::once(event).chain(&m.then);
                    let size: usize = events().map(|e| e.encode().2.len()).sum();
                    let overhead = PER_MUTATION_OVERHEAD * (1 + m.then.len());
                    if let Some(reason) = oversize_reason(size, header, limit) {
                        rejected.push(Rejected { id: m.id, reason });
                    } else {
                        let cost = size + overhead + sent_cost;
                        if !run.applied.is_empty() && bytes + cost > budget {
                            break;
                        }
                        bytes += cost;
                        run.applied.extend(events().map(|e| Mutation {
                            id: m.id,
                            event: e.clone(),
                        }));
                    }
                }
                Err(reason) => {
                    bytes += sent_cost;
                    rejected.push(Rejected {
                        id: m.id,
                        reason: reason.clone(),
                    });
                }
            }
            if let Some((_, e)) = as_sent {
                run.sent.push(Mutation {
                    id: m.id,
                    event: e.clone(),
                });
            }
            run.last = m.id;
        }
        run.validate()
            .map_err(|e| LogError::InvalidEntry(e.to_string()))?;
        Ok((run, rejected))
    }

    /// The client's newest range (its last applied mutation), or `None` for a client this log
    /// has not heard from: its runs past the index mark, else its newest range item. A strong
    /// head read, the mark, and a strong Query of one item (plus the entries past the mark).
    pub async fn last_mutation(
        &self,
        log: LogId,
        client: &str,
    ) -> Result<Option<ClientRange>, LogError> {
        let mut units = RequestUnits::default();
        let tail = self.tail(log, &mut units).await?;
        let item = self.newest_item(log, client, &mut units).await?;
        Ok(tail.newest_with(client, item))
    }

    /// The client's newest range item (one strong Query), which misses its runs past the index
    /// mark: read the mark first, and take the newer of the two (`Tail::newest_with`).
    async fn newest_item(
        &self,
        log: LogId,
        client: &str,
        units: &mut RequestUnits,
    ) -> Result<Option<ClientRange>, LogError> {
        Ok(self
            .store
            .client_ranges(log, client, None, 1, units)
            .await?
            .into_iter()
            .next())
    }

    /// The group of a client this log has heard from: its newest range item (one strong Query),
    /// or, for a client whose every run is past the index mark, the runs there. A client never
    /// changes group.
    pub async fn client_group(&self, log: LogId, client: &str) -> Result<Option<String>, LogError> {
        let mut units = RequestUnits::default();
        if let Some(r) = self.newest_item(log, client, &mut units).await? {
            return Ok(Some(r.group));
        }
        let tail = self.tail(log, &mut units).await?;
        Ok(tail.newest(client).map(|r| r.group))
    }

    /// The run that holds mutation `id` of a client (one run, as a direct push records it), or
    /// `None` if it has not been applied (nor skipped over by a replay that started the client
    /// later).
    pub async fn find_mutation(
        &self,
        log: LogId,
        client: &str,
        id: u64,
    ) -> Result<Option<ClientRange>, LogError> {
        let mut units = RequestUnits::default();
        let tail = self.tail(log, &mut units).await?;
        if let Some(r) = tail
            .runs
            .iter()
            .find(|r| r.client == client && (r.first..=r.last).contains(&id))
        {
            return Ok(Some(r.as_range()));
        }
        Ok(self
            .store
            .client_ranges(log, client, Some(id), 1, &mut units)
            .await?
            .into_iter()
            .find(|r| r.contains(id))
            .map(|r| run_of(&r, id)))
    }

    /// The clients of a group that have pushed to this log: its group item, and those whose
    /// first run is past the index mark.
    pub async fn group_clients(&self, log: LogId, group: &str) -> Result<Vec<String>, LogError> {
        let mut units = RequestUnits::default();
        let tail = self.tail(log, &mut units).await?;
        self.group_members(log, group, &tail, &mut units).await
    }

    /// The group's item's clients, and those whose first run is past the index mark (read as
    /// `tail`), which the item may not name yet.
    async fn group_members(
        &self,
        log: LogId,
        group: &str,
        tail: &Tail,
        units: &mut RequestUnits,
    ) -> Result<Vec<String>, LogError> {
        let mut clients = self.store.group_clients(log, group, units).await?;
        for c in tail.group_clients(group) {
            if !clients.iter().any(|k| k == c) {
                clients.push(c.to_owned());
            }
        }
        Ok(clients)
    }

    /// Each client of the group with its last applied mutation id among runs recorded before
    /// sequence `before` (clients with none left out): what a view of the log up to `before`
    /// has applied from the group. One read of the runs past the index mark for all of them.
    pub async fn group_last_mutations_before(
        &self,
        log: LogId,
        group: &str,
        before: u64,
    ) -> Result<BTreeMap<String, u64>, LogError> {
        let mut units = RequestUnits::default();
        let tail = self.tail(log, &mut units).await?;
        let clients = self.group_members(log, group, &tail, &mut units).await?;
        let mut out = BTreeMap::new();
        for client in clients {
            let from_tail = tail
                .runs
                .iter()
                .filter(|r| r.client == client && r.seq < before)
                .map(|r| r.last)
                .max();
            let last = match from_tail {
                Some(last) => last,
                None => self.last_in_items_before(log, &client, before).await?,
            };
            if last > 0 {
                out.insert(client, last);
            }
        }
        Ok(out)
    }

    /// The client's last applied mutation id among runs recorded before sequence `before`
    /// (0 if none): what a view of the log up to `before` has applied from this client.
    pub async fn last_mutation_before(
        &self,
        log: LogId,
        client: &str,
        before: u64,
    ) -> Result<u64, LogError> {
        let mut units = RequestUnits::default();
        let tail = self.tail(log, &mut units).await?;
        if let Some(last) = tail
            .runs
            .iter()
            .filter(|r| r.client == client && r.seq < before)
            .map(|r| r.last)
            .max()
        {
            return Ok(last);
        }
        self.last_in_items_before(log, client, before).await
    }

    /// [`last_mutation_before`](Self::last_mutation_before) from the range items alone (right
    /// when no run of the client past the index mark is before `before`).
    async fn last_in_items_before(
        &self,
        log: LogId,
        client: &str,
        before: u64,
    ) -> Result<u64, LogError> {
        let mut units = RequestUnits::default();
        let mut at_most = None;
        loop {
            let ranges = self
                .store
                .client_ranges(log, client, at_most, 4, &mut units)
                .await?;
            let Some(oldest) = ranges.last() else {
                return Ok(0);
            };
            if let Some(last) = ranges.iter().find_map(|r| r.last_before(before)) {
                return Ok(last);
            }
            if oldest.key <= 1 {
                return Ok(0);
            }
            let next = oldest.key - 1;
            if at_most.is_some_and(|a| next >= a) {
                return Err(corrupt(
                    log,
                    format!("client {client}'s ranges do not go back in order"),
                ));
            }
            at_most = Some(next);
        }
    }
}

/// The one run of `range` that holds `id`, as its own range.
fn run_of(range: &ClientRange, id: u64) -> ClientRange {
    let Some(i) = range.runs.iter().rposition(|(first, _)| *first <= id) else {
        return range.clone();
    };
    let (first, seq) = range.runs[i];
    let last = range
        .runs
        .get(i + 1)
        .map_or(range.last, |(next, _)| next - 1);
    ClientRange {
        key: first,
        first,
        last,
        seq,
        rejected: range
            .rejected
            .iter()
            .copied()
            .filter(|r| (first..=last).contains(r))
            .collect(),
        runs: Vec::new(),
        ..range.clone()
    }
}

/// The client's mutations not yet applied (`None` when every one is), once the client is known
/// to be in `group` and the first of them to follow its last applied one. A client new to this
/// log may start past 1 only in a replay.
fn pending_of<'m>(
    mutations: &'m [PushedMutation],
    newest: Option<&ClientRange>,
    group: &str,
    client: &str,
    source: RunSource,
) -> Result<Option<Vec<&'m PushedMutation>>, LogError> {
    if let Some(n) = newest
        && n.group != group
    {
        return Err(LogError::ClientGroupMismatch {
            client: client.to_owned(),
            group: n.group.clone(),
            claimed: group.to_owned(),
        });
    }
    let last = newest.map_or(0, |n| n.last);
    let pending: Vec<&PushedMutation> = mutations.iter().filter(|m| m.id > last).collect();
    let Some(first) = pending.first() else {
        return Ok(None);
    };
    let new_replayed = newest.is_none() && source == RunSource::Replay;
    if first.id != last + 1 && !new_replayed {
        return Err(match newest {
            None => LogError::ClientUnknown {
                client: client.to_owned(),
                got: first.id,
            },
            Some(_) => LogError::MutationGap {
                client: client.to_owned(),
                expected: last + 1,
                got: first.id,
            },
        });
    }
    Ok(Some(pending))
}

/// The range item a run gives its client once written at `seq`; every client's first range is
/// keyed 1 (`ClientRange::key`).
pub(super) fn range_for(run: &Mutations, first: bool, seq: u64) -> ClientRange {
    ClientRange {
        group: run.group.clone(),
        client: run.client.clone(),
        key: if first { 1 } else { run.first },
        first: run.first,
        last: run.last,
        seq,
        rejected: run.rejected(),
        runs: Vec::new(),
    }
}
