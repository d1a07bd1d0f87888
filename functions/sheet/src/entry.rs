//! What a log entry holds, decoded: the log's own markers, a spreadsheet event, or sync clients'
//! runs of mutations. The one place that knows every entry type of the sheet's log.

use crate::authored::{Authored, TYPE_AUTHORED};
use crate::event::{DecodeError, Event, TYPE_END_SEGMENT, TYPE_SNAPSHOT};
use crate::mutations::{MutationBatch, Mutations, TYPE_MUTATIONS, is_batch_version};
use crate::undo::{TYPE_UNDO, Undo};

/// An entry the log can hold: its own markers or a spreadsheet event.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryBody {
    Snapshot,
    EndSegment,
    Event(Event),
    /// A sync client's run of mutations (`crate::mutations`).
    Mutations(Mutations),
    /// Several clients' runs written by one group commit (`mutations` body version 2).
    Batch(MutationBatch),
    /// An undo or redo of a client group's step (`crate::undo`).
    Undo(Undo),
    /// An event appended directly for a client group (`crate::authored`).
    Authored(Authored),
}

impl EntryBody {
    /// Decodes any stored entry: the log's markers (whose bodies belong to the log core and are not
    /// looked at here) or a spreadsheet event.
    pub fn decode(type_code: u16, version: u16, body: &[u8]) -> Result<EntryBody, DecodeError> {
        match type_code {
            TYPE_SNAPSHOT => Ok(EntryBody::Snapshot),
            TYPE_END_SEGMENT => Ok(EntryBody::EndSegment),
            TYPE_MUTATIONS if is_batch_version(version) => {
                MutationBatch::decode(version, body).map(EntryBody::Batch)
            }
            TYPE_MUTATIONS => Mutations::decode(version, body).map(EntryBody::Mutations),
            TYPE_UNDO => Undo::decode(version, body).map(EntryBody::Undo),
            TYPE_AUTHORED => Authored::decode(version, body).map(EntryBody::Authored),
            _ => Event::decode(type_code, version, body).map(EntryBody::Event),
        }
    }

    /// The spreadsheet events the entry applies, in order: none for the log's markers, one for
    /// an event, the applied mutations' events for a `mutations` entry, an undo's events.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        let (one, runs, undo) = match self {
            EntryBody::Snapshot | EntryBody::EndSegment => (None, &[][..], &[][..]),
            EntryBody::Event(e) | EntryBody::Authored(Authored { event: e, .. }) => {
                (Some(e), &[][..], &[][..])
            }
            EntryBody::Mutations(m) => (None, std::slice::from_ref(m), &[][..]),
            EntryBody::Batch(b) => (None, &b.runs[..], &[][..]),
            EntryBody::Undo(u) => (None, &[][..], &u.events[..]),
        };
        one.into_iter()
            .chain(runs.iter().flat_map(|r| r.applied.iter().map(|m| &m.event)))
            .chain(undo.iter())
    }

    /// The client runs of a `mutations` entry of either version (none for other entries).
    pub fn runs(&self) -> &[Mutations] {
        match self {
            EntryBody::Mutations(m) => std::slice::from_ref(m),
            EntryBody::Batch(b) => &b.runs,
            _ => &[],
        }
    }

    pub fn type_code(&self) -> u16 {
        match self {
            EntryBody::Snapshot => TYPE_SNAPSHOT,
            EntryBody::EndSegment => TYPE_END_SEGMENT,
            EntryBody::Event(e) => e.type_code(),
            EntryBody::Mutations(_) | EntryBody::Batch(_) => TYPE_MUTATIONS,
            EntryBody::Undo(_) => TYPE_UNDO,
            EntryBody::Authored(_) => TYPE_AUTHORED,
        }
    }
}
