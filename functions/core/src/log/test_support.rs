//! Setup the crate's unit tests share: logs over the in-memory stores, entries and events to
//! append, and the sheet a log's entries make. It lives in the log module; what tests elsewhere in
//! the crate use too (the memory stores', `snapshot_input`'s) is `pub(crate)`.

use bytes::Bytes;

use super::{AppendOptions, EventLog};
use crate::config::LogConfig;
use crate::domain::{EntryType, LogId, NewEntry};
use crate::memory::{MemLogStore, MemPayloadStore};

/// The type code of a `set` event. The log never reads a body, so its tests append entries of
/// this type with any bytes ([`raw_set_entry`]).
pub(crate) const SET: EntryType = EntryType(16);

/// An entry of type [`SET`] whose body is `body` as given.
pub(crate) fn raw_set_entry(body: impl AsRef<[u8]>) -> NewEntry {
    NewEntry::new(SET, 1, Bytes::copy_from_slice(body.as_ref()))
}

/// A log over the in-memory stores with the default settings.
pub(crate) fn mem_log() -> EventLog<MemLogStore, MemPayloadStore> {
    EventLog::new(
        MemLogStore::new(),
        MemPayloadStore::new(),
        LogConfig::default(),
    )
    .expect("the default settings are valid")
}

/// Appends one entry of `kind` per body, in order.
pub(super) async fn append_bodies<S, P>(
    log: &EventLog<S, P>,
    id: LogId,
    kind: EntryType,
    bodies: &[&'static [u8]],
) where
    S: crate::ports::LogEntries + crate::ports::DedupeKeys,
    P: crate::ports::PayloadStore,
{
    for b in bodies {
        log.append(
            id,
            NewEntry::new(kind, 1, Bytes::from_static(b)),
            AppendOptions::default(),
        )
        .await
        .expect("append");
    }
}

/// A one-cell `set` of A1 to `v`.
#[cfg(feature = "engine")]
pub(crate) fn set_a1(v: f64) -> crate::sheet::event::Event {
    crate::sheet::event::Event::from_parts(
        "set",
        serde_json::json!({"cells": [{"ref": "A1", "value": v}]}),
    )
    .unwrap()
}

/// Pushed mutations `ids`, each setting A1 to its own id.
#[cfg(feature = "engine")]
pub(super) fn set_mutations(ids: std::ops::RangeInclusive<u64>) -> Vec<super::PushedMutation> {
    ids.map(|id| super::PushedMutation {
        id,
        event: Ok(set_a1(id as f64)),
        base: None,
        then: Vec::new(),
    })
    .collect()
}

/// A `set` of `cells` cells of 100-character strings: about `cells * 110` bytes of body.
#[cfg(feature = "engine")]
pub(super) fn big_set(cells: usize) -> crate::sheet::event::Event {
    let cells: Vec<_> = (0..cells)
        .map(|i| serde_json::json!({"ref": format!("A{}", i + 1), "value": "x".repeat(100)}))
        .collect();
    crate::sheet::event::Event::from_parts("set", serde_json::json!({ "cells": cells })).unwrap()
}

/// An entry holding `event`.
#[cfg(feature = "engine")]
pub(crate) fn entry(event: &crate::sheet::event::Event) -> NewEntry {
    let (code, version, body) = event.encode();
    NewEntry::new(EntryType(code), version, body)
}

/// A `set` of the cell at `a1` to the text `text`.
#[cfg(feature = "engine")]
pub(crate) fn set(a1: &str, text: &str) -> crate::sheet::event::Event {
    use crate::sheet::event::{CellEdit, Event, SetCells};
    Event::Set(SetCells {
        cells: vec![CellEdit {
            at: a1.parse().expect("a1"),
            value: crate::sheet::Value::Text(text.into()),
            format: None,
        }],
    })
}

/// `count` rows inserted at row number `row_number` (1-based, as the page shows them).
#[cfg(feature = "engine")]
pub(super) fn insert_rows(row_number: u32, count: u32) -> crate::sheet::event::Event {
    use crate::sheet::event::{Event, InsertRows, RowNumber};
    Event::InsertRows(InsertRows {
        at: RowNumber(row_number - 1),
        count,
        values: vec![],
    })
}

/// `count` rows deleted from row number `row_number` (1-based).
#[cfg(feature = "engine")]
pub(super) fn delete_rows(row_number: u32, count: u32) -> crate::sheet::event::Event {
    use crate::sheet::event::{DeleteRows, Event, RowNumber};
    Event::DeleteRows(DeleteRows {
        at: RowNumber(row_number - 1),
        count,
    })
}

/// The sheet the log's entries make.
#[cfg(feature = "engine")]
pub(super) async fn sheet<S: crate::ports::LogStore>(
    log: &EventLog<S, MemPayloadStore>,
    id: LogId,
) -> crate::sheet::Sheet {
    let page = log.read_since(id, 0, 10_000).await.expect("read");
    let mut sheet = crate::sheet::Sheet::new();
    for e in page.entries {
        let body =
            crate::sheet::entry::EntryBody::decode(e.kind.0, e.version, &e.body).expect("decode");
        for ev in body.events() {
            sheet.apply(ev, None).expect("apply");
        }
    }
    sheet
}

/// The cell at `a1` as text (a value of another kind in its debug form), if it is set.
#[cfg(feature = "engine")]
pub(super) fn text(s: &crate::sheet::Sheet, a1: &str) -> Option<String> {
    use crate::sheet::Value;
    let at: crate::sheet::CellRef = a1.parse().expect("a1");
    s.get(at).map(|c| match &c.value {
        Value::Text(t) => t.to_string(),
        other => format!("{other:?}"),
    })
}

/// A new log whose column A holds r1..r6; the view after it (the pull cookie) is returned.
#[cfg(feature = "engine")]
pub(super) async fn log_with_rows<S: crate::ports::LogStore>(
    log: &EventLog<S, MemPayloadStore>,
) -> (LogId, u64) {
    use crate::sheet::event::{CellEdit, Event, SetCells};
    let id = log.create().await.expect("create").log;
    let rows = Event::Set(SetCells {
        cells: (0..6)
            .map(|r| CellEdit {
                at: crate::sheet::CellRef { row: r, col: 0 },
                value: crate::sheet::Value::Text(format!("r{}", r + 1)),
                format: None,
            })
            .collect(),
    });
    let a = log
        .append(id, entry(&rows), AppendOptions::default())
        .await
        .expect("rows");
    (id, a.next_seq)
}
