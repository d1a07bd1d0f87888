//! The formulas of an XLSX worksheet, read in step with calamine's values.
//!
//! calamine's streaming cell reader gives each cell's cached value and skips its `<f>` element;
//! its formula reader gives formulas without values, and spreads a shared formula by filling a map
//! as large as the range the file names (a file can name every cell of the sheet) with a textual
//! rewrite that also moves function names such as `LOG10`. So the importer reads the worksheet
//! twice at once: calamine for the values, [`FormulaCells`] for the `<f>` of the same `<c>`
//! elements, in step, each through its own [`View`] of the one file. Memory stays one row plus
//! what the shared formulas below hold.
//!
//! - A cell's formula is its `<f>` text as the file stores it (no `=`).
//! - Shared formulas: the first cell of a group carries the text
//!   (`<f t="shared" si="3" ref="B2:B9">A1*2</f>`), the others only the group
//!   (`<f t="shared" si="3"/>`). Each of those gets the first cell's text with its relative
//!   references moved by the cell's distance from it ([`crate::formula::offset`]). A group's text is
//!   held until the reader passes the last row of its `ref`, and at most
//!   [`MAX_SHARED_TEXT_BYTES`] of text and [`MAX_SHARED_GROUPS`] groups at once; a cell of a group
//!   not held keeps its value only.
//! - Array formulas keep their text on the first cell; the other cells of the array have no `<f>`
//!   and keep their values. Data tables (`t="dataTable"`) have no text and import as values.
//! - A formula outside the limits ([`crate::formula::check`]) is left out: its cell keeps its
//!   cached value.

use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::rc::Rc;

use quick_xml::Reader as XmlReader;
use quick_xml::events::{BytesStart, Event};
use zip::ZipArchive;

use crate::formula::{self, MAX_FORMULA_CHARS};

/// Text of shared formulas held at once (their first cells' texts).
pub const MAX_SHARED_TEXT_BYTES: usize = 16 * 1024 * 1024;
/// Shared-formula groups held at once.
pub const MAX_SHARED_GROUPS: usize = 1 << 20;
/// Bytes read ahead by each view of the file (a read through one view moves the file away from
/// where the other left it, so each keeps a buffer of its own).
pub const VIEW_BUFFER_BYTES: usize = 256 * 1024;

/// One seekable file read through several [`View`]s, each at its own position.
#[derive(Debug)]
pub struct Shared<R> {
    file: Rc<RefCell<Positioned<R>>>,
}

#[derive(Debug)]
struct Positioned<R> {
    inner: R,
    /// Where `inner` is, when known: a view reading on from there needs no seek.
    at: Option<u64>,
}

/// A reader of a [`Shared`] file with a position of its own.
#[derive(Debug)]
pub struct View<R> {
    file: Rc<RefCell<Positioned<R>>>,
    pos: u64,
}

impl<R: Read + Seek> Shared<R> {
    pub fn new(inner: R) -> Self {
        Shared {
            file: Rc::new(RefCell::new(Positioned { inner, at: None })),
        }
    }

    /// A new view at the start of the file, buffered.
    pub fn view(&self) -> BufReader<View<R>> {
        BufReader::with_capacity(
            VIEW_BUFFER_BYTES,
            View {
                file: Rc::clone(&self.file),
                pos: 0,
            },
        )
    }
}

impl<R: Read + Seek> Read for View<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut file = self.file.borrow_mut();
        if file.at != Some(self.pos) {
            file.at = None;
            file.inner.seek(SeekFrom::Start(self.pos))?;
            file.at = Some(self.pos);
        }
        let n = file.inner.read(buf)?;
        self.pos += n as u64;
        file.at = Some(self.pos);
        Ok(n)
    }
}

impl<R: Read + Seek> Seek for View<R> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.pos = match to {
            SeekFrom::Start(p) => p,
            SeekFrom::Current(d) => self.pos.checked_add_signed(d).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "seek before the start")
            })?,
            SeekFrom::End(_) => {
                let mut file = self.file.borrow_mut();
                file.at = None;
                let p = file.inner.seek(to)?;
                file.at = Some(p);
                p
            }
        };
        Ok(self.pos)
    }
}

/// Why the formulas could not be read in step with the values.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FormulaReadError(pub(crate) String);

impl From<quick_xml::Error> for FormulaReadError {
    fn from(e: quick_xml::Error) -> Self {
        FormulaReadError(e.to_string())
    }
}

impl From<quick_xml::encoding::EncodingError> for FormulaReadError {
    fn from(e: quick_xml::encoding::EncodingError) -> Self {
        FormulaReadError(e.to_string())
    }
}

impl From<zip::result::ZipError> for FormulaReadError {
    fn from(e: zip::result::ZipError) -> Self {
        FormulaReadError(e.to_string())
    }
}

type Xml<'a, R> = XmlReader<BufReader<zip::read::ZipFile<'a, R>>>;

/// An XML reader of a part, set up as calamine sets up its own, so both see the same events.
pub(crate) fn xml_reader<'a, R: Read + Seek>(
    zip: &'a mut ZipArchive<R>,
    path: &str,
) -> Result<Option<Xml<'a, R>>, FormulaReadError> {
    // Part names match whatever their case and slashes, as calamine matches them.
    let name = zip
        .file_names()
        .find(|n| n.replace('\\', "/").eq_ignore_ascii_case(path))
        .unwrap_or(path)
        .to_owned();
    let file = match zip.by_name(&name) {
        Ok(f) => f,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut xml = XmlReader::from_reader(BufReader::new(file));
    let config = xml.config_mut();
    config.check_end_names = false;
    config.trim_text(false);
    config.check_comments = false;
    config.expand_empty_elements = true;
    Ok(Some(xml))
}

/// The value of `e`'s attribute named `key` (prefix included, as calamine matches them).
pub(crate) fn attribute<'e>(
    e: &'e BytesStart<'_>,
    key: &[u8],
) -> Result<Option<Cow<'e, [u8]>>, FormulaReadError> {
    // calamine reads attributes with quick-xml's checks on; skipping them here reads the same
    // values from any file calamine accepts, for less work on every cell.
    for a in e.attributes().with_checks(false) {
        let a = a.map_err(|e| FormulaReadError(e.to_string()))?;
        if a.key.as_ref() == key {
            return Ok(Some(a.value));
        }
    }
    Ok(None)
}

/// The part of the workbook's first sheet (the one calamine names first), found as calamine
/// finds it: the first `<sheet>` of `xl/workbook.xml`, its relationship in
/// `xl/_rels/workbook.xml.rels`. `None` when the workbook names none.
pub fn first_sheet_path<R: Read + Seek>(
    zip: &mut ZipArchive<R>,
) -> Result<Option<String>, FormulaReadError> {
    let mut buf = Vec::new();
    let id = {
        let Some(mut xml) = xml_reader(zip, "xl/workbook.xml")? else {
            return Ok(None);
        };
        loop {
            buf.clear();
            match xml.read_event_into(&mut buf)? {
                Event::Start(e) if e.local_name().as_ref() == b"sheet" => {
                    let id = match attribute(&e, b"r:id")? {
                        Some(id) => Some(id),
                        None => attribute(&e, b"relationships:id")?,
                    };
                    break id.map(Cow::into_owned);
                }
                Event::Eof => return Ok(None),
                _ => {}
            }
        }
    };
    let Some(id) = id else { return Ok(None) };
    let Some(mut xml) = xml_reader(zip, "xl/_rels/workbook.xml.rels")? else {
        return Ok(None);
    };
    loop {
        buf.clear();
        match xml.read_event_into(&mut buf)? {
            Event::Start(e) if e.local_name().as_ref() == b"Relationship" => {
                if attribute(&e, b"Id")?.as_deref() != Some(&id[..]) {
                    continue;
                }
                let Some(target) = attribute(&e, b"Target")? else {
                    return Ok(None);
                };
                let target = xml.decoder().decode(&target)?;
                return Ok(Some(if let Some(t) = target.strip_prefix('/') {
                    t.to_owned()
                } else if target.starts_with("xl/") {
                    target.into_owned()
                } else {
                    format!("xl/{target}")
                }));
            }
            Event::Eof => return Ok(None),
            _ => {}
        }
    }
}

/// The `<f>` of each `<c>` of a worksheet, in the order calamine reads the cells.
pub struct FormulaCells<'a, R: Read> {
    xml: Xml<'a, R>,
    buf: Vec<u8>,
    cell_buf: Vec<u8>,
    text_buf: Vec<u8>,
    shared: SharedFormulas,
    /// The style (`s`) of the cell [`Self::next`] read last.
    style: Option<u32>,
}

impl<R: Read> std::fmt::Debug for FormulaCells<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FormulaCells")
            .field("shared", &self.shared.groups.len())
            .finish_non_exhaustive()
    }
}

/// A `<f>` element's `t` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Kind {
    /// `normal` (or absent), `array`, or one not known: the text is the cell's formula.
    #[default]
    Own,
    Shared,
    DataTable,
}

/// What a `<f>` element says.
#[derive(Debug, Default)]
struct FormulaElement {
    kind: Kind,
    /// The shared-formula group (`si`).
    group: Option<u32>,
    /// The last row of its `ref`, 0-based.
    last_row: Option<u32>,
    text: String,
    /// The text was longer than any formula within the limits, and was not kept.
    too_long: bool,
}

impl<'a, R: Read + Seek> FormulaCells<'a, R> {
    /// Opens the worksheet at `path`, ready for its first cell; `None` when there is no such part.
    pub fn open(zip: &'a mut ZipArchive<R>, path: &str) -> Result<Option<Self>, FormulaReadError> {
        let Some(mut xml) = xml_reader(zip, path)? else {
            return Ok(None);
        };
        let mut buf = Vec::with_capacity(1024);
        loop {
            buf.clear();
            match xml.read_event_into(&mut buf)? {
                Event::Start(e) if e.local_name().as_ref() == b"sheetData" => break,
                Event::Eof => return Ok(None),
                _ => {}
            }
        }
        Ok(Some(FormulaCells {
            xml,
            buf,
            cell_buf: Vec::with_capacity(1024),
            text_buf: Vec::with_capacity(1024),
            shared: SharedFormulas::default(),
            style: None,
        }))
    }

    /// Reads the next `<c>`, the cell calamine has just read at `pos` (0-based row and column):
    /// its formula, within the limits, or `None`.
    pub fn next(&mut self, pos: (u32, u32)) -> Result<Option<Box<str>>, FormulaReadError> {
        loop {
            self.buf.clear();
            match self.xml.read_event_into(&mut self.buf)? {
                Event::Start(c) if c.local_name().as_ref() == b"c" => {
                    if let Some(r) = attribute(&c, b"r")?
                        && let Some(at) = position(&r)
                        && at != pos
                    {
                        return Err(out_of_step(pos));
                    }
                    self.style = attribute(&c, b"s")?.and_then(|v| number(&v));
                    break;
                }
                Event::End(e) if e.local_name().as_ref() == b"sheetData" => {
                    return Err(out_of_step(pos));
                }
                Event::Eof => return Err(out_of_step(pos)),
                _ => {}
            }
        }
        let element = self.cell()?;
        self.shared.expire(pos.0);
        Ok(element.and_then(|f| self.shared.formula(pos, f)))
    }

    /// The style index (`s`) of the cell [`Self::next`] read last, if it names one.
    pub fn style(&self) -> Option<u32> {
        self.style
    }

    /// The `<f>` of the cell just opened, reading to its end.
    fn cell(&mut self) -> Result<Option<FormulaElement>, FormulaReadError> {
        let mut found = None;
        loop {
            self.cell_buf.clear();
            match self.xml.read_event_into(&mut self.cell_buf)? {
                Event::Start(e) if e.local_name().as_ref() == b"f" => {
                    let mut f = FormulaElement {
                        kind: match attribute(&e, b"t")?.as_deref() {
                            Some(b"shared") => Kind::Shared,
                            Some(b"dataTable") => Kind::DataTable,
                            _ => Kind::Own,
                        },
                        group: attribute(&e, b"si")?.and_then(|v| number(&v)),
                        last_row: attribute(&e, b"ref")?.and_then(|v| last_row(&v)),
                        ..FormulaElement::default()
                    };
                    let end = e.name().as_ref().to_vec();
                    self.text(&end, &mut f)?;
                    found = Some(f);
                }
                // Anything else in the cell (`<v>`, `<is>` and its rich text) is passed over: none
                // of it holds a `<c>`.
                Event::End(e) if e.local_name().as_ref() == b"c" => return Ok(found),
                Event::Eof => return Err(FormulaReadError("the worksheet ends in a cell".into())),
                _ => {}
            }
        }
    }

    /// Reads the text of the `<f>` element just opened (named `end`) into `f`.
    fn text(&mut self, end: &[u8], f: &mut FormulaElement) -> Result<(), FormulaReadError> {
        // Bytes a formula within the limits can take (4 per character at most).
        const MAX_BYTES: usize = MAX_FORMULA_CHARS * 4;
        loop {
            self.text_buf.clear();
            let piece = match self.xml.read_event_into(&mut self.text_buf)? {
                Event::Text(t) => t.xml10_content()?.into_owned(),
                Event::CData(t) => t.decode()?.into_owned(),
                Event::GeneralRef(r) => {
                    let name = r.decode()?;
                    if let Some(s) = quick_xml::escape::resolve_xml_entity(&name) {
                        s.to_owned()
                    } else if let Some(c) = r.resolve_char_ref()? {
                        c.to_string()
                    } else {
                        return Err(FormulaReadError(format!("unknown entity &{name};")));
                    }
                }
                Event::End(e) if e.name().as_ref() == end => return Ok(()),
                Event::Eof => {
                    return Err(FormulaReadError("the worksheet ends in a formula".into()));
                }
                _ => continue,
            };
            if f.too_long || f.text.len() + piece.len() > MAX_BYTES {
                f.too_long = true;
                f.text = String::new();
            } else {
                f.text.push_str(&piece);
            }
        }
    }
}

fn out_of_step((row, col): (u32, u32)) -> FormulaReadError {
    FormulaReadError(format!(
        "the formulas and values of cell {} are out of step",
        crate::a1::CellRef { row, col }
    ))
}

/// A decimal number, if `v` is one.
fn number(v: &[u8]) -> Option<u32> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// The 0-based row and column of a cell reference such as `B12` (any case, no `$`).
fn position(r: &[u8]) -> Option<(u32, u32)> {
    let letters = r.iter().take_while(|b| b.is_ascii_alphabetic()).count();
    if letters == 0 {
        return None;
    }
    let mut col = 0u32;
    for b in &r[..letters] {
        col = col
            .checked_mul(26)?
            .checked_add(u32::from(b.to_ascii_uppercase() - b'A') + 1)?;
    }
    let row = number(&r[letters..])?;
    Some((row.checked_sub(1)?, col - 1))
}

/// The last row (0-based) of a `ref` such as `B2:B9` or `B2`.
fn last_row(v: &[u8]) -> Option<u32> {
    let last = v.rsplit(|&b| b == b':').next()?;
    let digits: Vec<u8> = last.iter().copied().filter(u8::is_ascii_digit).collect();
    number(&digits)?.checked_sub(1)
}

/// The shared-formula groups whose cells may still come.
#[derive(Debug, Default)]
struct SharedFormulas {
    groups: HashMap<u32, Group>,
    /// Groups by the last row of their `ref`, soonest first, to drop them once it is passed.
    expiry: BinaryHeap<Reverse<(u32, u32, u64)>>,
    /// Text the groups hold.
    bytes: usize,
    serial: u64,
}

#[derive(Debug)]
struct Group {
    /// The first cell's formula; `None` when it was outside the limits or past the bounds.
    text: Option<Box<str>>,
    at: (u32, u32),
    /// Tells this group from an earlier one of the same `si` in `expiry`.
    serial: u64,
}

impl SharedFormulas {
    /// The formula of the cell at `pos` whose `<f>` is `f`.
    fn formula(&mut self, pos: (u32, u32), f: FormulaElement) -> Option<Box<str>> {
        let text = (!f.too_long && !f.text.trim().is_empty() && formula::check(&f.text).is_ok())
            .then(|| Box::<str>::from(f.text.as_str()));
        match (f.kind, f.group) {
            (Kind::DataTable, _) => None,
            (Kind::Shared, Some(si)) if f.text.is_empty() && !f.too_long => self.spread(si, pos),
            (Kind::Shared, Some(si)) => {
                self.start(si, pos, f.last_row, text.clone());
                text
            }
            _ => text,
        }
    }

    /// A group's formula as it reads in the cell at `pos`.
    fn spread(&self, si: u32, pos: (u32, u32)) -> Option<Box<str>> {
        let group = self.groups.get(&si)?;
        let text = group.text.as_deref()?;
        let rows = i64::from(pos.0) - i64::from(group.at.0);
        let cols = i64::from(pos.1) - i64::from(group.at.1);
        match formula::offset(text, rows, cols) {
            None => Some(text.into()),
            Some(moved) => formula::check(&moved).is_ok().then(|| moved.into()),
        }
    }

    /// Starts group `si` at `at`, its formula `text`, its cells to row `last_row`.
    fn start(&mut self, si: u32, at: (u32, u32), last_row: Option<u32>, text: Option<Box<str>>) {
        if let Some(old) = self.groups.remove(&si) {
            self.bytes -= old.text.map_or(0, |t| t.len());
        }
        if self.groups.len() >= MAX_SHARED_GROUPS {
            return;
        }
        let text = text.filter(|t| self.bytes + t.len() <= MAX_SHARED_TEXT_BYTES);
        self.bytes += text.as_ref().map_or(0, |t| t.len());
        self.serial += 1;
        let serial = self.serial;
        self.groups.insert(si, Group { text, at, serial });
        // A group without a `ref` is held until the end (within the bounds).
        if let Some(last) = last_row {
            self.expiry.push(Reverse((last, si, serial)));
            // Groups restarted under the same `si` leave stale entries: sweep them out now and
            // then, so the heap stays within a multiple of the groups held.
            if self.expiry.len() > 2 * self.groups.len() + 64 {
                let groups = &self.groups;
                self.expiry
                    .retain(|Reverse((_, si, s))| groups.get(si).is_some_and(|g| g.serial == *s));
            }
        }
    }

    /// Drops the groups whose rows all lie before `row`.
    fn expire(&mut self, row: u32) {
        while let Some(Reverse((last, si, serial))) = self.expiry.peek().copied() {
            if last >= row {
                break;
            }
            self.expiry.pop();
            if self.groups.get(&si).is_some_and(|g| g.serial == serial)
                && let Some(g) = self.groups.remove(&si)
            {
                self.bytes -= g.text.map_or(0, |t| t.len());
            }
        }
    }
}

#[cfg(test)]
#[path = "xlsx_formulas_tests.rs"]
mod tests;
