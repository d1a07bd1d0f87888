//! Formulas: cells whose value is computed from other cells.
//!
//! The log stores a formula's text (what follows the `=`, as typed); its value is derived state,
//! computed by IronCalc (`ironcalc_base`), the engine the page runs as WebAssembly
//! (`@ironcalc/wasm`), so a value a person sees at once is the value the server answers.
//!
//! - `mod.rs` — [`Formula`], its limits, and the tokens of a formula.
//! - `rewrite.rs` — references rewritten when rows or columns are inserted or deleted, or when a
//!   formula is copied to another cell.
//! - `deps.rs` — the cells a formula reads, and the area a read must load to evaluate a range.
//! - `eval.rs` — evaluating a set of cells with the engine.
//!
//! The design (what a read recomputes, the bounds) is in `docs/sheet-model.md`, "Formulas".

pub mod deps;
pub mod eval;
pub mod rewrite;

use ironcalc_base::expressions::lexer::{Lexer, LexerMode};
use ironcalc_base::expressions::token::TokenType;
use ironcalc_base::language::get_default_language;
use ironcalc_base::locale::get_default_locale;

pub use deps::{closure_area, references};
pub use eval::{EvalError, Evaluated, MAX_EVAL_CELLS, TAB, evaluate};
pub use rewrite::{Displace, displace, displace_cells, offset};

/// Characters in one formula, `=` excluded (Excel: 8,192).
pub const MAX_FORMULA_CHARS: usize = 8_192;
/// Parentheses open at once in one formula (Excel allows 64 levels of nested functions).
pub const MAX_NESTING: usize = 64;

/// A formula cell's content: its text and, when known, the value it last computed (an XLSX
/// import's cached value, or the value a snapshot stored). The cached value is a hint for
/// readers that cannot evaluate; every read through the API evaluates.
#[derive(Debug, Clone, PartialEq)]
pub struct Formula {
    /// The formula without its leading `=`, e.g. `SUM(A1:A3)`.
    pub text: Box<str>,
    /// Never itself a formula.
    pub cached: Option<Box<super::Value>>,
}

/// Why a formula is outside the limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormulaError {
    #[error("formula is {0} characters, the limit is {MAX_FORMULA_CHARS}")]
    TooLong(usize),
    #[error("formula nests {0} parentheses deep, the limit is {MAX_NESTING}")]
    TooDeep(usize),
}

impl Formula {
    /// A formula from its text without the `=`, checked against the limits.
    pub fn new(text: &str) -> Result<Formula, FormulaError> {
        check(text)?;
        Ok(Formula {
            text: text.into(),
            cached: None,
        })
    }

    /// The formula as typed: `=` and the text.
    pub fn typed(&self) -> String {
        format!("={}", self.text)
    }
}

/// Checks a formula's text (without `=`) against [`MAX_FORMULA_CHARS`] and [`MAX_NESTING`].
pub fn check(text: &str) -> Result<(), FormulaError> {
    if text.len() > MAX_FORMULA_CHARS {
        let n = text.chars().count();
        if n > MAX_FORMULA_CHARS {
            return Err(FormulaError::TooLong(n));
        }
    }
    let (mut depth, mut deepest) = (0usize, 0usize);
    for token in tokens(text) {
        match token {
            TokenType::LeftParenthesis | TokenType::LeftBrace => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            TokenType::RightParenthesis | TokenType::RightBrace => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_NESTING {
        return Err(FormulaError::TooDeep(deepest));
    }
    Ok(())
}

/// The tokens of a formula (A1 mode, English names), up to the end or the first token the lexer
/// cannot read. References come out with absolute 1-based rows and columns.
pub fn tokens(text: &str) -> impl Iterator<Item = TokenType> {
    let mut lexer = Lexer::new(
        text,
        LexerMode::A1,
        get_default_locale(),
        get_default_language(),
    );
    std::iter::from_fn(move || match lexer.next_token() {
        TokenType::EOF | TokenType::Illegal(_) => None,
        t => Some(t),
    })
}

/// True when a text typed into a cell would be read as a formula, so storing it as text needs a
/// leading `'`: it starts with `=` once any leading quotes are skipped.
pub fn needs_quote(text: &str) -> bool {
    text.trim_start_matches('\'').starts_with('=')
}

#[cfg(test)]
mod tests;
