//! Checkpoint pieces as one base64 string of binary records, because a from-scratch build of a
//! large sheet lists every chunk it wrote and the checkpoint must stay far below DynamoDB's item
//! limit. Record: tag 0 + varint from + varint to (reused), or tag 1 + 32-byte hash + varints
//! rows, cells, max column, bytes, raw bytes (new).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

use super::builder::Piece;
use super::format::ChunkRef;
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
                let hash = hex::decode(&c.hash).map_err(serde::ser::Error::custom)?;
                w.buf.extend_from_slice(&hash);
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
    s.serialize_str(&STANDARD.encode(&w.buf))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Piece>, D::Error> {
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
                let hash = hex::encode(r.take(32).map_err(e)?);
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
    Ok(out)
}
