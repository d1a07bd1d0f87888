//! `mutations`: the record of one client's run of mutations, as a sync client (Replicache) pushed
//! them. One entry holds a contiguous range of the client's mutation ids, `first..=last`; the
//! mutations that applied carry their event, in order, and the ids in the range without an event
//! were rejected (their arguments failed validation) and changed nothing.
//!
//! Why one entry per run rather than one per mutation: a push of 100 small edits costs one entry
//! and one client item instead of 100 of each (`docs/sync.md`). Why an entry even when every
//! mutation in the run was rejected: the pull cookie is the log's next sequence, and Replicache
//! ignores a pull response whose cookie did not move, so the client would never learn that its
//! rejected mutation was processed.
//!
//! Binary body (version 1): group id and client id as length-prefixed strings, `first`,
//! `last - first`, the number of applied events, then for each `id - first`, the event's type
//! code, body version and length-prefixed body. Ids ascend; one id appears more than once when
//! its mutation applied as several events, in order: a delete that rebasing split around rows
//! inserted inside its range (`docs/sync.md`). Readers that go by id take every event of it.
//!
//! Version 2 is a *batch* ([`MutationBatch`]): the runs of several clients written by one group
//! commit (the sync writer, `docs/sync.md`). Its body is the number of runs, then each run as a
//! length-prefixed version-1 body, in the order they apply. A batch of one run is always written
//! as version 1, so a single-client entry reads the same whoever wrote it.
//!
//! Version 3 is a run that also records mutations *as sent* ([`Mutations::sent`]): the
//! row and column changes that rebasing moved or rejected (`docs/sync.md`, "Edits made against an
//! older view"). It is the version-1 body followed by the number of such mutations and each as
//! `id - first`, type code, body version and length-prefixed body. Version 4 is a batch whose runs
//! are each preceded by their own body version (1 or 3). Runs with nothing in `sent` are written
//! exactly as before.
//!
//! Version 5 is a *deferred* batch: laid out as version 4 (each run preceded by its own body
//! version), written even for one run, by the sync writer's group commit, whose runs' range items
//! are written later (`docs/sync.md`, "Range items written later"): a reader of a client's last
//! mutation id reads the version-5 entries past the log's index mark as well as the range items.

use super::codec::{CodecError, Reader, Writer};
use super::event::{DecodeError, Event, ValidationError};

/// Type code of a `mutations` entry.
pub const TYPE_MUTATIONS: u16 = 22;
/// Longest client or client group id, in bytes (defined with the events: an import names its
/// client group too).
pub use super::event::{MAX_ID_BYTES, check_id};
/// Most mutations one entry records (applied or rejected).
pub const MAX_MUTATIONS_PER_ENTRY: u64 = 1000;
/// Body version of a batch of runs.
pub const BATCH_VERSION: u16 = 2;
/// Body version of a run that records mutations as sent.
pub const RUN_SENT_VERSION: u16 = 3;
/// Body version of a batch holding at least one run that records mutations as sent.
pub const BATCH_SENT_VERSION: u16 = 4;

/// Body version of a batch whose runs' range items are written after the entry (a client's first
/// run excepted): the sync writer's group commit.
pub const DEFERRED_BATCH_VERSION: u16 = 5;

/// Whether a `mutations` body of this version is a batch of runs.
pub fn is_batch_version(version: u16) -> bool {
    version == BATCH_VERSION || version == BATCH_SENT_VERSION || version == DEFERRED_BATCH_VERSION
}

/// Whether a `mutations` body of this version is a deferred batch ([`DEFERRED_BATCH_VERSION`]).
pub fn is_deferred_version(version: u16) -> bool {
    version == DEFERRED_BATCH_VERSION
}
/// Most runs (clients) one batch entry holds: each run takes one item of the entry's DynamoDB
/// transaction, or two for a client's first run, within the transaction's 100 items.
pub const MAX_RUNS_PER_ENTRY: usize = 32;
const TYPE_NAME: &str = "mutations";

/// One client's run of mutations.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutations {
    pub group: String,
    pub client: String,
    pub first: u64,
    pub last: u64,
    /// The mutations that applied, in id order, each with its event.
    pub applied: Vec<Mutation>,
    /// Row and column changes of this run as the client sent them, where that differs from what
    /// applied: rebasing moved them (their applied form is in `applied`) or rejected them. A later
    /// mutation of the same client, made before the client learnt of this run, refers to rows and
    /// columns as the client saw them, that is, as sent. Positions only: an `insert-rows` keeps no
    /// values. Id order; empty for most runs.
    pub sent: Vec<Mutation>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Mutation {
    pub id: u64,
    pub event: Event,
}

impl Mutations {
    /// The ids in `first..=last` that have no event: rejected, applied as no-ops.
    pub fn rejected(&self) -> Vec<u64> {
        let mut applied = self.applied.iter().map(|m| m.id).peekable();
        (self.first..=self.last)
            .filter(|id| {
                // A mutation may have applied as several events (a split delete).
                let mut any = false;
                while applied.next_if_eq(id).is_some() {
                    any = true;
                }
                !any
            })
            .collect()
    }

    pub fn validate(&self) -> Result<(), ValidationError> {
        let err = |path: &str, message: String| ValidationError {
            path: path.into(),
            message,
        };
        check_id("clientGroupID", &self.group)?;
        check_id("clientID", &self.client)?;
        if self.first == 0 || self.last < self.first {
            return Err(err(
                "",
                format!(
                    "mutation ids {}..={} are not a range of positive ids",
                    self.first, self.last
                ),
            ));
        }
        if self.last - self.first >= MAX_MUTATIONS_PER_ENTRY {
            return Err(err(
                "",
                format!("more than {MAX_MUTATIONS_PER_ENTRY} mutations in one entry"),
            ));
        }
        let mut prev = None;
        for (i, m) in self.applied.iter().enumerate() {
            // Equal ids are one mutation applied as several events, in order (a delete that
            // rebasing split around rows inserted inside its range).
            if m.id < self.first || m.id > self.last || prev.is_some_and(|p| m.id < p) {
                return Err(err(
                    &format!("mutations[{i}].id"),
                    format!(
                        "{} is out of order or outside {}..={}",
                        m.id, self.first, self.last
                    ),
                ));
            }
            if matches!(m.event, Event::Import(_)) {
                return Err(err(
                    &format!("mutations[{i}]"),
                    "an import is not a mutation; files go through the upload flow".into(),
                ));
            }
            if matches!(m.event, Event::Restore(_)) {
                return Err(err(
                    &format!("mutations[{i}]"),
                    "a restore is not a mutation; it is `POST /logs/{logId}/restore`".into(),
                ));
            }
            m.event.validate().map_err(|e| ValidationError {
                path: format!("mutations[{i}].args.{}", e.path),
                message: e.message,
            })?;
            prev = Some(m.id);
        }
        let mut prev = None;
        for (i, m) in self.sent.iter().enumerate() {
            if m.id < self.first || m.id > self.last || prev.is_some_and(|p| m.id <= p) {
                return Err(err(
                    &format!("sent[{i}].id"),
                    format!(
                        "{} is out of order or outside {}..={}",
                        m.id, self.first, self.last
                    ),
                ));
            }
            if !m.event.shifts() {
                return Err(err(
                    &format!("sent[{i}]"),
                    "only row and column changes are recorded as sent".into(),
                ));
            }
            prev = Some(m.id);
        }
        Ok(())
    }

    /// The event mutation `id` was sent as, when this run recorded it: a row or column change
    /// that rebasing moved or rejected.
    pub fn sent_as(&self, id: u64) -> Option<&Event> {
        self.sent
            .binary_search_by_key(&id, |m| m.id)
            .ok()
            .map(|i| &self.sent[i].event)
    }

    /// Every mutation id of the run, ascending, with the events it applied as (none when it was
    /// rejected; two for a delete that rebasing split) and the event it was sent as, if recorded
    /// ([`sent_as`](Self::sent_as)).
    pub fn by_id(&self) -> impl Iterator<Item = (u64, Vec<&Event>, Option<&Event>)> + '_ {
        let mut applied = self.applied.iter().peekable();
        (self.first..=self.last).map(move |id| {
            let mut events = Vec::new();
            while let Some(m) = applied.next_if(|m| m.id == id) {
                events.push(&m.event);
            }
            (id, events, self.sent_as(id))
        })
    }

    /// The binary form: `(type code, body version, body bytes)`.
    pub fn encode(&self) -> (u16, u16, Vec<u8>) {
        let mut w = Writer::new();
        w.str(&self.group);
        w.str(&self.client);
        w.varint(self.first);
        w.varint(self.last - self.first);
        w.varint(self.applied.len() as u64);
        for m in &self.applied {
            w.varint(m.id - self.first);
            m.event.write_nested(&mut w);
        }
        if self.sent.is_empty() {
            return (TYPE_MUTATIONS, super::event::BODY_VERSION, w.buf);
        }
        w.varint(self.sent.len() as u64);
        for m in &self.sent {
            w.varint(m.id - self.first);
            m.event.write_nested(&mut w);
        }
        (TYPE_MUTATIONS, RUN_SENT_VERSION, w.buf)
    }

    pub fn decode(version: u16, body: &[u8]) -> Result<Mutations, DecodeError> {
        let codec = DecodeError::check_version(
            TYPE_NAME,
            version,
            version == super::event::BODY_VERSION || version == RUN_SENT_VERSION,
        )?;
        let mut r = Reader::new(body);
        let group = r
            .str(MAX_ID_BYTES, "client group id")
            .map_err(codec)?
            .to_owned();
        let client = r.str(MAX_ID_BYTES, "client id").map_err(codec)?.to_owned();
        let first = r.varint().map_err(codec)?;
        let span = r.varint().map_err(codec)?;
        if span >= MAX_MUTATIONS_PER_ENTRY {
            return Err(codec(CodecError::Invalid(format!("{span} mutations"))));
        }
        let last = first
            .checked_add(span)
            .ok_or_else(|| codec(CodecError::Invalid("mutation id overflows".into())))?;
        let mut list = |what: &str| -> Result<Vec<Mutation>, DecodeError> {
            let n = r.varint().map_err(codec)?;
            // Applied events may outnumber the ids (a split delete is two events under one id);
            // a mutation is recorded as sent at most once.
            if what == "sent" && n > span + 1 {
                return Err(codec(CodecError::Invalid(format!(
                    "{n} {what} mutations in a range of {}",
                    span + 1
                ))));
            }
            // Each mutation takes at least four bytes, so a lying count cannot over-allocate.
            let mut out = Vec::with_capacity((n as usize).min(r.remaining() / 4));
            for _ in 0..n {
                let offset = r.varint().map_err(codec)?;
                if offset > span {
                    return Err(codec(CodecError::Invalid(format!(
                        "mutation offset {offset} is past the range"
                    ))));
                }
                out.push(Mutation {
                    id: first + offset,
                    event: Event::read_nested(&mut r, codec)?,
                });
            }
            Ok(out)
        };
        let applied = list("applied")?;
        let sent = if version == RUN_SENT_VERSION {
            let sent = list("sent")?;
            if sent.is_empty() {
                return Err(codec(CodecError::Invalid(
                    "a version-3 run records no mutation as sent".into(),
                )));
            }
            sent
        } else {
            Vec::new()
        };
        r.finish().map_err(codec)?;
        let m = Mutations {
            group,
            client,
            first,
            last,
            applied,
            sent,
        };
        m.validate().map_err(|source| DecodeError::Invalid {
            type_name: TYPE_NAME,
            source,
        })?;
        Ok(m)
    }
}

/// Several clients' runs in one entry (body version 2), in the order they apply. Each client
/// appears at most once.
#[derive(Debug, Clone, PartialEq)]
pub struct MutationBatch {
    pub runs: Vec<Mutations>,
}

impl MutationBatch {
    pub fn validate(&self) -> Result<(), ValidationError> {
        let err = |message: String| ValidationError {
            path: String::new(),
            message,
        };
        if self.runs.is_empty() || self.runs.len() > MAX_RUNS_PER_ENTRY {
            return Err(err(format!(
                "a batch holds 1 to {MAX_RUNS_PER_ENTRY} runs (got {})",
                self.runs.len()
            )));
        }
        for (i, run) in self.runs.iter().enumerate() {
            run.validate().map_err(|e| ValidationError {
                path: format!(
                    "runs[{i}]{}{}",
                    if e.path.is_empty() { "" } else { "." },
                    e.path
                ),
                message: e.message,
            })?;
            if self.runs[..i].iter().any(|r| r.client == run.client) {
                return Err(err(format!("client {} has two runs", run.client)));
            }
        }
        Ok(())
    }

    /// The binary form: one run as a run (version 1 or 3), more as version 2, or as version 4
    /// when a run records mutations as sent.
    pub fn encode(&self) -> (u16, u16, Vec<u8>) {
        if let [one] = &self.runs[..] {
            return one.encode();
        }
        let tagged = self.runs.iter().any(|r| !r.sent.is_empty());
        self.encode_as(
            tagged,
            if tagged {
                BATCH_SENT_VERSION
            } else {
                BATCH_VERSION
            },
        )
    }

    /// The binary form of a deferred batch (version 5), however many runs it holds.
    pub fn encode_deferred(&self) -> (u16, u16, Vec<u8>) {
        self.encode_as(true, DEFERRED_BATCH_VERSION)
    }

    fn encode_as(&self, tagged: bool, version: u16) -> (u16, u16, Vec<u8>) {
        let mut w = Writer::new();
        w.varint(self.runs.len() as u64);
        for run in &self.runs {
            let (_, version, body) = run.encode();
            if tagged {
                w.varint(u64::from(version));
            }
            w.bytes(&body);
        }
        (TYPE_MUTATIONS, version, w.buf)
    }

    pub fn decode(version: u16, body: &[u8]) -> Result<MutationBatch, DecodeError> {
        let codec = DecodeError::check_version(TYPE_NAME, version, is_batch_version(version))?;
        let mut r = Reader::new(body);
        let n = r.varint().map_err(codec)?;
        if n == 0 || n > MAX_RUNS_PER_ENTRY as u64 {
            return Err(codec(CodecError::Invalid(format!("{n} runs in a batch"))));
        }
        let mut runs = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let run_version = if version == BATCH_SENT_VERSION || version == DEFERRED_BATCH_VERSION
            {
                r.varint_u32(u32::from(u16::MAX), "run version")
                    .map_err(codec)? as u16
            } else {
                super::event::BODY_VERSION
            };
            if run_version != super::event::BODY_VERSION && run_version != RUN_SENT_VERSION {
                return Err(codec(CodecError::Invalid(format!(
                    "a run of body version {run_version} in a batch"
                ))));
            }
            let bytes = r.bytes(usize::MAX >> 1, "run").map_err(codec)?;
            runs.push(Mutations::decode(run_version, bytes)?);
        }
        r.finish().map_err(codec)?;
        let b = MutationBatch { runs };
        b.validate().map_err(|source| DecodeError::Invalid {
            type_name: TYPE_NAME,
            source,
        })?;
        Ok(b)
    }
}

/// Decodes a `mutations` entry of either version into its runs.
pub fn decode_runs(version: u16, body: &[u8]) -> Result<Vec<Mutations>, DecodeError> {
    if is_batch_version(version) {
        MutationBatch::decode(version, body).map(|b| b.runs)
    } else {
        Mutations::decode(version, body).map(|m| vec![m])
    }
}

#[cfg(test)]
#[path = "mutations_tests.rs"]
mod tests;
