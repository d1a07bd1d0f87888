//! Reading CSV and XLSX files into rows, streaming: one row in memory at a time (plus, for XLSX,
//! the workbook's shared-strings table, which calamine loads up front, and the shared formulas
//! whose cells are still to come).
//!
//! Two modes. [`Mode::Strict`] is for validating an upload before it is committed: anything
//! outside the sheet limits is an error naming the row and column. [`Mode::Lenient`] is for
//! applying an entry already in the log, where every input must give *some* deterministic sheet:
//! rows past the last sheet row and columns past the last column are dropped, over-long text is
//! cut to the limit, and reading stops at the first record that cannot be parsed.
//!
//! Value inference for CSV fields follows what spreadsheets do on open: empty → no cell;
//! `TRUE`/`FALSE` (any case) → boolean; a standard error text such as `#N/A` → that error; a plain
//! decimal number (optional sign, digits, point, exponent; no `inf`/`nan`, no thousands
//! separators) → number; anything else → text. The first line is data, not a header. Each record
//! is one row; blank lines are skipped (as the `csv` crate and most CSV readers do), while a line
//! of empty fields (`,,`) is an empty row.
//!
//! An XLSX cell with a formula becomes a formula holding the value the file cached for it;
//! `xlsx_formulas.rs` reads the formulas in step with calamine's values.

use std::borrow::Cow;
use std::io::{Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::sync::Arc;

use calamine::{DataRef, Reader as _, Xlsx};
use serde::{Deserialize, Serialize};

use super::a1::CellRef;
use super::csv_records::{CsvRecords, RecordError};
use super::event::ImportFormat;
use super::formula::Formula;
use super::layout::LayoutRuns;
use super::limits::{
    MAX_COLS, MAX_CSV_RECORD_BYTES, MAX_ROWS, MAX_TEXT_CHARS, MAX_XLSX_COMPRESSION_RATIO,
    MAX_XLSX_PART_BYTES, MAX_XLSX_UNCOMPRESSED_BYTES,
};
use super::style::Style;
use super::value::{Cell, ErrorCode, Row, Value};
use super::xlsx_formulas::{FormulaCells, Shared, first_sheet_path};
use super::xlsx_styles::CellStyles;

/// A seekable byte source (a file, or bytes in memory).
pub trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Strict,
    Lenient,
}

/// Where to resume reading: every row before `row` has been delivered. For CSV, `byte`, `line`
/// and `record` locate the next record so the reader can seek instead of re-reading; XLSX
/// re-reads and skips (its XML cannot be entered in the middle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ImportPos {
    pub row: u32,
    #[serde(default)]
    pub byte: u64,
    #[serde(default)]
    pub line: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("reading the file: {0}")]
    Io(#[from] std::io::Error),
    #[error("the file is not a readable {format}: {message}")]
    Unreadable {
        format: &'static str,
        message: String,
    },
    #[error("the file has more than {MAX_ROWS} rows")]
    TooManyRows,
    #[error("row {row} has more than {MAX_COLS} columns")]
    TooManyColumns { row: u64 },
    #[error("{cell}: text is {chars} characters, the limit is {MAX_TEXT_CHARS}")]
    TextTooLong { cell: String, chars: usize },
    #[error("the record starting on line {line} is longer than {MAX_CSV_RECORD_BYTES} bytes")]
    RecordTooLong { line: u64 },
    #[error("part {part} decompresses to more than {MAX_XLSX_PART_BYTES} bytes")]
    XlsxPartTooLarge { part: String },
    #[error("the workbook decompresses to more than {MAX_XLSX_UNCOMPRESSED_BYTES} bytes")]
    XlsxTooLarge,
    #[error(
        "part {part} decompresses more than {MAX_XLSX_COMPRESSION_RATIO} times its stored size (a zip bomb?)"
    )]
    XlsxRatio { part: String },
    #[error("stopped by the consumer: {0}")]
    Consumer(String),
}

impl ImportError {
    /// The documented limit this error is about (its name in docs/api.md and its value), if any.
    pub fn limit(&self) -> Option<(&'static str, u64)> {
        Some(match self {
            ImportError::TooManyRows => ("maxRows", u64::from(MAX_ROWS)),
            ImportError::TooManyColumns { .. } => ("maxColumns", u64::from(MAX_COLS)),
            ImportError::TextTooLong { .. } => ("maxTextChars", MAX_TEXT_CHARS as u64),
            ImportError::RecordTooLong { .. } => ("maxCsvRecordBytes", MAX_CSV_RECORD_BYTES),
            ImportError::XlsxPartTooLarge { .. } => ("maxXlsxPartBytes", MAX_XLSX_PART_BYTES),
            ImportError::XlsxTooLarge => ("maxXlsxUncompressedBytes", MAX_XLSX_UNCOMPRESSED_BYTES),
            ImportError::XlsxRatio { .. } => {
                ("maxXlsxCompressionRatio", MAX_XLSX_COMPRESSION_RATIO)
            }
            _ => return None,
        })
    }
}

/// What a completed read saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImportSummary {
    /// Rows delivered (non-empty rows only).
    pub rows: u64,
    pub cells: u64,
    /// True when reading stopped early at unreadable input (lenient mode only).
    pub truncated: bool,
}

/// Calls `f` with each non-empty row in order and the position after it. `f` may stop the read
/// early with `ControlFlow::Break`, or fail it with an error message.
pub fn read_rows(
    format: ImportFormat,
    reader: Box<dyn ReadSeek>,
    from: ImportPos,
    mode: Mode,
    f: &mut dyn FnMut(Row, ImportPos) -> Result<ControlFlow<()>, String>,
) -> Result<ImportSummary, ImportError> {
    match format {
        ImportFormat::Csv => read_csv(
            reader,
            from,
            mode,
            &mut RowSink {
                cells: Vec::new(),
                f,
            },
        ),
        ImportFormat::Xlsx => read_xlsx(reader, from, mode, f),
    }
}

/// A non-empty CSV field, typed (see the module docs). Text borrows the reader's buffer unless it
/// had to be repaired (invalid UTF-8) or cut to the limit.
#[derive(Debug, Clone, PartialEq)]
pub enum Field<'a> {
    Text(Cow<'a, str>),
    /// A number, boolean or error: never `Value::Text`.
    Scalar(Value),
}

impl Field<'_> {
    pub fn into_value(self) -> Value {
        match self {
            Field::Text(t) => Value::Text(t.into_owned()),
            Field::Scalar(v) => v,
        }
    }
}

/// Where [`read_csv_with`] delivers a record: its non-empty fields one by one, then the end of
/// the row, so a consumer can encode fields as they come instead of building a [`Row`].
pub trait CsvSink {
    /// A record with `fields` fields (empty ones included) begins.
    fn start_row(&mut self, fields: usize);
    /// A non-empty field, columns ascending.
    fn cell(&mut self, col: u32, field: Field<'_>) -> Result<(), String>;
    /// The record ends. Called only when it had at least one cell (`cells`); a record of empty
    /// fields is not a row. `pos` is where a reader resumes after it.
    fn end_row(
        &mut self,
        index: u32,
        cells: usize,
        pos: ImportPos,
    ) -> Result<ControlFlow<()>, String>;
}

/// The [`CsvSink`] behind [`read_rows`]: builds each [`Row`] and hands it to the callback.
struct RowSink<'f> {
    cells: Vec<(u32, Cell)>,
    f: &'f mut dyn FnMut(Row, ImportPos) -> Result<ControlFlow<()>, String>,
}

impl CsvSink for RowSink<'_> {
    fn start_row(&mut self, fields: usize) {
        self.cells = Vec::with_capacity(fields.min(MAX_COLS as usize));
    }

    fn cell(&mut self, col: u32, field: Field<'_>) -> Result<(), String> {
        self.cells.push((
            col,
            Cell {
                value: field.into_value(),
                format: None,
                style: None,
            },
        ));
        Ok(())
    }

    fn end_row(
        &mut self,
        index: u32,
        _cells: usize,
        pos: ImportPos,
    ) -> Result<ControlFlow<()>, String> {
        let cells = std::mem::take(&mut self.cells);
        (self.f)(Row { index, cells }, pos)
    }
}

/// Reads a CSV file from `from`, delivering each record to `sink` (what [`read_rows`] does for
/// CSV, minus the [`Row`]s): the snapshot builder encodes the fields straight into chunk bytes.
pub fn read_csv_with<S: CsvSink>(
    reader: Box<dyn ReadSeek>,
    from: ImportPos,
    mode: Mode,
    sink: &mut S,
) -> Result<ImportSummary, ImportError> {
    read_csv(reader, from, mode, sink)
}

/// The layout an import of the file brings (an XLSX file's column widths, row heights and frozen
/// panes, `xlsx_layout.rs`; none for CSV or a workbook without any): at most
/// [`MAX_IMPORT_LAYOUT_BYTES`] of JSON, its row heights left out past that, then its widths.
/// Read after [`validate`] has checked the file's parts against the decompression limits.
pub fn layout_of<R: Read + Seek>(
    format: ImportFormat,
    reader: R,
) -> Result<Option<LayoutRuns>, ImportError> {
    if format != ImportFormat::Xlsx {
        return Ok(None);
    }
    crate::xlsx_layout::import_layout(reader).map_err(|e| ImportError::Unreadable {
        format: "XLSX workbook",
        message: e.0,
    })
}

/// Checks that a file would import within the limits (what the API runs before committing). A
/// ZIP file (an XLSX workbook) said to be CSV is refused rather than read as text.
pub fn validate(
    format: ImportFormat,
    mut reader: Box<dyn ReadSeek>,
) -> Result<ImportSummary, ImportError> {
    if format == ImportFormat::Csv {
        let mut magic = [0u8; 4];
        let n = reader.read(&mut magic)?;
        if magic[..n] == *b"PK\x03\x04" {
            return Err(ImportError::Unreadable {
                format: "CSV file",
                message: "it is an XLSX workbook (a ZIP file): upload it as one \
                    (`\"body\": {\"format\": \"xlsx\"}` or its media type)"
                    .into(),
            });
        }
        reader.seek(SeekFrom::Start(0))?;
    }
    read_rows(
        format,
        reader,
        ImportPos::default(),
        Mode::Strict,
        &mut |_, _| Ok(ControlFlow::Continue(())),
    )
}

/// Generic over the sink, so its per-cell call is compiled into the loop (ten million of them
/// in a 10M-cell import) rather than made through a vtable.
fn read_csv<S: CsvSink>(
    mut reader: Box<dyn ReadSeek>,
    from: ImportPos,
    mode: Mode,
    sink: &mut S,
) -> Result<ImportSummary, ImportError> {
    reader.seek(SeekFrom::Start(from.byte))?;
    let mut records = CsvRecords::new(reader);
    let mut summary = ImportSummary::default();
    let mut row = from.row;
    // Lines are counted from 1 at every start, as `csv::Reader` (which this reader replaced)
    // counted them, so resumed positions stay what they were.
    let line = |lines: u64| from.line + 1 + lines;
    loop {
        let record = match records.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(summary),
            Err(RecordError::Io(e)) => return Err(ImportError::Io(e)),
            Err(RecordError::TooLong { lines }) => {
                if mode == Mode::Strict {
                    return Err(ImportError::RecordTooLong { line: line(lines) });
                }
                summary.truncated = true;
                return Ok(summary);
            }
        };
        if row >= MAX_ROWS {
            if mode == Mode::Strict {
                return Err(ImportError::TooManyRows);
            }
            summary.truncated = true;
            return Ok(summary);
        }
        if record.fields.len() > MAX_COLS as usize && mode == Mode::Strict {
            return Err(ImportError::TooManyColumns {
                row: u64::from(row) + 1,
            });
        }
        sink.start_row(record.fields.len());
        // One UTF-8 check for the whole record (the separators are ASCII, so every field of a
        // valid record is a valid `str`); only a record that fails it is repaired field by field.
        let whole = std::str::from_utf8(record.bytes).ok();
        let mut cells = 0usize;
        for (col, &(a, b)) in record.fields.iter().take(MAX_COLS as usize).enumerate() {
            if a == b {
                continue;
            }
            let text = match whole.and_then(|w| w.get(a..b)) {
                Some(t) => Cow::Borrowed(t),
                None => String::from_utf8_lossy(&record.bytes[a..b]),
            };
            let value = infer_field(text, row, col as u32, mode)?;
            sink.cell(col as u32, value)
                .map_err(ImportError::Consumer)?;
            cells += 1;
        }
        // A record boundary the reader can seek back to: the start of the next record.
        let pos = ImportPos {
            row: row + 1,
            byte: from.byte + records.bytes(),
            line: line(records.lines()),
        };
        row += 1;
        if cells == 0 {
            continue;
        }
        summary.rows += 1;
        summary.cells += cells as u64;
        match sink
            .end_row(row - 1, cells, pos)
            .map_err(ImportError::Consumer)?
        {
            ControlFlow::Continue(()) => {}
            ControlFlow::Break(()) => return Ok(summary),
        }
    }
}

/// Spreadsheet-style typing of one text field (see the module docs).
pub fn infer_value(text: &str, row: u32, col: u32, mode: Mode) -> Result<Value, ImportError> {
    infer_field(Cow::Borrowed(text), row, col, mode).map(Field::into_value)
}

/// [`infer_value`] without copying text: a text field stays borrowed unless it is cut to the
/// limit.
#[inline(always)]
pub fn infer_field<'a>(
    text: Cow<'a, str>,
    row: u32,
    col: u32,
    mode: Mode,
) -> Result<Field<'a>, ImportError> {
    if let Some(v) = infer_scalar(&text) {
        return Ok(Field::Scalar(v));
    }
    if text.len() <= MAX_TEXT_CHARS {
        // No more bytes than the limit's characters, so not over it: the common case, kept
        // out of `limit_text` and its moves of the text.
        return Ok(Field::Text(text));
    }
    Ok(Field::Text(limit_text(text, row, col, mode)?))
}

/// The number, boolean or error a field spells, or `None` for text.
#[inline]
fn infer_scalar(text: &str) -> Option<Value> {
    // The first byte tells the kinds apart (a boolean starts with t or f, an error with #, a
    // number with a sign, a digit or a point), so most fields are looked at once.
    match text.as_bytes().first() {
        Some(b't' | b'T') if text.eq_ignore_ascii_case("true") => Some(Value::Bool(true)),
        Some(b'f' | b'F') if text.eq_ignore_ascii_case("false") => Some(Value::Bool(false)),
        Some(b'#') => ErrorCode::parse(text).map(Value::Error),
        Some(b'0'..=b'9' | b'+' | b'-' | b'.') => {
            if let Some(n) = small_decimal(text) {
                return Some(Value::Number(n));
            }
            if looks_numeric(text)
                && let Ok(n) = text.parse::<f64>()
                && n.is_finite()
            {
                return Some(Value::Number(n));
            }
            None
        }
        _ => None,
    }
}

/// An optionally signed decimal of at most 15 digits with an optional point and no exponent
/// (`-12`, `205.42`, `.5`, `3.`), the commonest number in a sheet, without the general float
/// parser. Its digits as an integer `m` are below 10^15 < 2^53 and its scale `10^k` (k ≤ 15) is
/// a float exactly, so `m / 10^k` is one correctly rounded division of exact values: the nearest
/// float to the decimal, which is what `parse::<f64>` gives (including `-0` as negative zero).
fn small_decimal(text: &str) -> Option<f64> {
    /// 10^k for k ≤ 15, each exact in an f64.
    const SCALE: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let b = text.as_bytes();
    let (negative, rest) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let mut m = 0u64;
    let mut digits = 0usize;
    let mut point = None;
    for (i, &d) in rest.iter().enumerate() {
        if d.is_ascii_digit() {
            m = m * 10 + u64::from(d - b'0');
            digits += 1;
            if digits > 15 {
                return None;
            }
        } else if d == b'.' && point.is_none() {
            point = Some(i);
        } else {
            return None;
        }
    }
    if digits == 0 {
        return None;
    }
    let scale = point.map_or(0, |p| rest.len() - p - 1);
    let n = m as f64 / SCALE[scale];
    Some(if negative { -n } else { n })
}

#[cold]
fn limit_text(
    text: Cow<'_, str>,
    row: u32,
    col: u32,
    mode: Mode,
) -> Result<Cow<'_, str>, ImportError> {
    if text.len() <= MAX_TEXT_CHARS {
        return Ok(text);
    }
    let chars = text.chars().count();
    if chars <= MAX_TEXT_CHARS {
        return Ok(text);
    }
    if mode == Mode::Strict {
        let cell = CellRef { row, col }.to_string();
        return Err(ImportError::TextTooLong { cell, chars });
    }
    Ok(Cow::Owned(text.chars().take(MAX_TEXT_CHARS).collect()))
}

/// A plain decimal: `-12`, `3.5`, `.5`, `1e-3`. Rejects what `f64::from_str` would also accept but
/// a spreadsheet would keep as text (`inf`, `NaN`, `1_000`).
fn looks_numeric(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i = 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut mantissa_digits = i - digits_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        mantissa_digits += i - frac_start;
    }
    if mantissa_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == b.len()
}

/// Reads the first worksheet: calamine streams its cells' values, and [`FormulaCells`] reads
/// their formulas in step, through a second view of the same file (`xlsx_formulas.rs`).
fn read_xlsx(
    reader: Box<dyn ReadSeek>,
    from: ImportPos,
    mode: Mode,
    f: &mut dyn FnMut(Row, ImportPos) -> Result<ControlFlow<()>, String>,
) -> Result<ImportSummary, ImportError> {
    let mut summary = ImportSummary::default();
    let mut reader = reader;
    if mode == Mode::Strict {
        check_zip(&mut reader)?;
    }
    let file = Shared::new(reader);
    let Some(mut book): Option<Xlsx<_>> = or_truncated(Xlsx::new(file.view()), mode)? else {
        summary.truncated = true;
        return Ok(summary);
    };
    let Some(name) = book.sheet_names().first().cloned() else {
        return Ok(summary);
    };
    let Some(mut cells) = or_truncated(book.worksheet_cells_reader(&name), mode)? else {
        summary.truncated = true;
        return Ok(summary);
    };
    // calamine has read the workbook, so the formulas' view finds the same sheet in it.
    let Some(mut zip) = or_truncated(zip::ZipArchive::new(file.view()), mode)? else {
        summary.truncated = true;
        return Ok(summary);
    };
    // Number formats and styles are kept when the styles can be read; a file whose styles cannot
    // be still imports its values.
    let styles = CellStyles::read(&mut zip).unwrap_or_default();
    let path = or_truncated(first_sheet_path(&mut zip), mode)?.flatten();
    let formulas = match path {
        Some(path) => or_truncated(FormulaCells::open(&mut zip, &path), mode)?.flatten(),
        None => None,
    };
    let mut rows = XlsxRows {
        from,
        mode,
        f,
        current: None,
        formulas,
        styles,
        summary,
    };
    loop {
        let cell = match or_truncated(cells.next_cell(), mode)? {
            Some(Some(c)) => c,
            Some(None) => break,
            None => {
                rows.summary.truncated = true;
                break;
            }
        };
        match rows.add(&cell)? {
            Some(ControlFlow::Continue(())) => {}
            Some(ControlFlow::Break(())) => return Ok(rows.summary),
            None => {
                rows.summary.truncated = true;
                break;
            }
        }
    }
    // The last row: the read ends whether or not the consumer asked it to.
    let _ = rows.emit()?;
    Ok(rows.summary)
}

/// A step of reading an XLSX file that failed: an error in strict mode; in lenient mode `None`,
/// where reading stops and the import is truncated.
fn or_truncated<T, E: std::fmt::Display>(
    step: Result<T, E>,
    mode: Mode,
) -> Result<Option<T>, ImportError> {
    match step {
        Ok(t) => Ok(Some(t)),
        Err(e) if mode == Mode::Strict => Err(ImportError::Unreadable {
            format: "XLSX",
            message: e.to_string(),
        }),
        Err(_) => Ok(None),
    }
}

/// The rows of a worksheet assembled from its cells, which come row by row, each row handed to
/// the consumer `f` once complete.
struct XlsxRows<'a, 'z, R: std::io::Read> {
    from: ImportPos,
    mode: Mode,
    f: &'a mut dyn FnMut(Row, ImportPos) -> Result<ControlFlow<()>, String>,
    /// The row being assembled.
    current: Option<Row>,
    /// The sheet's formulas, read in step with the cells (`None` when the sheet part could not
    /// be found again, which calamine having read it rules out).
    formulas: Option<FormulaCells<'z, R>>,
    /// The number format and style of each cell style (`xlsx_styles.rs`).
    styles: CellStyles,
    summary: ImportSummary,
}

impl<R: std::io::Read + Seek> XlsxRows<'_, '_, R> {
    /// Adds a cell to its row (emitting the previous row when it starts a new one); a cell
    /// outside the sheet or out of order is an error (strict) or dropped. `Break` when the
    /// consumer asked to stop; `None` when the formulas could not be read (lenient mode), where
    /// reading stops.
    fn add(
        &mut self,
        cell: &calamine::Cell<DataRef<'_>>,
    ) -> Result<Option<ControlFlow<()>>, ImportError> {
        let (r, c) = cell.get_position();
        let mode = self.mode;
        // Every cell moves the formulas' reader on, so it stays in step, kept or not.
        let (formula, style) = match self.formulas.as_mut() {
            Some(formulas) => match or_truncated(formulas.next((r, c)), mode)? {
                Some(formula) => (formula, formulas.style()),
                None => return Ok(None),
            },
            None => (None, None),
        };
        let format = style
            .and_then(|s| self.styles.format(s))
            .map(Box::<str>::from);
        let style = style.and_then(|s| self.styles.style(s)).cloned();
        self.add_cell(r, c, cell.get_value(), formula, (format, style))
            .map(Some)
    }

    /// [`Self::add`] for the cell at `r`, `c` holding `v` and, if it has them, `formula`, the
    /// number format of its style, `style_format` (which a date's own format gives way to only
    /// when the style names none), and its look, `style`.
    fn add_cell(
        &mut self,
        r: u32,
        c: u32,
        v: &DataRef<'_>,
        formula: Option<Box<str>>,
        (style_format, style): (Option<Box<str>>, Option<Arc<Style>>),
    ) -> Result<ControlFlow<()>, ImportError> {
        let mode = self.mode;
        if r >= MAX_ROWS || c >= MAX_COLS {
            if mode == Mode::Strict {
                return Err(if r >= MAX_ROWS {
                    ImportError::TooManyRows
                } else {
                    ImportError::TooManyColumns {
                        row: u64::from(r) + 1,
                    }
                });
            }
            return Ok(ControlFlow::Continue(()));
        }
        let content = xlsx_value(v, r, c, mode)?;
        let (value, format) = match (formula, content) {
            // A formula keeps the value the file cached for it (a date its number and format).
            (Some(text), content) => {
                let (cached, format) = content.map_or((None, None), |(v, f)| (Some(v), f));
                let cached = cached.map(Box::new);
                (Value::Formula(Formula { text, cached }), format)
            }
            (None, Some(content)) => content,
            // An empty cell is kept only for its look.
            (None, None) if style.is_some() => (Value::Empty, None),
            (None, None) => return Ok(ControlFlow::Continue(())),
        };
        let format = style_format.as_deref().or(format);
        let same_row = self.current.as_ref().is_some_and(|row| row.index == r);
        if !same_row {
            if self.current.as_ref().is_some_and(|row| row.index > r) {
                // Worksheet XML is row-major in every file Excel writes; a file that is not cannot
                // be streamed in order, so its out-of-order cells are an error (strict) or dropped.
                return out_of_order("row", r, c, mode);
            }
            if self.emit()?.is_break() {
                return Ok(ControlFlow::Break(()));
            }
            self.current = Some(Row {
                index: r,
                cells: Vec::new(),
            });
        }
        if let Some(row) = self.current.as_mut() {
            if row.cells.last().is_some_and(|(last, _)| *last >= c) {
                return out_of_order("column", r, c, mode);
            }
            row.cells.push((
                c,
                Cell {
                    style,
                    ..Cell::new(value, format)
                },
            ));
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Emits the row being assembled, if it has cells and is not before `from`; `Break` when
    /// the consumer asked to stop.
    fn emit(&mut self) -> Result<ControlFlow<()>, ImportError> {
        let Some(row) = self.current.take() else {
            return Ok(ControlFlow::Continue(()));
        };
        if row.cells.is_empty() || row.index < self.from.row {
            return Ok(ControlFlow::Continue(()));
        }
        self.summary.rows += 1;
        self.summary.cells += row.cells.len() as u64;
        let pos = ImportPos {
            row: row.index + 1,
            ..ImportPos::default()
        };
        (self.f)(row, pos).map_err(ImportError::Consumer)
    }
}

/// A cell out of `order` ("row" or "column"): an error (strict), else dropped.
fn out_of_order(
    order: &str,
    row: u32,
    col: u32,
    mode: Mode,
) -> Result<ControlFlow<()>, ImportError> {
    if mode == Mode::Strict {
        return Err(ImportError::Unreadable {
            format: "XLSX",
            message: format!("cell {} is out of {order} order", CellRef { row, col }),
        });
    }
    Ok(ControlFlow::Continue(()))
}

/// Inflates every part of an XLSX file once, counting, before calamine reads it: no part that is
/// read into memory whole may exceed [`MAX_XLSX_PART_BYTES`], the parts together may not exceed
/// [`MAX_XLSX_UNCOMPRESSED_BYTES`], and no part may inflate more than
/// [`MAX_XLSX_COMPRESSION_RATIO`] times. The sizes a ZIP file declares are not trusted: they are
/// what a zip bomb lies about. Memory stays at one buffer; a bomb is refused as soon as its ratio
/// shows. Leaves the reader at the start.
fn check_zip(reader: &mut Box<dyn ReadSeek>) -> Result<(), ImportError> {
    let unreadable = |e: zip::result::ZipError| ImportError::Unreadable {
        format: "XLSX",
        message: e.to_string(),
    };
    let mut total = 0u64;
    {
        let mut zip = zip::ZipArchive::new(&mut *reader).map_err(unreadable)?;
        let mut buf = vec![0u8; 64 * 1024];
        for i in 0..zip.len() {
            let mut part = zip.by_index(i).map_err(unreadable)?;
            let name = part.name().to_owned();
            let stored = part.compressed_size().max(1);
            // Worksheets are streamed; everything else calamine reads whole.
            let streamed = name.starts_with("xl/worksheets/");
            let mut inflated = 0u64;
            loop {
                let n = part.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                inflated += n as u64;
                total += n as u64;
                if !streamed && inflated > MAX_XLSX_PART_BYTES {
                    return Err(ImportError::XlsxPartTooLarge { part: name });
                }
                if total > MAX_XLSX_UNCOMPRESSED_BYTES {
                    return Err(ImportError::XlsxTooLarge);
                }
                if inflated > 1024 * 1024 && inflated / stored > MAX_XLSX_COMPRESSION_RATIO {
                    return Err(ImportError::XlsxRatio { part: name });
                }
            }
        }
    }
    reader.seek(SeekFrom::Start(0))?;
    Ok(())
}

fn xlsx_value(
    v: &DataRef<'_>,
    row: u32,
    col: u32,
    mode: Mode,
) -> Result<Option<(Value, Option<&'static str>)>, ImportError> {
    let text = |s: &str| -> Result<Value, ImportError> {
        Ok(Value::Text(
            limit_text(Cow::Borrowed(s), row, col, mode)?.into_owned(),
        ))
    };
    Ok(Some(match v {
        DataRef::Empty => return Ok(None),
        DataRef::Int(i) => (Value::Number(*i as f64), None),
        DataRef::Float(x) if x.is_finite() => (Value::Number(*x), None),
        DataRef::Float(_) => (Value::Error(ErrorCode::Num), None),
        DataRef::String(s) => (text(s)?, None),
        DataRef::SharedString(s) => (text(s)?, None),
        DataRef::Bool(b) => (Value::Bool(*b), None),
        DataRef::DateTime(d) => {
            // Dates are serial numbers with a date format, as in Excel itself.
            let serial = d.as_f64();
            let format = if serial.fract() == 0.0 {
                "yyyy-mm-dd"
            } else {
                "yyyy-mm-dd hh:mm:ss"
            };
            (Value::Number(serial), Some(format))
        }
        DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => (text(s)?, None),
        DataRef::Error(e) => {
            let code = ErrorCode::parse(&e.to_string()).unwrap_or(ErrorCode::Value);
            (Value::Error(code), None)
        }
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod infer_tests {
    use proptest::prelude::*;

    use super::*;

    /// The decimal fast path types a field exactly as the general rule does.
    fn general(text: &str) -> Option<f64> {
        if looks_numeric(text)
            && let Ok(n) = text.parse::<f64>()
            && n.is_finite()
        {
            return Some(n);
        }
        None
    }

    #[test]
    fn small_decimals_parse_as_the_float_parser_does() {
        for t in [
            "205.42",
            "0.18",
            "-0.0",
            ".5",
            "+.5",
            "5.",
            "0.1",
            "0.3",
            "123456789012.345",
            "1234567890.123456",
            ".000000000000001",
            "9007199254.740993",
            ".",
            "-.",
            "1.2.3",
            "1e5",
            "0",
            "-0",
            "+0",
            "007",
            "-12",
            "+12",
            "999999999999999",
            "-999999999999999",
            "1234567890123456",
            "-",
            "+",
            "",
            "1a",
        ] {
            let fast = small_decimal(t);
            if let Some(n) = fast {
                let g = general(t).unwrap();
                assert_eq!(n.to_bits(), g.to_bits(), "{t}");
            } else {
                let digits = t.bytes().filter(u8::is_ascii_digit).count();
                assert!(
                    digits > 15 || t.contains('e') || general(t).is_none(),
                    "{t}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn any_decimal_string_types_the_same(s in "[+-]?[0-9]{0,12}[.]?[0-9]{0,6}[.]?") {
            if let Some(n) = small_decimal(&s) {
                prop_assert_eq!(Some(n.to_bits()), general(&s).map(f64::to_bits));
            }
            let v = infer_value(&s, 0, 0, Mode::Lenient).unwrap();
            match (general(&s), v) {
                (Some(n), Value::Number(m)) => prop_assert_eq!(n.to_bits(), m.to_bits()),
                (None, Value::Text(t)) => prop_assert_eq!(t, s),
                (g, v) => prop_assert!(false, "{s:?}: {g:?} vs {v:?}"),
            }
        }
    }
}
