//! Appending an edit made against an older view (`baseSeq`): the entries committed since the
//! view's base are read, and the edit is moved through them with the sheet model's rules
//! ([`crate::sheet::rebase`], `docs/sync.md` "Edits made against an older view") before it is
//! written. A lost race reads only the entries that arrived since, and rebases again from the
//! edit as sent.

use super::push::{MAX_REBASE_ENTRIES, positions, too_old};
use crate::domain::{EntryType, LogId, NewEntry, RequestUnits};
use crate::error::LogError;
use crate::log::{AppendOnce, AppendOptions, EventLog, IdempotencyKey};
use crate::ports::{DedupeKeys, LogEntries, PayloadStore};
use crate::sheet::entry::EntryBody;
use crate::sheet::event::Event;
use crate::sheet::rebase::{Outcome, Step, rebase};

/// Entries read per page while catching up with the head.
const PAGE: u64 = 1000;

/// What [`EventLog::append_rebased`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct RebasedAppend {
    pub outcome: AppendOnce,
    /// The event written, when rebasing changed it (`None`: written as sent, or a duplicate).
    pub applied_as: Option<Event>,
}

/// The state of one rebasing append across its attempts.
pub(in crate::log) struct Rebasing {
    sent: Event,
    /// The client group an `authored` entry was appended for (written back around the event).
    group: Option<String>,
    base: u64,
    /// Structural events committed in `base..read_to`, in log order. Cell edits move nothing and
    /// are not kept.
    moves: Vec<Event>,
    read_to: u64,
    /// The event the last attempt would write.
    pub(in crate::log) current: Event,
}

/// Whether the entries up to the head were all read.
pub(in crate::log) enum CaughtUp {
    Yes,
    /// The head read is ahead of what an entries query shows yet (or behind the base): read again.
    NotVisible,
}

impl Rebasing {
    pub(in crate::log) fn new(entry: &NewEntry, base: u64) -> Result<Rebasing, LogError> {
        let bad = |e: String| LogError::InvalidEntry(format!("baseSeq needs a sheet event: {e}"));
        let (sent, group) = match EntryBody::decode(entry.kind.0, entry.version, &entry.body) {
            Ok(EntryBody::Event(e)) => (e, None),
            Ok(EntryBody::Authored(a)) => (a.event, Some(a.group)),
            Ok(_) => return Err(bad("not an event".into())),
            Err(e) => return Err(bad(e.to_string())),
        };
        Ok(Rebasing {
            current: sent.clone(),
            sent,
            group,
            base,
            moves: Vec::new(),
            read_to: base,
        })
    }

    pub(in crate::log) fn base(&self) -> u64 {
        self.base
    }

    pub(in crate::log) fn changed(&self) -> Option<&Event> {
        (self.current != self.sent).then_some(&self.current)
    }

    /// Reads what was committed in `read_to..next_seq` and rebases the edit through everything
    /// since its base. Errors when the base is no longer retained (the caller must reload) or
    /// when nothing of the edit is left to apply.
    pub(in crate::log) async fn catch_up<S: LogEntries, P: PayloadStore>(
        &mut self,
        log: &EventLog<S, P>,
        id: LogId,
        next_seq: u64,
        units: &mut RequestUnits,
    ) -> Result<CaughtUp, LogError> {
        if self.base > next_seq {
            return Ok(CaughtUp::NotVisible);
        }
        // The push path's bound: a view further back than a pull reads since its cookie is not
        // one a client edits, and the history read stays bounded.
        if next_seq - self.base > MAX_REBASE_ENTRIES {
            return Err(LogError::EditRejected(too_old(self.base, next_seq)));
        }
        while self.read_to < next_seq {
            let want = (next_seq - self.read_to).min(PAGE) as usize;
            let page = match log.read_since(id, self.read_to, want).await {
                Ok(p) => p,
                Err(LogError::OutOfRange { .. }) => return Ok(CaughtUp::NotVisible),
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
                // Only positions move references: keep structural events without the values an
                // insert carries, so what is held is bounded by their number, not their size.
                self.moves.extend(body.events().filter_map(positions));
                self.read_to += 1;
            }
            if self.read_to == before {
                return Ok(CaughtUp::NotVisible);
            }
        }
        let steps: Vec<Step<'_>> = self.moves.iter().map(Step::Other).collect();
        self.current = match rebase(&self.sent, &steps) {
            Outcome::Apply(mut events) if events.len() == 1 => events.remove(0),
            Outcome::Apply(_) => {
                return Err(LogError::EditRejected(
                    "rows or columns were inserted inside the range this delete removes since \
                     baseSeq; read the sheet again and delete the ranges you mean"
                        .into(),
                ));
            }
            Outcome::Reject(reason) => return Err(LogError::EditRejected(reason)),
        };
        Ok(CaughtUp::Yes)
    }

    /// The entry for the current event.
    pub(in crate::log) fn entry(&self) -> NewEntry {
        let (code, version, body) = match &self.group {
            Some(group) => crate::sheet::authored::Authored {
                group: group.clone(),
                event: self.current.clone(),
            }
            .encode(),
            None => self.current.encode(),
        };
        NewEntry::new(EntryType(code), version, body)
    }
}

impl<S: LogEntries + DedupeKeys, P: PayloadStore> EventLog<S, P> {
    /// Appends an edit made against the sheet as of `base_seq`, moved through every entry
    /// committed since so it applies to the rows and columns its author meant
    /// ([`crate::sheet::rebase`]). [`LogError::EditRejected`] when nothing of it is left (its
    /// cells' rows were deleted, an import replaced the sheet), [`LogError::ReloadRequired`] when
    /// `base_seq` is older than the retained segments, [`LogError::OutOfRange`] when it is past
    /// the end. With a key, a retry appends once, like [`EventLog::append_once`].
    pub async fn append_rebased(
        &self,
        log: LogId,
        entry: NewEntry,
        base_seq: u64,
        opts: AppendOptions,
        key: Option<&IdempotencyKey>,
    ) -> Result<RebasedAppend, LogError> {
        if opts.expected_seq.is_some() {
            return Err(LogError::InvalidEntry(
                "give expectedSeq (refuse on any change) or baseSeq (rebase), not both".into(),
            ));
        }
        let mut rebasing = Rebasing::new(&entry, base_seq)?;
        let outcome = self
            .append_inner(log, entry, opts, key, Some(&mut rebasing))
            .await?;
        let applied_as = match outcome {
            AppendOnce::Appended(_) => rebasing.changed().cloned(),
            AppendOnce::Duplicate { .. } => None,
        };
        Ok(RebasedAppend {
            outcome,
            applied_as,
        })
    }
}
