//! `sheetlog-sheet`: the spreadsheet model and the snapshot engine, with no AWS dependency.
//!
//! The model is the events, their JSON and binary forms, validation against the sheet limits,
//! and the deterministic state machine that applies them. The engine builds and reads chunked,
//! content-addressed snapshots through two narrow ports ([`snapshot::BlobStore`],
//! [`snapshot::ImportSource`]); their S3 adapter lives in `sheetlog-core`, so "no SDK in the
//! engine" is a rule the compiler keeps (this crate does not depend on one).
//!
//! Layout:
//! - `limits.rs` — the sheet limits (Excel's), in one place.
//! - `a1.rs` — A1 references, column letters and ranges.
//! - `value.rs` — cell values (text, number, boolean, empty, error, formula), cells, their JSON
//!   form.
//! - `bytes.rs` — the binary primitives: varints, lengths, texts, and a checking reader.
//! - `codec.rs` — the binary cell encoding shared with snapshot chunks.
//! - `formula/` — formulas: limits, reference rewriting, the dependency closure, evaluation
//!   with IronCalc.
//! - `event.rs` — the events, their JSON form and validation, their versioned binary bodies.
//!   `fields.rs` holds what they share (row numbers, column names, the span check, the
//!   validation error); `resize.rs` the bodies of the layout's entries.
//! - `layout.rs` — column widths, row heights and frozen panes: what the `resize-*` and `freeze`
//!   entries leave.
//! - `value.rs` also holds [`Row`], shared by the model and the importers.
//! - `style.rs` — cell styles (font, fill, alignment, wrap, borders) and the patch a `style`
//!   entry applies.
//! - `model.rs` — the row-level transforms, and [`Sheet`], the in-memory state machine.
//! - `mutations.rs` — the `mutations` entry: a sync client's run of mutations.
//! - `entry.rs` — [`EntryBody`]: any stored entry decoded (markers, an event, client runs).
//! - `authored.rs` — the `authored` entry: an event appended directly for a client group.
//! - `undo.rs` — the `undo` entry: an undo or redo of a sync client group's step;
//!   `undo_plan.rs` derives the group's stacks from the log and works out an undo's events.
//! - `rebase.rs` — moving an edit made against an older view onto the current sheet.
//! - `import.rs` — streaming CSV and XLSX readers used by `import` events; `csv_records.rs`
//!   splits CSV into records; `xlsx_formulas.rs` reads an XLSX sheet's formulas (shared ones
//!   spread) in step with calamine's values, `xlsx_styles.rs` the number format of each cell
//!   style, `xlsx_layout.rs` its first worksheet's column widths, row heights and frozen panes.
//! - `snapshot/` — the snapshot engine: format, incremental builder, range reads, store ports.
//! - `sample.rs` — deterministic realistic sample data for tests and benchmarks (feature
//!   `sample`; not in the Lambda functions).
//!
//! The rules themselves (what each event does at the edges of the sheet) are written up in
//! `docs/sheet-model.md`.

pub mod a1;
pub mod authored;
pub mod bytes;
pub mod codec;
mod csv_records;
pub mod entry;
pub mod event;
mod fields;
pub mod formula;
pub mod import;
pub mod layout;
pub mod limits;
pub mod model;
pub mod mutations;
pub mod rebase;
mod resize;
#[cfg(any(test, feature = "sample"))]
pub mod sample;
pub mod snapshot;
pub mod style;
pub mod undo;
pub mod undo_plan;
pub mod value;
mod xlsx_formulas;
mod xlsx_layout;
mod xlsx_styles;

pub use a1::{CellRef, Range, RefError};
pub use entry::EntryBody;
pub use event::{
    CellEdit, ColumnName, DecodeError, DeleteColumns, DeleteRows, Event, Import, ImportFormat,
    InsertColumns, InsertRows, Restore, RowNumber, SetCells, StyleCells, ValidationError,
};
pub use model::{ApplyError, Sheet};
pub use style::{Style, StylePatch};
pub use value::{Cell, ErrorCode, Row, Value};

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
