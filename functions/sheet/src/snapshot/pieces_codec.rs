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

/// Bytes of records per block of a [`Pieces`] list: each block is allocated once at this size
/// and never grown, so the list touches only the memory it holds (a `Vec` that doubles leaves
/// its earlier copies behind in the allocator, about as much again), and a finished build can
/// free each block once the manifest has listed it.
const BLOCK: usize = 64 << 10;
/// The longest record: a tag, a hash and five varints.
const MAX_RECORD: usize = 1 + 32 + 5 * 10;

/// A list of [`Piece`]s, encoded as they are added, in blocks of [`BLOCK`] bytes. The last piece
/// is kept decoded, so a run of reused base chunks grows in place. Shared with the checkpoints
/// handed out: a clone shares the full blocks and copies only the one being filled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pieces {
    /// Full blocks of records; a record never spans two.
    full: Vec<Arc<Vec<u8>>>,
    /// The block being filled.
    open: Vec<u8>,
    /// The last piece, not yet encoded.
    last: Option<Piece>,
    len: usize,
    /// Chunks the pieces list: one per new chunk, `to - from` per reused run.
    chunks: usize,
}

impl Pieces {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many chunks the pieces list (reused runs counted chunk by chunk).
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    pub fn push(&mut self, p: Piece) {
        self.chunks += match &p {
            Piece::New(_) => 1,
            Piece::Reused { from, to } => to.saturating_sub(*from),
        };
        if let Some(prev) = self.last.replace(p) {
            if self.open.capacity() == 0 {
                self.open.reserve_exact(BLOCK);
            }
            encode(&mut self.open, &prev);
            if self.open.len() + MAX_RECORD > BLOCK {
                self.full.push(Arc::new(std::mem::take(&mut self.open)));
            }
        }
        self.len += 1;
    }

    /// Adds base chunk `chunk`, extending the last piece when it is the run just before it.
    pub fn push_reused(&mut self, chunk: usize) {
        match &mut self.last {
            Some(Piece::Reused { to, .. }) if *to == chunk => {
                *to += 1;
                self.chunks += 1;
            }
            _ => self.push(Piece::Reused {
                from: chunk,
                to: chunk + 1,
            }),
        }
    }

    /// The encoded blocks in order (the last piece not included).
    fn blocks(&self) -> impl Iterator<Item = &[u8]> + Clone {
        self.full
            .iter()
            .map(|b| b.as_slice())
            .chain(std::iter::once(self.open.as_slice()))
    }

    /// The pieces in order. Decoding fails only on records that did not come from [`push`]
    /// (a checkpoint is checked when it is read).
    ///
    /// [`push`]: Self::push
    pub fn iter(&self) -> impl Iterator<Item = Result<Piece, CodecError>> + '_ {
        let records = self.blocks().flat_map(records);
        let last = self.last.iter().cloned().map(Ok);
        stop_at_error(records.chain(last))
    }

    /// Hands each piece to `f` in order, freeing each block of records once it is done (unless
    /// a checkpoint still shares it), so a list being turned into a manifest shrinks as the
    /// manifest grows.
    pub fn drain<E>(
        self,
        bad: impl Fn(CodecError) -> E,
        mut f: impl FnMut(Piece) -> Result<(), E>,
    ) -> Result<(), E> {
        let Pieces {
            full, open, last, ..
        } = self;
        for block in full {
            for p in records(&block) {
                f(p.map_err(&bad)?)?;
            }
        }
        for p in records(&open) {
            f(p.map_err(&bad)?)?;
        }
        drop(open);
        match last {
            Some(p) => f(p),
            None => Ok(()),
        }
    }
}

/// The records of one block.
fn records(block: &[u8]) -> impl Iterator<Item = Result<Piece, CodecError>> + '_ {
    let mut r = Reader::new(block);
    stop_at_error(std::iter::from_fn(move || {
        (r.remaining() > 0).then(|| decode(&mut r))
    }))
}

/// Ends an iterator after its first error.
fn stop_at_error<T, E>(
    it: impl Iterator<Item = Result<T, E>>,
) -> impl Iterator<Item = Result<T, E>> {
    let mut failed = false;
    it.take_while(move |r| {
        let go = !failed;
        failed |= r.is_err();
        go
    })
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
        // held twice.
        let mut tail = Vec::new();
        if let Some(last) = &self.last {
            encode(&mut tail, last);
        }
        s.collect_str(&Base64Blocks(
            self.blocks().chain(std::iter::once(tail.as_slice())),
        ))
    }
}

/// The base64 of the concatenation of some byte slices, written a slice at a time: each slice's
/// bytes up to a multiple of three make whole base64 groups, and the rest carries over.
struct Base64Blocks<I>(I);

impl<'a, I: Iterator<Item = &'a [u8]> + Clone> std::fmt::Display for Base64Blocks<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use base64::display::Base64Display;
        let mut carry: Vec<u8> = Vec::with_capacity(3);
        for mut block in self.0.clone() {
            if !carry.is_empty() {
                let need = (3 - carry.len()).min(block.len());
                carry.extend_from_slice(&block[..need]);
                block = &block[need..];
                if carry.len() < 3 {
                    continue;
                }
                Base64Display::new(&carry, &STANDARD).fmt(f)?;
                carry.clear();
            }
            let whole = block.len() - block.len() % 3;
            Base64Display::new(&block[..whole], &STANDARD).fmt(f)?;
            carry.extend_from_slice(&block[whole..]);
        }
        Base64Display::new(&carry, &STANDARD).fmt(f)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Enough pieces to fill several blocks, new chunks and runs of reused ones mixed.
    fn many() -> Vec<Piece> {
        let mut out = Vec::new();
        let mut base = 0usize;
        for i in 0..5_000u32 {
            if i % 7 == 0 {
                out.push(Piece::Reused {
                    from: base,
                    to: base + 1 + (i as usize % 3),
                });
                base += 10;
            } else {
                let mut hash = ChunkHash([0; 32]);
                hash.0[..4].copy_from_slice(&i.to_le_bytes());
                out.push(Piece::New(ChunkRef {
                    hash,
                    rows: i,
                    cells: u64::from(i) * 1_000_003,
                    max_col: i % 300,
                    bytes: u64::from(i) * 7,
                    raw_bytes: u64::from(i) * 31,
                    log: None,
                }));
            }
        }
        out
    }

    #[test]
    fn pieces_over_many_blocks_round_trip_and_drain_in_order() {
        let want = many();
        let mut pieces = Pieces::default();
        for p in &want {
            pieces.push(p.clone());
        }
        assert!(pieces.full.len() > 2, "{} full blocks", pieces.full.len());
        assert_eq!(pieces.len(), want.len());
        let got: Vec<Piece> = pieces.iter().map(Result::unwrap).collect();
        assert_eq!(got, want);

        // On the wire: the base64 of every record, whatever the block boundaries.
        let mut all = Vec::new();
        for p in &want {
            encode(&mut all, p);
        }
        let json = serde_json::to_string(&pieces).unwrap();
        assert_eq!(json, format!("\"{}\"", STANDARD.encode(&all)));
        let back: Pieces = serde_json::from_str(&json).unwrap();
        assert_eq!(back, pieces);
        assert_eq!(back.chunks(), pieces.chunks());

        let mut drained = Vec::new();
        pieces
            .drain(
                |e| e.to_string(),
                |p| {
                    drained.push(p);
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(drained, want);
    }

    #[test]
    fn reused_runs_grow_in_place_and_count_their_chunks() {
        let mut pieces = Pieces::default();
        for c in [3, 4, 5, 9, 10] {
            pieces.push_reused(c);
        }
        let got: Vec<Piece> = pieces.iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            vec![
                Piece::Reused { from: 3, to: 6 },
                Piece::Reused { from: 9, to: 11 }
            ]
        );
        assert_eq!((pieces.len(), pieces.chunks()), (2, 5));
    }
}
