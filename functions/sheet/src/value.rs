//! Cell values and cells.
//!
//! JSON form (the API contract): a string, a number, a boolean, `null` (explicitly empty) or
//! `{"error": "#DIV/0!"}`. A string that starts with `=` is a formula, as typed into any
//! spreadsheet; a text that would read as one is written with a leading `'`, which is not stored
//! (`'=1+1` is the text `=1+1`). Computed values ([`Shown`]) have no such quoting.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::formula::text::{self as formula, FormulaError};
use super::limits::{MAX_FORMAT_BYTES, MAX_TEXT_CHARS};
use super::style::{Style, StyleMemo, StylePatch};

/// The standard spreadsheet errors a cell can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    Null,
    Div0,
    Value,
    Ref,
    Name,
    Num,
    NA,
    GettingData,
    Spill,
    Calc,
    /// A formula that reads its own value, directly or through others.
    Circ,
    /// A formula the engine could not read.
    Error,
    /// A function the engine does not implement.
    NImpl,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::Null,
        ErrorCode::Div0,
        ErrorCode::Value,
        ErrorCode::Ref,
        ErrorCode::Name,
        ErrorCode::Num,
        ErrorCode::NA,
        ErrorCode::GettingData,
        ErrorCode::Spill,
        ErrorCode::Calc,
        ErrorCode::Circ,
        ErrorCode::Error,
        ErrorCode::NImpl,
    ];

    /// The text a spreadsheet shows, e.g. `#DIV/0!`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Null => "#NULL!",
            ErrorCode::Div0 => "#DIV/0!",
            ErrorCode::Value => "#VALUE!",
            ErrorCode::Ref => "#REF!",
            ErrorCode::Name => "#NAME?",
            ErrorCode::Num => "#NUM!",
            ErrorCode::NA => "#N/A",
            ErrorCode::GettingData => "#GETTING_DATA",
            ErrorCode::Spill => "#SPILL!",
            ErrorCode::Calc => "#CALC!",
            ErrorCode::Circ => "#CIRC!",
            ErrorCode::Error => "#ERROR!",
            ErrorCode::NImpl => "#N/IMPL",
        }
    }

    /// Parses the displayed text (case-insensitive, as spreadsheets accept it).
    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s))
    }

    /// The stable one-byte code used in binary encodings. Never renumber.
    pub fn code(self) -> u8 {
        match self {
            ErrorCode::Null => 1,
            ErrorCode::Div0 => 2,
            ErrorCode::Value => 3,
            ErrorCode::Ref => 4,
            ErrorCode::Name => 5,
            ErrorCode::Num => 6,
            ErrorCode::NA => 7,
            ErrorCode::GettingData => 8,
            ErrorCode::Spill => 9,
            ErrorCode::Calc => 10,
            ErrorCode::Circ => 11,
            ErrorCode::Error => 12,
            ErrorCode::NImpl => 13,
        }
    }

    pub fn from_code(c: u8) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|e| e.code() == c)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One cell's value. `Number` is always finite (JSON cannot carry NaN or infinities and the binary
/// decoder rejects them), so `PartialEq` is an equivalence in practice.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Empty,
    Text(String),
    Number(f64),
    Bool(bool),
    Error(ErrorCode),
    /// A formula; its value is computed (`formula.rs`).
    Formula(Formula),
}

/// Why a value or format is outside the limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("text is {0} characters, the limit is {MAX_TEXT_CHARS}")]
    TextTooLong(usize),
    #[error("number must be finite")]
    NotFinite,
    #[error("format is {0} bytes, the limit is {MAX_FORMAT_BYTES}")]
    FormatTooLong(usize),
    #[error(transparent)]
    Formula(#[from] FormulaError),
}

impl Value {
    pub fn is_empty(&self) -> bool {
        matches!(self, Value::Empty)
    }

    /// Checks the value against the sheet limits.
    pub fn check(&self) -> Result<(), ValueError> {
        match self {
            // Byte length bounds the char count from above, so most texts skip the count.
            Value::Text(t) if t.len() > MAX_TEXT_CHARS => {
                let n = t.chars().count();
                if n > MAX_TEXT_CHARS {
                    return Err(ValueError::TextTooLong(n));
                }
                Ok(())
            }
            Value::Number(n) if !n.is_finite() => Err(ValueError::NotFinite),
            Value::Formula(f) => Ok(formula::check(&f.text)?),
            _ => Ok(()),
        }
    }
}

/// Checks a number-format string against the limits.
pub fn check_format(f: &str) -> Result<(), ValueError> {
    if f.len() > MAX_FORMAT_BYTES {
        return Err(ValueError::FormatTooLong(f.len()));
    }
    Ok(())
}

/// A value as a reader sees it: computed values, texts as they are (no `'` before one that starts
/// with `=`). A formula shows its cached value, or nothing; callers evaluate first
/// ([`crate::formula::evaluate`]).
#[derive(Debug)]
pub struct Shown<'a>(pub &'a Value);

impl Serialize for Shown<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Text(t) => s.serialize_str(t),
            Value::Formula(f) => match f.cached.as_deref() {
                Some(v) => Shown(v).serialize(s),
                None => s.serialize_none(),
            },
            v => v.serialize(s),
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Empty => s.serialize_none(),
            Value::Text(t) if formula::needs_quote(t) => s.serialize_str(&format!("'{t}")),
            Value::Text(t) => s.serialize_str(t),
            Value::Formula(f) => s.serialize_str(&f.typed()),
            // Integral numbers print as integers (`80`, not `80.0`), as a client wrote them.
            Value::Number(n)
                if n.fract() == 0.0
                    && n.abs() < 9.007_199_254_740_992e15
                    && !(*n == 0.0 && n.is_sign_negative()) =>
            {
                s.serialize_i64(*n as i64)
            }
            Value::Number(n) => s.serialize_f64(*n),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Error(e) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("error", e.as_str())?;
                m.end()
            }
        }
    }
}

const VALUE_EXPECTED: &str = "a string, number, boolean, null or {\"error\": \"#DIV/0!\"}";

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(VALUE_EXPECTED)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Empty)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Empty)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v as f64))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v as f64))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        let v = Value::Number(v);
        v.check().map_err(E::custom)?;
        Ok(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.visit_string(v.to_owned())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        let v = if let Some(text) = v.strip_prefix('=') {
            Value::Formula(Formula::new(text).map_err(E::custom)?)
        } else if v.starts_with('\'') && formula::needs_quote(&v[1..]) {
            Value::Text(v[1..].to_owned())
        } else {
            Value::Text(v)
        };
        v.check().map_err(E::custom)?;
        Ok(v)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut code = None;
        while let Some(key) = map.next_key::<String>()? {
            if key != "error" {
                return Err(de::Error::custom(format!(
                    "unknown field `{key}` in an error value, expected `error`"
                )));
            }
            let text: String = map.next_value()?;
            code = Some(ErrorCode::parse(&text).ok_or_else(|| {
                de::Error::custom(format!(
                    "{text:?} is not a spreadsheet error (expected one of {})",
                    ErrorCode::ALL.map(ErrorCode::as_str).join(", ")
                ))
            })?);
        }
        code.map(Value::Error)
            .ok_or_else(|| de::Error::custom(format!("expected {VALUE_EXPECTED}")))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

/// A stored cell: a value, an optional number format and an optional style (never the default
/// style: a plain cell holds none). A cell with an empty value, no format and no style does not
/// exist (it is never stored).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Cell {
    pub value: Value,
    pub format: Option<Box<str>>,
    pub style: Option<Arc<Style>>,
}

impl Cell {
    pub fn new(value: Value, format: Option<&str>) -> Self {
        Cell {
            value,
            format: format.map(Into::into),
            style: None,
        }
    }

    /// True when the cell holds nothing and so is not stored.
    pub fn is_blank(&self) -> bool {
        self.value.is_empty() && self.format.is_none() && self.style.is_none()
    }

    /// Applies a style patch, keeping the value. `memo` (one per patch) holds the last style
    /// given and made, so the cells of a range that shared a style share the new one.
    pub fn restyle(&mut self, patch: &StylePatch, memo: &mut StyleMemo) {
        self.style = memo.patched(patch, self.style.as_ref());
        if let Some(f) = &patch.format {
            self.format = f.as_deref().map(Into::into);
        }
    }

    /// The cell a `set` of `edit` leaves: the edit's value and format, this cell's style (a value
    /// edit never changes how a cell looks).
    pub fn edited(&self, edit: &Cell) -> Cell {
        Cell {
            value: edit.value.clone(),
            format: edit.format.clone(),
            style: self.style.clone(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn json_values_round_trip_in_the_contract_form() {
        let text = r##"["x", 1.5, -2, true, null, {"error": "#DIV/0!"}, {"error":"#n/a"}]"##;
        let vs: Vec<Value> = serde_json::from_str(text).unwrap();
        assert_eq!(
            vs,
            vec![
                Value::Text("x".into()),
                Value::Number(1.5),
                Value::Number(-2.0),
                Value::Bool(true),
                Value::Empty,
                Value::Error(ErrorCode::Div0),
                Value::Error(ErrorCode::NA),
            ]
        );
        let back = serde_json::to_string(&vs).unwrap();
        assert_eq!(
            back,
            r##"["x",1.5,-2,true,null,{"error":"#DIV/0!"},{"error":"#N/A"}]"##
        );
    }

    #[test]
    fn wrong_value_types_and_unknown_errors_are_rejected_with_the_reason() {
        let e = serde_json::from_str::<Value>("[1]")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected a string, number, boolean, null"),
            "{e}"
        );
        let e = serde_json::from_str::<Value>(r##"{"error":"#OOPS"}"##)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"#OOPS\" is not a spreadsheet error"), "{e}");
        let long = format!("\"{}\"", "é".repeat(MAX_TEXT_CHARS + 1));
        let e = serde_json::from_str::<Value>(&long)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("text is 32768 characters, the limit is 32767"),
            "{e}"
        );
        // Exactly at the limit is fine, even when the UTF-8 is longer than the limit in bytes.
        let ok = format!("\"{}\"", "é".repeat(MAX_TEXT_CHARS));
        assert!(serde_json::from_str::<Value>(&ok).is_ok());
    }

    #[test]
    fn error_codes_have_stable_distinct_byte_codes() {
        for e in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(e.code()), Some(e));
            assert_eq!(ErrorCode::parse(e.as_str()), Some(e));
        }
        assert_eq!(ErrorCode::from_code(0), None);
    }
}

/// A formula cell's content: its text and, when known, the value it last computed (an XLSX
/// import's cached value, or the value a snapshot stored). The cached value is a hint for
/// readers that cannot evaluate; every read through the API evaluates.
#[derive(Debug, Clone, PartialEq)]
pub struct Formula {
    /// The formula without its leading `=`, e.g. `SUM(A1:A3)`.
    pub text: Box<str>,
    /// Never itself a formula.
    pub cached: Option<Box<Value>>,
}

impl Formula {
    /// A formula from its text without the `=`, checked against the limits.
    pub fn new(text: &str) -> Result<Formula, FormulaError> {
        formula::check(text)?;
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

/// One non-empty row: its 0-based index and its cells sorted by 0-based column.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    pub index: u32,
    pub cells: Vec<(u32, Cell)>,
}
