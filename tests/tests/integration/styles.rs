//! Cell styles through the HTTP API on the emulator: a `style` entry changes how cells look and
//! never their values (nor does a later `set` change their look); reads show styles now and at
//! older versions; an edit made against an older view lands on the cells it named through rows
//! others inserted, and is refused when they deleted them; a Replicache push of a `style`
//! mutation is pulled back with its cells; an undo takes a style back; an XLSX export carries
//! the styles to a reader; bad styles are refused naming the field.

use std::io::Cursor;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_tests::api::{
    ApiClient, TestApi, append_ok, new_log, post_entry, send_json_with as send_json,
};
use sheetlog_tests::fixtures::{pull_body, push_body, set_body};

/// The `styles` (and values) of `range` as of `at` (the whole log when `None`).
async fn read(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    range: &str,
    at: Option<u64>,
) -> anyhow::Result<Value> {
    let at = at.map(|a| format!("&at={a}")).unwrap_or_default();
    let path = format!("/logs/{log}/cells?range={range}{at}");
    let (status, v) = send_json(c.get(api.url(&path)), None).await?;
    anyhow::ensure!(status == StatusCode::OK, "{path}: {status} {v}");
    Ok(v)
}

fn style(ranges: &[&str], style: Value) -> Value {
    json!({"type": "style", "body": {"ranges": ranges, "style": style}})
}

#[tokio::test]
async fn a_style_changes_how_cells_look_and_never_their_values() -> anyhow::Result<()> {
    let api = TestApi::start("styles").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[
            ("A1", json!("Item")),
            ("B1", json!("Cost")),
            ("B2", json!(12.5)),
        ]),
    )
    .await?;
    let plain = append_ok(
        &c,
        &api,
        &log,
        style(
            &["A1:C1"],
            json!({"bold": true, "fill": "#DDEEFF", "border": {"bottom": {"style": "medium"}}}),
        ),
    )
    .await?;
    append_ok(
        &c,
        &api,
        &log,
        style(&["B2"], json!({"format": "0.00", "hAlign": "right"})),
    )
    .await?;
    let header =
        json!({"bold": true, "fill": "#ddeeff", "border": {"bottom": {"style": "medium"}}});
    let v = read(&c, &api, &log, "A1:C2", None).await?;
    assert_eq!(
        v["values"],
        json!([["Item", "Cost", null], [null, 12.5, null]])
    );
    assert_eq!(
        v["styles"],
        json!({"A1": header, "B1": header, "C1": header, "B2": {"hAlign": "right"}})
    );
    assert_eq!(v["formats"], json!({"B2": "0.00"}));

    // A value typed into a styled cell keeps its look; clearing it keeps a styled empty cell.
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[("A1", json!("Thing")), ("C1", Value::Null)]),
    )
    .await?;
    // Italic on a cell that is bold: both.
    append_ok(&c, &api, &log, style(&["A1"], json!({"italic": true}))).await?;
    let v = read(&c, &api, &log, "A1:C1", None).await?;
    assert_eq!(v["values"], json!([["Thing", "Cost", null]]));
    assert_eq!(v["styles"]["A1"]["italic"], json!(true));
    assert_eq!(v["styles"]["A1"]["bold"], json!(true));
    assert_eq!(v["styles"]["C1"], header);

    // Every field cleared: no style at all, and the empty C1 goes.
    append_ok(
        &c,
        &api,
        &log,
        style(
            &["A1:C1"],
            json!({"bold": false, "italic": null, "fill": null, "border": {"bottom": null}}),
        ),
    )
    .await?;
    let v = read(&c, &api, &log, "A1:C1", None).await?;
    assert!(v.get("styles").is_none(), "{v}");
    // An older version shows the styles it had.
    let old = read(&c, &api, &log, "A1:C2", Some(plain + 1)).await?;
    assert_eq!(
        old["styles"],
        json!({"A1": header, "B1": header, "C1": header})
    );
    assert_eq!(old["values"][0][0], json!("Item"));

    // The entry reads back in its JSON form.
    let path = format!("/logs/{log}/entries?from={plain}&limit=1");
    let (_, entries) = send_json(c.get(api.url(&path)), None).await?;
    assert_eq!(entries["entries"][0]["type"], "style", "{entries}");
    assert_eq!(
        entries["entries"][0]["body"],
        json!({"ranges": ["A1:C1"], "style": header})
    );
    Ok(())
}

#[tokio::test]
async fn bad_styles_are_refused_naming_the_field_and_write_nothing() -> anyhow::Result<()> {
    let api = TestApi::start("styles-bad").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let cases = [
        (
            style(&["A1"], json!({"fill": "yellow"})),
            "style.fill",
            "is not a colour",
        ),
        (
            style(&["A1"], json!({"fontSize": 0})),
            "style.fontSize",
            "1 to 409",
        ),
        (
            style(&["A1"], json!({})),
            "style",
            "names no field to change",
        ),
        (
            style(&[], json!({"bold": true})),
            "ranges",
            "at least one range",
        ),
        (
            style(&["A1:B2000000"], json!({"bold": true})),
            "ranges[0]",
            "A1:B2000000",
        ),
        (
            style(&["A1:Z100000"], json!({"bold": true})),
            "ranges",
            "the limit per entry",
        ),
        (
            style(&["A1"], json!({"blink": true})),
            "style",
            "unknown field `blink`",
        ),
    ];
    for (entry, path, words) in cases {
        let (status, v) = post_entry(&c, &api, &log, entry.clone()).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{entry}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(path) && message.contains(words),
            "{entry}: {message}"
        );
    }
    let (_, entries) =
        send_json(c.get(api.url(&format!("/logs/{log}/entries?from=1"))), None).await?;
    assert_eq!(entries["entries"], json!([]), "nothing written");
    Ok(())
}

#[tokio::test]
async fn a_style_made_against_an_older_view_follows_its_cells() -> anyhow::Result<()> {
    let api = TestApi::start("styles-rebase").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let rows: Vec<(String, Value)> = (1..=6)
        .map(|i| (format!("A{i}"), json!(format!("r{i}"))))
        .collect();
    let base = append_ok(&c, &api, &log, set_body(&rows)).await? + 1;
    // Someone inserts a row above row 3 while another person, seeing the old rows, colours 2..4.
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "insert-rows", "body": {"at": 3, "count": 1}}),
    )
    .await?;
    let mut entry = style(&["A2:A4"], json!({"fill": "#ffff00"}));
    entry["baseSeq"] = json!(base);
    let (status, v) = post_entry(&c, &api, &log, entry).await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    // r2 stays; r3 and r4 moved down a row; the new row between is not coloured.
    assert_eq!(
        v["appliedAs"],
        style(&["A2", "A4:A5"], json!({"fill": "#ffff00"}))
    );
    let now = read(&c, &api, &log, "A1:A7", None).await?;
    assert_eq!(
        now["values"],
        json!([["r1"], ["r2"], [null], ["r3"], ["r4"], ["r5"], ["r6"]])
    );
    let yellow = json!({"fill": "#ffff00"});
    assert_eq!(
        now["styles"],
        json!({"A2": yellow, "A4": yellow, "A5": yellow})
    );

    // Its rows deleted meanwhile: refused in words, nothing written.
    let head = v["nextSeq"].as_u64().unwrap_or_default();
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "delete-rows", "body": {"at": 6, "count": 2}}),
    )
    .await?;
    let mut gone = style(&["A6:A7"], json!({"bold": true}));
    gone["baseSeq"] = json!(head);
    let (status, v) = post_entry(&c, &api, &log, gone).await?;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("style A6:A7: every cell of it was deleted"),
        "{v}"
    );
    Ok(())
}

async fn post(c: &ApiClient, api: &TestApi, path: &str, body: Value) -> anyhow::Result<Value> {
    let (status, v) = send_json(c.post(api.url(path)), Some(body)).await?;
    anyhow::ensure!(status.is_success(), "{path}: {status} {v}");
    Ok(v)
}

/// The `put` of `key` in a pull's patch.
fn put<'a>(pull: &'a Value, key: &str) -> Option<&'a Value> {
    pull["patch"]
        .as_array()?
        .iter()
        .find(|op| op["op"] == "put" && op["key"] == key)
        .map(|op| &op["value"])
}

#[tokio::test]
async fn a_pushed_style_is_pulled_back_and_undone() -> anyhow::Result<()> {
    let api = TestApi::start("styles-sync").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    append_ok(&c, &api, &log, set_body(&[("B2", json!(7))])).await?;
    let push = format!("/logs/{log}/replicache/push");
    let pull = format!("/logs/{log}/replicache/pull");
    let first = post(&c, &api, &pull, pull_body("g", Value::Null)).await?;
    let cookie = first["cookie"].clone();
    let m = json!([{"clientID": "c", "id": 1, "name": "style", "timestamp": 1,
        "args": {"ranges": ["B2:C2"], "style": {"bold": true, "color": "#c00000"}, "baseSeq": cookie}}]);
    let v = post(&c, &api, &push, push_body("g", m)).await?;
    assert!(v.get("error").is_none(), "{v}");
    let next = post(&c, &api, &pull, pull_body("g", cookie)).await?;
    assert_eq!(next["lastMutationIDChanges"], json!({"c": 1}), "{next}");
    let red = json!({"bold": true, "color": "#c00000"});
    // Only the cells the style touched come back, with their values.
    assert_eq!(
        put(&next, "cell/B2"),
        Some(&json!({"value": 7, "style": red}))
    );
    assert_eq!(
        put(&next, "cell/C2"),
        Some(&json!({"value": null, "style": red}))
    );
    assert!(put(&next, "cell/A1").is_none());

    // The group's undo takes the style back and leaves the value.
    post(
        &c,
        &api,
        &format!("/logs/{log}/undo"),
        json!({"clientGroupId": "g"}),
    )
    .await?;
    let now = read(&c, &api, &log, "A1:C2", None).await?;
    assert!(now.get("styles").is_none(), "{now}");
    assert_eq!(now["values"][1], json!([null, 7, null]));
    // And redo puts it back.
    post(
        &c,
        &api,
        &format!("/logs/{log}/redo"),
        json!({"clientGroupId": "g"}),
    )
    .await?;
    let now = read(&c, &api, &log, "B2:C2", None).await?;
    assert_eq!(now["styles"], json!({"B2": red, "C2": red}));
    Ok(())
}

#[tokio::test]
async fn an_xlsx_export_carries_the_styles_to_a_reader() -> anyhow::Result<()> {
    let api = TestApi::start("styles-export").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[
            ("A1", json!("Region")),
            ("B1", json!("Sales")),
            ("B2", json!(0.5)),
        ]),
    )
    .await?;
    append_ok(
        &c,
        &api,
        &log,
        style(
            &["A1:B1"],
            json!({"bold": true, "fontSize": 14, "fill": "#1f4e78", "color": "#ffffff",
                   "hAlign": "center", "border": {"bottom": {"style": "double", "color": "#000000"}}}),
        ),
    )
    .await?;
    append_ok(
        &c,
        &api,
        &log,
        style(
            &["B2:B3"],
            json!({"format": "0%", "italic": true, "wrap": true, "vAlign": "top"}),
        ),
    )
    .await?;
    let cells = read(&c, &api, &log, "A1:B3", None).await?;
    let (status, answer) = send_json(
        c.get(api.url(&format!("/logs/{log}/export?format=xlsx"))),
        None,
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let url = answer["url"].as_str().unwrap_or_default();
    let bytes = reqwest::get(url).await?.bytes().await?.to_vec();
    // The workbook's cells as the importer reads them, in the shape of a cells answer.
    let mut styles = serde_json::Map::new();
    let mut formats = serde_json::Map::new();
    sheetlog_core::sheet::import::read_rows(
        sheetlog_core::sheet::ImportFormat::Xlsx,
        Box::new(Cursor::new(bytes)),
        Default::default(),
        sheetlog_core::sheet::import::Mode::Strict,
        &mut |row, _| {
            for (col, cell) in row.cells {
                let at = sheetlog_core::sheet::CellRef {
                    row: row.index,
                    col,
                }
                .to_string();
                if let Some(s) = cell.style {
                    styles.insert(at.clone(), json!(s.as_ref()));
                }
                if let Some(f) = cell.format {
                    formats.insert(at, json!(f));
                }
            }
            Ok(std::ops::ControlFlow::Continue(()))
        },
    )?;
    assert_eq!(Value::Object(styles), cells["styles"]);
    assert_eq!(Value::Object(formats), cells["formats"]);
    Ok(())
}
