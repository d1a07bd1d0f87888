//! Events the crate's unit tests build: one place for a `set` of cells.

use crate::{CellEdit, CellRef, Event, SetCells, Value};

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

/// A `set` of one cell.
pub(crate) fn set_one(at: CellRef, value: Value) -> Event {
    set_cells([(at, value)])
}
