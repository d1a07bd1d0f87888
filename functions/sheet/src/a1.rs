//! A1 references: `B3`, column letters `C`, ranges `A1:C3`.
//!
//! Internally rows and columns are 0-based `u32`s; the 1-based A1 form exists only at the edges
//! (JSON, error messages).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::limits::{MAX_COLS, MAX_ROWS};

/// One cell position, 0-based. Always inside the sheet limits when built by [`CellRef::new`] or parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CellRef {
    /// 0-based row (A1's row number minus one).
    pub row: u32,
    /// 0-based column (`A` is 0).
    pub col: u32,
}

/// Why a reference did not parse; the message quotes the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("{0:?} is not a valid A1 reference")]
    Malformed(String),
    #[error("{0:?} is outside the sheet (rows 1..=1048576, columns A..=XFD)")]
    OutOfRange(String),
    #[error("{0:?} is not a valid column (letters A..=XFD)")]
    BadColumn(String),
    #[error("{0:?} is not a valid range (expected e.g. \"A1:C3\")")]
    BadRange(String),
}

impl CellRef {
    /// A reference inside the sheet, or `None` when `row`/`col` are outside the limits.
    pub fn new(row: u32, col: u32) -> Option<Self> {
        (row < MAX_ROWS && col < MAX_COLS).then_some(Self { row, col })
    }
}

/// Column letters for a 0-based column: 0 → `A`, 25 → `Z`, 26 → `AA`.
pub fn column_name(col: u32) -> String {
    let mut n = u64::from(col) + 1;
    let mut out = Vec::with_capacity(3);
    while n > 0 {
        let rem = (n - 1) % 26;
        out.push(b'A' + rem as u8);
        n = (n - 1) / 26;
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses column letters (case-insensitive) into a 0-based column inside the sheet.
pub fn parse_column(s: &str) -> Result<u32, RefError> {
    if s.is_empty() || s.len() > 3 || !s.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(RefError::BadColumn(s.to_owned()));
    }
    let mut n: u32 = 0;
    for b in s.bytes() {
        n = n * 26 + u32::from(b.to_ascii_uppercase() - b'A') + 1;
    }
    if n > MAX_COLS {
        return Err(RefError::BadColumn(s.to_owned()));
    }
    Ok(n - 1)
}

impl FromStr for CellRef {
    type Err = RefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let split = s.find(|c: char| c.is_ascii_digit()).unwrap_or(s.len());
        let (letters, digits) = s.split_at(split);
        let malformed = || RefError::Malformed(s.to_owned());
        if letters.is_empty()
            || !letters.bytes().all(|b| b.is_ascii_alphabetic())
            || digits.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || digits.starts_with('0')
        {
            return Err(malformed());
        }
        let col = parse_column(letters).map_err(|_| RefError::OutOfRange(s.to_owned()))?;
        let row: u64 = digits
            .parse()
            .map_err(|_| RefError::OutOfRange(s.to_owned()))?;
        if row > u64::from(MAX_ROWS) {
            return Err(RefError::OutOfRange(s.to_owned()));
        }
        Ok(CellRef {
            row: row as u32 - 1,
            col,
        })
    }
}

impl fmt::Display for CellRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", column_name(self.col), self.row + 1)
    }
}

impl Serialize for CellRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CellRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A rectangle of cells, both corners inclusive, `start <= end` on both axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Range {
    pub start: CellRef,
    pub end: CellRef,
}

impl Range {
    /// The rectangle spanned by two corners given in any order.
    pub fn new(a: CellRef, b: CellRef) -> Self {
        Range {
            start: CellRef {
                row: a.row.min(b.row),
                col: a.col.min(b.col),
            },
            end: CellRef {
                row: a.row.max(b.row),
                col: a.col.max(b.col),
            },
        }
    }

    pub fn rows(&self) -> u32 {
        self.end.row - self.start.row + 1
    }

    pub fn cols(&self) -> u32 {
        self.end.col - self.start.col + 1
    }

    pub fn contains(&self, r: CellRef) -> bool {
        (self.start.row..=self.end.row).contains(&r.row)
            && (self.start.col..=self.end.col).contains(&r.col)
    }
}

impl FromStr for Range {
    type Err = RefError;

    /// `A1:C3`, or a single cell `B2` (a 1×1 range).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |_| RefError::BadRange(s.to_owned());
        match s.split_once(':') {
            Some((a, b)) => Ok(Range::new(a.parse().map_err(bad)?, b.parse().map_err(bad)?)),
            None => {
                let c: CellRef = s.parse().map_err(bad)?;
                Ok(Range::new(c, c))
            }
        }
    }
}

impl Serialize for Range {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.start == self.end {
            s.collect_str(&self.start)
        } else {
            s.collect_str(self)
        }
    }
}

impl<'de> Deserialize<'de> for Range {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_references_at_the_sheet_edges() {
        for (text, row, col) in [("A1", 0, 0), ("B3", 2, 1), ("Z9", 8, 25), ("AA10", 9, 26)] {
            let r: CellRef = text
                .parse()
                .map_err(|e| format!("{text}: {e}"))
                .unwrap_or(CellRef { row: 99, col: 99 });
            assert_eq!((r.row, r.col), (row, col), "{text}");
            assert_eq!(r.to_string(), text);
        }
        let last: Result<CellRef, _> = "XFD1048576".parse();
        assert_eq!(
            last,
            Ok(CellRef {
                row: MAX_ROWS - 1,
                col: MAX_COLS - 1
            })
        );
        assert_eq!("b3".parse::<CellRef>(), Ok(CellRef { row: 2, col: 1 }));
    }

    #[test]
    fn rejects_malformed_and_out_of_range_references_with_the_text() {
        for bad in ["", "B0", "3B", "B", "12", "B-1", "B03", "B 3", "É1"] {
            let e = bad
                .parse::<CellRef>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains("not a valid A1 reference"), "{bad}: {e}");
        }
        for bad in ["XFE1", "A1048577", "AAAA1", "A99999999999"] {
            let e = bad
                .parse::<CellRef>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains("outside the sheet"), "{bad}: {e}");
        }
    }

    #[test]
    fn column_names_round_trip_over_the_whole_sheet_width() {
        for col in 0..MAX_COLS {
            assert_eq!(parse_column(&column_name(col)), Ok(col));
        }
        assert_eq!(column_name(MAX_COLS - 1), "XFD");
        assert!(parse_column("XFE").is_err());
    }

    #[test]
    fn ranges_normalise_their_corners() {
        let r: Range = "C3:A1".parse().unwrap_or(Range::new(
            CellRef { row: 9, col: 9 },
            CellRef { row: 9, col: 9 },
        ));
        assert_eq!(r.to_string(), "A1:C3");
        assert_eq!((r.rows(), r.cols()), (3, 3));
        assert!("A1:".parse::<Range>().is_err());
    }
}
