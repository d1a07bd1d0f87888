use serde_json::json;

use super::*;
use crate::event::{DeleteColumns, DeleteRows, InsertColumns, InsertRows};
use crate::resize::write_resize;

fn runs(s: &Sizes) -> Vec<(u32, u32, u16)> {
    s.runs().collect()
}

fn event(v: serde_json::Value) -> Event {
    Event::from_json(v.to_string().as_bytes()).expect("a valid entry")
}

#[test]
fn a_resize_sets_splits_and_merges_runs() {
    let mut s = Sizes::default();
    s.set(2, 5, Some(120)); // 2..7
    assert_eq!(runs(&s), [(2, 7, 120)]);
    s.set(4, 1, Some(80)); // splits it in three
    assert_eq!(runs(&s), [(2, 4, 120), (4, 5, 80), (5, 7, 120)]);
    assert_eq!((s.get(3), s.get(4), s.get(7)), (Some(120), Some(80), None));
    s.set(4, 1, Some(120)); // one run again
    assert_eq!(runs(&s), [(2, 7, 120)]);
    s.set(0, 3, None); // back to the default, partly
    assert_eq!(runs(&s), [(3, 7, 120)]);
    s.set(7, 2, Some(120)); // touching, same size: merged
    assert_eq!(runs(&s), [(3, 9, 120)]);
    assert_eq!(
        s.spans(1, 10),
        [(1, 2, None), (3, 6, Some(120)), (9, 2, None)]
    );
    assert_eq!(s.spans(4, 2), [(4, 2, Some(120))]);
}

#[test]
fn sizes_move_with_inserts_and_deletes() {
    let mut s = Sizes::default();
    s.set(2, 4, Some(50)); // 2..6
    s.set(8, 1, Some(70));
    // Inserted inside the run: the new positions have the default size.
    s.insert(4, 2, 100);
    assert_eq!(runs(&s), [(2, 4, 50), (6, 8, 50), (10, 11, 70)]);
    // Deleting the inserted positions joins the run again.
    s.delete(4, 2);
    assert_eq!(runs(&s), [(2, 6, 50), (8, 9, 70)]);
    // A delete across runs takes its part of each.
    s.delete(5, 4);
    assert_eq!(runs(&s), [(2, 5, 50)]);
    // What an insert pushes past the end of the sheet goes.
    s.insert(0, 8, 12);
    assert_eq!(runs(&s), [(10, 12, 50)]);
}

#[test]
fn a_split_moves_with_rows_and_columns_inserted_or_deleted_before_it() {
    let mut l = Layout::default();
    l.apply(&event(
        json!({"type": "freeze", "body": {"rows": 2, "columns": 1}}),
    ));
    l.apply(&Event::InsertRows(InsertRows {
        at: RowNumber(0),
        count: 3,
        values: Vec::new(),
    }));
    assert_eq!(
        l.freeze,
        Freeze {
            rows: 5,
            columns: 1
        }
    );
    // Below the split: nothing moves.
    l.apply(&Event::DeleteRows(DeleteRows {
        at: RowNumber(6),
        count: 2,
    }));
    l.apply(&Event::DeleteRows(DeleteRows {
        at: RowNumber(3),
        count: 4,
    }));
    assert_eq!(l.freeze.rows, 3);
    l.apply(&Event::DeleteColumns(DeleteColumns {
        at: ColumnName(0),
        count: 1,
    }));
    l.apply(&Event::InsertColumns(InsertColumns {
        at: ColumnName(0),
        count: 1,
    }));
    assert_eq!(l.freeze.columns, 0, "a deleted split column is gone");
    l.apply(&Event::Import(crate::event::Import {
        format: crate::event::ImportFormat::Csv,
        group: None,
        layout: None,
    }));
    assert!(l.is_default(), "an import replaces the layout");
}

#[test]
fn the_json_form_round_trips_and_long_runs_take_several_entries() {
    let mut l = Layout::default();
    for e in [
        json!({"type": "resize-columns", "body": {"at": "B", "count": 3, "width": 120}}),
        json!({"type": "resize-rows", "body": {"at": 1, "count": 16384, "height": 40}}),
        json!({"type": "resize-rows", "body": {"at": 16385, "count": 10, "height": 40}}),
        json!({"type": "freeze", "body": {"rows": 1}}),
    ] {
        l.apply(&event(e));
    }
    let v = serde_json::to_value(&l).unwrap();
    assert_eq!(
        v,
        json!({
            "columns": [{"at": "B", "count": 3, "width": 120}],
            "rows": [{"at": 1, "count": 16394, "height": 40}],
            "freeze": {"rows": 1, "columns": 0}
        })
    );
    assert_eq!(serde_json::from_value::<Layout>(v).unwrap(), l);
    assert_eq!(serde_json::to_value(Layout::default()).unwrap(), json!({}));
    // As entries, a run longer than one resize may name is cut in two.
    let events = l.events();
    assert_eq!(events.len(), 4);
    let mut again = Layout::default();
    for e in &events {
        e.validate().unwrap();
        again.apply(e);
    }
    assert_eq!(again, l);
}

#[test]
fn entries_round_trip_through_the_binary_form() {
    for e in [
        json!({"type": "resize-columns", "body": {"at": "XFD", "count": 1, "width": 2000}}),
        json!({"type": "resize-columns", "body": {"at": "A", "count": 16384, "width": null}}),
        json!({"type": "resize-rows", "body": {"at": 1048576, "count": 1, "height": 1}}),
        json!({"type": "freeze", "body": {"rows": 1000, "columns": 100}}),
        json!({"type": "freeze", "body": {}}),
    ] {
        let ev = event(e.clone());
        let (code, version, body) = ev.encode();
        assert_eq!(Event::decode(code, version, &body).unwrap(), ev, "{e}");
        assert_eq!(
            crate::event::type_name_of(code),
            Some(ev.type_name()),
            "{e}"
        );
        // And the JSON form reads back as sent (a missing width is null).
        let back = serde_json::to_value(&ev).unwrap();
        assert_eq!(event(back), ev);
    }
}

/// An XLSX import carries its file's layout (body version 3), which the sheet takes; one without
/// leaves none.
#[test]
fn an_import_brings_its_files_layout() {
    let mut file = Layout::default();
    file.columns.set(0, 2, Some(90));
    file.rows.set(4, 1, Some(33));
    file.freeze = Freeze {
        rows: 1,
        columns: 0,
    };
    for group in [None, Some("g".to_owned())] {
        let ev = Event::Import(crate::event::Import {
            format: crate::event::ImportFormat::Xlsx,
            group: group.clone(),
            layout: Some(file.to_runs()),
        });
        let (code, version, body) = ev.encode();
        assert_eq!(version, crate::event::LAYOUT_VERSION);
        assert_eq!(Event::decode(code, version, &body).unwrap(), ev);
        let mut l = Layout::default();
        l.columns.set(5, 1, Some(300));
        l.apply(&ev);
        assert_eq!(l, file);
    }
    // Without a layout, the body is what it always was.
    let plain = Event::Import(crate::event::Import {
        format: crate::event::ImportFormat::Csv,
        group: None,
        layout: None,
    });
    assert_eq!(plain.encode().1, 1);
    // A stored layout past the limits does not decode.
    let mut w = crate::bytes::Writer::new();
    w.u8(1);
    w.u8(2);
    w.str(r#"{"columns": [{"at": "A", "count": 1, "width": 0}]}"#);
    assert!(Event::decode(crate::event::TYPE_IMPORT, 3, &w.buf).is_err());
}

#[test]
fn bad_entries_are_refused_naming_the_field() {
    for (e, path, words) in [
        (
            json!({"type": "resize-columns", "body": {"at": "B", "count": 2, "width": 0}}),
            "width",
            "not a size",
        ),
        (
            json!({"type": "resize-rows", "body": {"at": 3, "count": 1, "height": 2001}}),
            "height",
            "not a size",
        ),
        (
            json!({"type": "resize-rows", "body": {"at": 1, "count": 16385, "height": 20}}),
            "count",
            "at most 16384",
        ),
        (
            json!({"type": "resize-columns", "body": {"at": "XFD", "count": 2, "width": 20}}),
            "count",
            "past the end",
        ),
        (
            json!({"type": "freeze", "body": {"rows": 1001}}),
            "rows",
            "at most 1000",
        ),
        (
            json!({"type": "freeze", "body": {"columns": 101}}),
            "columns",
            "at most 100",
        ),
        (
            json!({"type": "freeze", "body": {"rows": 1, "cols": 1}}),
            "cols",
            "unknown field",
        ),
    ] {
        let err = Event::from_json(e.to_string().as_bytes()).expect_err("refused");
        assert_eq!(err.path, path, "{e}: {err}");
        assert!(err.message.contains(words), "{e}: {err}");
    }
    // A stored body with a size past the limit does not decode either.
    let mut w = crate::bytes::Writer::new();
    write_resize(&mut w, 1, 1, Some(2001));
    assert!(Event::decode(TYPE_RESIZE_COLUMNS, 1, &w.buf).is_err());
}

/// The page applies resizes as the server does: one table of cases for both
/// (`web/test/fixtures/layout-resizes.json`, also read by `web/test/axis.test.mts`).
#[test]
fn resizes_agree_with_the_pages_table() {
    #[derive(serde::Deserialize)]
    struct Resize {
        at: u32,
        count: u32,
        size: Option<u16>,
    }
    #[derive(serde::Deserialize)]
    struct Case {
        name: String,
        resizes: Vec<Resize>,
        sizes: Vec<Option<u16>>,
    }
    #[derive(serde::Deserialize)]
    struct Fixture {
        cases: Vec<Case>,
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../web/test/fixtures/layout-resizes.json"
    );
    let text = std::fs::read_to_string(path).expect("the shared fixture");
    let fixture: Fixture = serde_json::from_str(&text).expect("fixture JSON");
    assert!(fixture.cases.len() >= 4);
    for c in fixture.cases {
        let mut s = Sizes::default();
        for r in &c.resizes {
            s.set(r.at, r.count, r.size);
        }
        let got: Vec<Option<u16>> = (0..c.sizes.len() as u32).map(|i| s.get(i)).collect();
        assert_eq!(got, c.sizes, "{}", c.name);
    }
}
