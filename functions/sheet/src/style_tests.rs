#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::codec::{self, StyleRefs, StyleTable};
use crate::{Cell, Value};

fn rgb() -> impl Strategy<Value = Rgb> {
    (0u32..=0xff_ffff).prop_map(Rgb)
}

fn border() -> impl Strategy<Value = Border> {
    (
        proptest::sample::select(BorderStyle::ALL.to_vec()),
        proptest::option::of(rgb()),
    )
        .prop_map(|(style, color)| Border { style, color })
}

fn double<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<Option<T>>> {
    proptest::option::of(proptest::option::of(s))
}

/// Any patch that names at least one field.
pub(crate) fn any_patch() -> impl Strategy<Value = StylePatch> {
    let flags = proptest::collection::vec(proptest::option::of(any::<bool>()), 5);
    let sizes = (FontSize::MIN_HALF_POINTS..=FontSize::MAX_HALF_POINTS).prop_map(FontSize);
    (
        flags,
        double(sizes),
        double(rgb()),
        double(rgb()),
        double(proptest::sample::select(HAlign::ALL.to_vec())),
        double(proptest::sample::select(VAlign::ALL.to_vec())),
        proptest::collection::vec(double(border()), 4),
        double("0\\.0{0,3}%?"),
    )
        .prop_map(
            |(f, font_size, color, fill, h_align, v_align, b, format)| StylePatch {
                bold: f[0],
                italic: f[1],
                underline: f[2],
                strike: f[3],
                wrap: f[4],
                font_size,
                color,
                fill,
                h_align,
                v_align,
                border: BorderPatch {
                    top: b[0],
                    right: b[1],
                    bottom: b[2],
                    left: b[3],
                },
                format,
            },
        )
        .prop_filter("names a field", |p| !p.is_empty())
}

/// Ten patches, as a sheet's few shared styles: a bold header, fills, borders, a percentage.
pub(crate) fn ten_patches() -> Vec<StylePatch> {
    let p = |v: serde_json::Value| serde_json::from_value::<StylePatch>(v).unwrap();
    vec![
        p(json!({"bold": true, "fill": "#dddddd", "border": {"bottom": {"style": "medium"}}})),
        p(json!({"italic": true})),
        p(json!({"fill": "#fff2cc"})),
        p(json!({"color": "#c00000", "bold": true})),
        p(json!({"hAlign": "right", "format": "0.00%"})),
        p(json!({"fontSize": 14, "vAlign": "middle"})),
        p(
            json!({"border": {"top": {"style": "thin", "color": "#999999"}, "bottom": {"style": "thin"}}}),
        ),
        p(json!({"wrap": true, "hAlign": "center"})),
        p(json!({"underline": true, "strike": true, "fontSize": 10.5})),
        p(json!({"bold": false, "fill": null, "border": {"bottom": null}})),
    ]
}

#[test]
fn a_style_has_one_json_form_without_unset_fields() {
    let s: Style = serde_json::from_value(json!({
        "bold": true, "fontSize": 10.5, "color": "#C00000", "fill": "#ffff00",
        "hAlign": "center", "vAlign": "top", "wrap": true,
        "border": {"bottom": {"style": "double", "color": "#000000"}, "left": {"style": "thin"}}
    }))
    .unwrap();
    assert_eq!(s.font_size, Some(FontSize(21)));
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        json!({
            "bold": true, "wrap": true, "fontSize": 10.5, "color": "#c00000", "fill": "#ffff00",
            "hAlign": "center", "vAlign": "top",
            "border": {"bottom": {"style": "double", "color": "#000000"}, "left": {"style": "thin"}}
        })
    );
    let whole: Style = serde_json::from_value(json!({"fontSize": 12})).unwrap();
    assert_eq!(serde_json::to_string(&whole).unwrap(), r#"{"fontSize":12}"#);
    assert_eq!(serde_json::to_string(&Style::default()).unwrap(), "{}");
}

#[test]
fn bad_styles_are_refused_with_the_reason() {
    let err = |v: serde_json::Value| {
        serde_json::from_value::<StylePatch>(v)
            .unwrap_err()
            .to_string()
    };
    assert!(err(json!({"fill": "yellow"})).contains("is not a colour (expected \"#rrggbb\")"));
    assert!(err(json!({"color": "#12345"})).contains("is not a colour"));
    assert!(err(json!({"fontSize": 0.5})).contains("not one of 1 to 409 points"));
    assert!(err(json!({"fontSize": 10.25})).contains("in steps of 0.5"));
    assert!(err(json!({"fontSize": 410})).contains("not one of 1 to 409"));
    assert!(err(json!({"hAlign": "justify"})).contains("unknown variant"));
    assert!(err(json!({"border": {"top": {"style": "wavy"}}})).contains("unknown variant"));
    assert!(err(json!({"blink": true})).contains("unknown field"));
    let empty: StylePatch = serde_json::from_value(json!({})).unwrap();
    assert_eq!(empty.validate().unwrap_err(), "names no field to change");
}

#[test]
fn a_patch_sets_and_clears_only_what_it_names() {
    let p = |v: serde_json::Value| serde_json::from_value::<StylePatch>(v).unwrap();
    let mut cell = Cell::new(Value::Number(5.0), Some("0.0"));
    cell.restyle(
        &p(json!({"bold": true, "fill": "#ffff00"})),
        &mut StyleMemo::default(),
    );
    assert_eq!(cell.value, Value::Number(5.0));
    assert_eq!(cell.format.as_deref(), Some("0.0"));
    let s = cell.style.clone().unwrap();
    assert!(s.bold && s.fill == Some(Rgb(0xffff00)));
    // Italic added; bold and fill stay; the format changes.
    cell.restyle(
        &p(json!({"italic": true, "format": "0%"})),
        &mut StyleMemo::default(),
    );
    let s = cell.style.clone().unwrap();
    assert!(s.bold && s.italic && s.fill.is_some());
    assert_eq!(cell.format.as_deref(), Some("0%"));
    // Clearing every field leaves no style at all (never a default one); the format goes too.
    cell.restyle(
        &p(json!({"bold": false, "italic": null, "fill": null, "format": null})),
        &mut StyleMemo::default(),
    );
    assert_eq!(cell.style, None);
    assert_eq!(cell.format, None);
    assert!(!cell.is_blank());
    // An empty cell restyled to nothing is blank, so it is not stored.
    let mut empty = Cell::default();
    empty.restyle(&p(json!({"bold": false})), &mut StyleMemo::default());
    assert!(empty.is_blank());
}

#[test]
fn cells_that_shared_a_style_share_the_patched_one() {
    let patch: StylePatch = serde_json::from_value(json!({"bold": true})).unwrap();
    let shared = Arc::new(Style {
        fill: Some(Rgb(0xff)),
        ..Style::default()
    });
    let mut memo = StyleMemo::default();
    let mut cells: Vec<Cell> = (0..3)
        .map(|_| Cell {
            style: Some(shared.clone()),
            ..Cell::default()
        })
        .collect();
    for c in &mut cells {
        c.restyle(&patch, &mut memo);
    }
    let first = cells[0].style.clone().unwrap();
    assert!(first.bold && first.fill == Some(Rgb(0xff)));
    assert!(
        cells
            .iter()
            .all(|c| Arc::ptr_eq(c.style.as_ref().unwrap(), &first))
    );
}

#[test]
fn a_run_of_cells_writes_each_style_once_and_refers_to_it_after() {
    let bold = Arc::new(Style {
        bold: true,
        ..Style::default()
    });
    let fill = Arc::new(Style {
        fill: Some(Rgb(0x00ff00)),
        ..Style::default()
    });
    let cells = [
        Cell {
            style: Some(bold.clone()),
            ..Cell::new(Value::Number(1.0), None)
        },
        Cell {
            style: Some(fill.clone()),
            ..Cell::new(Value::Text("x".into()), Some("@"))
        },
        // Equal to the first by value, not by pointer.
        Cell {
            style: Some(Arc::new((*bold).clone())),
            ..Cell::default()
        },
        Cell::new(Value::Bool(true), None),
    ];
    let mut w = codec::Writer::new();
    let mut table = StyleTable::default();
    let mut sizes = Vec::new();
    for c in &cells {
        let before = w.len();
        codec::write_cell_in(&mut w, c, &mut table);
        sizes.push(w.len() - before);
    }
    assert_eq!(table.len(), 2);
    // Tag 0x40|empty, then a reference to style 1: two bytes.
    assert_eq!(sizes[2], 2, "{sizes:?}");
    let mut r = codec::Reader::new(&w.buf);
    let mut refs = StyleRefs::default();
    for c in &cells {
        assert_eq!(&codec::read_cell_in(&mut r, &mut refs).unwrap(), c);
    }
    assert!(r.finish().is_ok());
    // Without the cells before it, a reference names nothing: an error, not a panic.
    let third = &w.buf[w.buf.len() - sizes[3] - sizes[2]..];
    let e = codec::read_cell(&mut codec::Reader::new(third)).unwrap_err();
    assert!(
        e.to_string().contains("style 1 before it was written"),
        "{e}"
    );
    // A cell written alone carries its style in full.
    let mut alone = codec::Writer::new();
    codec::write_cell(&mut alone, &cells[2]);
    assert_eq!(
        codec::read_cell(&mut codec::Reader::new(&alone.buf)).unwrap(),
        cells[2]
    );
    // Set bodies carry no styles: the value decoder refuses one.
    assert!(codec::read_value(&mut codec::Reader::new(&alone.buf)).is_err());
}

#[test]
fn a_stored_default_style_or_unknown_field_is_corrupt() {
    let mut w = codec::Writer::new();
    w.u8(0x40); // empty value, a style follows
    w.u8(0); // in full
    w.varint(0); // with no field
    let e = codec::read_cell(&mut codec::Reader::new(&w.buf)).unwrap_err();
    assert!(e.to_string().contains("default style"), "{e}");
    let mut w = codec::Writer::new();
    w.varint(1 << 20);
    assert!(Style::read(&mut codec::Reader::new(&w.buf)).is_err());
    let mut w = codec::Writer::new();
    w.varint(BOLD);
    w.varint(BOLD);
    assert!(StylePatch::read(&mut codec::Reader::new(&w.buf)).is_err());
}

#[test]
fn replacing_then_restricting_gives_back_what_a_patch_changed() {
    let before = Style {
        italic: true,
        fill: Some(Rgb(0x123456)),
        ..Style::default()
    };
    let step: StylePatch =
        serde_json::from_value(json!({"fill": "#ffffff", "bold": true})).unwrap();
    let mut cell = Cell {
        style: Some(Arc::new(before.clone())),
        ..Cell::new(Value::Number(1.0), Some("0"))
    };
    cell.restyle(&step, &mut StyleMemo::default());
    let back = StylePatch::replacing(Some(&before), Some("0")).restricted_to(&step);
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        json!({"bold": false, "fill": "#123456"})
    );
    cell.restyle(&back, &mut StyleMemo::default());
    assert_eq!(cell.style.as_deref(), Some(&before));
    assert_eq!(cell.format.as_deref(), Some("0"));
}

proptest! {
    #[test]
    fn styles_and_patches_round_trip_through_both_forms(p in any_patch()) {
        let mut w = codec::Writer::new();
        p.write(&mut w);
        let mut r = codec::Reader::new(&w.buf);
        prop_assert_eq!(&StylePatch::read(&mut r).unwrap(), &p);
        prop_assert!(r.finish().is_ok());
        let json = serde_json::to_string(&p).unwrap();
        prop_assert_eq!(&serde_json::from_str::<StylePatch>(&json).unwrap(), &p);
        if let Some(s) = p.apply_to_style(None) {
            let mut w = codec::Writer::new();
            s.write(&mut w);
            prop_assert_eq!(&Style::read(&mut codec::Reader::new(&w.buf)).unwrap(), &s);
            let json = serde_json::to_string(&s).unwrap();
            prop_assert_eq!(&serde_json::from_str::<Style>(&json).unwrap(), &s);
        }
    }
}

/// A cell as the fixture writes it: `{"value", "format"?, "style"?}`, or null for none.
fn fixture_cell(v: &serde_json::Value) -> Option<Cell> {
    if v.is_null() {
        return None;
    }
    Some(Cell {
        value: serde_json::from_value(v["value"].clone()).unwrap(),
        format: v.get("format").map(|f| f.as_str().unwrap().into()),
        style: v
            .get("style")
            .map(|s| Arc::new(serde_json::from_value(s.clone()).unwrap())),
    })
}

/// The table the page's patches are held to as well (`web/test/styles.test.mts`): the server
/// turns every `before` into its `after`.
#[test]
fn the_server_applies_patches_as_the_page_is_held_to() {
    let fixture: serde_json::Value = serde_json::from_str(include_str!(
        "../../../web/test/fixtures/style-patches.json"
    ))
    .unwrap();
    let cases = fixture["cases"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for case in cases {
        let patch: StylePatch = serde_json::from_value(case["patch"].clone()).unwrap();
        let mut cell = fixture_cell(&case["before"]).unwrap_or_default();
        cell.restyle(&patch, &mut StyleMemo::default());
        let got = (!cell.is_blank()).then_some(cell);
        assert_eq!(got, fixture_cell(&case["after"]), "{}", case["name"]);
    }
}
