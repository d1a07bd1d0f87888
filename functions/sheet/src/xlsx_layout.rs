//! The layout of an XLSX workbook's first worksheet (the one an import reads): its column widths
//! (`<cols><col min max width customWidth>`), its rows' heights (`<row r ht customHeight>`) and
//! its frozen panes (`<pane xSplit ySplit state="frozen">`), as a [`Layout`] in pixels.
//!
//! Widths are in characters of the default font's digit (Excel's 7 pixels in Calibri 11, what
//! rust_xlsxwriter writes too), heights in points (4/3 of a pixel). Sizes are clamped to what a
//! resize allows; a width or height the file does not mark as custom is the default and left out.

use std::io::{Read, Seek};

use quick_xml::events::Event as XmlEvent;
use zip::ZipArchive;

use crate::event::MAX_IMPORT_LAYOUT_BYTES;
use crate::layout::{Freeze, Layout, LayoutRuns, MAX_FROZEN_COLUMNS, MAX_FROZEN_ROWS, MAX_SIZE_PX};
use crate::limits::{MAX_COLS, MAX_ROWS};
use crate::xlsx_formulas::{FormulaReadError, attribute, first_sheet_path, xml_reader};

/// Pixels of one character of column width.
const PX_PER_CHAR: f64 = 7.0;
/// Pixels of one point of row height.
const PX_PER_POINT: f64 = 4.0 / 3.0;

/// The first worksheet's layout as an `import` entry carries it: at most
/// [`MAX_IMPORT_LAYOUT_BYTES`] of JSON, its row heights left out past that, then its widths;
/// `None` when it has none.
pub fn import_layout<R: Read + Seek>(reader: R) -> Result<Option<LayoutRuns>, FormulaReadError> {
    let mut runs = read_layout(reader)?.to_runs();
    let size = |r: &LayoutRuns| serde_json::to_string(r).map_or(usize::MAX, |j| j.len());
    if size(&runs) > MAX_IMPORT_LAYOUT_BYTES {
        runs.rows.clear();
    }
    if size(&runs) > MAX_IMPORT_LAYOUT_BYTES {
        runs.columns.clear();
    }
    Ok((!runs.is_empty()).then_some(runs))
}

/// The first worksheet's layout; the default one when the workbook has no worksheet.
pub fn read_layout<R: Read + Seek>(reader: R) -> Result<Layout, FormulaReadError> {
    let mut zip = ZipArchive::new(reader).map_err(|e| FormulaReadError(e.to_string()))?;
    let Some(path) = first_sheet_path(&mut zip)? else {
        return Ok(Layout::default());
    };
    let Some(mut xml) = xml_reader(&mut zip, &path)? else {
        return Ok(Layout::default());
    };
    let mut layout = Layout::default();
    let mut buf = Vec::with_capacity(1024);
    loop {
        buf.clear();
        match xml.read_event_into(&mut buf)? {
            XmlEvent::Start(e) | XmlEvent::Empty(e) => match e.local_name().as_ref() {
                b"pane" => {
                    let frozen = attribute(&e, b"state")?
                        .is_some_and(|s| s.as_ref() == b"frozen" || s.as_ref() == b"frozenSplit");
                    if frozen {
                        let split = |v: Option<f64>, max: u32| v.map_or(0, |n| (n as u32).min(max));
                        layout.freeze = Freeze {
                            rows: split(float(attribute(&e, b"ySplit")?), MAX_FROZEN_ROWS),
                            columns: split(float(attribute(&e, b"xSplit")?), MAX_FROZEN_COLUMNS),
                        };
                    }
                }
                b"col" if custom(attribute(&e, b"customWidth")?) => {
                    let min = int(attribute(&e, b"min")?).unwrap_or(1).max(1);
                    let max = int(attribute(&e, b"max")?)
                        .unwrap_or(min)
                        .clamp(min, MAX_COLS);
                    if let (Some(w), true) = (float(attribute(&e, b"width")?), min <= MAX_COLS) {
                        layout
                            .columns
                            .set(min - 1, max - min + 1, Some(px(w * PX_PER_CHAR)));
                    }
                }
                b"row" if custom(attribute(&e, b"customHeight")?) => {
                    let r = int(attribute(&e, b"r")?).unwrap_or(0);
                    if let (Some(h), 1..=MAX_ROWS) = (float(attribute(&e, b"ht")?), r) {
                        layout.rows.set(r - 1, 1, Some(px(h * PX_PER_POINT)));
                    }
                }
                _ => {}
            },
            XmlEvent::Eof => return Ok(layout),
            _ => {}
        }
    }
}

fn custom(v: Option<std::borrow::Cow<'_, [u8]>>) -> bool {
    v.is_some_and(|v| v.as_ref() == b"1" || v.as_ref() == b"true")
}

fn float(v: Option<std::borrow::Cow<'_, [u8]>>) -> Option<f64> {
    std::str::from_utf8(v?.as_ref())
        .ok()?
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
}

fn int(v: Option<std::borrow::Cow<'_, [u8]>>) -> Option<u32> {
    std::str::from_utf8(v?.as_ref()).ok()?.parse().ok()
}

/// Pixels, rounded, within 1..=[`MAX_SIZE_PX`].
fn px(n: f64) -> u16 {
    n.round().clamp(1.0, f64::from(MAX_SIZE_PX)) as u16
}
