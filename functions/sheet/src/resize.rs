//! The bodies of the layout entries (`layout.rs` says what they do): `resize-columns`,
//! `resize-rows` and `freeze`, their rules and their binary form.

use serde::{Deserialize, Serialize};

use crate::bytes::{CodecError, Reader, Writer};
use crate::fields::{ColumnName, RowNumber, ValidationError, check_span};
use crate::limits::{MAX_COLS, MAX_ROWS};

/// Type code of `resize-columns` (26 is `style`).
pub const TYPE_RESIZE_COLUMNS: u16 = 27;
pub const TYPE_RESIZE_ROWS: u16 = 28;
pub const TYPE_FREEZE: u16 = 29;
/// The largest width or height, in pixels (Excel's widest column is about 1,790).
pub const MAX_SIZE_PX: u16 = 2_000;
/// The most rows or columns one resize may name (every column of the sheet).
pub const MAX_RESIZE_SPAN: u32 = 16_384;
/// The most rows and columns a split may freeze: panes larger than a screen are not panes.
pub const MAX_FROZEN_ROWS: u32 = 1_000;
pub const MAX_FROZEN_COLUMNS: u32 = 100;

/// `resize-columns`: `count` columns from `at` get `width` pixels, or the default when `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResizeColumns {
    pub at: ColumnName,
    pub count: u32,
    #[serde(default)]
    pub width: Option<u16>,
}

/// `resize-rows`: `count` rows from `at` get `height` pixels, or the default when `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResizeRows {
    pub at: RowNumber,
    pub count: u32,
    #[serde(default)]
    pub height: Option<u16>,
}

/// `freeze`: the first `rows` rows and `columns` columns stay in view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Freeze {
    #[serde(default)]
    pub rows: u32,
    #[serde(default)]
    pub columns: u32,
}

impl Freeze {
    pub fn is_none(&self) -> bool {
        self.rows == 0 && self.columns == 0
    }
}

/// Checks a resize: its span inside the sheet and at most [`MAX_RESIZE_SPAN`] long, its size in
/// 1..=[`MAX_SIZE_PX`].
pub(crate) fn check_resize(
    (at, count, max, unit, at_text): (u32, u32, u32, &str, &str),
    (size, field): (Option<u16>, &str),
) -> Result<(), ValidationError> {
    check_span(at, count, max, unit, at_text)?;
    if count > MAX_RESIZE_SPAN {
        return Err(ValidationError::new(
            "count",
            format!("{count} {unit}s; one resize takes at most {MAX_RESIZE_SPAN}"),
        ));
    }
    check_size(size, field)
}

pub(crate) fn check_size(size: Option<u16>, field: &str) -> Result<(), ValidationError> {
    match size {
        Some(s) if s == 0 || s > MAX_SIZE_PX => Err(ValidationError::new(
            field,
            format!("{s} pixels is not a size (1 to {MAX_SIZE_PX}, or null for the default)"),
        )),
        _ => Ok(()),
    }
}

pub(crate) fn check_freeze(f: &Freeze) -> Result<(), ValidationError> {
    if f.rows > MAX_FROZEN_ROWS {
        return Err(ValidationError::new(
            "rows",
            format!("{} rows; at most {MAX_FROZEN_ROWS} freeze", f.rows),
        ));
    }
    if f.columns > MAX_FROZEN_COLUMNS {
        return Err(ValidationError::new(
            "columns",
            format!("{} columns; at most {MAX_FROZEN_COLUMNS} freeze", f.columns),
        ));
    }
    Ok(())
}

/// A resize's body: `at`, `count`, then the size (0 for the default).
pub(crate) fn write_resize(w: &mut Writer, at: u32, count: u32, size: Option<u16>) {
    w.varint(u64::from(at));
    w.varint(u64::from(count));
    w.varint(u64::from(size.unwrap_or(0)));
}

fn read_resize(
    r: &mut Reader<'_>,
    max: u32,
    what: &str,
) -> Result<(u32, u32, Option<u16>), CodecError> {
    let at = r.varint_u32(max - 1, what)?;
    let count = r.varint_u32(max, "count")?;
    let size = r.varint_u32(u32::from(MAX_SIZE_PX), "size")?;
    Ok((at, count, u16::try_from(size).ok().filter(|s| *s > 0)))
}

pub(crate) fn read_resize_columns(r: &mut Reader<'_>) -> Result<ResizeColumns, CodecError> {
    let (at, count, width) = read_resize(r, MAX_COLS, "column")?;
    Ok(ResizeColumns {
        at: ColumnName(at),
        count,
        width,
    })
}

pub(crate) fn read_resize_rows(r: &mut Reader<'_>) -> Result<ResizeRows, CodecError> {
    let (at, count, height) = read_resize(r, MAX_ROWS, "row")?;
    Ok(ResizeRows {
        at: RowNumber(at),
        count,
        height,
    })
}

pub(crate) fn write_freeze(w: &mut Writer, f: &Freeze) {
    w.varint(u64::from(f.rows));
    w.varint(u64::from(f.columns));
}

pub(crate) fn read_freeze(r: &mut Reader<'_>) -> Result<Freeze, CodecError> {
    Ok(Freeze {
        rows: r.varint_u32(MAX_FROZEN_ROWS, "frozen rows")?,
        columns: r.varint_u32(MAX_FROZEN_COLUMNS, "frozen columns")?,
    })
}

/// A layout as runs of one size (the JSON form of `layout::Layout`): `{"columns": [{"at",
/// "count", "width"}], "rows": [{"at", "count", "height"}], "freeze": {"rows", "columns"}}`,
/// empty parts left out. A run may be longer than one resize takes (touching resizes of one
/// size merge); each is checked as it is read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LayoutRuns {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<ResizeColumns>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<ResizeRows>,
    #[serde(skip_serializing_if = "Freeze::is_none")]
    pub freeze: Freeze,
}

impl<'de> Deserialize<'de> for LayoutRuns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            #[serde(default)]
            columns: Vec<ResizeColumns>,
            #[serde(default)]
            rows: Vec<ResizeRows>,
            #[serde(default)]
            freeze: Freeze,
        }
        let raw = Raw::deserialize(d)?;
        let bad = serde::de::Error::custom;
        check_freeze(&raw.freeze).map_err(bad)?;
        for r in &raw.columns {
            check_span(r.at.0, r.count, MAX_COLS, "column", "the layout").map_err(bad)?;
            check_size(r.width, "width").map_err(bad)?;
        }
        for r in &raw.rows {
            check_span(r.at.0, r.count, MAX_ROWS, "row", "the layout").map_err(bad)?;
            check_size(r.height, "height").map_err(bad)?;
        }
        Ok(LayoutRuns {
            columns: raw.columns,
            rows: raw.rows,
            freeze: raw.freeze,
        })
    }
}

impl LayoutRuns {
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty() && self.rows.is_empty() && self.freeze.is_none()
    }
}
