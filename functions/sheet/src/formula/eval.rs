//! Evaluating a set of cells with IronCalc.
//!
//! The cells go into an in-memory IronCalc model (one worksheet, en locale, UTC), the model
//! evaluates, and the value of every formula cell comes back as one of ours. A cycle evaluates to
//! `#CIRC!`, a formula the engine cannot read to `#ERROR!`: evaluation always ends.

use std::collections::HashMap;

use ironcalc_base::Model;
use ironcalc_base::cell::CellValue;
use ironcalc_base::types::CellType;

use crate::a1::CellRef;
use crate::value::{Cell, ErrorCode, Row, Value};

/// Cells one evaluation may load (values and formulas together). `./scripts/bench formulas`
/// evaluates 1,000,000 cells (100,000 of them formulas) at a 251 MB peak for the whole process,
/// so twice that stays about half of the API function's 1,024 MB (`cdk/lib/stack/functions.ts`).
pub const MAX_EVAL_CELLS: usize = 2_000_000;

/// About the bytes of the cells one evaluation may load (texts and formulas are up to 32,767 and
/// 8,192 characters, so [`MAX_EVAL_CELLS`] alone would not bound them); counted as a range read
/// counts them (`snapshot::ReadBudget`).
pub const MAX_EVAL_BYTES: usize = 256 * 1024 * 1024;

/// The name the engine gives the sheet's one tab; references may name it (`Sheet1!A1`).
pub const TAB: &str = "Sheet1";

/// Why a set of cells could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error(
        "evaluating these formulas needs {cells} cells, more than the {MAX_EVAL_CELLS} one read may load"
    )]
    TooManyCells { cells: usize },
    #[error("the formula engine failed: {0}")]
    Engine(String),
}

/// The computed value of every formula cell that was evaluated.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Evaluated {
    pub values: HashMap<CellRef, Value>,
}

impl Evaluated {
    /// What `value`, the content of the cell at `at`, shows: its computed value for a formula,
    /// itself otherwise.
    pub fn shown<'a>(&'a self, at: CellRef, value: &'a Value) -> &'a Value {
        match value {
            Value::Formula(_) => self.values.get(&at).unwrap_or(&Value::Empty),
            v => v,
        }
    }

    /// `rows` as a reader sees them: every formula replaced by its computed value, formats kept.
    pub fn shown_rows(&self, rows: &[Row]) -> Vec<Row> {
        rows.iter()
            .map(|r| Row {
                index: r.index,
                cells: r
                    .cells
                    .iter()
                    .map(|(col, cell)| {
                        let at = CellRef {
                            row: r.index,
                            col: *col,
                        };
                        let value = self.shown(at, &cell.value).clone();
                        (
                            *col,
                            Cell {
                                value,
                                format: cell.format.clone(),
                                style: cell.style.clone(),
                            },
                        )
                    })
                    .collect(),
            })
            .collect()
    }
}

/// Stack for the thread an evaluation runs on. The engine evaluates a formula's inputs by
/// recursion, so a chain of formulas each reading the next is as deep as it is long; the stack is
/// reserved address space, and only the pages a deep chain touches take memory.
pub const EVAL_STACK_BYTES: usize = 1 << 30;

/// Evaluates every formula in `rows` from the cells in `rows`. A formula that reads a cell not
/// in `rows` reads it as empty: the caller loads the closure ([`super::closure_area`]). Runs on a
/// thread of its own with an [`EVAL_STACK_BYTES`] stack, and blocks until it is done.
pub fn evaluate(rows: &[Row]) -> Result<Evaluated, EvalError> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("formula-eval".into())
            .stack_size(EVAL_STACK_BYTES)
            .spawn_scoped(scope, || evaluate_here(rows))
            .map_err(|e| EvalError::Engine(format!("starting the evaluation thread: {e}")))?
            .join()
            .map_err(|_| EvalError::Engine("the evaluation panicked".into()))?
    })
}

fn evaluate_here(rows: &[Row]) -> Result<Evaluated, EvalError> {
    let cells: usize = rows.iter().map(|r| r.cells.len()).sum();
    if cells > MAX_EVAL_CELLS {
        return Err(EvalError::TooManyCells { cells });
    }
    let mut formulas = Vec::new();
    for row in rows {
        for (col, cell) in &row.cells {
            if matches!(cell.value, Value::Formula(_)) {
                formulas.push(CellRef {
                    row: row.index,
                    col: *col,
                });
            }
        }
    }
    if formulas.is_empty() {
        return Ok(Evaluated::default());
    }
    let mut model = Model::new_empty("sheet", "en", "UTC", "en").map_err(EvalError::Engine)?;
    for row in rows {
        for (col, cell) in &row.cells {
            load(&mut model, row.index, *col, &cell.value)?;
        }
    }
    model.evaluate();
    let mut values = HashMap::with_capacity(formulas.len());
    for at in formulas {
        values.insert(at, read(&model, at)?);
    }
    Ok(Evaluated { values })
}

fn load(model: &mut Model, row: u32, col: u32, value: &Value) -> Result<(), EvalError> {
    let (r, c) = (row as i32 + 1, col as i32 + 1);
    let done = match value {
        Value::Empty => Ok(()),
        Value::Number(n) => model.update_cell_with_number(0, r, c, *n),
        Value::Text(t) => model.update_cell_with_text(0, r, c, t),
        Value::Bool(b) => model.update_cell_with_bool(0, r, c, *b),
        Value::Error(e) => model.set_user_input(0, r, c, e.as_str().to_owned()),
        Value::Formula(f) => model
            .update_cell_with_formula(0, r, c, f.typed())
            // Text the engine refuses as a formula still evaluates, to an error.
            .or_else(|_| model.set_user_input(0, r, c, ErrorCode::Error.as_str().to_owned())),
    };
    done.map_err(EvalError::Engine)
}

fn read(model: &Model, at: CellRef) -> Result<Value, EvalError> {
    let (r, c) = (at.row as i32 + 1, at.col as i32 + 1);
    let value = model
        .get_cell_value_by_index(0, r, c)
        .map_err(EvalError::Engine)?;
    let is_error = model.get_cell_type(0, r, c).map_err(EvalError::Engine)? == CellType::ErrorValue;
    Ok(match value {
        CellValue::String(s) if is_error => {
            Value::Error(ErrorCode::parse(&s).unwrap_or(ErrorCode::Error))
        }
        CellValue::None => Value::Empty,
        CellValue::String(s) => Value::Text(s),
        CellValue::Number(n) if n.is_finite() => Value::Number(n),
        CellValue::Number(_) => Value::Error(ErrorCode::Num),
        CellValue::Boolean(b) => Value::Bool(b),
    })
}
