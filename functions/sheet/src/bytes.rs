//! The binary primitives every stored body is written with: LEB128 varints, bytes with their
//! length, UTF-8 texts, and the reader that checks each against what is left, so a decoder
//! returns an error on malformed input and never panics. The cell encoding (`codec.rs`) and
//! the style forms (`style.rs`) are built on these.

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
    pub(crate) fn unread(&mut self) {
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
