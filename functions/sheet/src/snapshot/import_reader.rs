//! Reading an import file for the builder: a blocking thread parses it and hands rows over a
//! bounded channel, either as [`Row`]s (when stages follow the import and must see them) or
//! already encoded as chunk row bytes (a from-scratch build of an imported sheet, where nothing
//! needs the rows decoded).

use std::ops::ControlFlow;

use tokio::sync::mpsc;

use super::format::{EncodedRow, RowWriter, encode_row};
use crate::Row;
use crate::codec::StyleTable;
use crate::codec::{self, Writer};
use crate::event::ImportFormat;
use crate::import::{self, CsvSink, Field, ImportPos, Mode};

/// Rows buffered between the import reader thread and the builder.
const IMPORT_CHANNEL_ROWS: usize = 256;
/// Rows handed over the channel at a time: one channel operation (and at most one wake-up of the
/// other thread) per batch, not per row.
const IMPORT_BATCH_ROWS: usize = 32;
/// Encoded rows are handed over in batches of about this many bytes: on one core every batch is
/// a switch between the reader thread and the builder, so batches of a few hundred rows make the
/// switches rare.
const ENCODED_BATCH_BYTES: usize = 32 << 10;
/// Encoded batches in flight between the reader thread and the builder.
const ENCODED_BATCHES_IN_FLIGHT: usize = 4;

#[derive(Debug)]
pub(crate) enum ImportMsg {
    Row(Row, ImportPos),
    Failed(String),
}

/// The builder's end of the import channel: rows arrive in batches and leave one at a time.
#[derive(Debug)]
pub(crate) struct ImportRx {
    rx: mpsc::Receiver<Vec<ImportMsg>>,
    batch: std::vec::IntoIter<ImportMsg>,
}

impl ImportRx {
    /// The next row (or failure), or `None` once the reader has finished.
    pub(crate) async fn recv(&mut self) -> Option<ImportMsg> {
        loop {
            if let Some(m) = self.batch.next() {
                return Some(m);
            }
            self.batch = self.rx.recv().await?.into_iter();
        }
    }
}

/// Rows encoded by the import reader thread, as a chunk stores them (without their gaps), one
/// after another in `buf`.
#[derive(Debug, Default)]
pub(crate) struct EncodedBatch {
    buf: Writer,
    rows: Vec<BatchRow>,
    failed: Option<String>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchRow {
    pub(crate) index: u32,
    /// Where the row's bytes end in the batch's buffer (they start where the previous row's end).
    end: usize,
    pub(crate) row: EncodedRow,
    /// Where the import reader resumes after this row.
    pub(crate) pos: ImportPos,
}

/// The builder's end of an encoded import.
#[derive(Debug)]
pub(crate) struct EncodedRx {
    rx: mpsc::Receiver<EncodedBatch>,
    batch: EncodedBatch,
    /// The next row of `batch` to hand out, and where its bytes start.
    next: usize,
    at: usize,
}

impl EncodedRx {
    /// Makes sure a row is ready in `batch`; `false` once the reader has finished. A batch's
    /// failure comes after its rows.
    pub(crate) async fn ready(&mut self) -> Result<bool, String> {
        while self.next >= self.batch.rows.len() {
            if let Some(message) = self.batch.failed.take() {
                return Err(message);
            }
            match self.rx.recv().await {
                Some(b) => {
                    self.batch = b;
                    self.next = 0;
                    self.at = 0;
                }
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// The row `ready` made available, and its bytes; moves past it.
    pub(crate) fn take(&mut self) -> (BatchRow, &[u8]) {
        let r = self.batch.rows[self.next];
        let bytes = &self.batch.buf.buf[self.at..r.end];
        self.next += 1;
        self.at = r.end;
        (r, bytes)
    }
}

/// Reads an import file on a blocking thread and hands rows over a bounded channel, so the file
/// streams through with a few hundred rows in flight.
pub(crate) fn spawn_import(
    format: ImportFormat,
    reader: Box<dyn import::ReadSeek>,
    from: ImportPos,
) -> ImportRx {
    let (tx, rx) = mpsc::channel(IMPORT_CHANNEL_ROWS / IMPORT_BATCH_ROWS);
    tokio::task::spawn_blocking(move || {
        let mut batch = Vec::with_capacity(IMPORT_BATCH_ROWS);
        let res = import::read_rows(format, reader, from, Mode::Lenient, &mut |row, pos| {
            batch.push(ImportMsg::Row(row, pos));
            if batch.len() < IMPORT_BATCH_ROWS {
                return Ok(ControlFlow::Continue(()));
            }
            let full = std::mem::replace(&mut batch, Vec::with_capacity(IMPORT_BATCH_ROWS));
            match tx.blocking_send(full) {
                Ok(()) => Ok(ControlFlow::Continue(())),
                // The builder went away (dropped mid-build); stop reading.
                Err(_) => Ok(ControlFlow::Break(())),
            }
        });
        if let Err(e) = res {
            batch.push(ImportMsg::Failed(e.to_string()));
        }
        if !batch.is_empty() {
            let _ = tx.blocking_send(batch);
        }
    });
    ImportRx {
        rx,
        batch: Vec::new().into_iter(),
    }
}

/// [`spawn_import`] for a build without stages: the reader thread encodes each row into chunk
/// bytes (CSV fields straight from the parser's buffer, with no `Row` or `String` per cell) and
/// hands them over about [`ENCODED_BATCH_BYTES`] at a time.
pub(crate) fn spawn_encoded_import(
    format: ImportFormat,
    reader: Box<dyn import::ReadSeek>,
    from: ImportPos,
) -> EncodedRx {
    let (tx, rx) = mpsc::channel(ENCODED_BATCHES_IN_FLIGHT);
    tokio::task::spawn_blocking(move || {
        let mut sink = EncodingSink {
            batch: EncodedBatch::default(),
            committed: 0,
            row: None,
            tx,
        };
        let res = match format {
            ImportFormat::Csv => import::read_csv_with(reader, from, Mode::Lenient, &mut sink),
            ImportFormat::Xlsx => {
                import::read_rows(format, reader, from, Mode::Lenient, &mut |row, pos| {
                    sink.row(&row, pos)
                })
            }
        };
        sink.batch.buf.buf.truncate(sink.committed);
        if let Err(e) = res {
            sink.batch.failed = Some(e.to_string());
        }
        if !sink.batch.rows.is_empty() || sink.batch.failed.is_some() {
            let _ = sink.tx.blocking_send(sink.batch);
        }
    });
    EncodedRx {
        rx,
        batch: EncodedBatch::default(),
        next: 0,
        at: 0,
    }
}

/// Encodes import rows into batches and sends each full batch to the builder.
struct EncodingSink {
    batch: EncodedBatch,
    /// The end of the last whole row in the batch's buffer.
    committed: usize,
    row: Option<RowWriter>,
    tx: mpsc::Sender<EncodedBatch>,
}

impl EncodingSink {
    /// Records the row just written and sends the batch once it is full.
    fn commit(&mut self, index: u32, row: EncodedRow, pos: ImportPos) -> ControlFlow<()> {
        self.committed = self.batch.buf.len();
        self.batch.rows.push(BatchRow {
            index,
            end: self.committed,
            row,
            pos,
        });
        if self.committed < ENCODED_BATCH_BYTES {
            return ControlFlow::Continue(());
        }
        let full = std::mem::take(&mut self.batch);
        self.committed = 0;
        match self.tx.blocking_send(full) {
            Ok(()) => ControlFlow::Continue(()),
            // The builder went away (dropped mid-build); stop reading.
            Err(_) => ControlFlow::Break(()),
        }
    }

    /// A whole row (XLSX).
    fn row(&mut self, row: &Row, pos: ImportPos) -> Result<ControlFlow<()>, String> {
        // A row's own table of styles: the chunk builder encodes a styled row again for its chunk.
        let encoded = encode_row(&mut self.batch.buf, row, &mut StyleTable::default())
            .map_err(|e| e.to_string())?;
        Ok(self.commit(row.index, encoded, pos))
    }
}

impl CsvSink for EncodingSink {
    fn start_row(&mut self, _fields: usize) {
        // A record of empty fields never reaches `end_row`: drop what it began.
        self.batch.buf.buf.truncate(self.committed);
        self.row = Some(RowWriter::begin(&mut self.batch.buf));
    }

    #[inline]
    fn cell(&mut self, col: u32, field: Field<'_>) -> Result<(), String> {
        let w = &mut self.batch.buf;
        let rw = self.row.as_mut().ok_or("a cell outside a row")?;
        rw.cell(w, col).map_err(|e| e.to_string())?;
        match field {
            Field::Text(t) => codec::write_text_cell(w, &t),
            Field::Scalar(v) => codec::write_value(w, &v, None),
        }
        Ok(())
    }

    fn end_row(
        &mut self,
        index: u32,
        _cells: usize,
        pos: ImportPos,
    ) -> Result<ControlFlow<()>, String> {
        let rw = self.row.take().ok_or("a row ended that did not begin")?;
        let encoded = rw.finish(&mut self.batch.buf);
        Ok(self.commit(index, encoded, pos))
    }
}
