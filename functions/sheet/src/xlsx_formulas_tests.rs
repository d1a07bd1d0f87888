//! XLSX imports keep their formulas: the text as the file stores it, the cached value beside it,
//! shared formulas spread over their cells, and what the engine computes from them is what the
//! file cached.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Cursor, Read, Write};

use super::*;
use crate::Sheet;
use crate::a1::CellRef;
use crate::event::ImportFormat;
use crate::formula::{Formula, evaluate};
use crate::import;
use crate::test_support::{at, n, text};
use crate::value::{Cell, ErrorCode, Row, Value};

fn formula(text: &str, cached: Option<Value>) -> Value {
    Value::Formula(Formula {
        text: text.into(),
        cached: cached.map(Box::new),
    })
}

fn import(bytes: &[u8]) -> Sheet {
    // What the API checks before it commits an upload reads the file without complaint.
    import::validate(ImportFormat::Xlsx, Box::new(Cursor::new(bytes.to_vec()))).unwrap();
    let mut sheet = Sheet::new();
    sheet
        .import_bytes(ImportFormat::Xlsx, Cursor::new(bytes))
        .unwrap();
    sheet
}

fn value(sheet: &Sheet, a1: &str) -> Value {
    sheet
        .get(at(a1))
        .map(|c| c.value.clone())
        .unwrap_or_default()
}

/// Close enough for values a logarithm computes (the engine's and Excel's may differ in the
/// last place).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => (x - y).abs() <= 1e-12 * x.abs().max(1.0),
        _ => a == b,
    }
}

/// Evaluates the sheet and checks every formula with a cached value computes that value, but
/// those in `skip`. Returns how many were checked.
fn computes_what_it_cached(sheet: &Sheet, skip: &[&str]) -> usize {
    let rows: Vec<Row> = sheet.rows().collect();
    let evaluated = evaluate(&rows).unwrap();
    let mut checked = 0;
    for row in &rows {
        for (col, cell) in &row.cells {
            let here = CellRef {
                row: row.index,
                col: *col,
            };
            let Value::Formula(f) = &cell.value else {
                continue;
            };
            if skip.contains(&here.to_string().as_str()) {
                continue;
            }
            let Some(cached) = f.cached.as_deref() else {
                continue;
            };
            let computed = evaluated.shown(here, &cell.value);
            assert!(
                same(computed, cached),
                "{here} ={}: computed {computed:?}, cached {cached:?}",
                f.text
            );
            checked += 1;
        }
    }
    checked
}

#[test]
fn an_xlsx_import_keeps_formulas_and_their_cached_values() {
    use rust_xlsxwriter::{Format, Workbook};
    let mut book = Workbook::new();
    let ws = book.add_worksheet();
    for r in 0..3u32 {
        ws.write_number(r, 0, f64::from(r + 1)).unwrap();
    }
    ws.write_formula(0, 1, "=SUM(A1:A3)").unwrap();
    ws.set_formula_result(0, 1, "6");
    ws.write_formula(1, 1, "A1+A2*A3").unwrap();
    ws.set_formula_result(1, 1, "7");
    ws.write_formula(2, 1, r#"IF(A1>0,"pos","neg")"#).unwrap();
    ws.set_formula_result(2, 1, "pos");
    ws.write_formula(3, 1, "A1=1").unwrap();
    ws.set_formula_result(3, 1, "TRUE");
    ws.write_formula(4, 1, "A1/0").unwrap();
    ws.set_formula_result(4, 1, "#DIV/0!");
    let date = Format::new().set_num_format("yyyy-mm-dd");
    ws.write_formula_with_format(5, 1, "DATE(2024,1,15)", &date)
        .unwrap();
    ws.set_formula_result(5, 1, "45306");
    ws.write_array_formula(0, 2, 2, 2, "{=A1:A3*10}").unwrap();
    ws.set_formula_result(0, 2, "10");
    let sheet = import(&book.save_to_buffer().unwrap());

    assert_eq!(value(&sheet, "A1"), n(1.0));
    assert_eq!(value(&sheet, "B1"), formula("SUM(A1:A3)", Some(n(6.0))));
    assert_eq!(value(&sheet, "B2"), formula("A1+A2*A3", Some(n(7.0))));
    assert_eq!(
        value(&sheet, "B3"),
        formula(r#"IF(A1>0,"pos","neg")"#, Some(text("pos")))
    );
    assert_eq!(
        value(&sheet, "B4"),
        formula("A1=1", Some(Value::Bool(true)))
    );
    assert_eq!(
        value(&sheet, "B5"),
        formula("A1/0", Some(Value::Error(ErrorCode::Div0)))
    );
    // A date keeps its number and its format.
    assert_eq!(
        sheet.get(at("B6")),
        Some(&Cell::new(
            formula("DATE(2024,1,15)", Some(n(45306.0))),
            Some("yyyy-mm-dd")
        ))
    );
    // An array formula: its first cell keeps the formula, the others their values.
    assert_eq!(value(&sheet, "C1"), formula("A1:A3*10", Some(n(10.0))));
    assert_eq!(value(&sheet, "C2"), n(0.0));
    assert_eq!(value(&sheet, "C3"), n(0.0));
    assert_eq!(computes_what_it_cached(&sheet, &["C1"]), 6);
}

/// An XLSX file whose first worksheet is `rows` (the `<row>` elements of its `<sheetData>`).
fn xlsx_with_rows(rows: &str) -> Vec<u8> {
    let mut book = rust_xlsxwriter::Workbook::new();
    book.add_worksheet().write_number(0, 0, 1.0).unwrap();
    let template = book.save_to_buffer().unwrap();
    let sheet = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><dimension ref="A1"/><sheetData>{rows}</sheetData></worksheet>"#
    );
    let mut zip = zip::ZipArchive::new(Cursor::new(template)).unwrap();
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for i in 0..zip.len() {
        let mut part = zip.by_index(i).unwrap();
        let name = part.name().to_owned();
        let mut bytes = Vec::new();
        part.read_to_end(&mut bytes).unwrap();
        if name == "xl/worksheets/sheet1.xml" {
            bytes = sheet.as_bytes().to_vec();
        }
        out.start_file(name, opts).unwrap();
        out.write_all(&bytes).unwrap();
    }
    out.finish().unwrap().into_inner()
}

#[test]
fn shared_formulas_are_spread_over_their_cells() {
    let long = format!("{}1", "1+".repeat(5_000));
    let deep = format!("{}1{}", "(".repeat(70), ")".repeat(70));
    let rows = format!(
        r#"<row r="1">
  <c r="A1"><v>1</v></c>
  <c r="B1"><f t="shared" ref="B1:B4" si="0">A1*2+$A$1</f><v>3</v></c>
  <c r="C1"><f t="shared" ref="C1:D1" si="1">SUM($A1:A$4)</f><v>10</v></c>
  <c r="D1"><f t="shared" si="1"/><v>34</v></c>
  <c r="E1"><f t="shared" ref="E1:E2" si="2">LOG10(A1*10)</f><v>1</v></c>
  <c r="F1"><f t="shared" ref="F1:G1" si="3">SUM(A:A)</f><v>15</v></c>
  <c r="G1"><f t="shared" si="3"/><v>45</v></c>
  <c r="H1" t="str"><f>IF(A1&gt;0,"pos","neg")</f><v>pos</v></c>
  <c r="I1"><f>A1+1</f></c>
  <c r="J1"><f>{long}</f><v>5001</v></c>
  <c r="K1"><f>{deep}</f><v>1</v></c>
  <c r="L1"><f t="shared" ref="L1:L2" si="4">{long}</f><v>5001</v></c>
  <c r="M1" t="e"><f>1/0</f><v>#DIV/0!</v></c>
  <c r="N1" t="b"><f>A1=1</f><v>1</v></c>
  <c r="O1"><f t="dataTable" ref="O1:O2" dt2D="0" dtr="0" r1="A1"/><v>7</v></c>
  <c r="P1"><f t="array" ref="P1:P2">A1:A2*10</f><v>10</v></c>
</row>
<row r="2">
  <c r="A2"><v>2</v></c>
  <c r="B2"><f t="shared" si="0"/><v>5</v></c>
  <c r="E2"><f t="shared" si="2"/><v>1.3010299956639813</v></c>
  <c r="L2"><f t="shared" si="4"/><v>5001</v></c>
  <c r="O2"><v>8</v></c>
  <c r="P2"><v>20</v></c>
</row>
<row r="3"><c r="A3"><v>3</v></c><c r="B3"><f t="shared" si="0"/><v>7</v></c></row>
<row r="4"><c r="A4"><v>4</v></c><c r="B4"><f t="shared" si="0"/><v>9</v></c></row>
<row r="5"><c r="B5"><f t="shared" si="0"/><v>11</v></c></row>
<row r="6"><c><v>5</v></c><c><f>A6*2</f><v>10</v></c></row>"#
    );
    let sheet = import(&xlsx_with_rows(&rows));
    let expect = [
        ("B1", formula("A1*2+$A$1", Some(n(3.0)))),
        ("B2", formula("A2*2+$A$1", Some(n(5.0)))),
        ("B3", formula("A3*2+$A$1", Some(n(7.0)))),
        ("B4", formula("A4*2+$A$1", Some(n(9.0)))),
        // Past the last row of its group's `ref`, the group is no longer held.
        ("B5", n(11.0)),
        ("C1", formula("SUM($A1:A$4)", Some(n(10.0)))),
        ("D1", formula("SUM($A1:B$4)", Some(n(34.0)))),
        // A function name that reads like a cell is not moved.
        ("E1", formula("LOG10(A1*10)", Some(n(1.0)))),
        ("E2", formula("LOG10(A2*10)", Some(n(1.3010299956639813)))),
        ("F1", formula("SUM(A:A)", Some(n(15.0)))),
        ("G1", formula("SUM(B:B)", Some(n(45.0)))),
        ("H1", formula(r#"IF(A1>0,"pos","neg")"#, Some(text("pos")))),
        // No cached value: the formula alone.
        ("I1", formula("A1+1", None)),
        // Over the length or nesting limit: the cached value alone, the group's cells too.
        ("J1", n(5001.0)),
        ("K1", n(1.0)),
        ("L1", n(5001.0)),
        ("L2", n(5001.0)),
        ("M1", formula("1/0", Some(Value::Error(ErrorCode::Div0)))),
        ("N1", formula("A1=1", Some(Value::Bool(true)))),
        ("O1", n(7.0)),
        ("O2", n(8.0)),
        ("P1", formula("A1:A2*10", Some(n(10.0)))),
        ("P2", n(20.0)),
        // Cells without `r` are placed as calamine places them.
        ("A6", n(5.0)),
        ("B6", formula("A6*2", Some(n(10.0)))),
    ];
    for (a1, want) in expect {
        assert_eq!(value(&sheet, a1), want, "{a1}");
    }
    assert_eq!(computes_what_it_cached(&sheet, &["P1"]), 14);
}

#[test]
fn cell_positions_and_the_last_rows_of_refs_parse() {
    assert_eq!(position(b"B12"), Some((11, 1)));
    assert_eq!(position(b"xfd1048576"), Some((1_048_575, 16_383)));
    assert_eq!(position(b"12"), None);
    assert_eq!(position(b"A0"), None);
    assert_eq!(last_row(b"B2:B9"), Some(8));
    assert_eq!(last_row(b"C7"), Some(6));
    assert_eq!(last_row(b"A:A"), None);
}

#[test]
fn a_shared_file_reads_the_same_through_two_views() {
    let bytes: Vec<u8> = (0..=255u8).cycle().take(3 * VIEW_BUFFER_BYTES).collect();
    let file = Shared::new(Cursor::new(bytes.clone()));
    let (mut a, mut b) = (file.view(), file.view());
    let (mut x, mut y) = (vec![0u8; 1000], vec![0u8; 1000]);
    let mut from_a = Vec::new();
    let mut from_b = Vec::new();
    loop {
        let i = a.read(&mut x).unwrap();
        let j = b.read(&mut y[..777]).unwrap();
        from_a.extend_from_slice(&x[..i]);
        from_b.extend_from_slice(&y[..j]);
        if i == 0 && j == 0 {
            break;
        }
    }
    assert_eq!(from_a, bytes);
    assert_eq!(from_b, bytes);
    b.seek(SeekFrom::Start(10)).unwrap();
    b.read_exact(&mut y[..3]).unwrap();
    assert_eq!(&y[..3], &[10, 11, 12]);
    assert_eq!(b.seek(SeekFrom::End(-1)).unwrap(), bytes.len() as u64 - 1);
}
