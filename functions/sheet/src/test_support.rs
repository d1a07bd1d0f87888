//! What the crate's unit tests build: cell references and values, and a `set` of cells.

use crate::{CellEdit, CellRef, Event, SetCells, Value};

/// The cell at an A1 reference.
pub(crate) fn at(a1: &str) -> CellRef {
    a1.parse().unwrap()
}

/// A number.
pub(crate) fn n(x: f64) -> Value {
    Value::Number(x)
}

/// A text.
pub(crate) fn text(s: &str) -> Value {
    Value::Text(s.into())
}

/// A `set` of each cell to its value, with no format.
pub(crate) fn set_cells(cells: impl IntoIterator<Item = (CellRef, Value)>) -> Event {
    Event::Set(SetCells {
        cells: cells
            .into_iter()
            .map(|(at, value)| CellEdit {
                at,
                value,
                format: None,
            })
            .collect(),
    })
}

/// A `set` of each cell, given by its A1 reference, to its value, with no format.
pub(crate) fn set_refs<R: AsRef<str>>(cells: &[(R, Value)]) -> Event {
    set_cells(
        cells
            .iter()
            .map(|(a1, value)| (at(a1.as_ref()), value.clone())),
    )
}

/// A `set` of one cell.
pub(crate) fn set_one(at: CellRef, value: Value) -> Event {
    set_cells([(at, value)])
}
