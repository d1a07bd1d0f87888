//! The fields events share, apart from the events themselves (`event.rs`, `resize.rs`): row
//! numbers and column names as JSON spells them, the span check, and the error a broken rule
//! gives.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::a1::{column_name, parse_column};
use super::limits::MAX_ROWS;

/// A 1-based row number in JSON, held 0-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowNumber(pub u32);

/// Column letters in JSON (`"C"`), held as a 0-based index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ColumnName(pub u32);

/// An event that breaks a rule; `path` names the field (`cells[2].ref`), empty for the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl ValidationError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ValidationError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// `at`/`count` of a row or column span: `count >= 1` and the span ends inside the sheet.
pub fn check_span(
    at: u32,
    count: u32,
    max: u32,
    unit: &str,
    at_text: &str,
) -> Result<(), ValidationError> {
    if count == 0 {
        return Err(ValidationError::new("count", "must be at least 1"));
    }
    if u64::from(at) + u64::from(count) > u64::from(max) {
        return Err(ValidationError::new(
            "count",
            format!("{count} {unit}s from {at_text} run past the end of the sheet ({max} {unit}s)"),
        ));
    }
    Ok(())
}

impl fmt::Display for RowNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "row {}", u64::from(self.0) + 1)
    }
}

impl Serialize for RowNumber {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::from(self.0) + 1)
    }
}

impl<'de> Deserialize<'de> for RowNumber {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = i64::deserialize(d)?;
        if n < 1 || n > i64::from(MAX_ROWS) {
            return Err(serde::de::Error::custom(format!(
                "{n} is out of range (rows are 1..={MAX_ROWS})"
            )));
        }
        Ok(RowNumber(n as u32 - 1))
    }
}

impl Serialize for ColumnName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&column_name(self.0))
    }
}

impl<'de> Deserialize<'de> for ColumnName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_column(&s)
            .map(ColumnName)
            .map_err(serde::de::Error::custom)
    }
}
