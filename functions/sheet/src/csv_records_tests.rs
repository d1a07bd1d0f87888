//! The record reader against `csv::Reader`, the reader it replaced: the same records, fields,
//! positions and line counts on any input.

use std::io::{Cursor, Read};

use proptest::prelude::*;

use super::*;

/// Hands its bytes over at most `step` at a time, so records, terminators and the byte-order
/// mark straddle refills.
struct Trickle {
    data: Cursor<Vec<u8>>,
    step: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.step);
        self.data.read(&mut buf[..n])
    }
}

/// Each record's fields, and the position (bytes, line) after it.
type Records = Vec<(Vec<Vec<u8>>, u64, u64)>;

fn by_csv(input: &[u8]) -> Records {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(Cursor::new(input));
    let mut record = csv::ByteRecord::new();
    let mut out = Vec::new();
    while rdr
        .read_byte_record(&mut record)
        .expect("reading from memory")
    {
        let p = rdr.position();
        out.push((
            record.iter().map(<[u8]>::to_vec).collect(),
            p.byte(),
            p.line(),
        ));
    }
    out
}

fn by_records(input: &[u8], step: usize) -> Records {
    let mut records = CsvRecords::new(Trickle {
        data: Cursor::new(input.to_vec()),
        step,
    });
    let mut out = Vec::new();
    loop {
        let fields = match records.next_record().expect("reading from memory") {
            Some(r) => r
                .fields
                .iter()
                .map(|&(a, b)| r.bytes[a..b].to_vec())
                .collect(),
            None => return out,
        };
        out.push((fields, records.bytes(), records.lines() + 1));
    }
}

/// Pieces CSV is made of, the awkward ones included.
fn piece() -> impl Strategy<Value = &'static [u8]> {
    prop::sample::select(vec![
        &b"a"[..],
        b"12.5",
        b"\xc3\xa9",
        b"\xff",
        b",",
        b"\"",
        b"\"\"",
        b"\n",
        b"\r",
        b"\r\n",
        b" ",
        BOM,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn reads_what_the_csv_crate_reads(
        bom in any::<bool>(),
        pieces in prop::collection::vec(piece(), 0..60),
        step in 1usize..9,
    ) {
        let mut input = if bom { BOM.to_vec() } else { Vec::new() };
        for p in pieces {
            input.extend_from_slice(p);
        }
        prop_assert_eq!(by_records(&input, step), by_csv(&input));
        prop_assert_eq!(by_records(&input, READ_BYTES), by_csv(&input));
    }
}

#[test]
fn simple_and_quoted_records_alternate_across_refills() {
    // Long enough to pass the buffer's first size several times, with a quoted record (and a
    // byte-order mark inside one, which only the first record drops) every so often.
    let mut input = BOM.to_vec();
    for i in 0..20_000 {
        match i % 97 {
            0 => input.extend_from_slice(b"\"q,\"\"x\"\"\ny\",2\r\n"),
            1 => input.extend_from_slice(b"\xef\xbb\xbf\"b\",1\n"),
            _ => input.extend_from_slice(format!("{i},Customer {i},x{i}@example.com\n").as_bytes()),
        }
    }
    let expected = by_csv(&input);
    assert_eq!(expected.len(), 20_000);
    assert_eq!(by_records(&input, READ_BYTES), expected);
    assert_eq!(by_records(&input, 4093), expected);
}

#[test]
fn an_endless_line_is_refused_at_the_record_limit() {
    for quoted in [false, true] {
        let mut input = b"a,b\n".to_vec();
        if quoted {
            input.push(b'"');
        }
        input.extend(std::iter::repeat_n(b'x', MAX_CSV_RECORD_BYTES as usize + 1));
        let mut records = CsvRecords::new(Cursor::new(input));
        assert!(records.next_record().unwrap().is_some());
        let err = records.next_record().unwrap_err();
        assert!(
            matches!(err, RecordError::TooLong { lines: 1 }),
            "quoted {quoted}: {err}"
        );
    }
    // At the limit exactly (terminator included) a record is read.
    let mut input = vec![b'y'; MAX_CSV_RECORD_BYTES as usize - 1];
    input.push(b'\n');
    let mut records = CsvRecords::new(Cursor::new(input));
    let r = records.next_record().unwrap().unwrap();
    assert_eq!(r.fields, &[(0, MAX_CSV_RECORD_BYTES as usize - 1)]);
}

#[test]
fn lines_ending_in_crlf_take_the_fast_path() {
    let mut input = Vec::new();
    for i in 0..1_000 {
        input.extend_from_slice(format!("{i},x{i},\r\n").as_bytes());
    }
    input.extend_from_slice(b"last,\r");
    assert_eq!(by_records(&input, READ_BYTES), by_csv(&input));
    let mut records = CsvRecords::new(Cursor::new(input));
    while records.next_record().unwrap().is_some() {}
    assert!(!records.core_started, "no record needed csv_core");
}
