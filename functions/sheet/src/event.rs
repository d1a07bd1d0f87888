//! Spreadsheet events: typed, validated, with a JSON form (the HTTP API contract) and a compact
//! binary form (the log body), versioned per type.
//!
//! JSON: `{"type": "set", "body": {"cells": [{"ref": "B3", "value": 1, "format": "0.00"}]}}`.
//! Binary: `Event::encode` gives `(type code, body version, bytes)`; the log stores those three
//! things and nothing else about the event.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::a1::{CellRef, Range, column_name};
use super::codec::{self, CodecError, Reader, Writer};
pub use super::fields::{ColumnName, RowNumber, ValidationError, check_span};
use super::limits::{MAX_CELLS_PER_SET, MAX_CELLS_PER_STYLE, MAX_COLS, MAX_ROWS};
use super::resize::{
    self as layout, Freeze, LayoutRuns, ResizeColumns, ResizeRows, TYPE_FREEZE,
    TYPE_RESIZE_COLUMNS, TYPE_RESIZE_ROWS,
};
use super::style::StylePatch;
use super::value::{Cell, Value, check_format};

/// Type code of the log's own Snapshot entry (owned by the log core).
pub const TYPE_SNAPSHOT: u16 = 0;
/// Type code of the log's own End Segment entry (owned by the log core).
pub const TYPE_END_SEGMENT: u16 = 1;
pub const TYPE_SET: u16 = 16;
pub const TYPE_INSERT_ROWS: u16 = 17;
pub const TYPE_DELETE_ROWS: u16 = 18;
pub const TYPE_INSERT_COLUMNS: u16 = 19;
pub const TYPE_DELETE_COLUMNS: u16 = 20;
pub const TYPE_IMPORT: u16 = 21;
/// Type code of `restore` (22 is the sync clients' `mutations`, `crate::mutations`).
pub const TYPE_RESTORE: u16 = 23;
/// Type code of `style` (24 is `undo`, `crate::undo`; 25 `authored`, `crate::authored`).
pub const TYPE_STYLE: u16 = 26;

/// The body version every type is written with today. Decoders keep accepting older versions.
pub const BODY_VERSION: u16 = 1;
/// The body version of an `import` or a `restore` that names the client group that made it.
pub const GROUP_VERSION: u16 = 2;
/// The body version of an `import` that carries its file's layout: the format, a byte of flags
/// (1: a client group follows, 2: the layout's JSON follows), then those.
pub const LAYOUT_VERSION: u16 = 3;
/// The most bytes of layout JSON an `import` carries.
pub const MAX_IMPORT_LAYOUT_BYTES: usize = 64 * 1024;
/// Longest client or client group id, in bytes.
pub const MAX_ID_BYTES: usize = 128;

/// A client or client group id: 1 to [`MAX_ID_BYTES`] printable ASCII characters.
pub fn check_id(what: &str, id: &str) -> Result<(), ValidationError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES || !id.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(ValidationError {
            path: what.into(),
            message: format!(
                "must be 1 to {MAX_ID_BYTES} printable ASCII characters without spaces"
            ),
        });
    }
    Ok(())
}

/// One spreadsheet event. The JSON form is adjacently tagged: `{"type": ..., "body": ...}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", content = "body", rename_all = "kebab-case")]
pub enum Event {
    Set(SetCells),
    InsertRows(InsertRows),
    DeleteRows(DeleteRows),
    InsertColumns(InsertColumns),
    DeleteColumns(DeleteColumns),
    Import(Import),
    Restore(Restore),
    Style(StyleCells),
    ResizeColumns(ResizeColumns),
    ResizeRows(ResizeRows),
    Freeze(Freeze),
}

/// `style`: change how the cells of some ranges look, keeping their values: each field the patch
/// names is set (or cleared by `null`), the others stay. An empty cell in a range becomes a styled
/// empty cell; a cell left with no value, format or style is removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StyleCells {
    pub ranges: Vec<Range>,
    pub style: StylePatch,
}

impl StyleCells {
    /// At least one range, at most [`MAX_CELLS_PER_STYLE`] cells, a valid patch.
    fn validate(&self) -> Result<(), ValidationError> {
        if self.ranges.is_empty() {
            return Err(ValidationError::new(
                "ranges",
                "must hold at least one range",
            ));
        }
        let n = self.cell_count();
        if n > MAX_CELLS_PER_STYLE {
            return Err(ValidationError::new(
                "ranges",
                format!("cover {n} cells, the limit per entry is {MAX_CELLS_PER_STYLE}"),
            ));
        }
        self.style
            .validate()
            .map_err(|e| ValidationError::new("style", e))?;
        if let Some(Some(f)) = &self.style.format {
            check_format(f).map_err(|e| ValidationError::new("style.format", e.to_string()))?;
        }
        Ok(())
    }

    /// The cells the ranges cover, counting a cell in two overlapping ranges twice.
    pub fn cell_count(&self) -> u64 {
        self.ranges
            .iter()
            .map(|r| u64::from(r.rows()) * u64::from(r.cols()))
            .sum()
    }

    /// The first and last rows any range covers.
    pub fn row_bounds(&self) -> Option<(u32, u32)> {
        let lo = self.ranges.iter().map(|r| r.start.row).min()?;
        let hi = self.ranges.iter().map(|r| r.end.row).max()?;
        Some((lo, hi))
    }

    /// The columns the ranges cover in `row`, as sorted, disjoint, inclusive spans (empty when
    /// no range covers it).
    pub fn columns_in(&self, row: u32) -> Vec<(u32, u32)> {
        let mut spans: Vec<(u32, u32)> = self
            .ranges
            .iter()
            .filter(|r| (r.start.row..=r.end.row).contains(&row))
            .map(|r| (r.start.col, r.end.col))
            .collect();
        spans.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(spans.len());
        for (a, b) in spans {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        merged
    }

    /// The next row at or after `row` that a range covers.
    pub fn next_row_from(&self, row: u32) -> Option<u32> {
        self.ranges
            .iter()
            .filter(|r| r.end.row >= row)
            .map(|r| r.start.row.max(row))
            .min()
    }
}

/// `set`: write cells. Each edit replaces the whole cell (value and format); `null` with no format
/// clears it. When a reference repeats, the last edit wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetCells {
    pub cells: Vec<CellEdit>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellEdit {
    #[serde(rename = "ref")]
    pub at: CellRef,
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// `insert-rows`: `count` empty rows so the first new row is row `at`; rows from `at` down move
/// down by `count`. `values[i][j]` fills new row `at + i`, column `j` (from A). Cells pushed past
/// the last sheet row are dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InsertRows {
    pub at: RowNumber,
    pub count: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Vec<Value>>,
}

/// `delete-rows`: remove rows `at..at+count`; rows below move up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteRows {
    pub at: RowNumber,
    pub count: u32,
}

/// `insert-columns`: like `insert-rows` for columns, with no values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InsertColumns {
    pub at: ColumnName,
    pub count: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteColumns {
    pub at: ColumnName,
    pub count: u32,
}

/// `import`: replace the sheet with a file's contents from A1. The file is the entry's external
/// payload, supplied separately.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Import {
    pub format: ImportFormat,
    /// The sync client group that imported the file (the web page's), when its commit named one:
    /// the import is then a step of that group's undo stack (`crate::undo_plan`). Body version 2.
    #[serde(
        rename = "clientGroupID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub group: Option<String>,
    /// The file's column widths, row heights and frozen panes (an XLSX file's, read when the
    /// upload was committed): the sheet's layout after the import. Body version 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<LayoutRuns>,
}

/// `restore`: make the sheet what it was as of sequence `seq` (the state of every entry before
/// it, as `cells?at=seq` shows it). The state is a snapshot manifest the API writes before it
/// appends the entry (`snapshot::restore_manifest_key`); everything after `seq` stays in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restore {
    pub seq: u64,
    /// The sync client group that restored (the web page's), when the request named one: the
    /// restore is then a step of that group's undo stack, like an import. Body version 2.
    #[serde(
        rename = "clientGroupID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub group: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImportFormat {
    Csv,
    Xlsx,
}

/// Why a stored body did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown entry type {0}")]
    UnknownType(u16),
    #[error("type {0} is a log entry (snapshot or end-segment), not a spreadsheet event")]
    LogEntry(u16),
    #[error(
        "{type_name} body version {version} is not supported (this build reads 1..={BODY_VERSION})"
    )]
    UnsupportedVersion {
        type_name: &'static str,
        version: u16,
    },
    #[error("{type_name} body: {source}")]
    Codec {
        type_name: &'static str,
        source: CodecError,
    },
    #[error("{type_name} body: {source}")]
    Invalid {
        type_name: &'static str,
        source: ValidationError,
    },
}

impl DecodeError {
    /// What every binary body of type `type_name` checks first: that this build reads its
    /// `version` (`known`), else [`DecodeError::UnsupportedVersion`]. Answers the wrapper of that
    /// type's codec errors.
    pub(crate) fn check_version(
        type_name: &'static str,
        version: u16,
        known: bool,
    ) -> Result<impl Fn(CodecError) -> DecodeError + Copy, DecodeError> {
        if !known {
            return Err(DecodeError::UnsupportedVersion { type_name, version });
        }
        Ok(move |source| DecodeError::Codec { type_name, source })
    }
}

const TYPE_NAMES: [&str; 11] = [
    "set",
    "insert-rows",
    "delete-rows",
    "insert-columns",
    "delete-columns",
    "import",
    "restore",
    "style",
    "resize-columns",
    "resize-rows",
    "freeze",
];

/// The JSON `type` name of a spreadsheet event's type code (`None` for the log's own entries and
/// codes no event has): the one table of names, which decoding and the API's entry
/// listing both read.
pub fn type_name_of(type_code: u16) -> Option<&'static str> {
    match type_code {
        TYPE_SET..=TYPE_IMPORT => Some(TYPE_NAMES[usize::from(type_code - TYPE_SET)]),
        TYPE_RESTORE => Some(TYPE_NAMES[6]),
        TYPE_STYLE..=TYPE_FREEZE => Some(TYPE_NAMES[usize::from(type_code - TYPE_STYLE) + 7]),
        _ => None,
    }
}

impl Event {
    /// The JSON `type` name.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::Set(_) => "set",
            Event::InsertRows(_) => "insert-rows",
            Event::DeleteRows(_) => "delete-rows",
            Event::InsertColumns(_) => "insert-columns",
            Event::DeleteColumns(_) => "delete-columns",
            Event::Import(_) => "import",
            Event::Restore(_) => "restore",
            Event::Style(_) => "style",
            Event::ResizeColumns(_) => "resize-columns",
            Event::ResizeRows(_) => "resize-rows",
            Event::Freeze(_) => "freeze",
        }
    }

    pub fn type_code(&self) -> u16 {
        match self {
            Event::Set(_) => TYPE_SET,
            Event::InsertRows(_) => TYPE_INSERT_ROWS,
            Event::DeleteRows(_) => TYPE_DELETE_ROWS,
            Event::InsertColumns(_) => TYPE_INSERT_COLUMNS,
            Event::DeleteColumns(_) => TYPE_DELETE_COLUMNS,
            Event::Import(_) => TYPE_IMPORT,
            Event::Restore(_) => TYPE_RESTORE,
            Event::Style(_) => TYPE_STYLE,
            Event::ResizeColumns(_) => TYPE_RESIZE_COLUMNS,
            Event::ResizeRows(_) => TYPE_RESIZE_ROWS,
            Event::Freeze(_) => TYPE_FREEZE,
        }
    }

    /// Whether the event inserts or deletes rows or columns.
    pub fn shifts(&self) -> bool {
        matches!(
            self,
            Event::InsertRows(_)
                | Event::DeleteRows(_)
                | Event::InsertColumns(_)
                | Event::DeleteColumns(_)
        )
    }

    /// Whether the event moves cells: a row or column insert or delete, or an import or a
    /// restore, which replace them all. Cell edits, styles and the layout's entries move none.
    pub fn moves_cells(&self) -> bool {
        self.shifts() || matches!(self, Event::Import(_) | Event::Restore(_))
    }

    /// Parses and validates a whole JSON entry `{"type": ..., "body": ...}`.
    pub fn from_json(bytes: &[u8]) -> Result<Event, ValidationError> {
        let raw: RawEntry = serde_json::from_slice(bytes).map_err(|e| {
            // serde_json's messages carry "at line 1 column 7", which is noise for a JSON body.
            let msg = e.to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_owned();
            ValidationError::new("", msg)
        })?;
        Event::from_parts(&raw.kind, raw.body)
    }

    /// Parses and validates an entry given its `type` and `body` (for callers that wrap the entry
    /// in their own JSON, such as the API with its `expectedSeq`).
    pub fn from_parts(kind: &str, body: serde_json::Value) -> Result<Event, ValidationError> {
        let event = match kind {
            "set" => Event::Set(parse_body(body)?),
            "insert-rows" => Event::InsertRows(parse_body(body)?),
            "delete-rows" => Event::DeleteRows(parse_body(body)?),
            "insert-columns" => Event::InsertColumns(parse_body(body)?),
            "delete-columns" => Event::DeleteColumns(parse_body(body)?),
            "import" => Event::Import(parse_body(body)?),
            "restore" => Event::Restore(parse_body(body)?),
            "style" => Event::Style(parse_body(body)?),
            "resize-columns" => Event::ResizeColumns(parse_body(body)?),
            "resize-rows" => Event::ResizeRows(parse_body(body)?),
            "freeze" => Event::Freeze(parse_body(body)?),
            other => {
                return Err(ValidationError::new(
                    "type",
                    format!(
                        "{other:?} is not a known entry type (expected one of {})",
                        TYPE_NAMES.join(", ")
                    ),
                ));
            }
        };
        event.validate()?;
        Ok(event)
    }

    /// Checks the rules serde cannot: limits that involve more than one field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            Event::Set(s) => {
                if s.cells.is_empty() {
                    return Err(ValidationError::new("cells", "must hold at least one cell"));
                }
                if s.cells.len() > MAX_CELLS_PER_SET {
                    return Err(ValidationError::new(
                        "cells",
                        format!(
                            "{} cells, the limit per entry is {MAX_CELLS_PER_SET}",
                            s.cells.len()
                        ),
                    ));
                }
                for (i, c) in s.cells.iter().enumerate() {
                    if CellRef::new(c.at.row, c.at.col).is_none() {
                        return Err(ValidationError::new(
                            format!("cells[{i}].ref"),
                            "is outside the sheet",
                        ));
                    }
                    c.value.check().map_err(|e| {
                        ValidationError::new(format!("cells[{i}].value"), e.to_string())
                    })?;
                    if let Some(f) = &c.format {
                        check_format(f).map_err(|e| {
                            ValidationError::new(format!("cells[{i}].format"), e.to_string())
                        })?;
                    }
                }
                Ok(())
            }
            Event::InsertRows(e) => {
                check_span(e.at.0, e.count, MAX_ROWS, "row", &e.at.to_string())?;
                if e.values.len() as u64 > u64::from(e.count) {
                    return Err(ValidationError::new(
                        "values",
                        format!("has {} rows but count is {}", e.values.len(), e.count),
                    ));
                }
                for (i, row) in e.values.iter().enumerate() {
                    if row.len() as u64 > u64::from(MAX_COLS) {
                        return Err(ValidationError::new(
                            format!("values[{i}]"),
                            format!("has {} values, the sheet has {MAX_COLS} columns", row.len()),
                        ));
                    }
                    for (j, v) in row.iter().enumerate() {
                        v.check().map_err(|e| {
                            ValidationError::new(format!("values[{i}][{j}]"), e.to_string())
                        })?;
                    }
                }
                Ok(())
            }
            Event::DeleteRows(e) => check_span(e.at.0, e.count, MAX_ROWS, "row", &e.at.to_string()),
            Event::InsertColumns(e) => {
                check_span(e.at.0, e.count, MAX_COLS, "column", &column_name(e.at.0))
            }
            Event::DeleteColumns(e) => {
                check_span(e.at.0, e.count, MAX_COLS, "column", &column_name(e.at.0))
            }
            Event::Import(i) => match &i.group {
                Some(g) => check_id("clientGroupID", g),
                None => Ok(()),
            },
            Event::Restore(x) => match &x.group {
                Some(g) => check_id("clientGroupID", g),
                None => Ok(()),
            },
            Event::Style(st) => st.validate(),
            Event::ResizeColumns(r) => layout::check_resize(
                (r.at.0, r.count, MAX_COLS, "column", &column_name(r.at.0)),
                (r.width, "width"),
            ),
            Event::ResizeRows(r) => layout::check_resize(
                (r.at.0, r.count, MAX_ROWS, "row", &r.at.to_string()),
                (r.height, "height"),
            ),
            Event::Freeze(f) => layout::check_freeze(f),
        }
    }

    /// The binary form: `(type code, body version, body bytes)`.
    pub fn encode(&self) -> (u16, u16, Vec<u8>) {
        let mut w = Writer::new();
        match self {
            Event::Set(s) => {
                w.varint(s.cells.len() as u64);
                for c in &s.cells {
                    w.varint(u64::from(c.at.row));
                    w.varint(u64::from(c.at.col));
                    codec::write_value(&mut w, &c.value, c.format.as_deref());
                }
            }
            Event::InsertRows(e) => {
                w.varint(u64::from(e.at.0));
                w.varint(u64::from(e.count));
                w.varint(e.values.len() as u64);
                for row in &e.values {
                    w.varint(row.len() as u64);
                    for v in row {
                        codec::write_value(&mut w, v, None);
                    }
                }
            }
            Event::DeleteRows(DeleteRows { at, count }) => {
                w.varint(u64::from(at.0));
                w.varint(u64::from(*count));
            }
            Event::InsertColumns(InsertColumns { at, count })
            | Event::DeleteColumns(DeleteColumns { at, count }) => {
                w.varint(u64::from(at.0));
                w.varint(u64::from(*count));
            }
            Event::Import(i) => {
                w.u8(match i.format {
                    ImportFormat::Csv => 0,
                    ImportFormat::Xlsx => 1,
                });
                if let Some(layout) = &i.layout {
                    w.u8(u8::from(i.group.is_some()) | 2);
                    if let Some(g) = &i.group {
                        w.str(g);
                    }
                    w.str(&serde_json::to_string(layout).unwrap_or_default());
                    return (TYPE_IMPORT, LAYOUT_VERSION, w.buf);
                }
                if let Some(g) = &i.group {
                    w.str(g);
                    return (TYPE_IMPORT, GROUP_VERSION, w.buf);
                }
            }
            Event::Restore(r) => {
                w.varint(r.seq);
                if let Some(g) = &r.group {
                    w.str(g);
                    return (TYPE_RESTORE, GROUP_VERSION, w.buf);
                }
            }
            Event::Style(st) => {
                w.varint(st.ranges.len() as u64);
                for r in &st.ranges {
                    for v in [r.start.row, r.start.col, r.end.row, r.end.col] {
                        w.varint(u64::from(v));
                    }
                }
                st.style.write(&mut w);
            }
            Event::ResizeColumns(r) => layout::write_resize(&mut w, r.at.0, r.count, r.width),
            Event::ResizeRows(r) => layout::write_resize(&mut w, r.at.0, r.count, r.height),
            Event::Freeze(f) => layout::write_freeze(&mut w, f),
        }
        (self.type_code(), BODY_VERSION, w.buf)
    }

    /// Writes the event inside another entry's body (a `mutations` run, an `undo`): its type code,
    /// body version and length-prefixed body.
    pub fn write_nested(&self, w: &mut Writer) {
        let (code, version, body) = self.encode();
        w.varint(u64::from(code));
        w.varint(u64::from(version));
        w.bytes(&body);
    }

    /// Reads an event [`write_nested`](Self::write_nested) wrote; `codec` says whose body the
    /// bytes were cut from.
    pub fn read_nested(
        r: &mut Reader<'_>,
        codec: impl Fn(CodecError) -> DecodeError,
    ) -> Result<Event, DecodeError> {
        let code = r.varint_u32(u32::from(u16::MAX), "type").map_err(&codec)? as u16;
        let version = r
            .varint_u32(u32::from(u16::MAX), "version")
            .map_err(&codec)? as u16;
        let bytes = r.bytes(usize::MAX >> 1, "event body").map_err(&codec)?;
        Event::decode(code, version, bytes)
    }

    /// Decodes a stored body and checks it against the same rules as the JSON form.
    pub fn decode(type_code: u16, version: u16, body: &[u8]) -> Result<Event, DecodeError> {
        let type_name = match type_code {
            TYPE_SNAPSHOT | TYPE_END_SEGMENT => return Err(DecodeError::LogEntry(type_code)),
            code => type_name_of(code).ok_or(DecodeError::UnknownType(code))?,
        };
        let with_group =
            (type_code == TYPE_IMPORT || type_code == TYPE_RESTORE) && version == GROUP_VERSION;
        let with_layout = type_code == TYPE_IMPORT && version == LAYOUT_VERSION;
        if version != BODY_VERSION && !with_group && !with_layout {
            return Err(DecodeError::UnsupportedVersion { type_name, version });
        }
        let codec_err = |source| DecodeError::Codec { type_name, source };
        let mut r = Reader::new(body);
        let mut event = decode_v1(type_code, &mut r).map_err(codec_err)?;
        if let (true, Event::Import(i)) = (with_layout, &mut event) {
            let flags = r.u8().map_err(codec_err)?;
            if flags & 1 != 0 {
                let group = r.str(MAX_ID_BYTES, "client group id").map_err(codec_err)?;
                i.group = Some(group.to_owned());
            }
            let json = r
                .str(MAX_IMPORT_LAYOUT_BYTES, "layout")
                .map_err(codec_err)?;
            let layout = serde_json::from_str(json)
                .map_err(|e| codec_err(CodecError::Invalid(format!("layout: {e}"))))?;
            i.layout = Some(layout);
        }
        if with_group {
            let group = r.str(MAX_ID_BYTES, "client group id").map_err(codec_err)?;
            match &mut event {
                Event::Import(i) => i.group = Some(group.to_owned()),
                Event::Restore(x) => x.group = Some(group.to_owned()),
                _ => {}
            }
        }
        r.finish().map_err(codec_err)?;
        event
            .validate()
            .map_err(|source| DecodeError::Invalid { type_name, source })?;
        Ok(event)
    }
}

fn decode_v1(type_code: u16, r: &mut Reader<'_>) -> Result<Event, CodecError> {
    let span = |r: &mut Reader<'_>, max: u32, what: &str| -> Result<(u32, u32), CodecError> {
        Ok((r.varint_u32(max - 1, what)?, r.varint_u32(max, "count")?))
    };
    Ok(match type_code {
        TYPE_SET => {
            let n = r.varint()?;
            if n > MAX_CELLS_PER_SET as u64 {
                return Err(CodecError::Invalid(format!("{n} cells")));
            }
            // Every cell takes at least three bytes, so a lying count cannot over-allocate.
            let mut cells = Vec::with_capacity((n as usize).min(r.remaining() / 3));
            for _ in 0..n {
                let row = r.varint_u32(MAX_ROWS - 1, "row")?;
                let col = r.varint_u32(MAX_COLS - 1, "column")?;
                let (value, format) = codec::read_value(r)?;
                cells.push(CellEdit {
                    at: CellRef { row, col },
                    value,
                    format: format.map(String::from),
                });
            }
            Event::Set(SetCells { cells })
        }
        TYPE_INSERT_ROWS => {
            let (at, count) = span(r, MAX_ROWS, "row")?;
            let nrows = r.varint_u32(count, "value rows")?;
            let mut values = Vec::with_capacity((nrows as usize).min(r.remaining()));
            for _ in 0..nrows {
                let ncols = r.varint_u32(MAX_COLS, "values per row")?;
                let mut row = Vec::with_capacity((ncols as usize).min(r.remaining()));
                for _ in 0..ncols {
                    let (v, f) = codec::read_value(r)?;
                    if f.is_some() {
                        return Err(CodecError::Invalid(
                            "insert-rows values carry no format".into(),
                        ));
                    }
                    row.push(v);
                }
                values.push(row);
            }
            Event::InsertRows(InsertRows {
                at: RowNumber(at),
                count,
                values,
            })
        }
        TYPE_DELETE_ROWS => {
            let (at, count) = span(r, MAX_ROWS, "row")?;
            Event::DeleteRows(DeleteRows {
                at: RowNumber(at),
                count,
            })
        }
        TYPE_INSERT_COLUMNS => {
            let (at, count) = span(r, MAX_COLS, "column")?;
            Event::InsertColumns(InsertColumns {
                at: ColumnName(at),
                count,
            })
        }
        TYPE_DELETE_COLUMNS => {
            let (at, count) = span(r, MAX_COLS, "column")?;
            Event::DeleteColumns(DeleteColumns {
                at: ColumnName(at),
                count,
            })
        }
        TYPE_RESTORE => Event::Restore(Restore {
            seq: r.varint()?,
            group: None,
        }),
        TYPE_STYLE => decode_style(r)?,
        TYPE_RESIZE_COLUMNS => Event::ResizeColumns(layout::read_resize_columns(r)?),
        TYPE_RESIZE_ROWS => Event::ResizeRows(layout::read_resize_rows(r)?),
        TYPE_FREEZE => Event::Freeze(layout::read_freeze(r)?),
        _ => Event::Import(Import {
            format: match r.u8()? {
                0 => ImportFormat::Csv,
                1 => ImportFormat::Xlsx,
                b => return Err(CodecError::Invalid(format!("unknown import format {b}"))),
            },
            group: None,
            layout: None,
        }),
    })
}

/// A `style` body: the range count, each range's corners (row, column, row, column), the patch.
fn decode_style(r: &mut Reader<'_>) -> Result<Event, CodecError> {
    let n = r.varint()?;
    if n > MAX_CELLS_PER_STYLE {
        return Err(CodecError::Invalid(format!("{n} ranges")));
    }
    // Every range takes at least four bytes, so a lying count cannot over-allocate.
    let mut ranges = Vec::with_capacity((n as usize).min(r.remaining() / 4));
    for _ in 0..n {
        let corner = |r: &mut Reader<'_>| -> Result<CellRef, CodecError> {
            Ok(CellRef {
                row: r.varint_u32(MAX_ROWS - 1, "row")?,
                col: r.varint_u32(MAX_COLS - 1, "column")?,
            })
        };
        let (a, b) = (corner(r)?, corner(r)?);
        if b.row < a.row || b.col < a.col {
            return Err(CodecError::Invalid(
                "a range whose corners are swapped".into(),
            ));
        }
        ranges.push(Range { start: a, end: b });
    }
    let style = StylePatch::read(r)?;
    Ok(Event::Style(StyleCells { ranges, style }))
}

fn parse_body<T: DeserializeOwned>(body: serde_json::Value) -> Result<T, ValidationError> {
    serde_path_to_error::deserialize(body).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        ValidationError::new(path, e.into_inner().to_string())
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    #[serde(rename = "type")]
    kind: String,
    body: serde_json::Value,
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawEntry::deserialize(d)?;
        Event::from_parts(&raw.kind, raw.body).map_err(serde::de::Error::custom)
    }
}

impl SetCells {
    /// The edits keyed by position in row-major order, the last edit of a repeated reference
    /// winning. A blank cell in the map means "clear".
    pub fn sorted_edits(&self) -> BTreeMap<CellRef, Cell> {
        let mut m = BTreeMap::new();
        for c in &self.cells {
            m.insert(c.at, Cell::new(c.value.clone(), c.format.as_deref()));
        }
        m
    }
}
