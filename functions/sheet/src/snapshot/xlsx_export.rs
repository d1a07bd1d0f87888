//! A version of the sheet as an XLSX workbook, written in bounded memory: what
//! `GET /logs/{logId}/export?format=xlsx` hands out (docs/api.md, "Export").
//!
//! The version is read a window of whole rows at a time, as [`super::diff`] reads it (at most
//! [`WINDOW_CELLS`] cells and [`WINDOW_BYTES`] of them, halved while a window is too large), and
//! each window's formulas are shown as a read shows them ([`shown_rows`]). The windows go through
//! a channel of one to a blocking thread that writes them with `rust_xlsxwriter` in its constant
//! memory mode: each row is written to a temporary file as soon as the next one starts, and the
//! workbook is zipped from those files at the end. So memory holds about three windows and the
//! writer's buffers, whatever the sheet's size; the disk holds the worksheet's XML and the file.
//!
//! What the workbook holds: one worksheet, `Sheet1`, every stored cell at its place with its
//! number format; a formula as its text with the value a read shows for it as the cached result
//! (so readers that do not calculate, such as calamine or pandas, see the values; Excel and
//! LibreOffice calculate again on open). An error value that Excel knows (`#DIV/0!`, `#N/A`, …)
//! is written as a formula of that error alone (`=#DIV/0!`), the only way the writer has to store
//! one; the engine's own errors (`#CIRC!`, `#ERROR!`, `#N/IMPL`) have no Excel code and are written
//! as their text.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use rust_xlsxwriter::{
    Color, Format, FormatAlign, FormatBorder, FormatPattern, FormatUnderline, Workbook, Worksheet,
    XlsxError,
};
use uuid::Uuid;

use super::SnapshotError;
use super::diff::{Version, WINDOW_CELLS, window_range, window_rows};
use super::read::{ReadBudget, extent, layout_at, read_rows};
use super::shown::{ShownError, shown_rows};
use super::store::{BlobStore, ImportSource};
use crate::layout::Layout;
use crate::style::{Border, BorderStyle, HAlign, Look, Style, VAlign};
use crate::value::{ErrorCode, Value};
use crate::{Cell, Range, Row};

/// What the writer makes of a sheet. A cached export names it, so an export written by an older
/// writer is not handed out once this one writes something else.
pub const EXPORT_VERSION: u32 = 1;
/// Bytes of cell contents one window holds at most (long texts make windows of fewer rows).
pub const WINDOW_BYTES: usize = 8 * 1024 * 1024;
/// The worksheet's name.
pub const SHEET_NAME: &str = "Sheet1";

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportStats {
    pub rows: u32,
    pub columns: u32,
    /// Non-empty cells, formulas included (a formatted empty cell counts too).
    pub cells: u64,
    pub formulas: u64,
    /// The file's size.
    pub bytes: u64,
}

/// Why a version could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A window's formulas reach more cells than one read may evaluate.
    #[error(transparent)]
    Formulas(ShownError),
    #[error("writing the workbook: {0}")]
    Write(String),
    /// `progress` asked to stop (a deadline), after `rows_done` of `rows`.
    #[error("stopped after {rows_done} of {rows} rows")]
    Stopped { rows_done: u32, rows: u32 },
}

impl From<XlsxError> for ExportError {
    fn from(e: XlsxError) -> Self {
        ExportError::Write(e.to_string())
    }
}

/// One window of rows: the cells as stored and, when some are formulas, as shown.
struct Window {
    stored: Vec<Row>,
    shown: Option<Vec<Row>>,
}

/// What the writer hears: rows, then `Finish` once every row has come. A channel closed without
/// it (the read failed or was stopped) leaves no file.
enum Msg {
    Rows(Window),
    Finish,
}

/// Writes version `v` of the sheet to `path` as an XLSX workbook; the writer's temporary files go
/// to `tempdir` (and are gone when it returns). `progress` hears the rows read so far and the
/// sheet's rows, after each window, and may stop the export there (`ControlFlow::Break`).
pub async fn export_xlsx(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    log_id: Uuid,
    v: Version<'_>,
    (path, tempdir): (&Path, &Path),
    progress: &mut (dyn FnMut(u32, u32) -> ControlFlow<()> + Send),
) -> Result<ExportStats, ExportError> {
    let size = extent(payloads, v.base, v.entries).await?;
    let (rows, cols) = (size.rows, size.columns.max(1));
    let layout = layout_at(v.base, v.entries);
    let (tx, rx) = tokio::sync::mpsc::channel::<Msg>(1);
    let target = (path.to_path_buf(), tempdir.to_path_buf());
    let writer = tokio::task::spawn_blocking(move || write_workbook(rx, target, &layout));

    let mut window = window_rows(cols);
    let mut row = 0u32;
    let mut failed = None;
    while row < rows {
        let (last, range) = window_range(row, window, (rows, cols));
        let next = match read_window(store, payloads, log_id, v, range).await {
            Ok(Some(w)) => w,
            Ok(None) if window > 1 => {
                window = window.div_ceil(2);
                continue;
            }
            Ok(None) => {
                failed = Some(ExportError::Snapshot(SnapshotError::Internal(format!(
                    "row {} is larger than {WINDOW_BYTES} bytes",
                    row + 1
                ))));
                break;
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        if tx.send(Msg::Rows(next)).await.is_err() {
            break; // the writer stopped: its error is below
        }
        row = last + 1;
        if progress(row, rows).is_break() && row < rows {
            failed = Some(ExportError::Stopped {
                rows_done: row,
                rows,
            });
            break;
        }
    }
    if failed.is_none() {
        // A writer that already stopped has its error below.
        let _ = tx.send(Msg::Finish).await;
    }
    drop(tx);
    let written = match writer.await {
        Ok(r) => r,
        // rust_xlsxwriter panics when its temporary file cannot be made or written (a full disk).
        Err(e) => Err(ExportError::Write(format!(
            "the XLSX writer stopped ({e}); is there room in {}?",
            tempdir.display()
        ))),
    };
    if let Some(e) = failed {
        return Err(e);
    }
    let mut stats = written?;
    stats.rows = rows;
    stats.columns = size.columns;
    Ok(stats)
}

/// The cells of `range`, shown; `None` when they pass one window's budget.
async fn read_window(
    store: &dyn BlobStore,
    payloads: &dyn ImportSource,
    log_id: Uuid,
    v: Version<'_>,
    range: Range,
) -> Result<Option<Window>, ExportError> {
    let budget = ReadBudget {
        cells: WINDOW_CELLS as usize,
        bytes: WINDOW_BYTES,
    };
    let stored = match read_rows(store, payloads, log_id, v.base, v.entries, range, budget).await {
        Ok((rows, _)) => rows,
        Err(SnapshotError::OverBudget { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let has_formulas = stored
        .iter()
        .flat_map(|r| &r.cells)
        .any(|(_, c)| matches!(c.value, Value::Formula(_)));
    let shown = if has_formulas {
        Some(
            shown_rows(
                store,
                payloads,
                log_id,
                v.base,
                v.entries,
                range,
                stored.clone(),
            )
            .await
            .map_err(|e| match e {
                ShownError::Snapshot(e) => ExportError::Snapshot(e),
                e => ExportError::Formulas(e),
            })?,
        )
    } else {
        None
    };
    Ok(Some(Window { stored, shown }))
}

/// The blocking half: every window into one constant-memory worksheet, then the file. The
/// layout's column widths and frozen panes are set first; each row's height as the rows go by
/// (a constant-memory worksheet writes a row out once the next one starts).
fn write_workbook(
    mut rx: tokio::sync::mpsc::Receiver<Msg>,
    (path, tempdir): (PathBuf, PathBuf),
    layout: &Layout,
) -> Result<ExportStats, ExportError> {
    let mut book = Workbook::new();
    book.set_tempdir(&tempdir)?;
    let sheet = book.add_worksheet_with_constant_memory();
    sheet.set_name(SHEET_NAME)?;
    for (start, end, width) in layout.columns.runs() {
        for col in start..end {
            // Columns past 16,384 cannot be (the sheet's limit is Excel's).
            sheet.set_column_width_pixels(u16::try_from(col).unwrap_or(u16::MAX), width)?;
        }
    }
    if !layout.freeze.is_none() {
        let cols = u16::try_from(layout.freeze.columns).unwrap_or(u16::MAX);
        sheet.set_freeze_panes(layout.freeze.rows, cols)?;
    }
    let mut heights = Heights::new(layout);
    let mut cells = Cells::default();
    let mut stats = ExportStats::default();
    loop {
        let w = match rx.blocking_recv() {
            Some(Msg::Rows(w)) => w,
            Some(Msg::Finish) => break,
            None => return Err(ExportError::Write("the export was cancelled".into())),
        };
        for (i, row) in w.stored.iter().enumerate() {
            heights.until(sheet, row.index + 1)?;
            let shown = w
                .shown
                .as_ref()
                .and_then(|s| s.get(i))
                .filter(|s| s.index == row.index);
            for (j, (col, cell)) in row.cells.iter().enumerate() {
                let value = shown
                    .and_then(|s| s.cells.get(j))
                    .filter(|(c, _)| c == col)
                    .map(|(_, c)| &c.value);
                cells.write(sheet, (row.index, *col), cell, value)?;
            }
        }
    }
    heights.until(sheet, u32::MAX)?;
    stats.cells = cells.written;
    stats.formulas = cells.formulas;
    book.save(&path)?;
    stats.bytes = std::fs::metadata(&path)
        .map_err(|e| ExportError::Write(format!("{}: {e}", path.display())))?
        .len();
    Ok(stats)
}

/// The row heights of a layout, set on the worksheet in row order as the rows are written.
struct Heights {
    runs: std::vec::IntoIter<(u32, u32, u16)>,
    current: Option<(u32, u32, u16)>,
}

impl Heights {
    fn new(layout: &Layout) -> Self {
        let mut runs = layout.rows.runs().collect::<Vec<_>>().into_iter();
        let current = runs.next();
        Heights { runs, current }
    }

    /// Sets the heights of every resized row before `end` not set yet.
    fn until(&mut self, sheet: &mut Worksheet, end: u32) -> Result<(), ExportError> {
        while let Some((start, stop, height)) = self.current {
            if start >= end {
                break;
            }
            let upto = stop.min(end);
            for row in start..upto {
                sheet.set_row_height_pixels(row, height)?;
            }
            self.current = if upto < stop {
                Some((upto, stop, height))
            } else {
                self.runs.next()
            };
        }
        Ok(())
    }
}

/// Writes cells, one `Format` per distinct number format and style.
#[derive(Default)]
struct Cells {
    formats: HashMap<Look, Format>,
    written: u64,
    formulas: u64,
}

/// The workbook format of a number format and a style.
fn xlsx_format(number: Option<&str>, style: Option<&Style>) -> Format {
    let mut f = Format::new();
    if let Some(n) = number {
        f = f.set_num_format(n);
    }
    let Some(s) = style else { return f };
    if s.bold {
        f = f.set_bold();
    }
    if s.italic {
        f = f.set_italic();
    }
    if s.underline {
        f = f.set_underline(FormatUnderline::Single);
    }
    if s.strike {
        f = f.set_font_strikethrough();
    }
    if s.wrap {
        f = f.set_text_wrap();
    }
    if let Some(size) = s.font_size {
        f = f.set_font_size(size.points());
    }
    if let Some(c) = s.color {
        f = f.set_font_color(Color::RGB(c.0));
    }
    if let Some(c) = s.fill {
        f = f
            .set_pattern(FormatPattern::Solid)
            .set_background_color(Color::RGB(c.0));
    }
    if let Some(a) = s.h_align {
        f = f.set_align(match a {
            HAlign::Left => FormatAlign::Left,
            HAlign::Center => FormatAlign::Center,
            HAlign::Right => FormatAlign::Right,
        });
    }
    if let Some(a) = s.v_align {
        f = f.set_align(match a {
            VAlign::Top => FormatAlign::Top,
            VAlign::Middle => FormatAlign::VerticalCenter,
            VAlign::Bottom => FormatAlign::Bottom,
        });
    }
    let line = |b: &Border| match b.style {
        BorderStyle::Thin => FormatBorder::Thin,
        BorderStyle::Medium => FormatBorder::Medium,
        BorderStyle::Thick => FormatBorder::Thick,
        BorderStyle::Dashed => FormatBorder::Dashed,
        BorderStyle::Dotted => FormatBorder::Dotted,
        BorderStyle::Double => FormatBorder::Double,
    };
    type Side = (
        fn(Format, FormatBorder) -> Format,
        fn(Format, Color) -> Format,
    );
    let sides: [Side; 4] = [
        (Format::set_border_top, |f, c| f.set_border_top_color(c)),
        (Format::set_border_right, |f, c| f.set_border_right_color(c)),
        (Format::set_border_bottom, |f, c| {
            f.set_border_bottom_color(c)
        }),
        (Format::set_border_left, |f, c| f.set_border_left_color(c)),
    ];
    for (border, (set_line, set_color)) in s.border.sides().iter().zip(sides) {
        if let Some(b) = border {
            f = set_line(f, line(b));
            if let Some(c) = b.color {
                f = set_color(f, Color::RGB(c.0));
            }
        }
    }
    f
}

impl Cells {
    fn write(
        &mut self,
        sheet: &mut Worksheet,
        (row, col): (u32, u32),
        cell: &Cell,
        shown: Option<&Value>,
    ) -> Result<(), XlsxError> {
        // Both fit Excel's grid, which is the sheet's (limits.rs): 1,048,576 rows, 16,384 columns.
        let col = u16::try_from(col).map_err(|_| XlsxError::RowColumnLimitError)?;
        let format = (cell.format.is_some() || cell.style.is_some()).then(|| {
            self.formats
                .entry((cell.format.clone(), cell.style.clone()))
                .or_insert_with(|| xlsx_format(cell.format.as_deref(), cell.style.as_deref()))
                .clone()
        });
        let f = format.as_ref();
        self.written += 1;
        match &cell.value {
            Value::Empty => match f {
                Some(f) => sheet.write_blank(row, col, f).map(drop),
                None => {
                    self.written -= 1;
                    Ok(())
                }
            },
            Value::Text(t) => match f {
                Some(f) => sheet.write_string_with_format(row, col, t, f).map(drop),
                None => sheet.write_string(row, col, t).map(drop),
            },
            Value::Number(n) => match f {
                Some(f) => sheet.write_number_with_format(row, col, *n, f).map(drop),
                None => sheet.write_number(row, col, *n).map(drop),
            },
            Value::Bool(b) => match f {
                Some(f) => sheet.write_boolean_with_format(row, col, *b, f).map(drop),
                None => sheet.write_boolean(row, col, *b).map(drop),
            },
            Value::Error(e) => match excel_error(*e) {
                Some(code) => {
                    let formula =
                        rust_xlsxwriter::Formula::new(format!("={code}")).set_result(code);
                    write_formula(sheet, (row, col), formula, f)
                }
                None => match f {
                    Some(f) => sheet
                        .write_string_with_format(row, col, e.as_str(), f)
                        .map(drop),
                    None => sheet.write_string(row, col, e.as_str()).map(drop),
                },
            },
            Value::Formula(formula) => {
                self.formulas += 1;
                let value = shown.or(formula.cached.as_deref()).unwrap_or(&Value::Empty);
                let formula = rust_xlsxwriter::Formula::new(format!("={}", formula.text))
                    .set_result(result_text(value));
                write_formula(sheet, (row, col), formula, f)
            }
        }
    }
}

fn write_formula(
    sheet: &mut Worksheet,
    (row, col): (u32, u16),
    formula: rust_xlsxwriter::Formula,
    format: Option<&Format>,
) -> Result<(), XlsxError> {
    match format {
        Some(f) => sheet
            .write_formula_with_format(row, col, formula, f)
            .map(drop),
        None => sheet.write_formula(row, col, formula).map(drop),
    }
}

/// An error code Excel reads in a formula, as it writes it.
fn excel_error(e: ErrorCode) -> Option<&'static str> {
    match e {
        ErrorCode::Null
        | ErrorCode::Div0
        | ErrorCode::Value
        | ErrorCode::Ref
        | ErrorCode::Name
        | ErrorCode::Num
        | ErrorCode::NA
        | ErrorCode::GettingData => Some(e.as_str()),
        _ => None,
    }
}

/// A formula's value as the cached result the writer stores: a number as its shortest exact
/// decimal, `TRUE`/`FALSE`, an error's code, a text as it is.
fn result_text(v: &Value) -> String {
    match v {
        Value::Empty => String::new(),
        Value::Text(t) => t.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(true) => "TRUE".into(),
        Value::Bool(false) => "FALSE".into(),
        Value::Error(e) => e.as_str().into(),
        Value::Formula(_) => String::new(),
    }
}

#[cfg(test)]
#[path = "xlsx_export_tests.rs"]
mod tests;
