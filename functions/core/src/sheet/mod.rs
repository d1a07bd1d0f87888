//! The spreadsheet model: events, their JSON and binary forms, validation against the sheet
//! limits, and the deterministic state machine that applies them.
//!
//! Layout:
//! - `limits.rs` — the sheet limits (Excel's), in one place.
//! - `a1.rs` — A1 references, column letters and ranges.
//! - `value.rs` — cell values (text, number, boolean, empty, error), cells, their JSON form.
//! - `codec.rs` — varints and the binary cell encoding shared with snapshot chunks.
//! - `event.rs` — the events, their JSON form and validation, their versioned binary bodies.
//! - `model.rs` — rows, the row-level transforms, and [`Sheet`], the in-memory state machine.
//! - `import.rs` — streaming CSV and XLSX readers used by `import` events.
//! - `sample.rs` — deterministic realistic sample data for tests and benchmarks.
//!
//! The rules themselves (what each event does at the edges of the sheet) are written up in
//! `docs/sheet-model.md`.

pub mod a1;
pub mod codec;
pub mod event;
pub mod import;
pub mod limits;
pub mod model;
pub mod sample;
pub mod value;

pub use a1::{CellRef, Range, RefError};
pub use event::{
    CellEdit, ColumnName, DecodeError, DeleteColumns, DeleteRows, Entry, Event, Import,
    ImportFormat, InsertColumns, InsertRows, RowNumber, SetCells, ValidationError,
};
pub use model::{ApplyError, Row, Sheet};
pub use value::{Cell, ErrorCode, Value};

#[cfg(test)]
mod tests;
