//! Tests of the spreadsheet model: the JSON contract, validation messages, binary round trips
//! (property d), the state machine's rules, and imports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Cursor;

use proptest::prelude::*;

use super::event::*;
use super::import::{self, ImportError};
use super::limits::*;
use super::*;
use crate::test_support::{set_refs, text};

fn parse(json: &str) -> Result<Event, String> {
    Event::from_json(json.as_bytes()).map_err(|e| e.to_string())
}

fn rejected(json: &str) -> String {
    match parse(json) {
        Ok(e) => panic!("accepted {json}: {e:?}"),
        Err(e) => e,
    }
}

#[test]
fn contract_examples_parse_and_serialise_back_to_the_same_json() {
    let examples = [
        r##"{"type":"set","body":{"cells":[{"ref":"B3","value":0.25,"format":"0.00%"},{"ref":"A1","value":"Nails"},{"ref":"C2","value":null},{"ref":"D4","value":true},{"ref":"E5","value":{"error":"#DIV/0!"}}]}}"##,
        r#"{"type":"insert-rows","body":{"at":1000002,"count":1,"values":[["Nails",0.01,80,null,0.15]]}}"#,
        r#"{"type":"insert-rows","body":{"at":3,"count":2}}"#,
        r#"{"type":"delete-rows","body":{"at":7,"count":3}}"#,
        r#"{"type":"insert-columns","body":{"at":"C","count":1}}"#,
        r#"{"type":"delete-columns","body":{"at":"XFD","count":1}}"#,
        r#"{"type":"import","body":{"format":"xlsx"}}"#,
        r#"{"type":"restore","body":{"seq":42}}"#,
    ];
    for json in examples {
        let e = parse(json).unwrap();
        assert_eq!(serde_json::to_string(&e).unwrap(), json);
        // serde's own entry point gives the same event.
        assert_eq!(serde_json::from_str::<Event>(json).unwrap(), e);
    }
    let Event::InsertRows(ir) = parse(examples[1]).unwrap() else {
        panic!()
    };
    assert_eq!(ir.at, RowNumber(1_000_001));
}

#[test]
fn invalid_events_are_rejected_with_a_message_naming_the_field() {
    let cases: &[(&str, &str)] = &[
        // bad A1 references
        (
            r#"{"type":"set","body":{"cells":[{"ref":"A1","value":1},{"ref":"B2","value":1},{"ref":"B0","value":1}]}}"#,
            r#"cells[2].ref: "B0" is not a valid A1 reference"#,
        ),
        (
            r#"{"type":"set","body":{"cells":[{"ref":"XFE1","value":1}]}}"#,
            r#"cells[0].ref: "XFE1" is outside the sheet"#,
        ),
        (
            r#"{"type":"set","body":{"cells":[{"ref":"A1048577","value":1}]}}"#,
            r#"cells[0].ref: "A1048577" is outside the sheet"#,
        ),
        // out-of-range positions
        (
            r#"{"type":"insert-rows","body":{"at":0,"count":1}}"#,
            "at: 0 is out of range (rows are 1..=1048576)",
        ),
        (
            r#"{"type":"delete-rows","body":{"at":1048577,"count":1}}"#,
            "at: 1048577 is out of range",
        ),
        (
            r#"{"type":"delete-rows","body":{"at":1048576,"count":2}}"#,
            "count: 2 rows from row 1048576 run past the end of the sheet",
        ),
        (
            r#"{"type":"insert-rows","body":{"at":5,"count":0}}"#,
            "count: must be at least 1",
        ),
        (
            r#"{"type":"insert-rows","body":{"at":5,"count":-1}}"#,
            "count: invalid value: integer `-1`",
        ),
        (
            r#"{"type":"delete-columns","body":{"at":"XFE","count":1}}"#,
            r#"at: "XFE" is not a valid column"#,
        ),
        (
            r#"{"type":"insert-columns","body":{"at":"XFD","count":2}}"#,
            "count: 2 columns from XFD run past the end of the sheet",
        ),
        (
            r#"{"type":"insert-rows","body":{"at":1,"count":1,"values":[[1],[2]]}}"#,
            "values: has 2 rows but count is 1",
        ),
        // wrong value types
        (
            r#"{"type":"set","body":{"cells":[{"ref":"A1","value":[1,2]}]}}"#,
            "cells[0].value: invalid type: sequence, expected a string, number, boolean, null or {\"error\": \"#DIV/0!\"}",
        ),
        (
            r##"{"type":"set","body":{"cells":[{"ref":"A1","value":{"error":"#WAT"}}]}}"##,
            r##"cells[0].value: "#WAT" is not a spreadsheet error"##,
        ),
        (
            r#"{"type":"set","body":{"cells":[{"ref":1,"value":1}]}}"#,
            "cells[0].ref: invalid type: integer `1`, expected a string",
        ),
        (
            r#"{"type":"insert-rows","body":{"at":"3","count":1}}"#,
            "at: invalid type: string \"3\", expected i64",
        ),
        (
            r#"{"type":"import","body":{"format":"xls"}}"#,
            "format: unknown variant `xls`, expected `csv` or `xlsx`",
        ),
        (
            r#"{"type":"restore","body":{"seq":-1}}"#,
            "seq: invalid value: integer `-1`, expected u64",
        ),
        (
            r#"{"type":"restore","body":{"seq":1,"at":2}}"#,
            "unknown field `at`, expected `seq`",
        ),
        // unknown type and unknown fields
        (
            r#"{"type":"merge-cells","body":{}}"#,
            r#"type: "merge-cells" is not a known entry type"#,
        ),
        (
            r#"{"type":"snapshot","body":{}}"#,
            r#"type: "snapshot" is not a known entry type"#,
        ),
        (
            r#"{"type":"delete-rows","body":{"at":1,"count":1,"why":"x"}}"#,
            "unknown field `why`, expected `at` or `count`",
        ),
        (
            r#"{"type":"set","body":{"cells":[{"ref":"A1","value":1,"colour":"red"}]}}"#,
            "cells[0].colour: unknown field `colour`",
        ),
        (
            r#"{"type":"set","body":{"cells":[]},"extra":1}"#,
            "unknown field `extra`",
        ),
        (
            r#"{"type":"set","body":{"cells":[]}}"#,
            "cells: must hold at least one cell",
        ),
        (r#"{"type":"set","body":{}}"#, "missing field `cells`"),
        (r#"{"type":"set""#, "EOF while parsing"),
    ];
    for (json, want) in cases {
        let got = rejected(json);
        assert!(got.contains(want), "{json}\n  got:  {got}\n  want: {want}");
    }
}

#[test]
fn oversized_text_and_formats_are_rejected() {
    let text = "x".repeat(MAX_TEXT_CHARS + 1);
    let json = format!(r#"{{"type":"set","body":{{"cells":[{{"ref":"A1","value":"{text}"}}]}}}}"#);
    assert_eq!(
        rejected(&json),
        "cells[0].value: text is 32768 characters, the limit is 32767"
    );
    let json =
        format!(r#"{{"type":"insert-rows","body":{{"at":1,"count":1,"values":[[1,"{text}"]]}}}}"#);
    assert!(rejected(&json).starts_with("values[0][1]: text is 32768 characters"));
    let fmt = "0".repeat(MAX_FORMAT_BYTES + 1);
    let json = format!(
        r#"{{"type":"set","body":{{"cells":[{{"ref":"A1","value":1,"format":"{fmt}"}}]}}}}"#
    );
    assert_eq!(
        rejected(&json),
        "cells[0].format: format is 256 bytes, the limit is 255"
    );
    // At the limits is fine.
    let text = "x".repeat(MAX_TEXT_CHARS);
    let json =
        format!(r#"{{"type":"set","body":{{"cells":[{{"ref":"XFD1048576","value":"{text}"}}]}}}}"#);
    assert!(parse(&json).is_ok());
}

#[test]
fn bad_binary_bodies_are_errors_naming_the_problem() {
    let (t, v, body) = parse(r#"{"type":"set","body":{"cells":[{"ref":"B3","value":"x"}]}}"#)
        .unwrap()
        .encode();
    assert_eq!((t, v), (TYPE_SET, 1));
    let msg = |r: Result<Event, DecodeError>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(msg(Event::decode(99, 1, &body)), "unknown entry type 99");
    assert!(msg(Event::decode(TYPE_SNAPSHOT, 1, &[])).contains("is a log entry"));
    assert!(msg(Event::decode(TYPE_SET, 2, &body)).contains("set body version 2 is not supported"));
    assert!(
        msg(Event::decode(TYPE_SET, 1, &body[..body.len() - 1])).contains("set body: truncated")
    );
    let mut long = body.clone();
    long.push(0);
    assert!(msg(Event::decode(TYPE_SET, 1, &long)).contains("1 unexpected trailing bytes"));
    // A count of zero rows is well-formed bytes but breaks the rules.
    assert!(
        msg(Event::decode(TYPE_DELETE_ROWS, 1, &[0, 0]))
            .contains("delete-rows body: count: must be at least 1")
    );
    assert!(
        msg(Event::decode(TYPE_DELETE_ROWS, 1, &[0x80, 0x80, 0x40, 1]))
            .contains("row 1048576 exceeds 1048575")
    );
    assert_eq!(
        EntryBody::decode(TYPE_SNAPSHOT, 0, b"anything"),
        Ok(EntryBody::Snapshot)
    );
    assert_eq!(
        EntryBody::decode(TYPE_END_SEGMENT, 0, &[]),
        Ok(EntryBody::EndSegment)
    );
}

// ---- property (d): every event round-trips through both forms ----

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Empty),
        "\\PC{0,20}".prop_map(Value::Text),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::Number),
        (-1_000_000i64..1_000_000).prop_map(|n| Value::Number(n as f64)),
        any::<bool>().prop_map(Value::Bool),
        proptest::sample::select(ErrorCode::ALL.to_vec()).prop_map(Value::Error),
    ]
}

fn any_event() -> impl Strategy<Value = Event> {
    let cell = (
        0..MAX_ROWS,
        0..MAX_COLS,
        any_value(),
        proptest::option::of("[#0.,%a-z ]{0,12}"),
    );
    prop_oneof![
        proptest::collection::vec(cell, 1..8).prop_map(|cells| Event::Set(SetCells {
            cells: cells
                .into_iter()
                .map(|(row, col, value, format)| CellEdit {
                    at: CellRef { row, col },
                    value,
                    format
                })
                .collect(),
        })),
        (
            0..MAX_ROWS,
            1u32..2000,
            proptest::collection::vec(proptest::collection::vec(any_value(), 0..5), 0..3)
        )
            .prop_map(|(at, count, values)| {
                let at = at.min(MAX_ROWS - count);
                let values = values.into_iter().take(count as usize).collect();
                Event::InsertRows(InsertRows {
                    at: RowNumber(at),
                    count,
                    values,
                })
            }),
        (0..MAX_ROWS, 1u32..2000).prop_map(|(at, count)| Event::DeleteRows(DeleteRows {
            at: RowNumber(at.min(MAX_ROWS - count)),
            count
        })),
        (0..MAX_COLS, 1u32..50).prop_map(|(at, count)| Event::InsertColumns(InsertColumns {
            at: ColumnName(at.min(MAX_COLS - count)),
            count
        })),
        (0..MAX_COLS, 1u32..50).prop_map(|(at, count)| Event::DeleteColumns(DeleteColumns {
            at: ColumnName(at.min(MAX_COLS - count)),
            count
        })),
        (
            prop_oneof![Just(ImportFormat::Csv), Just(ImportFormat::Xlsx)],
            proptest::option::of("[!-~]{1,128}"),
        )
            .prop_map(|(format, group)| Event::Import(Import {
                format,
                group,
                layout: None
            })),
        any::<u64>().prop_map(|seq| Event::Restore(super::event::Restore { seq, group: None })),
        (
            proptest::collection::vec((0..MAX_ROWS, 0..MAX_COLS, 1u32..100, 1u32..100), 1..4),
            crate::style::tests::any_patch(),
        )
            .prop_map(|(ranges, style)| Event::Style(super::event::StyleCells {
                ranges: ranges
                    .into_iter()
                    .map(|(r, c, h, w)| {
                        let end = CellRef {
                            row: (r + h - 1).min(MAX_ROWS - 1),
                            col: (c + w - 1).min(MAX_COLS - 1),
                        };
                        Range::new(CellRef { row: r, col: c }, end)
                    })
                    .collect(),
                style,
            })),
    ]
}

/// Bit-exact comparison (so -0.0 and 0.0 are told apart).
fn same(a: &Event, b: &Event) -> bool {
    format!("{a:?}") == format!("{b:?}") && a.encode() == b.encode()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_event_round_trips_through_binary_and_json(e in any_event()) {
        prop_assert!(e.validate().is_ok(), "{:?}", e.validate());
        let (t, v, body) = e.encode();
        let back = Event::decode(t, v, &body).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(same(&back, &e), "binary: {back:?} != {e:?}");
        let entry = EntryBody::decode(t, v, &body).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(entry.type_code(), t);
        let json = serde_json::to_vec(&e).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = Event::from_json(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(same(&back, &e), "json: {back:?} != {e:?}");
    }

    #[test]
    fn decoding_random_bytes_never_panics(t in 14u16..24, body in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = Event::decode(t, 1, &body);
    }
}

// ---- the state machine ----

fn grid(sheet: &Sheet, range: &str) -> Vec<Vec<Value>> {
    sheet.read_range(range.parse().unwrap())
}

#[test]
fn rows_and_columns_move_the_way_a_spreadsheet_moves_them() {
    let mut s = Sheet::new();
    s.apply(
        &set_refs(&[("A1", text("a1")), ("B2", text("b2")), ("C3", text("c3"))]),
        None,
    )
    .unwrap();
    // Insert two rows so the first new row is row 2: old row 2 becomes row 4.
    s.apply(
        &parse(r#"{"type":"insert-rows","body":{"at":2,"count":2,"values":[["new"]]}}"#).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(
        s.get("A2".parse().unwrap()).map(|c| &c.value),
        Some(&text("new"))
    );
    assert_eq!(
        s.get("B4".parse().unwrap()).map(|c| &c.value),
        Some(&text("b2"))
    );
    assert_eq!(
        s.get("C5".parse().unwrap()).map(|c| &c.value),
        Some(&text("c3"))
    );
    // Delete rows 2..=4: "new" and "b2" go, c3 moves up to row 2.
    s.apply(
        &parse(r#"{"type":"delete-rows","body":{"at":2,"count":3}}"#).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(
        grid(&s, "A1:C2"),
        vec![
            vec![text("a1"), Value::Empty, Value::Empty],
            vec![Value::Empty, Value::Empty, text("c3")]
        ]
    );
    // Insert a column at B: C moves to D.
    s.apply(
        &parse(r#"{"type":"insert-columns","body":{"at":"B","count":1}}"#).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(
        s.get("D2".parse().unwrap()).map(|c| &c.value),
        Some(&text("c3"))
    );
    s.apply(
        &parse(r#"{"type":"delete-columns","body":{"at":"A","count":3}}"#).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(
        s.get("A2".parse().unwrap()).map(|c| &c.value),
        Some(&text("c3"))
    );
    assert_eq!(s.cell_count(), 1);
}

#[test]
fn set_replaces_the_whole_cell_and_null_without_format_clears_it() {
    let mut s = Sheet::new();
    s.apply(&parse(r#"{"type":"set","body":{"cells":[{"ref":"A1","value":1,"format":"0.00"},{"ref":"A1","value":2,"format":"0%"}]}}"#).unwrap(), None).unwrap();
    assert_eq!(
        s.get("A1".parse().unwrap()),
        Some(&Cell::new(Value::Number(2.0), Some("0%"))),
        "last edit wins"
    );
    s.apply(
        &parse(r#"{"type":"set","body":{"cells":[{"ref":"A1","value":null,"format":"0.0"}]}}"#)
            .unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(
        s.get("A1".parse().unwrap()),
        Some(&Cell::new(Value::Empty, Some("0.0"))),
        "a formatted empty cell is kept"
    );
    s.apply(
        &parse(r#"{"type":"set","body":{"cells":[{"ref":"A1","value":null}]}}"#).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(s.cell_count(), 0);
}

#[test]
fn cells_pushed_past_the_last_row_or_column_are_dropped() {
    let mut s = Sheet::new();
    s.apply(
        &set_refs(&[
            ("A1048575", text("near")),
            ("A1048576", text("last")),
            ("XFC1", text("xfc")),
        ]),
        None,
    )
    .unwrap();
    s.apply(
        &parse(r#"{"type":"insert-rows","body":{"at":1,"count":1}}"#).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(
        s.get("A1048576".parse().unwrap()).map(|c| &c.value),
        Some(&text("near"))
    );
    assert_eq!(s.row_count(), 2);
    s.apply(
        &parse(r#"{"type":"insert-columns","body":{"at":"A","count":2}}"#).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(
        s.get("C1048576".parse().unwrap()).map(|c| &c.value),
        Some(&text("near"))
    );
    assert_eq!(s.cell_count(), 1, "XFC1 moved past XFD and is gone");
}

// ---- imports ----

#[test]
fn csv_import_replaces_the_sheet_and_types_values_like_a_spreadsheet() {
    let mut s = Sheet::new();
    s.apply(&set_refs(&[("Z99", text("old"))]), None).unwrap();
    // The blank line is skipped (as CSV readers do); a line of empty fields is an empty row.
    let csv = "name,price,ok,err,when\n\"Nails, small\",0.01,TRUE,#N/A,1e3\n,,false,,inf\n\n,,\n-7,007,x\n";
    s.import_bytes(ImportFormat::Csv, csv.as_bytes()).unwrap();
    assert_eq!(s.get("Z99".parse().unwrap()), None);
    assert_eq!(
        grid(&s, "A1:E5"),
        vec![
            vec![
                text("name"),
                text("price"),
                text("ok"),
                text("err"),
                text("when")
            ],
            vec![
                text("Nails, small"),
                Value::Number(0.01),
                Value::Bool(true),
                Value::Error(ErrorCode::NA),
                Value::Number(1000.0)
            ],
            vec![
                Value::Empty,
                Value::Empty,
                Value::Bool(false),
                Value::Empty,
                text("inf")
            ],
            vec![Value::Empty; 5],
            vec![
                Value::Number(-7.0),
                Value::Number(7.0),
                text("x"),
                Value::Empty,
                Value::Empty
            ],
        ]
    );
}

#[test]
fn strict_import_validation_names_the_offending_cell_and_lenient_apply_truncates() {
    let long = "y".repeat(MAX_TEXT_CHARS + 5);
    let csv = format!("a,b\nc,{long}\n");
    let err = import::validate(
        ImportFormat::Csv,
        Box::new(Cursor::new(csv.clone().into_bytes())),
    )
    .unwrap_err();
    assert!(matches!(err, ImportError::TextTooLong { .. }));
    assert_eq!(
        err.to_string(),
        "B2: text is 32772 characters, the limit is 32767"
    );
    let mut s = Sheet::new();
    s.import_bytes(ImportFormat::Csv, csv.as_bytes()).unwrap();
    match s.get("B2".parse().unwrap()).map(|c| &c.value) {
        Some(Value::Text(t)) => assert_eq!(t.chars().count(), MAX_TEXT_CHARS),
        other => panic!("{other:?}"),
    }
    let wide = vec!["1"; MAX_COLS as usize + 1].join(",");
    let err =
        import::validate(ImportFormat::Csv, Box::new(Cursor::new(wide.into_bytes()))).unwrap_err();
    assert_eq!(err.to_string(), "row 1 has more than 16384 columns");
    let err = import::validate(
        ImportFormat::Xlsx,
        Box::new(Cursor::new(b"not a zip".to_vec())),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the file is not a readable XLSX"),
        "{err}"
    );
}

#[test]
fn xlsx_import_reads_the_first_sheet_with_types() {
    let mut book = rust_xlsxwriter::Workbook::new();
    let ws = book.add_worksheet();
    ws.write_string(0, 0, "item").unwrap();
    ws.write_number(0, 1, 2.5).unwrap();
    ws.write_boolean(1, 0, true).unwrap();
    ws.write_number(3, 2, 42.0).unwrap();
    ws.write_string(3, 3, "shared").unwrap();
    ws.write_string(4, 3, "shared").unwrap();
    let bytes = book.save_to_buffer().unwrap();
    let summary =
        import::validate(ImportFormat::Xlsx, Box::new(Cursor::new(bytes.clone()))).unwrap();
    assert_eq!((summary.rows, summary.cells), (4, 6));
    let mut s = Sheet::new();
    s.import_bytes(ImportFormat::Xlsx, Cursor::new(bytes))
        .unwrap();
    assert_eq!(
        grid(&s, "A1:D5"),
        vec![
            vec![text("item"), Value::Number(2.5), Value::Empty, Value::Empty],
            vec![Value::Bool(true), Value::Empty, Value::Empty, Value::Empty],
            vec![Value::Empty; 4],
            vec![
                Value::Empty,
                Value::Empty,
                Value::Number(42.0),
                text("shared")
            ],
            vec![Value::Empty, Value::Empty, Value::Empty, text("shared")],
        ]
    );
}

#[test]
fn an_import_without_its_payload_is_an_error() {
    let mut s = Sheet::new();
    let e = s
        .apply(
            &Event::Import(Import {
                format: ImportFormat::Csv,
                group: None,
                layout: None,
            }),
            None,
        )
        .unwrap_err();
    assert!(matches!(e, ApplyError::MissingPayload));
}

#[test]
fn an_endless_csv_record_is_refused_at_the_record_limit() {
    // An unclosed quote makes the rest of the file one record: without the bound the parser
    // would gather all of it into memory.
    let mut endless = b"a,b\n\"".to_vec();
    endless.extend(std::iter::repeat_n(
        b'x',
        MAX_CSV_RECORD_BYTES as usize + 1024 * 1024,
    ));
    let err =
        import::validate(ImportFormat::Csv, Box::new(Cursor::new(endless.clone()))).unwrap_err();
    assert!(
        matches!(err, ImportError::RecordTooLong { line: 2 }),
        "{err}"
    );
    assert_eq!(
        err.limit(),
        Some(("maxCsvRecordBytes", MAX_CSV_RECORD_BYTES))
    );
    // Applying such a file (it could never be committed) stops there, deterministically.
    let mut s = Sheet::new();
    s.import_bytes(ImportFormat::Csv, &endless[..]).unwrap();
    assert_eq!(grid(&s, "A1:B1"), vec![vec![text("a"), text("b")]]);

    // A long record under the limit is fine: 100 fields of 30,000 characters (3 MB).
    let field = "y".repeat(30_000);
    let wide = format!("{}\n1,2\n", vec![field.as_str(); 100].join(","));
    let summary =
        import::validate(ImportFormat::Csv, Box::new(Cursor::new(wide.into_bytes()))).unwrap();
    assert_eq!((summary.rows, summary.cells), (2, 102));
}

/// A ZIP file with the given parts, each deflated.
fn zip_of(parts: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in parts {
        out.start_file(*name, opts).unwrap();
        out.write_all(bytes).unwrap();
    }
    out.finish().unwrap().into_inner()
}

#[test]
fn xlsx_zip_bombs_are_refused_before_they_are_inflated_into_memory() {
    let zeros = vec![0u8; 300 * 1024 * 1024];
    for part in ["xl/sharedStrings.xml", "xl/worksheets/sheet1.xml"] {
        let bomb = zip_of(&[("[Content_Types].xml", b"<Types/>"), (part, &zeros)]);
        assert!(bomb.len() < 1024 * 1024, "{} bytes", bomb.len());
        let err = import::validate(ImportFormat::Xlsx, Box::new(Cursor::new(bomb))).unwrap_err();
        assert!(
            matches!(&err, ImportError::XlsxRatio { part: p } if p == part),
            "{err}"
        );
        assert_eq!(
            err.limit(),
            Some(("maxXlsxCompressionRatio", MAX_XLSX_COMPRESSION_RATIO))
        );
    }
    // A part that is not streamed may not exceed its own size limit even when it compresses
    // like ordinary XML (here: digits, about 2:1).
    let digits: Vec<u8> = (0..MAX_XLSX_PART_BYTES + 1)
        .map(|i| b'0' + ((i * 7919) % 10) as u8)
        .collect();
    let big = zip_of(&[("xl/styles.xml", &digits)]);
    let err = import::validate(ImportFormat::Xlsx, Box::new(Cursor::new(big))).unwrap_err();
    assert!(
        matches!(&err, ImportError::XlsxPartTooLarge { part } if part == "xl/styles.xml"),
        "{err}"
    );
}
