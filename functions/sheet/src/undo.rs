//! `undo`: the entry that undoes (or redoes) one step of a sync client group's own history
//! (`docs/sync.md`, "Undo and redo"). It names the step it acts on and holds the events that do
//! it, worked out by the API when it was appended: the inverse of the step, moved through
//! everything committed after it, without the cells someone else has changed since. Readers apply
//! the events like any other; the group's undo and redo stacks are derived from these entries and
//! the group's `mutations` runs ([`crate::undo_plan::stacks`]).
//!
//! Binary body (version 1): the group id (length-prefixed), a flags byte (bit 0: redo), the
//! target's sequence, client id (empty when the target is an `undo` entry) and mutation id, the
//! number of cells skipped, the number of events, then each event's type code, body version and
//! length-prefixed body.

use super::codec::{CodecError, Reader, Writer};
use super::event::{BODY_VERSION, DecodeError, Event, ValidationError};
use super::mutations::{MAX_ID_BYTES, check_id};

/// Type code of an `undo` entry (22 is `mutations`, 23 `restore`).
pub const TYPE_UNDO: u16 = 24;
const TYPE_NAME: &str = "undo";
/// Most events one undo holds: a step is one mutation (at most a few events) or one undo of one,
/// whose inverse of a deleted range is an insert plus the range's cells, in sets of at most
/// [`crate::limits::MAX_CELLS_PER_SET`] cells.
pub const MAX_UNDO_EVENTS: u64 = 64;

/// One undo or redo.
#[derive(Debug, Clone, PartialEq)]
pub struct Undo {
    /// The sync client group whose step this acts on.
    pub group: String,
    /// A redo re-applies the step an earlier undo took back; its target is that `undo` entry.
    pub redo: bool,
    pub target: Target,
    /// What it applies, in order (empty when everything was skipped).
    pub events: Vec<Event>,
    /// Cells of the step left alone because someone else changed or deleted them since.
    pub skipped: u64,
}

/// The step an undo acts on: one mutation of a `mutations` entry, or a whole entry (an `undo`
/// entry, or an `import` the group made).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub seq: u64,
    /// The mutation's client; empty when the target is a whole entry (an `undo`, or an import).
    pub client: String,
    /// The mutation's id; 0 when the target is an `undo` entry.
    pub id: u64,
}

impl Target {
    /// A whole entry as a target.
    pub fn entry(seq: u64) -> Target {
        Target {
            seq,
            client: String::new(),
            id: 0,
        }
    }

    pub fn is_mutation(&self) -> bool {
        !self.client.is_empty()
    }
}

impl Undo {
    pub fn validate(&self) -> Result<(), ValidationError> {
        let err = |path: &str, message: &str| ValidationError {
            path: path.into(),
            message: message.into(),
        };
        check_id("clientGroupID", &self.group)?;
        if self.target.is_mutation() {
            check_id("target.clientID", &self.target.client)?;
            if self.target.id == 0 {
                return Err(err("target.mutationID", "must be positive"));
            }
        } else if self.target.id != 0 {
            return Err(err("target.mutationID", "an undo entry has no mutation id"));
        }
        if self.events.len() as u64 > MAX_UNDO_EVENTS {
            return Err(err("events", "too many events"));
        }
        let alone = self.events.len() == 1;
        for (i, e) in self.events.iter().enumerate() {
            // An undo of an import is one restore of the sheet before it, and nothing else.
            if matches!(e, Event::Import(_)) || matches!(e, Event::Restore(_)) && !alone {
                return Err(err(
                    &format!("events[{i}]"),
                    "an undo holds cell, row and column changes, or one restore",
                ));
            }
            e.validate().map_err(|v| ValidationError {
                path: format!("events[{i}].{}", v.path),
                message: v.message,
            })?;
        }
        Ok(())
    }

    /// The binary form: `(type code, body version, body bytes)`.
    pub fn encode(&self) -> (u16, u16, Vec<u8>) {
        let mut w = Writer::new();
        w.str(&self.group);
        w.u8(u8::from(self.redo));
        w.varint(self.target.seq);
        w.str(&self.target.client);
        w.varint(self.target.id);
        w.varint(self.skipped);
        w.varint(self.events.len() as u64);
        for e in &self.events {
            e.write_nested(&mut w);
        }
        (TYPE_UNDO, BODY_VERSION, w.buf)
    }

    pub fn decode(version: u16, body: &[u8]) -> Result<Undo, DecodeError> {
        let codec = DecodeError::check_version(TYPE_NAME, version, version == BODY_VERSION)?;
        let mut r = Reader::new(body);
        let group = r.str(MAX_ID_BYTES, "client group id").map_err(codec)?;
        let group = group.to_owned();
        let redo = match r.u8().map_err(codec)? {
            0 => false,
            1 => true,
            f => return Err(codec(CodecError::Invalid(format!("flags {f}")))),
        };
        let seq = r.varint().map_err(codec)?;
        let client = r.str(MAX_ID_BYTES, "client id").map_err(codec)?.to_owned();
        let id = r.varint().map_err(codec)?;
        let skipped = r.varint().map_err(codec)?;
        let n = r.varint().map_err(codec)?;
        if n > MAX_UNDO_EVENTS {
            return Err(codec(CodecError::Invalid(format!("{n} events"))));
        }
        let mut events = Vec::with_capacity(n as usize);
        for _ in 0..n {
            events.push(Event::read_nested(&mut r, codec)?);
        }
        r.finish().map_err(codec)?;
        let u = Undo {
            group,
            redo,
            target: Target { seq, client, id },
            events,
            skipped,
        };
        u.validate().map_err(|source| DecodeError::Invalid {
            type_name: TYPE_NAME,
            source,
        })?;
        Ok(u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{DeleteRows, InsertRows, RowNumber};

    #[test]
    fn an_undo_reads_back_as_written() {
        let u = Undo {
            group: "g1".into(),
            redo: true,
            target: Target {
                seq: 41,
                client: "c1".into(),
                id: 7,
            },
            events: vec![
                Event::InsertRows(InsertRows {
                    at: RowNumber(2),
                    count: 3,
                    values: Vec::new(),
                }),
                Event::DeleteRows(DeleteRows {
                    at: RowNumber(9),
                    count: 1,
                }),
            ],
            skipped: 2,
        };
        let (code, version, body) = u.encode();
        assert_eq!((code, version), (TYPE_UNDO, BODY_VERSION));
        assert_eq!(Undo::decode(version, &body), Ok(u.clone()));
        // Every truncation is an error, never a panic or a shorter undo.
        for cut in 0..body.len() {
            assert!(Undo::decode(version, &body[..cut]).is_err(), "cut at {cut}");
        }
        assert!(Undo::decode(2, &body).is_err());
    }

    #[test]
    fn an_entry_target_has_no_mutation_id() {
        let mut u = Undo {
            group: "g".into(),
            redo: false,
            target: Target::entry(3),
            events: Vec::new(),
            skipped: 0,
        };
        assert!(u.validate().is_ok());
        u.target.id = 4;
        assert!(u.validate().is_err());
        u.target.client = "c".into();
        assert!(u.validate().is_ok());
        u.group = String::new();
        assert!(u.validate().is_err());
    }

    #[test]
    fn a_restore_is_an_undos_only_event_or_none() {
        let restore = Event::Restore(crate::event::Restore {
            seq: 3,
            group: None,
        });
        let del = Event::DeleteRows(DeleteRows {
            at: RowNumber(0),
            count: 1,
        });
        let mut u = Undo {
            group: "g".into(),
            redo: false,
            target: Target::entry(3),
            events: vec![restore.clone()],
            skipped: 0,
        };
        assert!(u.validate().is_ok());
        u.events.push(del);
        assert!(u.validate().is_err());
        u.events = vec![Event::Import(crate::event::Import {
            format: crate::event::ImportFormat::Csv,
            group: None,
            layout: None,
        })];
        assert!(u.validate().is_err());
    }
}
