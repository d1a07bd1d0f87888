//! The cell encoding shared by the event bodies and the snapshot chunks, over the primitives of
//! `bytes.rs` (LEB128 varints, lengths, texts), which it re-exports.
//!
//! Written by hand rather than through a serde format because these bytes are a storage contract:
//! they are hashed (chunk names) and stored for years, so they must not change when a dependency
//! does. Every decoder returns an error on malformed input and never panics.

use std::collections::HashMap;
use std::sync::Arc;

use super::formula::{Formula, MAX_FORMULA_CHARS};
use super::limits::{MAX_FORMAT_BYTES, MAX_TEXT_CHARS};
use super::style::Style;
use super::value::{Cell, ErrorCode, Value};

pub use super::bytes::{CodecError, Reader, Writer};

// Cell tag byte: the low bits are the kind, FORMAT_BIT says a format string follows the value.
const KIND_EMPTY: u8 = 0;
const KIND_TEXT: u8 = 1;
const KIND_FLOAT: u8 = 2;
const KIND_FALSE: u8 = 3;
const KIND_TRUE: u8 = 4;
const KIND_ERROR: u8 = 5;
/// An integral number stored as a zigzag varint: most numbers in sheets are small integers, and
/// 1–3 bytes beat 8.
const KIND_INT: u8 = 6;
/// A formula: its text, then its cached value encoded as a value without a format
/// (`KIND_EMPTY` when none is known).
const KIND_FORMULA: u8 = 7;
const FORMAT_BIT: u8 = 0x80;
/// A style follows the format (snapshot chunks only: an event's cells carry none).
const STYLE_BIT: u8 = 0x40;
/// Integers up to this magnitude are exact in an `f64`, so the int form round-trips.
const MAX_SAFE_INT: f64 = 9_007_199_254_740_992.0;

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The encoded size of a UTF-8 text longer than this cannot be within MAX_TEXT_CHARS.
const MAX_TEXT_BYTES: usize = MAX_TEXT_CHARS * 4;

/// Encodes a value and an optional format.
#[inline]
pub fn write_value(w: &mut Writer, value: &Value, format: Option<&str>) {
    let fbit = if format.is_some() { FORMAT_BIT } else { 0 };
    match value {
        Value::Empty => w.u8(KIND_EMPTY | fbit),
        Value::Text(t) => write_text_tag(w, t, fbit),
        Value::Number(n) => {
            // Below 2^53 a float is whole exactly when truncating it to an integer and back
            // gives it again (cheaper than `fract`, a libm call on baseline x86-64).
            let is_int = n.abs() < MAX_SAFE_INT
                && (*n as i64) as f64 == *n
                && !(*n == 0.0 && n.is_sign_negative());
            if is_int {
                w.u8(KIND_INT | fbit);
                w.varint(zigzag(*n as i64));
            } else {
                w.u8(KIND_FLOAT | fbit);
                w.buf.extend_from_slice(&n.to_le_bytes());
            }
        }
        Value::Bool(false) => w.u8(KIND_FALSE | fbit),
        Value::Bool(true) => w.u8(KIND_TRUE | fbit),
        Value::Error(e) => {
            w.u8(KIND_ERROR | fbit);
            w.u8(e.code());
        }
        Value::Formula(f) => {
            w.u8(KIND_FORMULA | fbit);
            w.str(&f.text);
            match f.cached.as_deref() {
                // A cached value is never a formula; one that somehow is is dropped, not nested.
                Some(Value::Formula(_)) | None => w.u8(KIND_EMPTY),
                Some(v) => write_value(w, v, None),
            }
        }
    }
    if let Some(f) = format {
        w.str(f);
    }
}

#[inline]
fn write_text_tag(w: &mut Writer, t: &str, fbit: u8) {
    // Room for the tag, the longest length varint and the text, made once.
    w.buf.reserve(11 + t.len());
    w.u8(KIND_TEXT | fbit);
    w.str(t);
}

/// Encodes a text cell without a format, exactly as [`write_cell`] encodes
/// `Cell { value: Value::Text(t), format: None }`, from borrowed text (the import path encodes
/// fields straight from the CSV reader's buffer, without a `String` per cell).
#[inline]
pub fn write_text_cell(w: &mut Writer, t: &str) {
    write_text_tag(w, t, 0);
}

/// Encodes a cell with its style written out in full (see [`write_cell_in`]).
pub fn write_cell(w: &mut Writer, cell: &Cell) {
    write_cell_in(w, cell, &mut StyleTable::default());
}

/// Encodes a cell. A styled cell has the tag's `0x40` bit and, after its format, a varint: `0`
/// and the style in full ([`Style::write`]), which becomes the next entry of `table`, or `i + 1`
/// for the style already at `table[i]`. A snapshot chunk keeps one table from its first row, so
/// each style it uses is written once.
pub fn write_cell_in(w: &mut Writer, cell: &Cell, table: &mut StyleTable) {
    let Some(style) = &cell.style else {
        return write_value(w, &cell.value, cell.format.as_deref());
    };
    let tag_at = w.len();
    write_value(w, &cell.value, cell.format.as_deref());
    w.buf[tag_at] |= STYLE_BIT;
    match table.find(style) {
        Some(i) => w.varint(u64::from(i) + 1),
        None => {
            w.u8(0);
            style.write(w);
            table.add(style.clone());
        }
    }
}

/// The styles a run of encoded cells has written in full so far, in order (a snapshot chunk's,
/// from its first row): what a later cell refers to by position.
#[derive(Debug, Default, Clone)]
pub struct StyleTable {
    styles: Vec<Arc<Style>>,
    index: HashMap<Arc<Style>, u32>,
    /// The last style found, by pointer: runs of cells share one `Arc`.
    last: Option<(Arc<Style>, u32)>,
}

impl StyleTable {
    fn find(&mut self, s: &Arc<Style>) -> Option<u32> {
        if let Some((l, i)) = &self.last
            && Arc::ptr_eq(l, s)
        {
            return Some(*i);
        }
        let i = *self.index.get(s)?;
        self.last = Some((s.clone(), i));
        Some(i)
    }

    fn add(&mut self, s: Arc<Style>) {
        let i = self.styles.len() as u32;
        self.index.insert(s.clone(), i);
        self.last = Some((s.clone(), i));
        self.styles.push(s);
    }

    /// Forgets every style (a new chunk begins).
    pub fn clear(&mut self) {
        self.styles.clear();
        self.index.clear();
        self.last = None;
    }

    /// How many styles it holds.
    pub fn len(&self) -> usize {
        self.styles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.styles.is_empty()
    }
}

/// The styles a reader has met so far in a run of cells, in order (see [`write_cell_in`]).
#[derive(Debug, Default, Clone)]
pub struct StyleRefs(Vec<Arc<Style>>);

/// Decodes what [`write_value`] wrote, checking the limits.
pub fn read_value(r: &mut Reader<'_>) -> Result<(Value, Option<Box<str>>), CodecError> {
    let (value, format, styled) = read_tagged(r)?;
    if styled {
        return Err(CodecError::Invalid("a style where none may be".into()));
    }
    Ok((value, format))
}

/// A value, its format, and whether a style follows.
fn read_tagged(r: &mut Reader<'_>) -> Result<(Value, Option<Box<str>>, bool), CodecError> {
    let tag = r.u8()?;
    let value = match tag & !(FORMAT_BIT | STYLE_BIT) {
        KIND_EMPTY => Value::Empty,
        KIND_TEXT => {
            let t = r.str(MAX_TEXT_BYTES, "text")?;
            let v = Value::Text(t.to_owned());
            v.check().map_err(|e| CodecError::Invalid(e.to_string()))?;
            v
        }
        KIND_FLOAT => {
            let b = r.take(8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            let n = f64::from_le_bytes(a);
            if !n.is_finite() {
                return Err(CodecError::Invalid("number is not finite".into()));
            }
            Value::Number(n)
        }
        KIND_INT => {
            let i = unzigzag(r.varint()?);
            if (i as f64).abs() >= MAX_SAFE_INT {
                return Err(CodecError::Invalid("integer out of range".into()));
            }
            Value::Number(i as f64)
        }
        KIND_FALSE => Value::Bool(false),
        KIND_TRUE => Value::Bool(true),
        KIND_ERROR => {
            let c = r.u8()?;
            Value::Error(
                ErrorCode::from_code(c)
                    .ok_or_else(|| CodecError::Invalid(format!("unknown error code {c}")))?,
            )
        }
        KIND_FORMULA => {
            let text = r.str(MAX_FORMULA_CHARS * 4, "formula")?;
            let mut f = Formula::new(text).map_err(|e| CodecError::Invalid(e.to_string()))?;
            let cached = match r.u8()? {
                KIND_EMPTY => None,
                t if t & (FORMAT_BIT | STYLE_BIT) != 0 || t == KIND_FORMULA => {
                    return Err(CodecError::BadTag(t));
                }
                _ => {
                    r.unread();
                    Some(Box::new(read_value(r)?.0))
                }
            };
            f.cached = cached;
            Value::Formula(f)
        }
        _ => return Err(CodecError::BadTag(tag)),
    };
    let format = if tag & FORMAT_BIT != 0 {
        Some(r.str(MAX_FORMAT_BYTES, "format")?.into())
    } else {
        None
    };
    Ok((value, format, tag & STYLE_BIT != 0))
}

/// Decodes a cell [`write_cell`] wrote (a style, if any, in full).
pub fn read_cell(r: &mut Reader<'_>) -> Result<Cell, CodecError> {
    read_cell_in(r, &mut StyleRefs::default())
}

/// Decodes a cell [`write_cell_in`] wrote, `refs` holding the styles met before it in its run.
pub fn read_cell_in(r: &mut Reader<'_>, refs: &mut StyleRefs) -> Result<Cell, CodecError> {
    let (value, format, styled) = read_tagged(r)?;
    let style = if styled {
        let at = r.varint()?;
        if at == 0 {
            let s = Arc::new(Style::read(r)?);
            if s.is_default() {
                return Err(CodecError::Invalid("a default style stored".into()));
            }
            refs.0.push(s.clone());
            Some(s)
        } else {
            let s = usize::try_from(at - 1)
                .ok()
                .and_then(|i| refs.0.get(i))
                .ok_or_else(|| CodecError::Invalid(format!("style {at} before it was written")))?;
            Some(s.clone())
        }
    } else {
        None
    };
    Ok(Cell {
        value,
        format,
        style,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overlong_input() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut w = Writer::new();
            w.varint(v);
            let mut r = Reader::new(&w.buf);
            assert_eq!(r.varint(), Ok(v));
            assert!(r.finish().is_ok());
        }
        assert_eq!(
            Reader::new(&[0xff; 11]).varint(),
            Err(CodecError::BadVarint)
        );
        assert_eq!(Reader::new(&[0x80]).varint(), Err(CodecError::Truncated(1)));
    }

    /// The bytes are a storage contract: known encodings stay what they were.
    #[test]
    fn varints_keep_their_known_encodings() {
        for (v, bytes) in [
            (0u64, &[0x00][..]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (16_384, &[0x80, 0x80, 0x01]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut w = Writer::new();
            w.varint(v);
            assert_eq!(w.buf, bytes, "{v}");
            let mut r = Reader::new(bytes);
            assert_eq!(r.varint(), Ok(v));
            assert_eq!(r.remaining(), 0);
        }
        // A tenth byte with more than the 64th bit overflows.
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(Reader::new(&over).varint(), Err(CodecError::BadVarint));
    }

    #[test]
    fn numbers_keep_their_exact_bits() {
        for n in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            1e300,
            -9_007_199_254_740_991.0,
            2f64.powi(60),
        ] {
            let mut w = Writer::new();
            write_value(&mut w, &Value::Number(n), None);
            let (v, _) = read_value(&mut Reader::new(&w.buf)).unwrap();
            match v {
                Value::Number(m) => assert_eq!(m.to_bits(), n.to_bits(), "{n}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [
            &[0x07u8][..],
            &[0x01, 0x05, b'a'],
            &[0x02, 0, 0],
            &[0x05, 99],
            &[0x81, 0x00, 0x7f],
        ] {
            assert!(read_value(&mut Reader::new(bytes)).is_err(), "{bytes:?}");
        }
    }
}
