#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;
use crate::Sheet;
use crate::a1::{CellRef, Range};
use crate::codec::{Reader, Writer, read_cell, write_cell};
use crate::event::Event;
use crate::test_support::{at, n, text};
use crate::value::{Cell, ErrorCode, Row, Value};

/// The sheet of `cells` (A1 ref, JSON value as typed), evaluated: what each cell shows.
fn shown(cells: &[(&str, serde_json::Value)]) -> impl Fn(&str) -> Value + use<> {
    let mut sheet = Sheet::new();
    let set: Event = serde_json::from_value(serde_json::json!({
        "type": "set",
        "body": {"cells": cells.iter().map(|(r, v)| serde_json::json!({"ref": r, "value": v})).collect::<Vec<_>>()},
    }))
    .unwrap();
    sheet.apply(&set, None).unwrap();
    let rows: Vec<Row> = sheet.rows().collect();
    let evaluated = evaluate(&rows).unwrap();
    move |a1: &str| {
        let at = at(a1);
        let value = sheet.get(at).map(|c| c.value.clone()).unwrap_or_default();
        evaluated.shown(at, &value).clone()
    }
}

fn err(e: ErrorCode) -> Value {
    Value::Error(e)
}

#[test]
fn formulas_compute_what_a_spreadsheet_computes() {
    use serde_json::json;
    let v = shown(&[
        ("A1", json!(1)),
        ("A2", json!(2)),
        ("A3", json!(3.5)),
        ("B1", json!("=SUM(A1:A3)")),
        ("B2", json!("=A1+A2*A3")),
        ("B3", json!("=AVERAGE(A1:A3)")),
        ("C1", json!("Ada")),
        ("C2", json!("=CONCAT(C1,\" \",\"Lovelace\")")),
        ("C3", json!("=LEN(C1)")),
        ("C4", json!("=UPPER(C1)")),
        ("D1", json!("=IF(A1>0,\"pos\",\"neg\")")),
        ("D2", json!("=AND(TRUE,A2=2)")),
        ("D3", json!("=VLOOKUP(2,A1:B3,2,FALSE)")),
        ("D4", json!("=INDEX(A1:A3,3)")),
        ("D5", json!("=MATCH(3.5,A1:A3,0)")),
        ("E1", json!("=DATE(2024,1,31)")),
        ("E2", json!("=YEAR(E1)")),
        ("E3", json!("=DAY(E1+1)")),
        ("F1", json!("=1/0")),
        ("F2", json!("=NOSUCHFUNCTION(1)")),
        ("F3", json!("=A1+C1")),
        ("F4", json!("=VLOOKUP(9,A1:B3,2,FALSE)")),
        ("F5", json!("=#REF!+1")),
        ("G1", json!("=G2+1")),
        ("G2", json!("=G1+1")),
        ("H1", json!("'=1+1")),
    ]);
    assert_eq!(v("B1"), n(6.5));
    assert_eq!(v("B2"), n(8.0));
    assert_eq!(v("B3"), n(6.5 / 3.0));
    assert_eq!(v("C2"), text("Ada Lovelace"));
    assert_eq!(v("C3"), n(3.0));
    assert_eq!(v("C4"), text("ADA"));
    assert_eq!(v("D1"), text("pos"));
    assert_eq!(v("D2"), Value::Bool(true));
    assert_eq!(v("D3"), n(8.0));
    assert_eq!(v("D4"), n(3.5));
    assert_eq!(v("D5"), n(3.0));
    assert_eq!(v("E1"), n(45322.0), "Excel's serial for 2024-01-31");
    assert_eq!(v("E2"), n(2024.0));
    assert_eq!(v("E3"), n(1.0));
    assert_eq!(v("F1"), err(ErrorCode::Div0));
    assert_eq!(v("F2"), err(ErrorCode::Name));
    assert_eq!(v("F3"), err(ErrorCode::Value));
    assert_eq!(v("F4"), err(ErrorCode::NA));
    assert_eq!(v("F5"), err(ErrorCode::Ref));
    assert_eq!(
        v("G1"),
        err(ErrorCode::Circ),
        "a cycle is an error value, not a hang"
    );
    assert_eq!(v("G2"), err(ErrorCode::Circ));
    assert_eq!(
        v("H1"),
        text("=1+1"),
        "a leading quote keeps a literal text"
    );
}

#[test]
fn json_form_keeps_formulas_and_quotes_texts_that_look_like_one() {
    let f: Value = serde_json::from_str(r#""=SUM(A1:A3)""#).unwrap();
    assert!(matches!(&f, Value::Formula(x) if &*x.text == "SUM(A1:A3)"));
    assert_eq!(serde_json::to_string(&f).unwrap(), r#""=SUM(A1:A3)""#);
    for (typed, stored) in [
        ("'=1+1", "=1+1"),
        ("''=x", "'=x"),
        ("'plain", "'plain"),
        ("a=b", "a=b"),
    ] {
        let v: Value = serde_json::from_str(&serde_json::to_string(typed).unwrap()).unwrap();
        assert_eq!(v, text(stored), "{typed}");
        // Written back, it reads as the same text again.
        let back: Value = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
        assert_eq!(back, v, "{typed}");
    }
    // What a reader is shown has no quote.
    assert_eq!(
        serde_json::to_string(&crate::value::Shown(&text("=1+1"))).unwrap(),
        r#""=1+1""#
    );
}

#[test]
fn formulas_past_the_limits_are_refused_with_a_reason() {
    let long = format!("\"={}\"", "1+".repeat(MAX_FORMULA_CHARS / 2) + "1");
    let e = serde_json::from_str::<Value>(&long)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("formula is 8193 characters, the limit is 8192"),
        "{e}"
    );
    let deep = format!("\"={}1{}\"", "(".repeat(65), ")".repeat(65));
    let e = serde_json::from_str::<Value>(&deep)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nests 65 parentheses deep, the limit is 64"),
        "{e}"
    );
    let ok = format!("\"={}1{}\"", "(".repeat(64), ")".repeat(64));
    assert!(serde_json::from_str::<Value>(&ok).is_ok());
}

#[test]
fn formula_cells_round_trip_the_binary_codec_with_their_cached_value() {
    let mut f = Formula::new("A1*2").unwrap();
    for cached in [
        None,
        Some(n(4.0)),
        Some(text("x")),
        Some(err(ErrorCode::Circ)),
    ] {
        f.cached = cached.map(Box::new);
        let cell = Cell::new(Value::Formula(f.clone()), Some("0.00"));
        let mut w = Writer::new();
        write_cell(&mut w, &cell);
        let mut r = Reader::new(&w.buf);
        assert_eq!(read_cell(&mut r).unwrap(), cell);
        r.finish().unwrap();
    }
    // A cached value that claims to be a formula is corrupt input, not a nested formula.
    let mut w = Writer::new();
    write_cell(
        &mut w,
        &Cell::new(Value::Formula(Formula::new("1").unwrap()), None),
    );
    let last = w.buf.len() - 1;
    w.buf[last] = 7;
    assert!(read_cell(&mut Reader::new(&w.buf)).is_err());
}

fn rows(text: &str, s: Displace) -> Option<String> {
    displace(text, TAB, s)
}

#[test]
fn references_move_with_inserted_and_deleted_rows_and_columns() {
    let ins_row_5 = Displace::InsertRows { at: 4, count: 1 };
    assert_eq!(rows("A5", ins_row_5).as_deref(), Some("A6"));
    assert_eq!(rows("A4", ins_row_5), None, "above the insert");
    assert_eq!(rows("$B$5*2", ins_row_5).as_deref(), Some("$B$6*2"));
    assert_eq!(
        rows("SUM(A1:A10)", ins_row_5).as_deref(),
        Some("SUM(A1:A11)"),
        "grows"
    );
    assert_eq!(rows("SUM(A:A)", ins_row_5), None, "a whole column stays");
    assert_eq!(
        rows("sum( a5 , Sheet1!A7 )", ins_row_5).as_deref(),
        Some("sum( A6 , Sheet1!A8 )")
    );
    assert_eq!(
        rows("Other!A5+A5", ins_row_5).as_deref(),
        Some("Other!A5+A6"),
        "other tabs stay"
    );
    assert_eq!(
        rows("\"A5\"&A5", ins_row_5).as_deref(),
        Some("\"A5\"&A6"),
        "not inside strings"
    );

    let del_row_5 = Displace::DeleteRows { at: 4, count: 1 };
    assert_eq!(rows("A5+1", del_row_5).as_deref(), Some("#REF!+1"));
    assert_eq!(rows("Sheet1!A5+1", del_row_5).as_deref(), Some("#REF!+1"));
    assert_eq!(rows("A6", del_row_5).as_deref(), Some("A5"));
    assert_eq!(
        rows("SUM(A1:A10)", del_row_5).as_deref(),
        Some("SUM(A1:A9)"),
        "shrinks"
    );
    assert_eq!(
        rows("SUM(A5:A10)", del_row_5).as_deref(),
        Some("SUM(A5:A9)"),
        "first row gone"
    );
    assert_eq!(
        rows("SUM(A1:A5)", del_row_5).as_deref(),
        Some("SUM(A1:A4)"),
        "last row gone"
    );
    assert_eq!(
        rows("SUM(A5:B5)", del_row_5).as_deref(),
        Some("SUM(#REF!)"),
        "all gone"
    );

    let ins_col_b = Displace::InsertColumns { at: 1, count: 2 };
    assert_eq!(rows("B1+A1", ins_col_b).as_deref(), Some("D1+A1"));
    assert_eq!(rows("SUM(A1:C1)", ins_col_b).as_deref(), Some("SUM(A1:E1)"));
    assert_eq!(rows("SUM(1:1)", ins_col_b), None, "a whole row stays");
    assert_eq!(rows("SUM(B:B)", ins_col_b).as_deref(), Some("SUM(D:D)"));
    let del_col_b = Displace::DeleteColumns { at: 1, count: 1 };
    assert_eq!(rows("B1", del_col_b).as_deref(), Some("#REF!"));
    assert_eq!(rows("C1*$C$2", del_col_b).as_deref(), Some("B1*$B$2"));
}

#[test]
fn a_copied_formula_moves_its_relative_references() {
    let moved = |t: &str, r: i64, c: i64| offset(t, r, c).unwrap_or_else(|| t.to_owned());
    assert_eq!(moved("A1*2+$A$1", 3, 0), "A4*2+$A$1");
    assert_eq!(moved("SUM($A1:A$4)", 2, 1), "SUM($A3:B$4)");
    assert_eq!(moved("A$1+$B2", 1, 1), "B$1+$B3");
    assert_eq!(
        moved("LOG10(A1)", 1, 0),
        "LOG10(A2)",
        "a function name stays"
    );
    assert_eq!(
        moved("SUM(A:A)", 5, 1),
        "SUM(B:B)",
        "a whole column moves across only"
    );
    assert_eq!(
        moved("SUM(1:2)", 1, 5),
        "SUM(2:3)",
        "a whole row moves down only"
    );
    assert_eq!(moved("SUM($A:$A)", 1, 1), "SUM($A:$A)");
    assert_eq!(moved("Other!B2 + \"B2\"", 1, 0), "Other!B3 + \"B2\"");
    assert_eq!(moved("A1+B2", -1, 0), "#REF!+B1", "off the top");
    assert_eq!(moved("Sheet1!A1", 0, -1), "#REF!");
    assert_eq!(moved("SUM(A1:B2)", -1, 0), "SUM(#REF!)");
    assert_eq!(moved("XFD1", 0, 1), "#REF!", "off the right edge");
    assert_eq!(offset("A1+B2", 0, 0), None);
    assert_eq!(offset("\"x\"&TRUE", 4, 4), None);
}

#[test]
fn a_structural_edit_rewrites_formulas_in_the_sheet_and_their_values_follow() {
    use serde_json::json;
    let mut sheet = Sheet::new();
    let ev = |v: serde_json::Value| -> Event { serde_json::from_value(v).unwrap() };
    sheet
        .apply(
            &ev(json!({"type": "set", "body": {"cells": [
                {"ref": "A1", "value": 1}, {"ref": "A2", "value": 2}, {"ref": "A3", "value": 3},
                {"ref": "B1", "value": "=SUM(A1:A3)"}, {"ref": "B2", "value": "=A3*10"}
            ]}})),
            None,
        )
        .unwrap();
    sheet
        .apply(&ev(json!({"type": "insert-rows", "body": {"at": 2, "count": 1, "values": [[5, "=A1"]]}})), None)
        .unwrap();
    let formula = |s: &Sheet, a1: &str| match &s.get(at(a1)).unwrap().value {
        Value::Formula(f) => f.text.to_string(),
        v => panic!("{a1} is {v:?}"),
    };
    assert_eq!(formula(&sheet, "B1"), "SUM(A1:A4)");
    assert_eq!(formula(&sheet, "B3"), "A4*10");
    assert_eq!(
        formula(&sheet, "B2"),
        "A1",
        "the inserted row's own formula is as typed"
    );
    let rows: Vec<Row> = sheet.rows().collect();
    let e = evaluate(&rows).unwrap();
    assert_eq!(e.values[&at("B1")], n(11.0));
    assert_eq!(e.values[&at("B3")], n(30.0));
    sheet
        .apply(
            &ev(json!({"type": "delete-rows", "body": {"at": 4, "count": 1}})),
            None,
        )
        .unwrap();
    assert_eq!(formula(&sheet, "B1"), "SUM(A1:A3)");
    assert_eq!(formula(&sheet, "B3"), "#REF!*10");
    let rows: Vec<Row> = sheet.rows().collect();
    assert_eq!(
        evaluate(&rows).unwrap().values[&at("B3")],
        err(ErrorCode::Ref)
    );
}

#[test]
fn the_closure_grows_until_every_formula_read_is_loaded() {
    let f = |t: &str| Cell::new(Value::Formula(Formula::new(t).unwrap()), None);
    // A chain down column A: A(i) = A(i+1) + 1, 1,000 rows; the read asks for A1 only.
    let chain: Vec<Row> = (0..1000)
        .map(|i| Row {
            index: i,
            cells: vec![(
                0,
                if i == 999 {
                    Cell::new(n(0.0), None)
                } else {
                    f(&format!("A{}+1", i + 2))
                },
            )],
        })
        .collect();
    let range = Range::new(at("A1"), at("A1"));
    let mut area = range;
    let mut rounds = 0;
    let load = |area: Range| -> Vec<Row> {
        chain
            .iter()
            .filter(|r| r.index >= area.start.row && r.index <= area.end.row)
            .cloned()
            .collect()
    };
    loop {
        match closure_area(&load(area), range, area, TAB) {
            Some(next) => area = next,
            None => {
                let reached = deps::reach(&load(area), range, TAB);
                assert_eq!(evaluate(&reached.rows).unwrap().values[&at("A1")], n(999.0));
                break;
            }
        }
        rounds += 1;
        assert!(
            rounds < 20,
            "a chain of 1,000 closes in about log2(1,000) rounds"
        );
    }
    // Formulas loaded but not reached are left out: A501 reads down its own chain only.
    let two_chains: Vec<Row> = (0..1000)
        .map(|i| Row {
            index: i,
            cells: vec![(
                0,
                if i == 499 || i == 999 {
                    Cell::new(n(0.0), None)
                } else {
                    f(&format!("A{}+1", i + 2))
                },
            )],
        })
        .collect();
    let range = Range::new(at("A501"), at("A501"));
    let reached = deps::reach(&two_chains, range, TAB);
    assert_eq!(reached.rows.len(), 500, "A501..A1000 only");
    assert_eq!(reached.rows.first().map(|r| r.index), Some(500));
    assert_eq!(
        evaluate(&reached.rows).unwrap().values[&at("A501")],
        n(499.0)
    );
    // What a read loads and evaluates, area by area: A1 reads down the first chain, and doubling
    // the area loads rows of the second (to row 512), whose formulas read on to row 1000.
    let load_two = |area: Range| -> Vec<Row> {
        two_chains
            .iter()
            .filter(|r| r.index >= area.start.row && r.index <= area.end.row)
            .cloned()
            .collect()
    };
    let range = Range::new(at("A1"), at("A1"));
    let loaded = futures::executor::block_on(load_closure(load_two(range), range, TAB, |area| {
        let rows = load_two(area);
        async move { Ok::<_, ()>(rows) }
    }))
    .unwrap();
    assert_eq!(
        loaded.len(),
        500,
        "a read of A1 evaluates its own chain only"
    );
    assert_eq!(
        references("SUM(B2:C3)+D4+Other!A1", TAB),
        vec![
            Range::new(at("B2"), at("C3")),
            Range::new(at("D4"), at("D4")),
        ]
    );
}

fn arb_sheet() -> impl Strategy<Value = Vec<(u32, u32, String)>> {
    // Numbers in a 6×4 block and formulas reading cells and ranges of it.
    let cell = (0u32..6, 0u32..4);
    let formula = prop_oneof![
        (0u32..6, 0u32..4).prop_map(|(r, c)| format!("{}*2", CellRef { row: r, col: c })),
        (0u32..6, 0u32..4, 0u32..6, 0u32..4).prop_map(|(a, b, c, d)| format!(
            "SUM({}:{})",
            CellRef { row: a, col: b },
            CellRef { row: c, col: d }
        )),
        (0u32..6, 0u32..4).prop_map(|(r, c)| format!("COUNT({}:D6)", CellRef { row: r, col: c })),
    ];
    proptest::collection::vec(
        prop_oneof![
            (cell.clone(), -50i32..50).prop_map(|((r, c), x)| (r, c, x.to_string())),
            (cell, formula).prop_map(|((r, c), f)| (r, c, format!("={f}"))),
        ],
        1..16,
    )
}

proptest! {
    /// Inserting empty rows or columns changes no value a formula computes: rewriting the
    /// references then evaluating equals evaluating the sheet as it was, cell for cell.
    #[test]
    fn rewriting_then_evaluating_equals_evaluating_before_the_insert(
        cells in arb_sheet(),
        on_rows in any::<bool>(),
        at_line in 0u32..7,
        count in 1u32..3,
    ) {
        let mut sheet = Sheet::new();
        let set = serde_json::json!({"type": "set", "body": {"cells": cells.iter().map(|(r, c, v)| {
            let value: serde_json::Value = v.parse::<i64>().map_or_else(|_| v.clone().into(), Into::into);
            serde_json::json!({"ref": CellRef { row: *r, col: *c }.to_string(), "value": value})
        }).collect::<Vec<_>>()}});
        sheet.apply(&serde_json::from_value(set).unwrap(), None).unwrap();
        let before_rows: Vec<Row> = sheet.rows().collect();
        let before = evaluate(&before_rows).unwrap();
        let event = if on_rows {
            serde_json::json!({"type": "insert-rows", "body": {"at": at_line + 1, "count": count}})
        } else {
            serde_json::json!({"type": "insert-columns", "body": {"at": crate::a1::column_name(at_line), "count": count}})
        };
        sheet.apply(&serde_json::from_value(event).unwrap(), None).unwrap();
        let after_rows: Vec<Row> = sheet.rows().collect();
        let after = evaluate(&after_rows).unwrap();
        for (cell, v) in &before.values {
            let moved = |x: u32| if x >= at_line { x + count } else { x };
            let to = if on_rows { CellRef { row: moved(cell.row), col: cell.col } } else { CellRef { row: cell.row, col: moved(cell.col) } };
            prop_assert_eq!(after.values.get(&to), Some(v), "{} moved to {}", cell, to);
        }
    }

    /// A delete of the lines an insert made returns every formula to its text.
    #[test]
    fn deleting_what_an_insert_made_restores_every_formula(
        cells in arb_sheet(),
        at_line in 0u32..7,
        count in 1u32..3,
    ) {
        for (text, s) in cells.iter().filter_map(|(_, _, v)| v.strip_prefix('=')).flat_map(|t| {
            [Displace::InsertRows { at: at_line, count }, Displace::InsertColumns { at: at_line, count }].map(|s| (t, s))
        }) {
            let there = displace(text, TAB, s).unwrap_or_else(|| text.to_owned());
            let back = displace(&there, TAB, s.inverse()).unwrap_or_else(|| there.clone());
            prop_assert_eq!(&back, text);
        }
    }
}

/// The table the page's engine is held to as well (`web/test/formula.test.mts`): the server's
/// engine gives every value it lists. Numbers compare as numbers (2^60 is written as an integer).
#[test]
fn the_server_computes_the_values_the_page_is_held_to() {
    let fixture: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../web/test/fixtures/formula-agreement.json"
    ))
    .unwrap();
    let mut sheet = Sheet::new();
    let mut cells = Vec::new();
    for (r, row) in fixture["cells"].as_array().unwrap().iter().enumerate() {
        for (c, v) in row.as_array().unwrap().iter().enumerate() {
            if !v.is_null() {
                let at = CellRef {
                    row: r as u32,
                    col: c as u32,
                };
                cells.push((at, serde_json::from_value::<Value>(v.clone()).unwrap()));
            }
        }
    }
    sheet
        .apply(&crate::test_support::set_cells(cells), None)
        .unwrap();
    let rows: Vec<Row> = sheet.rows().collect();
    let evaluated = evaluate(&rows).unwrap();
    let mut got = serde_json::Map::new();
    for (at, v) in &evaluated.values {
        got.insert(
            at.to_string(),
            serde_json::to_value(crate::value::Shown(v)).unwrap(),
        );
    }
    if std::env::var_os("SHEETLOG_PRINT_AGREEMENT").is_some() {
        println!("{}", serde_json::to_string_pretty(&got).unwrap());
    }
    let expected = fixture["expected"].as_object().unwrap();
    assert_eq!(
        expected.len(),
        got.len(),
        "every formula cell is listed: {got:?}"
    );
    for (at, want) in expected {
        let have = &got[at];
        let same = match (want.as_f64(), have.as_f64()) {
            (Some(a), Some(b)) => a == b,
            _ => want == have,
        };
        assert!(
            same,
            "{at}: the fixture says {want}, the server's engine gives {have}"
        );
    }
}

/// The cases the page's rewrite is held to as well (`web/test/formula.test.mts`).
#[test]
fn references_move_as_the_page_moves_them() {
    let fixture: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../web/test/fixtures/formula-moves.json"
    ))
    .unwrap();
    for case in fixture["cases"].as_array().unwrap() {
        let c = &case["change"];
        let (at, count) = (
            c["at"].as_u64().unwrap() as u32,
            c["count"].as_u64().unwrap() as u32,
        );
        let s = match (c["axis"].as_str().unwrap(), c["op"].as_str().unwrap()) {
            ("rows", "insert") => Displace::InsertRows { at, count },
            ("rows", _) => Displace::DeleteRows { at, count },
            (_, "insert") => Displace::InsertColumns { at, count },
            _ => Displace::DeleteColumns { at, count },
        };
        let text = case["formula"].as_str().unwrap();
        assert_eq!(
            displace(text, TAB, s).as_deref(),
            case["moved"].as_str(),
            "{text} after {c}"
        );
    }
}
