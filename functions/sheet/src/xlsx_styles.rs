//! The cell styles of an XLSX workbook, so an import keeps each cell's number format and look.
//!
//! A cell names its style by index (`<c s="3">`); the style (`<xf numFmtId="10" fontId="1"
//! fillId="2" borderId="1">` in `cellXfs` of `xl/styles.xml`, with an `<alignment>` child) names
//! a number format, a font, a fill and borders from the tables before it (ECMA-376 Part 1, 18.8).
//! [`CellStyles`] maps a style index to what a cell keeps:
//! - the number format, either one of the workbook's own (`<numFmt numFmtId="164"
//!   formatCode="0.0"/>`) or one of Excel's built-in ones by number (18.8.30); `None` for
//!   General, for a format over the sheet's length limit, and for the built-in date and time
//!   formats, whose dates the importer already gives its own `yyyy-mm-dd` format (the built-in
//!   ones are the reader's locale's in Excel, not fixed strings);
//! - the [`Style`]: bold, italic, underline, strike, the font's size when it differs from the
//!   workbook's default font (the first), its colour when given as RGB and not black, a solid
//!   fill's colour, horizontal and vertical alignment, wrap, and the four borders (lines Excel
//!   has and this model does not become the nearest: hair is thin, the dash-dot kinds dashed).
//!   Theme and indexed colours are not resolved: such a colour is left out.

use std::collections::HashMap;
use std::io::{Read, Seek};
use std::sync::Arc;

use quick_xml::events::Event;
use zip::ZipArchive;

use crate::limits::MAX_FORMAT_BYTES;
use crate::style::{
    Border, BorderStyle, Borders, FontSize, HAlign, Look, Rgb, SIDES, Style, VAlign,
};
use crate::xlsx_formulas::{FormulaReadError, attribute, xml_reader};

/// Styles read at most: Excel's own limit on cell formats in a workbook.
pub const MAX_STYLES: usize = 64_000;

/// Excel's built-in number formats that are not dates or times, by id.
fn builtin(id: u32) -> Option<&'static str> {
    Some(match id {
        1 => "0",
        2 => "0.00",
        3 => "#,##0",
        4 => "#,##0.00",
        9 => "0%",
        10 => "0.00%",
        11 => "0.00E+00",
        12 => "# ?/?",
        13 => "# ??/??",
        37 => "#,##0 ;(#,##0)",
        38 => "#,##0 ;[Red](#,##0)",
        39 => "#,##0.00;(#,##0.00)",
        40 => "#,##0.00;[Red](#,##0.00)",
        48 => "##0.0E+0",
        49 => "@",
        _ => return None,
    })
}

/// Each cell style's number format and style, by style index.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CellStyles {
    by_style: Vec<Look>,
}

/// A font of the `fonts` table, as far as a style keeps it.
#[derive(Debug, Default, Clone)]
struct Font {
    bold: bool,
    italic: bool,
    underline: bool,
    strike: bool,
    size: Option<FontSize>,
    color: Option<Rgb>,
}

/// One entry of `cellXfs` being read.
#[derive(Debug, Default)]
struct Xf {
    num_fmt: u32,
    font: Option<usize>,
    fill: Option<usize>,
    border: Option<usize>,
    h_align: Option<HAlign>,
    v_align: Option<VAlign>,
    wrap: bool,
}

/// The table of `styles.xml` being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Table {
    #[default]
    Other,
    Fonts,
    Fills,
    Borders,
    CellXfs,
}

impl CellStyles {
    /// The number format a cell of style `s` keeps.
    pub fn format(&self, s: u32) -> Option<&str> {
        self.by_style.get(s as usize)?.0.as_deref()
    }

    /// The style a cell of style `s` keeps.
    pub fn style(&self, s: u32) -> Option<&Arc<Style>> {
        self.by_style.get(s as usize)?.1.as_ref()
    }

    /// The workbook's cell styles (`xl/styles.xml`); none when it has no such part.
    pub fn read<R: Read + Seek>(zip: &mut ZipArchive<R>) -> Result<Self, FormulaReadError> {
        let Some(mut xml) = xml_reader(zip, "xl/styles.xml")? else {
            return Ok(Self::default());
        };
        let mut p = Parser::default();
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let event = xml.read_event_into(&mut buf)?;
            let attr = |name: &[u8]| -> Result<Option<Vec<u8>>, FormulaReadError> {
                match &event {
                    Event::Start(s) => Ok(attribute(s, name)?.map(std::borrow::Cow::into_owned)),
                    _ => Ok(None),
                }
            };
            match &event {
                Event::Start(e) if e.local_name().as_ref() == b"numFmt" => {
                    let id = attr(b"numFmtId")?.and_then(|v| number(&v));
                    if let (Some(id), Some(code)) = (id, attr(b"formatCode")?) {
                        let code = quick_xml::escape::unescape(&xml.decoder().decode(&code)?)
                            .map_err(|e| FormulaReadError(e.to_string()))?
                            .into_owned();
                        p.own.insert(id, code.into());
                    }
                }
                Event::Start(e) => p.start(e.local_name().as_ref(), &attr)?,
                Event::End(e) if p.end(e.local_name().as_ref()) => break,
                Event::Eof => break,
                _ => {}
            }
        }
        Ok(p.finish())
    }
}

type Attr<'a> = dyn Fn(&[u8]) -> Result<Option<Vec<u8>>, FormulaReadError> + 'a;

/// `styles.xml` as far as it has been read: the tables, and the entry of one being read.
#[derive(Debug, Default)]
struct Parser {
    own: HashMap<u32, Box<str>>,
    fonts: Vec<Font>,
    fills: Vec<Option<Rgb>>,
    borders: Vec<Borders>,
    xfs: Vec<Xf>,
    table: Table,
    font: Font,
    /// Whether the fill being read is solid, and its colour.
    fill: (bool, Option<Rgb>),
    border: Borders,
    /// The side of the border being read, and its line until its colour is seen.
    side: Option<(usize, Option<BorderStyle>)>,
    xf: Option<Xf>,
}

impl Parser {
    fn start(&mut self, name: &[u8], attr: &Attr<'_>) -> Result<(), FormulaReadError> {
        match (self.table, name) {
            (_, b"fonts") => self.table = Table::Fonts,
            (_, b"fills") => self.table = Table::Fills,
            (_, b"borders") => self.table = Table::Borders,
            (_, b"cellXfs") => self.table = Table::CellXfs,
            (Table::Fonts, b"font") => self.font = Font::default(),
            (Table::Fonts, b"b") => self.font.bold = on(attr(b"val")?),
            (Table::Fonts, b"i") => self.font.italic = on(attr(b"val")?),
            (Table::Fonts, b"strike") => self.font.strike = on(attr(b"val")?),
            (Table::Fonts, b"u") => {
                self.font.underline = attr(b"val")?.is_none_or(|v| v.as_slice() != b"none");
            }
            (Table::Fonts, b"sz") => {
                self.font.size = attr(b"val")?
                    .and_then(|v| std::str::from_utf8(&v).ok()?.parse::<f64>().ok())
                    .and_then(FontSize::from_points);
            }
            (Table::Fonts, b"color") => self.font.color = rgb(attr(b"rgb")?),
            (Table::Fills, b"fill") => self.fill = (false, None),
            (Table::Fills, b"patternFill") => {
                self.fill.0 = attr(b"patternType")?.is_some_and(|t| t.as_slice() == b"solid");
            }
            (Table::Fills, b"fgColor") => self.fill.1 = rgb(attr(b"rgb")?),
            (Table::Borders, b"border") => self.border = Borders::default(),
            (Table::Borders, b"top" | b"right" | b"bottom" | b"left") => {
                let i = SIDES.iter().position(|s| s.as_bytes() == name).unwrap_or(0);
                self.side = Some((i, attr(b"style")?.and_then(|v| line(&v))));
            }
            (Table::Borders, b"color") => {
                if let (Some((i, Some(style))), Some(color)) = (self.side, rgb(attr(b"rgb")?)) {
                    let border = Border {
                        style,
                        color: Some(color),
                    };
                    set_side(&mut self.border, i, border);
                    self.side = Some((i, None));
                }
            }
            (Table::CellXfs, b"xf") => {
                let id = |v: Option<Vec<u8>>| v.and_then(|v| number(&v)).map(|n| n as usize);
                self.xf = Some(Xf {
                    num_fmt: attr(b"numFmtId")?.and_then(|v| number(&v)).unwrap_or(0),
                    font: id(attr(b"fontId")?),
                    fill: id(attr(b"fillId")?),
                    border: id(attr(b"borderId")?),
                    ..Xf::default()
                });
            }
            (Table::CellXfs, b"alignment") => {
                if let Some(x) = self.xf.as_mut() {
                    x.h_align = attr(b"horizontal")?.and_then(|v| match v.as_slice() {
                        b"left" => Some(HAlign::Left),
                        b"center" | b"centerContinuous" => Some(HAlign::Center),
                        b"right" => Some(HAlign::Right),
                        _ => None,
                    });
                    x.v_align = attr(b"vertical")?.and_then(|v| match v.as_slice() {
                        b"top" => Some(VAlign::Top),
                        b"center" => Some(VAlign::Middle),
                        b"bottom" => Some(VAlign::Bottom),
                        _ => None,
                    });
                    x.wrap = attr(b"wrapText")?.is_some_and(|v| on(Some(v)));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// An element ends; `true` once there is nothing more to read (the end of `cellXfs`, or
    /// [`MAX_STYLES`] of them).
    fn end(&mut self, name: &[u8]) -> bool {
        match (self.table, name) {
            (_, b"cellXfs") => return true,
            (_, b"fonts" | b"fills" | b"borders") => self.table = Table::Other,
            (Table::Fonts, b"font") if self.fonts.len() < MAX_STYLES => {
                self.fonts.push(std::mem::take(&mut self.font));
            }
            (Table::Fills, b"fill") if self.fills.len() < MAX_STYLES => {
                self.fills
                    .push(if self.fill.0 { self.fill.1 } else { None });
            }
            (Table::Borders, b"top" | b"right" | b"bottom" | b"left") => {
                if let Some((i, Some(style))) = self.side.take() {
                    set_side(&mut self.border, i, Border { style, color: None });
                }
            }
            (Table::Borders, b"border") if self.borders.len() < MAX_STYLES => {
                self.borders.push(self.border);
            }
            (Table::CellXfs, b"xf") => {
                if let Some(x) = self.xf.take() {
                    self.xfs.push(x);
                    return self.xfs.len() == MAX_STYLES;
                }
            }
            _ => {}
        }
        false
    }

    fn finish(self) -> CellStyles {
        let default_size = self.fonts.first().and_then(|f| f.size);
        let by_style = self
            .xfs
            .iter()
            .map(|x| {
                let code = self
                    .own
                    .get(&x.num_fmt)
                    .map(|c| &**c)
                    .or_else(|| builtin(x.num_fmt))
                    .filter(|c| c.len() <= MAX_FORMAT_BYTES && !c.eq_ignore_ascii_case("General"));
                let f = x
                    .font
                    .and_then(|i| self.fonts.get(i))
                    .cloned()
                    .unwrap_or_default();
                let style = Style {
                    bold: f.bold,
                    italic: f.italic,
                    underline: f.underline,
                    strike: f.strike,
                    wrap: x.wrap,
                    font_size: f.size.filter(|s| Some(*s) != default_size),
                    // Black is every reader's default text colour.
                    color: f.color.filter(|c| c.0 != 0),
                    fill: x.fill.and_then(|i| self.fills.get(i).copied().flatten()),
                    h_align: x.h_align,
                    v_align: x.v_align,
                    border: x
                        .border
                        .and_then(|i| self.borders.get(i).copied())
                        .unwrap_or_default(),
                };
                (
                    code.map(Into::into),
                    (!style.is_default()).then(|| Arc::new(style)),
                )
            })
            .collect();
        CellStyles { by_style }
    }
}

fn set_side(b: &mut Borders, i: usize, border: Border) {
    let side = match i {
        0 => &mut b.top,
        1 => &mut b.right,
        2 => &mut b.bottom,
        _ => &mut b.left,
    };
    *side = Some(border);
}

/// A boolean font property: present without `val`, or with `val` 1 or true.
fn on(val: Option<Vec<u8>>) -> bool {
    val.is_none_or(|v| matches!(v.as_slice(), b"1" | b"true"))
}

/// An `rgb` attribute, `AARRGGBB` or `RRGGBB`.
fn rgb(v: Option<Vec<u8>>) -> Option<Rgb> {
    let v = v?;
    let hex = std::str::from_utf8(&v).ok()?;
    let hex = hex.get(hex.len().checked_sub(6)?..)?;
    Rgb::parse(&format!("#{hex}"))
}

/// A border line's name, as the nearest this model has.
fn line(v: &[u8]) -> Option<BorderStyle> {
    Some(match v {
        b"thin" | b"hair" => BorderStyle::Thin,
        b"medium" => BorderStyle::Medium,
        b"thick" => BorderStyle::Thick,
        b"dashed" | b"mediumDashed" | b"dashDot" | b"mediumDashDot" | b"dashDotDot"
        | b"mediumDashDotDot" | b"slantDashDot" => BorderStyle::Dashed,
        b"dotted" => BorderStyle::Dotted,
        b"double" => BorderStyle::Double,
        _ => return None,
    })
}

fn number(v: &[u8]) -> Option<u32> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Write};

    use super::*;

    fn workbook_with_styles(styles: &str) -> ZipArchive<Cursor<Vec<u8>>> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        zip.start_file("xl/styles.xml", zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(styles.as_bytes()).unwrap();
        ZipArchive::new(Cursor::new(zip.finish().unwrap().into_inner())).unwrap()
    }

    #[test]
    fn styles_map_to_their_own_and_builtin_formats_but_not_general_or_dates() {
        let mut zip = workbook_with_styles(
            r#"<?xml version="1.0"?><styleSheet xmlns="x">
            <numFmts count="2"><numFmt numFmtId="164" formatCode="0.0&quot;kg&quot;"/>
              <numFmt numFmtId="165" formatCode="General"/></numFmts>
            <cellStyleXfs count="1"><xf numFmtId="10"/></cellStyleXfs>
            <cellXfs count="6"><xf numFmtId="0"/><xf numFmtId="164"/><xf numFmtId="10"/>
              <xf numFmtId="14"/><xf/><xf numFmtId="165"/><xf numFmtId="49"/></cellXfs>
            </styleSheet>"#,
        );
        let f = CellStyles::read(&mut zip).unwrap();
        assert_eq!(f.format(0), None);
        assert_eq!(f.format(1), Some("0.0\"kg\""));
        assert_eq!(f.format(2), Some("0.00%"));
        assert_eq!(
            f.format(3),
            None,
            "a built-in date keeps the importer's own"
        );
        assert_eq!(f.format(4), None);
        assert_eq!(f.format(5), None);
        assert_eq!(f.format(6), Some("@"));
        assert_eq!(f.format(99), None);
    }

    #[test]
    fn a_workbook_without_styles_has_no_formats() {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        zip.start_file("xl/workbook.xml", zip::write::SimpleFileOptions::default())
            .unwrap();
        let mut zip = ZipArchive::new(Cursor::new(zip.finish().unwrap().into_inner())).unwrap();
        assert_eq!(CellStyles::read(&mut zip).unwrap(), CellStyles::default());
    }
}
