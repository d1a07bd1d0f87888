//! The chunk list of a build in progress, held as the compact binary records a checkpoint
//! carries, because a from-scratch build of a large sheet lists every chunk it wrote: 17,638 at
//! 100M cells, about 44 bytes each here against 88 as [`ChunkRef`]s. On the wire (a checkpoint)
//! it is one base64 string of the records, so it stays far below DynamoDB's item limit.
//!
//! Record: tag 0 + varint from + varint to (reused), or tag 1 + 32-byte hash + varints rows,
//! cells, max column, bytes, raw bytes (new).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error as _};

use super::format::{ChunkHash, ChunkRef};
use crate::codec::{CodecError, Reader, Writer};

/// Part of the output chunk list: a run of the base snapshot's chunks, or a new chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Piece {
    /// Base chunks `from..to`.
    Reused {
        from: usize,
        to: usize,
    },
    New(ChunkRef),
}

/// A list of [`Piece`]s, encoded as they are added. The last one is kept decoded, so a run of
/// reused base chunks grows in place. Shared with the checkpoints handed out: a clone copies
/// nothing, and the builder copies the records only if a checkpoint still holds them when it
/// adds a piece.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pieces {
    /// Every piece but the last, encoded.
    encoded: Arc<Vec<u8>>,
    last: Option<Piece>,
    len: usize,
}

impl Pieces {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, p: Piece) {
        if let Some(prev) = self.last.replace(p) {
            encode(Arc::make_mut(&mut self.encoded), &prev);
        }
        self.len += 1;
    }

    /// Adds base chunk `chunk`, extending the last piece when it is the run just before it.
    pub fn push_reused(&mut self, chunk: usize) {
        match &mut self.last {
            Some(Piece::Reused { to, .. }) if *to == chunk => *to += 1,
            _ => self.push(Piece::Reused {
                from: chunk,
                to: chunk + 1,
            }),
        }
    }

    /// The pieces in order. Decoding fails only on records that did not come from [`push`]
    /// (a checkpoint is checked when it is read).
    pub fn iter(&self) -> impl Iterator<Item = Result<Piece, CodecError>> + '_ {
        let mut r = Reader::new(self.encoded.as_slice());
        let mut last = self.last.as_ref();
        let mut failed = false;
        std::iter::from_fn(move || {
            if failed {
                None
            } else if r.remaining() > 0 {
                let p = decode(&mut r);
                failed = p.is_err();
                Some(p)
            } else {
                last.take().cloned().map(Ok)
            }
        })
    }
}

fn encode(w: &mut Vec<u8>, p: &Piece) {
    let mut out = Writer {
        buf: std::mem::take(w),
    };
    match p {
        Piece::Reused { from, to } => {
            out.u8(0);
            out.varint(*from as u64);
            out.varint(*to as u64);
        }
        Piece::New(c) => {
            out.u8(1);
            out.buf.extend_from_slice(&c.hash.0);
            for v in [
                u64::from(c.rows),
                c.cells,
                u64::from(c.max_col),
                c.bytes,
                c.raw_bytes,
            ] {
                out.varint(v);
            }
        }
    }
    *w = out.buf;
}

fn decode(r: &mut Reader<'_>) -> Result<Piece, CodecError> {
    match r.u8()? {
        0 => Ok(Piece::Reused {
            from: usize::try_from(r.varint()?)
                .map_err(|_| CodecError::Invalid("piece range".into()))?,
            to: usize::try_from(r.varint()?)
                .map_err(|_| CodecError::Invalid("piece range".into()))?,
        }),
        1 => {
            let mut hash = ChunkHash([0; 32]);
            hash.0.copy_from_slice(r.take(32)?);
            Ok(Piece::New(ChunkRef {
                hash,
                rows: r.varint_u32(u32::MAX, "rows")?,
                cells: r.varint()?,
                max_col: r.varint_u32(u32::MAX, "max column")?,
                bytes: r.varint()?,
                raw_bytes: r.varint()?,
                log: None,
            }))
        }
        t => Err(CodecError::Invalid(format!("unknown piece tag {t}"))),
    }
}

impl Serialize for Pieces {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Streamed into the serializer: a 100M-cell build's pieces are ~1 MB of base64, not
        // held twice. The encoded records up to a multiple of 3 bytes give whole base64 groups
        // without padding, so the rest (and the last piece) can follow as a second run.
        let whole = self.encoded.len() - self.encoded.len() % 3;
        let mut rest = self.encoded[whole..].to_vec();
        if let Some(last) = &self.last {
            encode(&mut rest, last);
        }
        s.collect_str(&Base64Pair(&self.encoded[..whole], &rest))
    }
}

/// The base64 of `0` then `1`, where `0` is a multiple of 3 bytes long.
struct Base64Pair<'a>(&'a [u8], &'a [u8]);

impl std::fmt::Display for Base64Pair<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        base64::display::Base64Display::new(self.0, &STANDARD).fmt(f)?;
        base64::display::Base64Display::new(self.1, &STANDARD).fmt(f)
    }
}

impl<'de> Deserialize<'de> for Pieces {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let bytes = STANDARD.decode(text.as_bytes()).map_err(D::Error::custom)?;
        let mut r = Reader::new(&bytes);
        let mut out = Pieces::default();
        while r.remaining() > 0 {
            out.push(decode(&mut r).map_err(|e| D::Error::custom(e.to_string()))?);
        }
        Ok(out)
    }
}
