//! The chunk list of a build in progress, held as the compact binary records a checkpoint
//! carries, because a from-scratch build of a large sheet lists every chunk it wrote: 17,638 at
//! 100M cells, about 44 bytes each here against 88 as [`ChunkRef`]s. The records fill blocks of
//! [`BLOCK`] bytes, and each full block is written to the blob store as one *part* of the list
//! (named by its hash, [`list_key`](super::format::list_key)) and dropped: a build holds at most
//! one block of the list, and a checkpoint carries the parts' names and that block, so neither
//! grows with the sheet (but for one 64-digit name per part, about 745 chunks).
//!
//! On the wire (a checkpoint): while nothing has been written out, one base64 string of the
//! records, as before parts existed; after, `{"parts": [hash, …], "partPieces": n,
//! "partChunks": n, "open": base64}`. Both forms are read.
//!
//! Record: tag 0 + varint from + varint to (reused), or tag 1 + 32-byte hash + varints rows,
//! cells, max column, bytes, raw bytes (new).

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

impl Piece {
    /// How many chunks the piece lists.
    fn chunks(&self) -> usize {
        match self {
            Piece::New(_) => 1,
            Piece::Reused { from, to } => to.saturating_sub(*from),
        }
    }
}

/// Bytes of records per block of a [`Pieces`] list, and so per part written to the store: about
/// 745 new chunks. Each block is allocated once at this size and never grown (a `Vec` that
/// doubles leaves its earlier copies behind in the allocator). Smaller blocks make smaller
/// checkpoints (a checkpoint carries the open block, ~44 KB of base64 at most) for more parts.
const BLOCK: usize = 32 << 10;
/// The longest record: a tag, a hash and five varints.
const MAX_RECORD: usize = 1 + 32 + 5 * 10;

/// Records and what they list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Block {
    bytes: Vec<u8>,
    pieces: usize,
    chunks: usize,
}

/// A list of [`Piece`]s, encoded as they are added, in blocks of [`BLOCK`] bytes; full blocks
/// wait in memory until the builder writes them out as parts ([`next_full`], [`written`]). The
/// last piece is kept decoded, so a run of reused base chunks grows in place.
///
/// [`next_full`]: Self::next_full
/// [`written`]: Self::written
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pieces {
    /// Blocks written to the store, by the hash of their bytes, in order.
    parts: Vec<ChunkHash>,
    /// Pieces and chunks the written parts list.
    part_pieces: usize,
    part_chunks: usize,
    /// Full blocks not yet written out (a record never spans two blocks).
    full: std::collections::VecDeque<Block>,
    /// The block being filled.
    open: Block,
    /// The last piece, not yet encoded.
    last: Option<Piece>,
    len: usize,
    /// Chunks the pieces list: one per new chunk, `to - from` per reused run.
    chunks: usize,
    /// The block size: [`BLOCK`], less in tests that want many parts from a small build.
    block: usize,
}

impl Default for Pieces {
    fn default() -> Self {
        Pieces {
            parts: Vec::new(),
            part_pieces: 0,
            part_chunks: 0,
            full: Default::default(),
            open: Block::default(),
            last: None,
            len: 0,
            chunks: 0,
            block: BLOCK,
        }
    }
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

    /// The parts of the list written to the store so far, in order: their keys are
    /// [`list_key`](super::format::list_key)s of these hashes.
    pub fn parts(&self) -> &[ChunkHash] {
        &self.parts
    }

    /// Uses blocks of `bytes` (at least one record) from the next one on.
    pub(crate) fn set_block(&mut self, bytes: usize) {
        self.block = bytes.max(MAX_RECORD);
    }

    pub fn push(&mut self, p: Piece) {
        self.chunks += p.chunks();
        if let Some(prev) = self.last.replace(p) {
            if self.open.bytes.capacity() == 0 {
                self.open.bytes.reserve_exact(self.block);
            }
            encode(&mut self.open.bytes, &prev);
            self.open.pieces += 1;
            self.open.chunks += prev.chunks();
            if self.open.bytes.len() + MAX_RECORD > self.block {
                self.full.push_back(std::mem::take(&mut self.open));
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

    /// The oldest full block not yet written out: the bytes of the next part.
    pub(crate) fn next_full(&self) -> Option<&[u8]> {
        self.full.front().map(|b| b.bytes.as_slice())
    }

    /// [`next_full`](Self::next_full)'s block is in the store under `hash`: forget its bytes.
    pub(crate) fn written(&mut self, hash: ChunkHash) {
        if let Some(b) = self.full.pop_front() {
            self.parts.push(hash);
            self.part_pieces += b.pieces;
            self.part_chunks += b.chunks;
        }
    }

    /// The blocks held in memory, in order (the last piece not included).
    fn blocks(&self) -> impl Iterator<Item = &[u8]> + Clone {
        self.full
            .iter()
            .chain(std::iter::once(&self.open))
            .map(|b| b.bytes.as_slice())
    }

    /// The pieces held in memory (those after the written parts), in order. Decoding fails
    /// only on records that did not come from [`push`] (a checkpoint is checked when it is
    /// read).
    ///
    /// [`push`]: Self::push
    pub fn iter(&self) -> impl Iterator<Item = Result<Piece, CodecError>> + '_ {
        let records = self.blocks().flat_map(records);
        let last = self.last.iter().cloned().map(Ok);
        stop_at_error(records.chain(last))
    }

    /// The names of the written parts, and the pieces held in memory after them as blocks of
    /// records (read with [`records`]) and the last piece.
    pub(crate) fn into_parts(self) -> (Vec<ChunkHash>, Vec<Vec<u8>>, Option<Piece>) {
        let mut blocks: Vec<Vec<u8>> = self.full.into_iter().map(|b| b.bytes).collect();
        blocks.push(self.open.bytes);
        (self.parts, blocks, self.last)
    }
}

/// The records of one block.
pub(crate) fn records(block: &[u8]) -> impl Iterator<Item = Result<Piece, CodecError>> + '_ {
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
            // Tag 2 is a new chunk with formulas, its count after the five fields tag 1 has.
            out.u8(if c.formulas > 0 { 2 } else { 1 });
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
            if c.formulas > 0 {
                out.varint(c.formulas);
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
        tag @ (1 | 2) => {
            let mut hash = ChunkHash([0; 32]);
            hash.0.copy_from_slice(r.take(32)?);
            let mut c = ChunkRef {
                hash,
                rows: r.varint_u32(u32::MAX, "rows")?,
                cells: r.varint()?,
                max_col: r.varint_u32(u32::MAX, "max column")?,
                formulas: 0,
                bytes: r.varint()?,
                raw_bytes: r.varint()?,
                log: None,
            };
            if tag == 2 {
                c.formulas = r.varint()?;
            }
            Ok(Piece::New(c))
        }
        t => Err(CodecError::Invalid(format!("unknown piece tag {t}"))),
    }
}

impl Serialize for Pieces {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // Streamed into the serializer, not held twice as base64.
        let mut tail = Vec::new();
        if let Some(last) = &self.last {
            encode(&mut tail, last);
        }
        let records = Base64Blocks(self.blocks().chain(std::iter::once(tail.as_slice())));
        if self.parts.is_empty() {
            return s.collect_str(&records);
        }
        let mut st = s.serialize_struct("Pieces", 4)?;
        st.serialize_field("parts", &self.parts)?;
        st.serialize_field("partPieces", &self.part_pieces)?;
        st.serialize_field("partChunks", &self.part_chunks)?;
        st.serialize_field("open", &AsStr(&records))?;
        st.end()
    }
}

/// Serialises a `Display` value as a string, written straight into the serializer.
struct AsStr<'a, T>(&'a T);

impl<T: std::fmt::Display> Serialize for AsStr<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self.0)
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

/// The two wire forms of [`Pieces`].
#[derive(Deserialize)]
#[serde(untagged)]
enum Wire {
    Inline(String),
    Parts(PartsWire),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PartsWire {
    parts: Vec<ChunkHash>,
    part_pieces: usize,
    part_chunks: usize,
    open: String,
}

impl<'de> Deserialize<'de> for Pieces {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (mut out, text) = match Wire::deserialize(d)? {
            Wire::Inline(text) => (Pieces::default(), text),
            Wire::Parts(w) => {
                if w.parts.is_empty() && (w.part_pieces > 0 || w.part_chunks > 0) {
                    return Err(D::Error::custom("pieces counted in no parts"));
                }
                let out = Pieces {
                    parts: w.parts,
                    part_pieces: w.part_pieces,
                    part_chunks: w.part_chunks,
                    len: w.part_pieces,
                    chunks: w.part_chunks,
                    ..Pieces::default()
                };
                (out, w.open)
            }
        };
        let bytes = STANDARD.decode(text.as_bytes()).map_err(D::Error::custom)?;
        let mut r = Reader::new(&bytes);
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
                    formulas: u64::from(i % 3 == 0),
                    bytes: u64::from(i) * 7,
                    raw_bytes: u64::from(i) * 31,
                    log: None,
                }));
            }
        }
        out
    }

    #[test]
    fn pieces_over_many_blocks_round_trip_inline_until_parts_are_written() {
        let want = many();
        let mut pieces = Pieces::default();
        for p in &want {
            pieces.push(p.clone());
        }
        assert!(pieces.full.len() > 2, "{} full blocks", pieces.full.len());
        assert_eq!(pieces.len(), want.len());
        let got: Vec<Piece> = pieces.iter().map(Result::unwrap).collect();
        assert_eq!(got, want);

        // On the wire: the base64 of every record, whatever the block boundaries, as before
        // parts existed.
        let mut all = Vec::new();
        for p in &want {
            encode(&mut all, p);
        }
        let json = serde_json::to_string(&pieces).unwrap();
        assert_eq!(json, format!("\"{}\"", STANDARD.encode(&all)));
        let back: Pieces = serde_json::from_str(&json).unwrap();
        assert_eq!(back, pieces);
        assert_eq!(back.chunks(), pieces.chunks());
    }

    /// Writes out every full block, as the builder does, into `store`.
    fn write_out(pieces: &mut Pieces, store: &mut Vec<(ChunkHash, Vec<u8>)>) {
        while let Some(b) = pieces.next_full() {
            let hash = ChunkHash::of(b);
            store.push((hash, b.to_vec()));
            pieces.written(hash);
        }
    }

    #[test]
    fn written_parts_leave_memory_and_the_checkpoint_names_them() {
        let want = many();
        let mut store = Vec::new();
        let mut pieces = Pieces::default();
        let mut sizes = Vec::new();
        for p in &want {
            pieces.push(p.clone());
            write_out(&mut pieces, &mut store);
            sizes.push(serde_json::to_string(&pieces).unwrap().len());
        }
        assert!(store.len() > 2, "{} parts", store.len());
        assert!(pieces.full.is_empty());
        // What a checkpoint carries is bounded by a block (in base64) and the parts' names.
        let bound = BLOCK * 4 / 3 + 200 + store.len() * 67;
        assert!(
            sizes.iter().all(|&s| s <= bound),
            "{:?} over {bound}",
            sizes.iter().max()
        );

        let json = serde_json::to_string(&pieces).unwrap();
        let back: Pieces = serde_json::from_str(&json).unwrap();
        assert_eq!(back, pieces);
        assert_eq!((back.len(), back.chunks()), (want.len(), pieces.chunks()));
        assert_eq!(
            back.parts(),
            store.iter().map(|(h, _)| *h).collect::<Vec<_>>()
        );

        // The parts from the store, then what is in memory: the whole list, in order.
        let (parts, blocks, last) = back.into_parts();
        let mut got = Vec::new();
        for h in parts {
            let (_, bytes) = store.iter().find(|(k, _)| *k == h).unwrap();
            got.extend(records(bytes).map(Result::unwrap));
        }
        for b in &blocks {
            got.extend(records(b).map(Result::unwrap));
        }
        got.extend(last);
        assert_eq!(got, want);
    }

    #[test]
    fn an_inline_checkpoint_of_many_blocks_reads_back_with_its_blocks_still_to_write() {
        // A checkpoint written before parts existed lists every record inline: read, its full
        // blocks wait to be written out like any others.
        let want = many();
        let mut all = Vec::new();
        for p in &want {
            encode(&mut all, p);
        }
        let mut back: Pieces =
            serde_json::from_str(&format!("\"{}\"", STANDARD.encode(&all))).unwrap();
        let mut store = Vec::new();
        write_out(&mut back, &mut store);
        assert!(store.len() > 2);
        assert_eq!(back.len(), want.len());
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
