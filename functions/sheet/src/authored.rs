//! `authored`: a spreadsheet event appended directly (`POST /logs/{logId}/entries`) on behalf of a
//! sync client group, so it is a step of that group's undo stack (`crate::undo_plan`) as a
//! mutation would be. The CLI's edits are these: a person's `sheetlog set` is undone by their
//! `sheetlog undo`. Readers apply the event as they would the plain one; `GET …/entries` shows it
//! as its event, with the group.
//!
//! Binary body (version 1): the group id (length-prefixed), then the event's type code, body
//! version and length-prefixed body.

use super::codec::{Reader, Writer};
use super::event::{BODY_VERSION, DecodeError, Event, MAX_ID_BYTES, ValidationError, check_id};

/// Type code of an `authored` entry (24 is `undo`).
pub const TYPE_AUTHORED: u16 = 25;
const TYPE_NAME: &str = "authored";

#[derive(Debug, Clone, PartialEq)]
pub struct Authored {
    pub group: String,
    /// A cell, row or column change: an import or a restore carries its group in its own body.
    pub event: Event,
}

impl Authored {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_id("clientGroupId", &self.group)?;
        if matches!(self.event, Event::Import(_) | Event::Restore(_)) {
            return Err(ValidationError {
                path: "type".into(),
                message: "an import or a restore names its client group in its own request".into(),
            });
        }
        self.event.validate()
    }

    /// The binary form: `(type code, body version, body bytes)`.
    pub fn encode(&self) -> (u16, u16, Vec<u8>) {
        let mut w = Writer::new();
        w.str(&self.group);
        self.event.write_nested(&mut w);
        (TYPE_AUTHORED, BODY_VERSION, w.buf)
    }

    pub fn decode(version: u16, body: &[u8]) -> Result<Authored, DecodeError> {
        let codec = DecodeError::check_version(TYPE_NAME, version, version == BODY_VERSION)?;
        let mut r = Reader::new(body);
        let group = r.str(MAX_ID_BYTES, "client group id").map_err(codec)?;
        let group = group.to_owned();
        let event = Event::read_nested(&mut r, codec)?;
        r.finish().map_err(codec)?;
        let a = Authored { group, event };
        a.validate().map_err(|source| DecodeError::Invalid {
            type_name: TYPE_NAME,
            source,
        })?;
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{DeleteRows, RowNumber};

    #[test]
    fn an_authored_event_reads_back_as_written_and_cuts_fail() {
        let a = Authored {
            group: "cli-1".into(),
            event: Event::DeleteRows(DeleteRows {
                at: RowNumber(4),
                count: 2,
            }),
        };
        let (code, version, body) = a.encode();
        assert_eq!(code, TYPE_AUTHORED);
        assert_eq!(Authored::decode(version, &body), Ok(a));
        for cut in 0..body.len() {
            assert!(
                Authored::decode(version, &body[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let restore = Authored {
            group: "g".into(),
            event: Event::Restore(crate::event::Restore {
                seq: 1,
                group: None,
            }),
        };
        assert!(restore.validate().is_err());
    }
}
