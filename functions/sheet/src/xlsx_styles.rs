//! The number formats of an XLSX workbook's cell styles, so an import keeps each cell's format.
//!
//! A cell names its style by index (`<c s="3">`); the style (`<xf numFmtId="10">` in `cellXfs`
//! of `xl/styles.xml`) names a number format, either one of the workbook's own (`<numFmt
//! numFmtId="164" formatCode="0.0"/>`) or one of Excel's built-in ones by number (ECMA-376
//! Part 1, 18.8.30). [`NumberFormats`] maps a style index to the format a cell keeps:
//! `None` for General, for a format over the sheet's length limit, and for the built-in date
//! and time formats, whose dates the importer already gives its own `yyyy-mm-dd` format (the
//! built-in ones are the reader's locale's in Excel, not fixed strings).

use std::collections::HashMap;
use std::io::{Read, Seek};

use quick_xml::events::Event;
use zip::ZipArchive;

use crate::limits::MAX_FORMAT_BYTES;
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

/// Each cell style's number format, by style index.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NumberFormats {
    by_style: Vec<Option<Box<str>>>,
}

impl NumberFormats {
    /// The format a cell of style `s` keeps.
    pub fn of(&self, s: u32) -> Option<&str> {
        self.by_style.get(s as usize)?.as_deref()
    }

    /// The workbook's cell styles (`xl/styles.xml`); none when it has no such part.
    pub fn read<R: Read + Seek>(zip: &mut ZipArchive<R>) -> Result<Self, FormulaReadError> {
        let Some(mut xml) = xml_reader(zip, "xl/styles.xml")? else {
            return Ok(Self::default());
        };
        let mut own: HashMap<u32, Box<str>> = HashMap::new();
        let mut by_style = Vec::new();
        let mut in_cell_xfs = false;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match xml.read_event_into(&mut buf)? {
                Event::Start(e) if e.local_name().as_ref() == b"numFmt" => {
                    let id = attribute(&e, b"numFmtId")?.and_then(|v| number(&v));
                    let code = attribute(&e, b"formatCode")?;
                    if let (Some(id), Some(code)) = (id, code) {
                        let code = quick_xml::escape::unescape(&xml.decoder().decode(&code)?)
                            .map_err(|e| FormulaReadError(e.to_string()))?
                            .into_owned();
                        own.insert(id, code.into());
                    }
                }
                Event::Start(e) if e.local_name().as_ref() == b"cellXfs" => in_cell_xfs = true,
                Event::End(e) if e.local_name().as_ref() == b"cellXfs" => break,
                Event::Start(e) if in_cell_xfs && e.local_name().as_ref() == b"xf" => {
                    if by_style.len() == MAX_STYLES {
                        break;
                    }
                    let id = attribute(&e, b"numFmtId")?
                        .and_then(|v| number(&v))
                        .unwrap_or(0);
                    let code = own
                        .get(&id)
                        .map(|c| &**c)
                        .or_else(|| builtin(id))
                        .filter(|c| {
                            c.len() <= MAX_FORMAT_BYTES && !c.eq_ignore_ascii_case("General")
                        });
                    by_style.push(code.map(Into::into));
                }
                Event::Eof => break,
                _ => {}
            }
        }
        Ok(NumberFormats { by_style })
    }
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
        let f = NumberFormats::read(&mut zip).unwrap();
        assert_eq!(f.of(0), None);
        assert_eq!(f.of(1), Some("0.0\"kg\""));
        assert_eq!(f.of(2), Some("0.00%"));
        assert_eq!(f.of(3), None, "a built-in date keeps the importer's own");
        assert_eq!(f.of(4), None);
        assert_eq!(f.of(5), None);
        assert_eq!(f.of(6), Some("@"));
        assert_eq!(f.of(99), None);
    }

    #[test]
    fn a_workbook_without_styles_has_no_formats() {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        zip.start_file("xl/workbook.xml", zip::write::SimpleFileOptions::default())
            .unwrap();
        let mut zip = ZipArchive::new(Cursor::new(zip.finish().unwrap().into_inner())).unwrap();
        assert_eq!(
            NumberFormats::read(&mut zip).unwrap(),
            NumberFormats::default()
        );
    }
}
