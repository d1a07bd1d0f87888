//! The entries, events and request bodies tests build, one builder for each, named by what it
//! returns. A `set`'s cells are `(reference, value)` pairs with the value as JSON:
//! `set_body(&[("A1", json!(1)), ("B2", json!("two"))])`.
//!
//! - [`set_body`]: a `set` as the API's entry JSON (`POST /logs/{logId}/entries`)
//! - [`set_event`]: a `set` as a typed event; [`set_entry`]: as an entry to append to a log
//! - [`pushed_set`]: a `set` as a pushed mutation, for a sync client's run
//! - [`set_mutation`], [`push_body`], [`pull_body`]: Replicache's mutation, push and pull JSON
//! - [`numbered_edit_entry`], [`offloaded_set_entry`]: the `set` entries of a long history
//! - [`event_entry`]: an entry from any event's JSON; [`insert_rows_entry`]: rows of tagged values
//! - [`snapshot_entry`]: a Snapshot entry; [`raw_set_entry`]: an entry of the `set` type
//!   ([`SET_ENTRY_TYPE`]) whose body is given as bytes (the log stores a body without reading it)
//!
//! Each panics on an event the sheet refuses: a test that builds one has a bug, not a failure
//! to report.

use bytes::Bytes;
use serde_json::{Value, json};
use sheetlog_core::domain::{EntryType, NewEntry};
use sheetlog_core::log::PushedMutation;
use sheetlog_core::sheet::Event;
use sheetlog_core::sheet::event::{BODY_VERSION, TYPE_SET};

/// The `cells` array of a `set`: `[{"ref": …, "value": …}, …]`.
fn cells_json<R: AsRef<str>>(cells: &[(R, Value)]) -> Value {
    cells
        .iter()
        .map(|(at, value)| json!({"ref": at.as_ref(), "value": value}))
        .collect()
}

/// A `set` of `cells` as the API's entry JSON: `{"type": "set", "body": {"cells": [...]}}`.
pub fn set_body<R: AsRef<str>>(cells: &[(R, Value)]) -> Value {
    json!({"type": "set", "body": {"cells": cells_json(cells)}})
}

/// A `set` of `cells` as a typed event.
pub fn set_event<R: AsRef<str>>(cells: &[(R, Value)]) -> Event {
    Event::from_parts("set", json!({"cells": cells_json(cells)}))
        .unwrap_or_else(|e| panic!("a valid set event: {e}"))
}

/// A `set` of `cells` as an entry to append.
pub fn set_entry<R: AsRef<str>>(cells: &[(R, Value)]) -> NewEntry {
    entry_of(&set_event(cells))
}

/// A `set` of `cells` as pushed mutation `id` with no base, as a sync client's run takes it.
pub fn pushed_set<R: AsRef<str>>(id: u64, cells: &[(R, Value)]) -> PushedMutation {
    PushedMutation::new(id, Ok(set_event(cells)))
}

/// Edit `i` of a numbered series over `rows` rows: A and B of row `i % rows + 1` set to the text
/// `edit i` and the number `i`.
pub fn numbered_edit_entry(i: u32, rows: u32) -> NewEntry {
    let row = i % rows + 1;
    set_entry(&[
        (format!("A{row}"), json!(format!("edit {i}"))),
        (format!("B{row}"), json!(i)),
    ])
}

/// A `set` of C1:C700 to texts of about 25 characters: a body over the 16 KB inline threshold,
/// so the log keeps it in the payload store.
pub fn offloaded_set_entry() -> NewEntry {
    let cells: Vec<_> = (1..=700)
        .map(|r| (format!("C{r}"), json!(format!("a long value for row {r}"))))
        .collect();
    set_entry(&cells)
}

/// An entry for a spreadsheet event given as the API's entry JSON (`{"type": ..., "body": ...}`).
pub fn event_entry(json: Value) -> NewEntry {
    let event = Event::from_json(json.to_string().as_bytes())
        .unwrap_or_else(|e| panic!("a valid test event: {e}"));
    entry_of(&event)
}

/// `rows` rows of three cells inserted at row `at` (1-based), values tagged with `tag`:
/// `[tag-r, r * 7, "note tag r"]`.
pub fn insert_rows_entry(at: u32, rows: u32, tag: &str) -> NewEntry {
    let values: Vec<Value> = (0..rows)
        .map(|r| json!([format!("{tag}-{r}"), r * 7, format!("note {tag} {r}")]))
        .collect();
    event_entry(json!({
        "type": "insert-rows",
        "body": { "at": at, "count": rows, "values": values }
    }))
}

/// A Snapshot entry to append.
pub fn snapshot_entry() -> NewEntry {
    NewEntry::new(EntryType::SNAPSHOT, 0, Bytes::new())
}

/// The entry type of a `set` event.
pub const SET_ENTRY_TYPE: EntryType = EntryType(TYPE_SET);

/// An entry of the `set` type whose body is `body` as given, for tests of the log itself: it
/// stores and reads back a body without decoding it.
pub fn raw_set_entry(body: impl AsRef<[u8]>) -> NewEntry {
    NewEntry::new(
        SET_ENTRY_TYPE,
        BODY_VERSION,
        Bytes::copy_from_slice(body.as_ref()),
    )
}

fn entry_of(event: &Event) -> NewEntry {
    let (code, version, body) = event.encode();
    NewEntry::new(EntryType(code), version, body)
}

/// A Replicache mutation `id` of `client`: a `set` of one cell.
pub fn set_mutation(client: &str, id: u64, reference: &str, value: Value) -> Value {
    json!({"clientID": client, "id": id, "name": "set", "timestamp": 1,
           "args": {"cells": [{"ref": reference, "value": value}]}})
}

/// A Replicache push (pushVersion 1) of `mutations` (a JSON array) for client group `group`.
pub fn push_body(group: &str, mutations: Value) -> Value {
    json!({"pushVersion": 1, "clientGroupID": group, "mutations": mutations,
           "profileID": "p", "schemaVersion": ""})
}

/// A Replicache pull (pullVersion 1) of client group `group` from `cookie` (null: a first pull).
pub fn pull_body(group: &str, cookie: Value) -> Value {
    json!({"pullVersion": 1, "clientGroupID": group, "cookie": cookie,
           "profileID": "p", "schemaVersion": ""})
}
