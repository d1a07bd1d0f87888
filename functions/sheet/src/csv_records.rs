//! Splitting a CSV byte stream into records, with exactly the `csv` crate's reading (no headers,
//! any field count, `,` between fields, `"` quoting with doubled quotes, and `\r`, `\n` or `\r\n`
//! ending a record; blank lines skipped; a UTF-8 byte-order mark at the start dropped), but
//! faster on the records most files are made of.
//!
//! Most records are one line with no quote and no carriage return, except perhaps one at its end
//! (a file of `\r\n` lines). For those the reader finds the line's end and its commas with
//! `memchr` (vector instructions, many bytes a step) and hands out the fields as slices of its own
//! buffer, copying nothing. Any other record (a quote anywhere in the line, or a `\r` before its
//! end) goes through `csv_core`, the state machine under the `csv` crate, from the record's first
//! byte, so quoted fields, quotes inside fields, embedded line breaks and odd terminators read
//! exactly as before. `csv_core` returns to its start state after every record (its `\r\n` state
//! accepts the same bytes as the start state), so one parser serves every slow record of a read.
//! The import reader used `csv::Reader` alone until its per-byte state machine was a tenth of a
//! snapshot build (`docs/sheet-model.md`, "Measured");
//! `csv_records_tests` checks records, fields and positions against `csv::Reader` on random input.

use std::io::{self, Read};

use crate::limits::MAX_CSV_RECORD_BYTES;

/// What the reader asks its source for at a time, and its buffer's starting size.
const READ_BYTES: usize = 64 << 10;
const BOM: &[u8; 3] = b"\xef\xbb\xbf";

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A record took more than [`MAX_CSV_RECORD_BYTES`] (its terminator included), so a file that
    /// is one endless line is refused at the limit instead of gathered into memory. `lines` is
    /// how many line feeds came before the record.
    #[error("a CSV record is longer than {MAX_CSV_RECORD_BYTES} bytes")]
    TooLong { lines: u64 },
}

/// One record: its fields, as byte ranges of `bytes`.
#[derive(Debug)]
pub(crate) struct Record<'a> {
    /// The record's bytes (with its commas, for a simple record; the fields' contents one after
    /// another, quotes removed, for a record `csv_core` read).
    pub(crate) bytes: &'a [u8],
    pub(crate) fields: &'a [(usize, usize)],
}

/// Reads records one at a time from a byte source.
pub(crate) struct CsvRecords<R> {
    inner: R,
    buf: Vec<u8>,
    /// `buf[start..end]` is read but not yet consumed.
    start: usize,
    end: usize,
    eof: bool,
    /// Bytes consumed since the read began, and line feeds among them.
    consumed: u64,
    lines: u64,
    /// Whether the byte-order mark check at the start is still to do.
    at_start: bool,
    core: csv_core::Reader,
    /// `csv_core` drops a byte-order mark at the start of the first input it is given; it is
    /// first given one byte, which it never drops, so a slow record that starts with those bytes
    /// keeps them (as `csv::Reader` does for any record but the first).
    core_started: bool,
    /// A slow record's field contents and their ends, as `csv_core` writes them.
    out: Vec<u8>,
    ends: Vec<usize>,
    fields: Vec<(usize, usize)>,
}

impl<R: Read> CsvRecords<R> {
    pub(crate) fn new(inner: R) -> Self {
        CsvRecords {
            inner,
            buf: vec![0; READ_BYTES],
            start: 0,
            end: 0,
            eof: false,
            consumed: 0,
            lines: 0,
            at_start: true,
            core: csv_core::Reader::new(),
            core_started: false,
            out: vec![0; 1024],
            ends: vec![0; 64],
            fields: Vec::new(),
        }
    }

    /// Bytes consumed since the read began: where the next record starts, relative to where the
    /// read started.
    pub(crate) fn bytes(&self) -> u64 {
        self.consumed
    }

    /// Line feeds consumed since the read began.
    pub(crate) fn lines(&self) -> u64 {
        self.lines
    }

    /// The next record, or `None` at the end of the input.
    pub(crate) fn next_record(&mut self) -> Result<Option<Record<'_>>, RecordError> {
        if self.at_start {
            self.at_start = false;
            while self.end - self.start < BOM.len() && self.fill()? {}
            if self.buf[self.start..self.end].starts_with(BOM) {
                self.advance(BOM.len());
            }
        }
        // Blank lines: terminators where a record would start.
        loop {
            while self.start < self.end && matches!(self.buf[self.start], b'\n' | b'\r') {
                self.lines += u64::from(self.buf[self.start] == b'\n');
                self.advance(1);
            }
            if self.start < self.end {
                break;
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
        let before = self.lines;
        let too_long = |len: usize| len as u64 > MAX_CSV_RECORD_BYTES;
        // The line's end: scanned from where the last look stopped, across refills.
        let mut scanned = 0;
        let newline = loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.start + scanned..self.end]) {
                break Some(scanned + i);
            }
            scanned = self.end - self.start;
            if too_long(scanned) {
                return Err(RecordError::TooLong { lines: before });
            }
            if !self.fill()? {
                break None;
            }
        };
        let len = newline.unwrap_or(self.end - self.start);
        let line = &self.buf[self.start..self.start + len];
        // A line that ends in `\r` (a `\r\n` file) reads as `csv_core` reads it: the record ends
        // at the `\r`, and the `\n` after it is a blank line the next call skips.
        let (body, taken, ends_line) = match line.last() {
            Some(b'\r') => (len - 1, len, false),
            _ => (len, len + usize::from(newline.is_some()), newline.is_some()),
        };
        let line = &line[..body];
        if memchr::memchr2(b'"', b'\r', line).is_some() {
            return self.slow_record(before);
        }
        if too_long(taken) {
            return Err(RecordError::TooLong { lines: before });
        }
        self.fields.clear();
        let mut field_start = 0;
        for comma in memchr::memchr_iter(b',', line) {
            self.fields.push((field_start, comma));
            field_start = comma + 1;
        }
        self.fields.push((field_start, body));
        let at = self.start;
        self.advance(taken);
        self.lines += u64::from(ends_line);
        Ok(Some(Record {
            bytes: &self.buf[at..at + body],
            fields: &self.fields,
        }))
    }

    /// A record `csv_core` reads, from its first byte.
    fn slow_record(&mut self, before: u64) -> Result<Option<Record<'_>>, RecordError> {
        use csv_core::ReadRecordResult as R;
        let first = self.consumed;
        let (mut nout, mut nend) = (0, 0);
        loop {
            let mut input = &self.buf[self.start..self.end];
            if !self.core_started {
                input = &input[..input.len().min(1)];
            }
            let at_end = input.is_empty();
            let (res, nin, o, e) =
                self.core
                    .read_record(input, &mut self.out[nout..], &mut self.ends[nend..]);
            self.core_started = true;
            self.lines += memchr::memchr_iter(b'\n', &input[..nin]).count() as u64;
            self.advance(nin);
            nout += o;
            nend += e;
            if self.consumed - first > MAX_CSV_RECORD_BYTES {
                return Err(RecordError::TooLong { lines: before });
            }
            match res {
                // Given nothing, `csv_core` ends the record or the input; never waits for more.
                R::InputEmpty if at_end => return Ok(None),
                R::InputEmpty => {
                    if self.start == self.end {
                        // At the end of the input the next call is given nothing, which ends
                        // the record.
                        self.fill()?;
                    }
                }
                R::OutputFull => self.out.resize(self.out.len() * 2, 0),
                R::OutputEndsFull => self.ends.resize(self.ends.len() * 2, 0),
                R::Record => {
                    self.fields.clear();
                    let mut field_start = 0;
                    for &end in &self.ends[..nend] {
                        self.fields.push((field_start, end));
                        field_start = end;
                    }
                    return Ok(Some(Record {
                        bytes: &self.out[..nout],
                        fields: &self.fields,
                    }));
                }
                R::End => return Ok(None),
            }
        }
    }

    fn advance(&mut self, n: usize) {
        self.start += n;
        self.consumed += n as u64;
    }

    /// Reads more input after what is buffered, keeping the unconsumed bytes; `false` at the
    /// end of the input.
    fn fill(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            // A record longer than the buffer: the callers stop it at the record limit.
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
#[path = "csv_records_tests.rs"]
mod tests;
