//! Rebasing pushed mutations (`docs/sync.md`, "Edits made against an older view"): a mutation
//! whose arguments carry `baseSeq` was made against the sheet as of that sequence plus its
//! client's own unconfirmed mutations. Before a run is built, the entries committed since the
//! push's oldest base are read once (positions only), and each such mutation is moved through
//! them with the sheet model's rules ([`crate::sheet::rebase`]):
//!
//! - another client's or a direct append's row and column changes are [`Step::Other`];
//! - the same client's earlier mutations are [`Step::Own`]: the client's view held them as it
//!   sent them (recorded in the run as [`Mutations::sent`](crate::sheet::mutations::Mutations)
//!   when rebasing changed them) and the log holds them as applied;
//! - the runs written before this one in the same batch entry, then the client's own earlier
//!   mutations of this call, follow in the order they apply.
//!
//! A lost race reads only what arrived since and rebases again from the mutations as sent.

use std::collections::BTreeMap;

use crate::domain::{LogId, RequestUnits};
use crate::error::LogError;
use crate::log::EventLog;
use crate::log::pushed_mutation::PushedMutation;
use crate::ports::{LogEntries, PayloadStore};
use crate::sheet::entry::EntryBody;
use crate::sheet::event::{Event, InsertRows};
use crate::sheet::mutations::MAX_MUTATIONS_PER_ENTRY;
use crate::sheet::rebase::{Outcome, Step, rebase};

/// Entries read per page while catching up with the head.
const PAGE: u64 = 1000;

/// The most entries a push reads to rebase its mutations: the pull's own limit for reading since
/// a cookie (past it a client is reset, so a view older than that is not one a client edits).
pub const MAX_REBASE_ENTRIES: u64 = 5_000;

/// Why an edit made against `base` is not rebased onto a log at `head`: the view is further back
/// than [`MAX_REBASE_ENTRIES`] (or no longer retained).
pub(in crate::log) fn too_old(base: u64, head: u64) -> String {
    format!(
        "made against a view of the sheet more than {MAX_REBASE_ENTRIES} entries old \
         (baseSeq {base}, the log is at {head}); pull and edit again"
    )
}

/// The positions an event moves, without the values an insert carries; `None` for cell edits
/// and the layout's entries, which move nothing.
pub(in crate::log) fn positions(event: &Event) -> Option<Event> {
    match event {
        e if !e.moves_cells() => None,
        Event::InsertRows(e) => Some(Event::InsertRows(InsertRows {
            values: Vec::new(),
            ..e.clone()
        })),
        other => Some(other.clone()),
    }
}

/// One mutation or event committed after the push's oldest base that moved rows or columns.
#[derive(Debug)]
struct Past {
    seq: u64,
    /// The client and mutation id, when it was a client's mutation.
    from: Option<(String, u64)>,
    /// As its author saw it (for a mutation: as sent).
    seen: Vec<Event>,
    /// As the log applied it (empty: rejected).
    applied: Vec<Event>,
}

/// A mutation after rebasing: its event moved (or why it cannot apply), and the form it was
/// sent in when rebasing changed a row or column change or rejected it.
#[derive(Debug, Clone)]
pub(in crate::log) struct Rebased {
    pub mutation: PushedMutation,
    pub sent: Option<Event>,
}

/// Whether the entries up to the head were all read.
pub(in crate::log) enum Caught {
    Yes,
    /// The head read is ahead of what an entries query shows yet, or a base is past it: read the
    /// head again, strongly.
    NotVisible,
}

/// The state of rebasing one push (or a batch of pushes) across attempts.
#[derive(Debug)]
pub(in crate::log) struct PushRebase {
    /// The newest base of the mutations.
    newest: u64,
    /// Entries from the oldest base up to this were read (or are too old to read).
    read_to: u64,
    /// Bases below this are too old to rebase (further back than [`MAX_REBASE_ENTRIES`], or
    /// no longer retained).
    floor: u64,
    /// The log's next sequence number at the last catch-up.
    head: u64,
    /// In sequence order.
    past: Vec<Past>,
    /// The mutations' bases, ascending, each once: what is read starts at the oldest one still
    /// in the window, and nothing is read when every one is out of it.
    bases: Vec<u64>,
}

impl PushRebase {
    /// `None` when no mutation carries a base: nothing to rebase, the push applies as sent.
    pub(in crate::log) fn new<'a>(
        mutations: impl IntoIterator<Item = &'a PushedMutation>,
    ) -> Option<PushRebase> {
        let mut bases: Vec<u64> = mutations.into_iter().filter_map(|m| m.base).collect();
        bases.sort_unstable();
        bases.dedup();
        let from = *bases.first()?;
        Some(PushRebase {
            newest: bases.last().copied().unwrap_or(from),
            read_to: from,
            floor: from,
            head: from,
            past: Vec::new(),
            bases,
        })
    }

    /// Reads what was committed in `read_to..next_seq`, positions only. With a strong head read
    /// (`strong`), a base past the head is the client's mistake and its mutation is rejected;
    /// with an eventual one it may be the read lagging.
    pub(in crate::log) async fn catch_up<S: LogEntries, P: PayloadStore>(
        &mut self,
        log: &EventLog<S, P>,
        id: LogId,
        next_seq: u64,
        strong: bool,
        units: &mut RequestUnits,
    ) -> Result<Caught, LogError> {
        if self.newest > next_seq && !strong {
            return Ok(Caught::NotVisible);
        }
        self.head = next_seq;
        // A view further back than a pull reads since a cookie is not one a client edits: its
        // mutations are rejected rather than reading an unbounded history.
        let lowest = next_seq.saturating_sub(MAX_REBASE_ENTRIES);
        if self.read_to < lowest {
            self.floor = self.floor.max(lowest);
            self.read_to = lowest;
            self.past.clear();
        }
        // Entries before the oldest base still to rebase are no step of any mutation: skip
        // them. When every base is out of the window, those mutations are rejected as too old
        // without reading anything (as `POST /entries` refuses such a base up front).
        let oldest_live = self.bases.iter().copied().find(|b| *b >= self.floor);
        self.read_to = self
            .read_to
            .max(oldest_live.unwrap_or(next_seq).min(next_seq));
        while self.read_to < next_seq {
            let want = (next_seq - self.read_to).min(PAGE) as usize;
            let page = match log.read_since(id, self.read_to, want).await {
                Ok(p) => p,
                Err(LogError::OutOfRange { .. }) => return Ok(Caught::NotVisible),
                Err(LogError::ReloadRequired { first_retained, .. }) => {
                    // The oldest bases are no longer retained: reject them, read the rest.
                    self.floor = self.floor.max(first_retained.min(next_seq));
                    if first_retained <= self.read_to {
                        return Err(LogError::ReloadRequired {
                            from: self.read_to,
                            first_retained,
                        });
                    }
                    self.read_to = first_retained.min(next_seq);
                    continue;
                }
                Err(e) => return Err(e),
            };
            *units += page.units;
            let before = self.read_to;
            for e in page.entries {
                if e.seq != self.read_to || e.seq >= next_seq {
                    break;
                }
                let body = EntryBody::decode(e.kind.0, e.version, &e.body).map_err(|err| {
                    LogError::CorruptLog {
                        log: id,
                        detail: format!("entry {} does not decode: {err}", e.seq),
                    }
                })?;
                self.record(e.seq, &body);
                self.read_to += 1;
            }
            if self.read_to == before {
                return Ok(Caught::NotVisible);
            }
        }
        Ok(Caught::Yes)
    }

    fn record(&mut self, seq: u64, body: &EntryBody) {
        match body {
            // An undo is the API's, appended directly: no client's view held it.
            EntryBody::Event(_) | EntryBody::Undo(_) | EntryBody::Authored(_) => {
                for p in body.events().filter_map(positions) {
                    self.past.push(Past {
                        seq,
                        from: None,
                        seen: vec![p.clone()],
                        applied: vec![p],
                    });
                }
            }
            EntryBody::Mutations(_) | EntryBody::Batch(_) => {
                for run in body.runs() {
                    for (id, events, sent) in run.by_id() {
                        let done: Vec<_> = events.into_iter().filter_map(positions).collect();
                        let seen = match sent {
                            Some(sent) => positions(sent).into_iter().collect(),
                            None => done.clone(),
                        };
                        if seen.is_empty() && done.is_empty() {
                            continue;
                        }
                        self.past.push(Past {
                            seq,
                            from: Some((run.client.clone(), id)),
                            seen,
                            applied: done,
                        });
                    }
                }
            }
            EntryBody::Snapshot | EntryBody::EndSegment => {}
        }
    }

    /// One client's mutations (ids ascending, the first one after its last applied), rebased.
    /// `before`: the row and column changes that apply before this client's run and after every
    /// committed entry (the earlier runs of the same batch entry).
    ///
    /// Only the first [`MAX_MUTATIONS_PER_ENTRY`] are rebased: a run holds no more, and the rest
    /// are rebased on the round that writes them (each mutation depends only on those before it,
    /// so what is returned is what rebasing all of them would give for these).
    ///
    /// Linear in the mutations where nothing moves: a mutation is walked through the history only
    /// when some step of its history moves rows or columns ([`rebase`] returns the edit as sent
    /// otherwise), the client's own cell edits are no step at all (they move nothing), and the
    /// committed history since a base is found by binary search.
    pub(in crate::log) fn apply(
        &self,
        client: &str,
        pending: &[&PushedMutation],
        before: &[Event],
    ) -> Vec<Rebased> {
        let pending = &pending[..pending.len().min(MAX_MUTATIONS_PER_ENTRY as usize)];
        let first_id = pending.first().map_or(0, |m| m.id);
        // `moving_from[i]`: whether a committed step at `past[i..]` may move something for
        // this client's mutations (cautious for the client's own ids at or past the first
        // pending one, which count as another's change: they never occur in a consistent log).
        let mut moving_from = vec![false; self.past.len() + 1];
        for (i, p) in self.past.iter().enumerate().rev() {
            let moves = match &p.from {
                Some((c, m)) if c == client && *m < first_id => p.seen != p.applied,
                Some((c, _)) if c == client => p.seen != p.applied || !p.applied.is_empty(),
                _ => !p.applied.is_empty(),
            };
            moving_from[i] = moving_from[i + 1] || moves;
        }
        let mut out: Vec<Rebased> = Vec::with_capacity(pending.len());
        // The client's earlier mutations of this call that change positions: (as sent, as
        // applied), positions only. Cell edits are left out: a step with nothing in it moves
        // nothing and changes no walk.
        let mut own: Vec<(Vec<Event>, Vec<Event>)> = Vec::new();
        let mut own_moving = false;
        for m in pending {
            let (rebased, sent) = match (&m.event, m.base) {
                (Ok(event), Some(base)) => {
                    let from = self.past.partition_point(|p| p.seq < base);
                    let moving = moving_from[from] || !before.is_empty() || own_moving;
                    self.one(client, m.id, event, base, before, &own, moving)
                }
                _ => (
                    m.event
                        .clone()
                        .map(|e| std::iter::once(e).chain(m.then.clone()).collect()),
                    None,
                ),
            };
            let seen: Vec<Event> = match &m.event {
                Ok(e) => positions(e).into_iter().collect(),
                Err(_) => Vec::new(),
            };
            let applied: Vec<Event> = match &rebased {
                Ok(events) => events.iter().filter_map(positions).collect(),
                Err(_) => Vec::new(),
            };
            if !seen.is_empty() || !applied.is_empty() {
                own_moving = own_moving || seen != applied;
                own.push((seen, applied));
            }
            out.push(finish(m, rebased, sent));
        }
        out
    }

    /// The rebase of one mutation: the bounds, then [`rebase`] through the committed history
    /// since `base`, the batch entry's earlier runs and the client's own earlier mutations of
    /// this call. `moving`: whether any of those steps may move something; when none does, the
    /// edit applies as sent without walking them (what [`rebase`] itself answers).
    #[allow(clippy::too_many_arguments)]
    fn one(
        &self,
        client: &str,
        id: u64,
        event: &Event,
        base: u64,
        before: &[Event],
        own: &[(Vec<Event>, Vec<Event>)],
        moving: bool,
    ) -> (Result<Vec<Event>, String>, Option<Event>) {
        if base > self.head {
            return (
                Err(format!(
                    "baseSeq {base} is past the log's end ({}): it is not a view of this log",
                    self.head
                )),
                None,
            );
        }
        if base < self.floor {
            return (Err(too_old(base, self.head)), positions(event));
        }
        if !moving {
            return (Ok(vec![event.clone()]), None);
        }
        let from = self.past.partition_point(|p| p.seq < base);
        let mut steps: Vec<Step<'_>> = Vec::new();
        for p in &self.past[from..] {
            match &p.from {
                Some((c, m)) if c == client && *m < id => steps.push(Step::Own {
                    seen: &p.seen,
                    applied: &p.applied,
                }),
                _ => steps.extend(p.applied.iter().map(Step::Other)),
            }
        }
        steps.extend(before.iter().map(Step::Other));
        steps.extend(
            own.iter()
                .map(|(seen, applied)| Step::Own { seen, applied }),
        );
        let structural = positions(event);
        match rebase(event, &steps) {
            Outcome::Apply(events) => {
                let sent = structural.filter(|_| events.as_slice() != std::slice::from_ref(event));
                (Ok(events), sent)
            }
            Outcome::Reject(reason) => (Err(reason), structural),
        }
    }
}

/// A mutation as rebased: a split delete applies as several events under its one id.
fn finish(m: &PushedMutation, rebased: Result<Vec<Event>, String>, sent: Option<Event>) -> Rebased {
    let (event, then) = match rebased {
        Ok(mut events) if !events.is_empty() => {
            let first = events.remove(0);
            (Ok(first), events)
        }
        Ok(_) => (Err("nothing left to apply".to_owned()), Vec::new()),
        Err(why) => (Err(why), Vec::new()),
    };
    Rebased {
        mutation: PushedMutation {
            id: m.id,
            event,
            base: m.base,
            then,
        },
        sent,
    }
}

/// The sent forms of a run's mutations, by id, for [`EventLog::build_run`].
pub(in crate::log) fn sent_forms(rebased: &[Rebased]) -> BTreeMap<u64, Event> {
    rebased
        .iter()
        .filter_map(|r| r.sent.clone().map(|e| (r.mutation.id, e)))
        .collect()
}

#[cfg(test)]
#[path = "push_oracle.rs"]
mod oracle;
