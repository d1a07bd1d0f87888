//! Checkpoint pieces as one base64 string of binary records, because a from-scratch build of a
//! large sheet lists every chunk it wrote and the checkpoint must stay far below DynamoDB's item
//! limit. Record: tag 0 + varint from + varint to (reused), or tag 1 + 32-byte hash + varints
//! rows, cells, max column, bytes, raw bytes (new).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

use super::builder::Piece;
use super::format::{ChunkHash, ChunkRef};
use crate::codec::{Reader, Writer};

pub fn serialize<S: Serializer>(pieces: &[Piece], s: S) -> Result<S::Ok, S::Error> {
    let mut w = Writer::new();
    for p in pieces {
        match p {
            Piece::Reused { from, to } => {
                w.u8(0);
                w.varint(*from as u64);
                w.varint(*to as u64);
            }
            Piece::New(c) => {
                w.u8(1);
                w.buf.extend_from_slice(&c.hash.0);
                for v in [
                    u64::from(c.rows),
                    c.cells,
                    u64::from(c.max_col),
                    c.bytes,
                    c.raw_bytes,
                ] {
                    w.varint(v);
                }
            }
        }
    }
    // Streamed into the serializer: a 100M-cell build's pieces are ~1 MB of base64, not held
    // twice.
    s.collect_str(&base64::display::Base64Display::new(&w.buf, &STANDARD))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Vec<Piece>>, D::Error> {
    let text = String::deserialize(d)?;
    let bytes = STANDARD.decode(text).map_err(D::Error::custom)?;
    let mut r = Reader::new(&bytes);
    let mut out = Vec::new();
    let e = |e: crate::codec::CodecError| D::Error::custom(e.to_string());
    while r.remaining() > 0 {
        match r.u8().map_err(e)? {
            0 => out.push(Piece::Reused {
                from: r.varint().map_err(e)? as usize,
                to: r.varint().map_err(e)? as usize,
            }),
            1 => {
                let mut hash = ChunkHash([0; 32]);
                hash.0.copy_from_slice(r.take(32).map_err(e)?);
                let rows = r.varint_u32(u32::MAX, "rows").map_err(e)?;
                let cells = r.varint().map_err(e)?;
                let max_col = r.varint_u32(u32::MAX, "max column").map_err(e)?;
                let bytes = r.varint().map_err(e)?;
                let raw_bytes = r.varint().map_err(e)?;
                out.push(Piece::New(ChunkRef {
                    hash,
                    rows,
                    cells,
                    max_col,
                    bytes,
                    raw_bytes,
                    log: None,
                }));
            }
            t => return Err(D::Error::custom(format!("unknown piece tag {t}"))),
        }
    }
    Ok(Arc::new(out))
}
