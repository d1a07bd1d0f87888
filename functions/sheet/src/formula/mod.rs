//! Formulas: cells whose value is computed from other cells.
//!
//! The log stores a formula's text (what follows the `=`, as typed); its value is derived state,
//! computed by IronCalc (`ironcalc_base`), the engine the page runs as WebAssembly
//! (`@ironcalc/wasm`), so a value a person sees at once is the value the server answers.
//!
//! - `text.rs` — a formula's limits and tokens (the [`Formula`] type is in `value.rs`).
//! - `rewrite.rs` — references rewritten when rows or columns are inserted or deleted, or when a
//!   formula is copied to another cell.
//! - `deps.rs` — the cells a formula reads, and the area a read must load to evaluate a range.
//! - `eval.rs` — evaluating a set of cells with the engine.
//!
//! The design (what a read recomputes, the bounds) is in `docs/sheet-model.md`, "Formulas".

pub mod deps;
pub mod eval;
pub mod rewrite;
pub mod text;

pub use crate::value::Formula;
pub use deps::{Reach, closure_area, load_closure, load_reach, references};
pub use eval::{EvalError, Evaluated, MAX_EVAL_BYTES, MAX_EVAL_CELLS, TAB, evaluate};
pub use rewrite::{Displace, displace, displace_cells, offset};
pub use text::{
    FormulaError, MAX_FORMULA_CHARS, MAX_NESTING, check, is_volatile, needs_quote, tokens,
};

#[cfg(test)]
mod tests;
