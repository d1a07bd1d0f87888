//! Group commit (`docs/sync.md`, "Queued pushes"): the pushes of many clients of one log written
//! in as few `mutations` entries as the entry limits allow, by the one writer a sheet has.
//!
//! Each client's run is built exactly as a direct push builds it ([`EventLog::build_run`]: the
//! same skipping of applied ids, gap rule, rejected mutations and per-entry limits), then the runs
//! of up to [`MAX_RUNS_PER_ENTRY`] clients share one deferred batch entry (body version 5),
//! written with one conditional put on the log's next sequence: the entry records every client's
//! last mutation id, so the effects and the ids become visible together, and the conditional put
//! keeps every mutation applied at most once (a writer whose view of the clients is stale loses
//! the append). The runs' range items (and a new client's place in its group) are written by
//! window afterwards (`super::range_index`).
//!
//! A client whose mutations cannot be applied because of what they are (another group's client,
//! a gap, an unknown client past its first mutation) is refused on its own: the other clients'
//! runs go on. Store failures and running out of attempts fail the whole call; nothing partial is
//! lost, since a retry skips what was applied.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tracing::{debug, warn};

use super::append::{Head, after_lost_race};
use super::clients::{MAX_RUN_BODY_BYTES, range_for};
use super::range_index::{LoggedRun, index_due};
use super::rebase::push::{Caught, PushRebase, positions, sent_forms};
use super::{Appended, EventLog, SegmentHint, retry};
use crate::domain::clients::ClientRange;
use crate::domain::{EntryType, LogId, NewEntry, RequestUnits};
use crate::error::LogError;
use crate::log::PushedMutation;
use crate::ports::{
    ClientPutOutcome, ClientRuns, Consistency, LogEntries, MAX_RANGES_PER_TRANSACTION,
    PayloadStore, PutOutcome,
};
use crate::sheet::event::Event;
use crate::sheet::mutations::{MAX_RUNS_PER_ENTRY, MutationBatch, Mutations};

/// The most a batch body spends on its run count (a varint of at most [`MAX_RUNS_PER_ENTRY`]).
const BATCH_FRAME_BYTES: usize = 2;
/// The most a batch body spends framing one run: its version and its length, as varints.
const BATCH_RUN_FRAME_BYTES: usize = 3 + 5;

/// One client's mutations (ids ascending) in a batch of pushes.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientPush {
    pub group: String,
    pub client: String,
    pub mutations: Vec<PushedMutation>,
}

/// What became of one client of a batch.
#[derive(Debug)]
pub enum ClientResult {
    /// Every mutation given is applied (now or before). `last` is the client's last applied
    /// mutation id; `ranges` the runs this call wrote.
    Done { last: u64, ranges: Vec<ClientRange> },
    /// The client's mutations from the first one not applied on cannot be applied as sent
    /// ([`LogError::MutationGap`], [`LogError::ClientUnknown`],
    /// [`LogError::ClientGroupMismatch`], [`LogError::InvalidEntry`]). Runs written before the
    /// refusal are in `ranges`.
    Refused {
        error: LogError,
        ranges: Vec<ClientRange>,
    },
}

/// What [`EventLog::push_batch`] did.
#[derive(Debug)]
pub struct BatchOutcome {
    /// One result per client, in the order given.
    pub clients: Vec<ClientResult>,
    /// The entries written, in order (run the snapshot trigger after each).
    pub appended: Vec<Appended>,
    pub units: RequestUnits,
}

/// The most clients a [`KnownClients`] remembers for one log; past it, it starts afresh.
pub const MAX_KNOWN_CLIENTS: usize = 10_000;

/// What a sheet's one writer knows of the sheet's clients, as of the log's `next_seq`: each
/// remembered client's newest run, and every client with a run past the index mark (whose range
/// item may not exist yet, `deferred`). A batch that finds the log where the writer left it reads
/// no client again; one that finds it moved reads only the entries in between.
///
/// Built from the log itself (the runs past the index mark, then each client's range item), so
/// it is exact; still, a client is never refused on what was remembered from an earlier call:
/// the writer first builds it afresh. A remembered state that turned stale because another writer
/// appended in between makes the entry's conditional write fail, as any lost race.
#[derive(Debug, Default, Clone)]
pub struct KnownClients {
    /// The log's next sequence when the state below was current.
    next_seq: Option<u64>,
    /// The index mark as read (`Some(None)`: never set).
    mark: Option<Option<u64>>,
    /// The segment of the head `next_seq` was read at.
    at: Option<SegmentHint>,
    newest: HashMap<String, Option<ClientRange>>,
}

impl KnownClients {
    /// How many clients are remembered.
    pub fn len(&self) -> usize {
        self.newest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.newest.is_empty()
    }

    /// After this writer's own entry that records no client run (the snapshot trigger's),
    /// appended right after the commit this state was current at: it is current after it too,
    /// so the next batch need not read anything. `next_seq` is the log's next sequence after
    /// that entry; anything but exactly one entry more changes nothing here, and the next batch
    /// reads the entries in between.
    pub fn after_own_entry(&mut self, next_seq: u64) {
        if self.next_seq.is_some_and(|n| n + 1 == next_seq) {
            self.next_seq = Some(next_seq);
        }
    }

    /// Makes `client`'s remembered range `newest` without touching the head it is trusted at:
    /// a state no real commit leaves, for the tests of what guards against it.
    #[cfg(test)]
    pub(super) fn forge(&mut self, client: &str, newest: Option<ClientRange>) {
        self.newest.insert(client.to_owned(), newest);
    }

    /// What to index, when the log has passed the end of a window past the index mark: the
    /// mark, the log's next sequence and its segment, for [`EventLog::index_deferred`]. The
    /// writer runs it after the batch's messages are deleted and its poke sent, so that a
    /// window's items do not hold up the sheet's next batch.
    pub fn index_due(&self) -> Option<(u64, u64, SegmentHint)> {
        match (self.mark, self.next_seq, self.at) {
            (Some(Some(mark)), Some(next_seq), Some(at)) if index_due(mark, next_seq) => {
                Some((mark, next_seq, at))
            }
            _ => None,
        }
    }

    /// Records a mark that indexing moved to (a lower one changes nothing).
    pub fn indexed(&mut self, mark: u64) {
        if let Some(Some(m)) = self.mark.as_mut() {
            *m = (*m).max(mark);
        }
    }

    /// Adds the runs of entries the log gained since `next_seq`.
    fn learn(&mut self, runs: Vec<LoggedRun>) {
        for r in runs {
            let range = r.as_range();
            self.newest.insert(r.client, Some(range));
        }
    }
}

/// Whether an error is worth another round: a throttled or timed-out store call.
fn retryable(e: &LogError) -> bool {
    matches!(e, LogError::Store(s) if s.is_retryable())
}

/// A client's state while a batch is written.
#[derive(Debug, Default)]
struct Slot {
    /// The newest range as last read or written; `None` when it must be read again.
    newest: Option<Option<ClientRange>>,
    /// Whether `newest` came from [`KnownClients`] rather than a read or our own write.
    remembered: bool,
    ranges: Vec<ClientRange>,
    done: Option<Result<u64, LogError>>,
}

/// One client's run in a round's entry.
struct PlannedRun {
    /// The client's place in the batch (its [`Slot`]).
    slot: usize,
    /// Whether it is the client's first run ever.
    first: bool,
    run: Mutations,
}

/// What a round will write.
enum Plan {
    /// A client was refused on what an earlier call left: read everything afresh first.
    Recheck,
    /// Every client is decided: the batch is done.
    Decided,
    /// The runs of the round's entry.
    Runs(Vec<PlannedRun>),
}

/// What one call of [`EventLog::push_batch`] carries from round to round.
struct Rounds {
    units: RequestUnits,
    hint: Option<SegmentHint>,
    consistency: Consistency,
    backoff: retry::Backoff,
    slots: Vec<Slot>,
    /// Whether `known` came from an earlier call rather than being built in this one.
    inherited: bool,
    appended: Vec<Appended>,
    /// Rounds lost in a row (to a race, a throttle or an unseen entry).
    failures: u32,
}

impl Rounds {
    /// Each undecided client's newest range, as `known` now has it.
    fn refresh_slots(&mut self, pushes: &[ClientPush], known: &KnownClients) {
        for (push, slot) in pushes.iter().zip(self.slots.iter_mut()) {
            if slot.done.is_none() {
                slot.newest = known.newest.get(&push.client).cloned();
                slot.remembered = slot.remembered || self.inherited;
            }
        }
    }

    /// Counts a lost round; out of attempts, the call fails with [`LogError::Contention`].
    fn lost_round(&mut self, log: LogId, max_attempts: u32) -> Result<(), LogError> {
        self.failures += 1;
        if self.failures >= max_attempts {
            return Err(LogError::Contention {
                log,
                attempts: max_attempts,
            });
        }
        Ok(())
    }

    /// A round's entry is written: its clients' ranges are known, and the next round reads
    /// strongly (our own entry may not show in an eventually consistent read yet).
    fn settle_written(
        &mut self,
        known: &mut KnownClients,
        head: &Head,
        runs: &[PlannedRun],
        written: Vec<ClientRange>,
    ) {
        let next_seq = head.next_seq();
        for (planned, range) in runs.iter().zip(written) {
            known
                .newest
                .insert(range.client.clone(), Some(range.clone()));
            self.slots[planned.slot].newest = Some(Some(range.clone()));
            self.slots[planned.slot].ranges.push(range);
        }
        known.next_seq = Some(next_seq + 1);
        self.appended
            .push(head.appended(self.failures + 1, RequestUnits::default()));
        self.failures = 0;
        self.hint = Some(head.at);
        self.consistency = Consistency::Strong;
    }

    /// A round's entry is not written; the next round reads strongly, after a pause.
    async fn settle_lost(
        &mut self,
        known: &mut KnownClients,
        head: &Head,
        outcome: ClientPutOutcome,
    ) {
        match outcome {
            ClientPutOutcome::Written => {}
            // Another writer gave one of these clients its first run first (a direct push, or
            // our own earlier try whose answer was lost): read afresh.
            ClientPutOutcome::RangeTaken => {
                *known = KnownClients::default();
            }
            // The log moved: the next round reads the entries in between.
            ClientPutOutcome::Taken(winner) => {
                self.hint = Some(after_lost_race(head.at, winner.as_ref()));
                self.consistency = Consistency::Strong;
                self.backoff.sleep().await;
            }
            ClientPutOutcome::Interrupted => {
                self.hint = Some(head.at);
                self.consistency = Consistency::Strong;
                self.backoff.sleep().await;
            }
        }
    }

    /// The batch's outcome: each client's result, the entries written, the units spent (also
    /// on the last entry).
    fn finish(mut self) -> BatchOutcome {
        if let Some(last) = self.appended.last_mut() {
            last.units = self.units;
        }
        let clients = self
            .slots
            .into_iter()
            .map(|s| match s.done {
                Some(Ok(last)) => ClientResult::Done {
                    last,
                    ranges: s.ranges,
                },
                Some(Err(error)) => ClientResult::Refused {
                    error,
                    ranges: s.ranges,
                },
                // Every slot is decided before the loop ends.
                None => ClientResult::Refused {
                    error: LogError::InvalidEntry("client left undecided".into()),
                    ranges: s.ranges,
                },
            })
            .collect();
        BatchOutcome {
            clients,
            appended: self.appended,
            units: self.units,
        }
    }
}

impl<S: LogEntries + ClientRuns, P: PayloadStore> EventLog<S, P> {
    /// Applies the pushes of many clients (each client at most once) in as few `mutations`
    /// entries as the limits allow: per client exactly what [`push_run`](Self::push_run) would
    /// apply, run after run, until each client is done or refused.
    pub async fn push_batch(
        &self,
        log: LogId,
        pushes: &[ClientPush],
        hint: Option<SegmentHint>,
    ) -> Result<BatchOutcome, LogError> {
        self.push_batch_known(log, pushes, hint, &mut KnownClients::default())
            .await
    }

    /// As [`push_batch`](Self::push_batch), for the sheet's one writer: `known` is what it knew
    /// of the clients after its last group commit; the clients it holds are not read again when
    /// the log's head is where that commit left it. On success `known` describes the log after
    /// this call; after a throttled call or running out of attempts it describes the log as far
    /// as the call got; on any other error it is emptied.
    pub async fn push_batch_known(
        &self,
        log: LogId,
        pushes: &[ClientPush],
        hint: Option<SegmentHint>,
        known: &mut KnownClients,
    ) -> Result<BatchOutcome, LogError> {
        let mut cache = std::mem::take(known);
        let out = self.push_batch_inner(log, pushes, hint, &mut cache).await;
        // What is known stays exact through a throttled call or a lost race: keep it, so the
        // retry need not read everything afresh. After anything else, start afresh.
        let keep = match &out {
            Ok(_) => true,
            Err(e) => retryable(e) || matches!(e, LogError::Contention { .. }),
        };
        if keep && cache.newest.len() <= MAX_KNOWN_CLIENTS {
            *known = cache;
        }
        out
    }

    /// The rounds of a batch: bring what is known of the clients to the head (and the push
    /// rebase with it), [`plan`](Self::plan_round) the runs of one entry, [`write`](Self::write_round)
    /// it with one conditional put, then settle what the put found, until every client is decided.
    async fn push_batch_inner(
        &self,
        log: LogId,
        pushes: &[ClientPush],
        hint: Option<SegmentHint>,
        known: &mut KnownClients,
    ) -> Result<BatchOutcome, LogError> {
        let mut seen = BTreeSet::new();
        if let Some(dup) = pushes.iter().find(|p| !seen.insert(p.client.as_str())) {
            return Err(LogError::InvalidEntry(format!(
                "client {} appears twice in one batch",
                dup.client
            )));
        }
        let mut st = Rounds {
            units: RequestUnits::default(),
            hint,
            consistency: Consistency::Eventual,
            backoff: retry::Backoff::new(&self.cfg),
            slots: pushes.iter().map(|_| Slot::default()).collect(),
            // Whether `known` came from an earlier call rather than being built in this one.
            inherited: known.next_seq.is_some(),
            appended: Vec::new(),
            failures: 0,
        };
        let mut at: SegmentHint;
        let mut rebasing = PushRebase::new(pushes.iter().flat_map(|p| p.mutations.iter()));
        loop {
            let Some(head) = self.read_head(log, known, pushes, &mut st).await? else {
                continue;
            };
            let next_seq = head.next_seq();
            at = head.at;
            st.refresh_slots(pushes, known);
            if let Some(r) = rebasing.as_mut() {
                let strong = st.consistency == Consistency::Strong;
                if let Caught::NotVisible = r
                    .catch_up(self, log, next_seq, strong, &mut st.units)
                    .await?
                {
                    st.consistency = Consistency::Strong;
                    st.hint = Some(head.at);
                    st.backoff.sleep().await;
                    st.lost_round(log, self.cfg.max_attempts)?;
                    continue;
                }
            }
            let runs = match self.plan_round(pushes, &mut st.slots, rebasing.as_ref()) {
                Plan::Recheck => {
                    *known = KnownClients::default();
                    for slot in &mut st.slots {
                        slot.remembered = false;
                    }
                    continue;
                }
                Plan::Decided => break,
                Plan::Runs(runs) => runs,
            };
            // The index mark exists before the first entry that defers range items.
            if !self
                .ensure_index_mark(log, known, next_seq, &mut st.units)
                .await?
            {
                // Someone else set it, and may have deferred runs since: read afresh.
                *known = KnownClients::default();
                continue;
            }
            let (written, outcome) = self.write_round(log, &head, &runs, &mut st.units).await?;
            if let ClientPutOutcome::Written = outcome {
                debug!(log = %log, seq = next_seq, clients = written.len(), "batch applied");
                st.settle_written(known, &head, &runs, written);
                // A push that takes many entries gives the other sheets of the writer's batch
                // (polled on the same task) a turn between them: one sheet's large push never
                // holds up another's commit.
                tokio::task::yield_now().await;
                continue;
            }
            st.settle_lost(known, &head, outcome).await;
            st.lost_round(log, self.cfg.max_attempts)?;
        }
        // Indexing the windows this call completed is the caller's, off the sheet's critical
        // path ([`KnownClients::index_due`]).
        known.at = Some(at);
        Ok(st.finish())
    }

    /// A round's head, with what is known brought to it: `None` (after a pause) when a throttled
    /// or timed-out read costs this round, not the batch; nothing is written before the entry's
    /// put, and what is known stays exact.
    async fn read_head(
        &self,
        log: LogId,
        known: &mut KnownClients,
        pushes: &[ClientPush],
        st: &mut Rounds,
    ) -> Result<Option<Head>, LogError> {
        let read = self
            .bring_known(
                log,
                st.hint,
                st.consistency,
                known,
                pushes,
                &mut st.slots,
                &mut st.units,
            )
            .await;
        match read {
            Ok((head, rebuilt)) => {
                st.inherited = st.inherited && !rebuilt;
                Ok(Some(head))
            }
            Err(e) if retryable(&e) && st.failures + 1 < self.cfg.max_attempts => {
                debug!(log = %log, error = %e, "reading the clients failed; trying again");
                st.failures += 1;
                st.consistency = Consistency::Strong;
                st.backoff.sleep().await;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Plans one round: the runs of one entry, within its limits, in push order; a client that
    /// does not fit waits for the next round. Each run's mutations are rebased through the runs
    /// before it in the entry. A client with nothing left to apply, or refused, is decided here.
    fn plan_round(
        &self,
        pushes: &[ClientPush],
        slots: &mut [Slot],
        rebasing: Option<&PushRebase>,
    ) -> Plan {
        let mut runs: Vec<PlannedRun> = Vec::new();
        let mut before: Vec<Event> = Vec::new();
        let mut bytes = BATCH_FRAME_BYTES;
        let budget = MAX_RUN_BODY_BYTES.min(self.cfg.max_body_bytes);
        let mut recheck = false;
        for (i, (push, slot)) in pushes.iter().zip(slots.iter_mut()).enumerate() {
            if slot.done.is_some() {
                continue;
            }
            let newest = slot.newest.as_ref().and_then(Option::as_ref);
            let run = match self.next_run(push, newest, rebasing, &before) {
                // Never refuse a client on what an earlier call left: build it afresh first.
                Err(_) if slot.remembered => {
                    recheck = true;
                    continue;
                }
                Ok(Some(run)) => run,
                Ok(None) => {
                    slot.done = Some(match newest {
                        Some(n) => Ok(n.last),
                        None => Err(LogError::InvalidEntry(format!(
                            "client {} pushed no mutations",
                            push.client
                        ))),
                    });
                    continue;
                }
                Err(e) => {
                    slot.done = Some(Err(e));
                    continue;
                }
            };
            // Each run alone is within the entry-size rule (`build_run`); together they must be
            // too, framing included, or `place_body` would refuse the whole entry.
            let size = run.encode().2.len() + BATCH_RUN_FRAME_BYTES;
            if !runs.is_empty()
                && (bytes + size > budget
                    || runs.len() >= MAX_RUNS_PER_ENTRY.min(MAX_RANGES_PER_TRANSACTION))
            {
                continue;
            }
            bytes += size;
            before.extend(run.applied.iter().filter_map(|m| positions(&m.event)));
            runs.push(PlannedRun {
                slot: i,
                first: newest.is_none(),
                run,
            });
        }
        if recheck {
            Plan::Recheck
        } else if runs.is_empty() {
            Plan::Decided
        } else {
            Plan::Runs(runs)
        }
    }

    /// Makes sure the index mark exists before the first entry that defers range items: `false`
    /// when someone else set it meanwhile.
    async fn ensure_index_mark(
        &self,
        log: LogId,
        known: &mut KnownClients,
        next_seq: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, LogError> {
        if known.mark != Some(None) {
            return Ok(true);
        }
        if self
            .store
            .start_index_mark(log, next_seq - 1, units)
            .await?
        {
            known.mark = Some(Some(next_seq - 1));
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Writes one round's runs as one deferred batch entry at the head, with one conditional put:
    /// the range each run gives its client (written later, by window), and what the
    /// put found. A throttled or timed-out put is [`ClientPutOutcome::Interrupted`]: the next round
    /// reads the head and finds the entry if it landed.
    async fn write_round(
        &self,
        log: LogId,
        head: &Head,
        runs: &[PlannedRun],
        units: &mut RequestUnits,
    ) -> Result<(Vec<ClientRange>, ClientPutOutcome), LogError> {
        let next_seq = head.next_seq();
        let batch = MutationBatch {
            runs: runs.iter().map(|p| p.run.clone()).collect(),
        };
        let (code, version, body) = batch.encode_deferred();
        let entry = NewEntry::new(EntryType(code), version, body);
        let placed = self.place_body(log, &entry).await?;
        let record = head.record(&entry, placed, self.clock.now(), rand::random());
        let written: Vec<ClientRange> = runs
            .iter()
            .map(|p| range_for(&p.run, p.first, next_seq))
            .collect();
        let outcome = match self.store.put_entry(log, &record, units).await {
            Ok(PutOutcome::Written) => ClientPutOutcome::Written,
            Ok(PutOutcome::Taken(w)) => ClientPutOutcome::Taken(w),
            Err(e) if e.is_retryable() => ClientPutOutcome::Interrupted,
            Err(e) => return Err(e.into()),
        };
        Ok((written, outcome))
    }

    /// Indexes what `known` says is due ([`KnownClients::index_due`]) and records the mark it
    /// moved to: for a writer that keeps `known` to itself between batches (one with several
    /// pollers tracks the marks it set on its own).
    pub async fn index_known(&self, log: LogId, known: &mut KnownClients) -> Result<(), LogError> {
        if let Some((mark, next_seq, at)) = known.index_due() {
            let mut units = RequestUnits::default();
            let moved = self
                .index_deferred(log, mark, next_seq, at, &mut units)
                .await?;
            known.indexed(moved);
        }
        Ok(())
    }

    /// Brings `known` to the log's head and every unfinished client of the batch into it: the
    /// entries since `known` was current, or the runs past the index mark afresh, then the range
    /// items of clients still unknown (which have no run past the mark), read in parallel. The
    /// head, and whether `known` was built afresh.
    #[allow(clippy::too_many_arguments)]
    async fn bring_known(
        &self,
        log: LogId,
        hint: Option<SegmentHint>,
        consistency: Consistency,
        known: &mut KnownClients,
        pushes: &[ClientPush],
        slots: &mut [Slot],
        units: &mut RequestUnits,
    ) -> Result<(Head, bool), LogError> {
        let head = self.head(log, hint, consistency, units).await?;
        let next_seq = head.next_seq();
        match known.next_seq {
            Some(n) if n == next_seq => {}
            Some(n) if n < next_seq => {
                match self.runs_between(log, n, next_seq, head.at, units).await {
                    Ok(runs) => {
                        known.learn(runs);
                        known.next_seq = Some(next_seq);
                    }
                    Err(e) if retryable(&e) => return Err(e),
                    Err(e) => {
                        debug!(log = %log, error = %e, "catching up failed; reading afresh");
                        *known = KnownClients::default();
                    }
                }
            }
            _ => *known = KnownClients::default(),
        }
        let mut rebuilt = false;
        if known.next_seq.is_none() {
            let tail = self.tail_at(log, &head, units).await?;
            known.mark = Some(tail.mark);
            known.learn(tail.runs);
            known.next_seq = Some(next_seq);
            rebuilt = true;
        }
        let stale: Vec<usize> = pushes
            .iter()
            .enumerate()
            .filter(|(i, p)| slots[*i].done.is_none() && !known.newest.contains_key(&p.client))
            .map(|(i, _)| i)
            .collect();
        let reads = futures::future::join_all(stale.iter().map(|&i| async move {
            let mut u = RequestUnits::default();
            let r = self
                .store
                .client_ranges(log, &pushes[i].client, None, 1, &mut u)
                .await;
            (r, u)
        }))
        .await;
        // Current from here on, even if the round fails later: indexing needs the segment.
        known.at = Some(head.at);
        for (&i, (read, u)) in stale.iter().zip(reads) {
            *units += u;
            let newest = read?.into_iter().next();
            known.newest.insert(pushes[i].client.clone(), newest);
            slots[i].remembered = false;
        }
        Ok((head, rebuilt))
    }

    /// The client's next run after `newest`, `None` when every mutation given is applied, or
    /// why its mutations cannot be applied: the rules of [`push_run`](Self::push_run).
    fn next_run(
        &self,
        push: &ClientPush,
        newest: Option<&ClientRange>,
        rebasing: Option<&PushRebase>,
        before: &[Event],
    ) -> Result<Option<Mutations>, LogError> {
        if let Some(n) = newest
            && n.group != push.group
        {
            return Err(LogError::ClientGroupMismatch {
                client: push.client.clone(),
                group: n.group.clone(),
                claimed: push.group.clone(),
            });
        }
        let last = newest.map_or(0, |n| n.last);
        let pending: Vec<&PushedMutation> = push.mutations.iter().filter(|m| m.id > last).collect();
        let Some(first) = pending.first() else {
            return Ok(None);
        };
        if first.id != last + 1 {
            return Err(match newest {
                None => LogError::ClientUnknown {
                    client: push.client.clone(),
                    got: first.id,
                },
                Some(_) => LogError::MutationGap {
                    client: push.client.clone(),
                    expected: last + 1,
                    got: first.id,
                },
            });
        }
        let (run, rejected) = match rebasing {
            None => self.build_run(&push.group, &push.client, last, &pending, &BTreeMap::new())?,
            Some(r) => {
                let rebased = r.apply(&push.client, &pending, before);
                let moved: Vec<&PushedMutation> = rebased.iter().map(|r| &r.mutation).collect();
                self.build_run(
                    &push.group,
                    &push.client,
                    last,
                    &moved,
                    &sent_forms(&rebased),
                )?
            }
        };
        // A queued push has no answer to carry the reasons: the client sees the rejected
        // mutations as applied with no effect, as a direct push's caller does; the log says why.
        for r in &rejected {
            warn!(group = %push.group, client = %push.client, id = r.id, reason = %r.reason, "mutation rejected");
        }
        Ok(Some(run))
    }
}
