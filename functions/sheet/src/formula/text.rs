//! A formula's text: its limits, its tokens, and when a text needs a quote to stay one. Nothing
//! here knows cells or values, so `value.rs` can check formulas without a circle.

use ironcalc_base::expressions::lexer::{Lexer, LexerMode};
use ironcalc_base::expressions::token::TokenType;
use ironcalc_base::language::get_default_language;
use ironcalc_base::locale::get_default_locale;

/// Characters in one formula, `=` excluded (Excel: 8,192).
pub const MAX_FORMULA_CHARS: usize = 8_192;
/// Parentheses open at once in one formula (Excel allows 64 levels of nested functions).
pub const MAX_NESTING: usize = 64;

/// Why a formula is outside the limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormulaError {
    #[error("formula is {0} characters, the limit is {MAX_FORMULA_CHARS}")]
    TooLong(usize),
    #[error("formula nests {0} parentheses deep, the limit is {MAX_NESTING}")]
    TooDeep(usize),
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

/// Functions whose value is not fixed by the cells a formula names: the clock, chance, a
/// reference computed at run time (`INDIRECT`, `OFFSET`) or the workbook's environment.
const VOLATILE: [&str; 9] = [
    "RAND(",
    "RANDBETWEEN(",
    "RANDARRAY(",
    "NOW(",
    "TODAY(",
    "INDIRECT(",
    "OFFSET(",
    "CELL(",
    "INFO(",
];

/// True when a formula may call a volatile function: its value can change without any cell it
/// names changing, so no value computed for it earlier can stand in for evaluating it now. A
/// text match, so a string literal naming such a function counts too (the cost of that mistake
/// is an evaluation, never a stale value).
pub fn is_volatile(text: &str) -> bool {
    let upper = text.to_ascii_uppercase();
    VOLATILE.iter().any(|name| upper.contains(name))
}
