//! The compact binary primitives shared by the event bodies and the snapshot chunks: LEB128
//! varints and the cell encoding.
//!
//! Written by hand rather than through a serde format because these bytes are a storage contract:
//! they are hashed (chunk names) and stored for years, so they must not change when a dependency
//! does. Every decoder returns an error on malformed input and never panics.

use super::formula::{Formula, MAX_FORMULA_CHARS};
use super::limits::{MAX_FORMAT_BYTES, MAX_TEXT_CHARS};
use super::value::{Cell, ErrorCode, Value};

/// Why bytes did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("truncated: needed {0} more bytes")]
    Truncated(usize),
    #[error("varint too long")]
    BadVarint,
    #[error("unknown cell tag {0:#04x}")]
    BadTag(u8),
    #[error("text is not UTF-8")]
    BadUtf8,
    #[error("{0}")]
    Invalid(String),
    #[error("{0} unexpected trailing bytes")]
    Trailing(usize),
}

/// Appends encoded values to a byte vector.
#[derive(Debug, Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// An unsigned LEB128 varint, written here rather than through the `leb128` crate: its
    /// byte-at-a-time `Write` made a snapshot build 17% slower (docs/design.md, "What we wrote
    /// ourselves, and why").
    #[inline]
    pub fn varint(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(byte);
                return;
            }
            self.buf.push(byte | 0x80);
        }
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Reads encoded values from a byte slice.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Steps back over the byte just read (after a `u8` that peeked at a tag).
    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), CodecError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(CodecError::Trailing(n)),
        }
    }

    pub fn u8(&mut self) -> Result<u8, CodecError> {
        let b = *self.buf.get(self.pos).ok_or(CodecError::Truncated(1))?;
        self.pos += 1;
        Ok(b)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.remaining() < n {
            return Err(CodecError::Truncated(n - self.remaining()));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// An unsigned LEB128 varint: more than 64 bits is [`CodecError::BadVarint`], running out of
    /// bytes [`CodecError::Truncated`].
    pub fn varint(&mut self) -> Result<u64, CodecError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(CodecError::BadVarint);
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError::BadVarint)
    }

    /// A varint that must fit `u32` and be at most `max`; `what` names it in the error.
    pub fn varint_u32(&mut self, max: u32, what: &str) -> Result<u32, CodecError> {
        let v = self.varint()?;
        if v > u64::from(max) {
            return Err(CodecError::Invalid(format!("{what} {v} exceeds {max}")));
        }
        Ok(v as u32)
    }

    /// A length-prefixed byte string of at most `max` bytes.
    pub fn bytes(&mut self, max: usize, what: &str) -> Result<&'a [u8], CodecError> {
        let n = self.varint()?;
        if n > max as u64 {
            return Err(CodecError::Invalid(format!(
                "{what} is {n} bytes, the limit is {max}"
            )));
        }
        self.take(n as usize)
    }

    pub fn str(&mut self, max: usize, what: &str) -> Result<&'a str, CodecError> {
        std::str::from_utf8(self.bytes(max, what)?).map_err(|_| CodecError::BadUtf8)
    }
}

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

pub fn write_cell(w: &mut Writer, cell: &Cell) {
    write_value(w, &cell.value, cell.format.as_deref());
}

/// Decodes what [`write_value`] wrote, checking the limits.
pub fn read_value(r: &mut Reader<'_>) -> Result<(Value, Option<Box<str>>), CodecError> {
    let tag = r.u8()?;
    let value = match tag & !FORMAT_BIT {
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
                t if t & FORMAT_BIT != 0 || t & !FORMAT_BIT == KIND_FORMULA => {
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
    Ok((value, format))
}

pub fn read_cell(r: &mut Reader<'_>) -> Result<Cell, CodecError> {
    let (value, format) = read_value(r)?;
    Ok(Cell { value, format })
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
