//! Column widths, row heights and frozen panes through the HTTP API on the emulator: the
//! `resize-columns`, `resize-rows` and `freeze` entries, the `layout` of the extent answer now and
//! at older versions (from a snapshot and the entries after it), a resize made against an older
//! view through someone's column insert, a pushed resize undone and redone, an XLSX export that
//! carries the layout and imports back with it, and bad entries refused naming the field.

use std::io::Read;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_tests::api::{
    ApiClient, TestApi, append_ok, new_log, post_entry, send_json_with as send_json, upload_file,
};
use sheetlog_tests::fixtures::{pull_body, push_body, set_body};

/// The `layout` of the extent answer as of `at` (the whole log when `None`); `null` when the
/// sheet has none.
async fn layout(c: &ApiClient, api: &TestApi, log: &str, at: Option<u64>) -> anyhow::Result<Value> {
    let at = at.map(|a| format!("?at={a}")).unwrap_or_default();
    let path = format!("/logs/{log}/extent{at}");
    let (status, v) = send_json(c.get(api.url(&path)), None).await?;
    anyhow::ensure!(status == StatusCode::OK, "{path}: {status} {v}");
    Ok(v.get("layout").cloned().unwrap_or(Value::Null))
}

fn widths(at: &str, count: u32, width: Value) -> Value {
    json!({"type": "resize-columns", "body": {"at": at, "count": count, "width": width}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn widths_heights_and_panes_read_back_now_and_at_older_versions() -> anyhow::Result<()> {
    // Snapshots every few entries, so the later reads start from one.
    let cfg = sheetlog_api::config::ApiConfig {
        snapshot_interval: 4,
        ..Default::default()
    };
    let Some(api) = TestApi::start_with_pipeline("layout", cfg).await? else {
        return Ok(());
    };
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let first = append_ok(&c, &api, &log, set_body(&[("A1", json!("Item"))])).await?;
    assert_eq!(layout(&c, &api, &log, None).await?, Value::Null);
    append_ok(&c, &api, &log, widths("B", 3, json!(140))).await?;
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "resize-rows", "body": {"at": 1, "count": 1, "height": 36}}),
    )
    .await?;
    let frozen = append_ok(
        &c,
        &api,
        &log,
        json!({"type": "freeze", "body": {"rows": 1, "columns": 1}}),
    )
    .await?;
    let all = json!({
        "columns": [{"at": "B", "count": 3, "width": 140}],
        "rows": [{"at": 1, "count": 1, "height": 36}],
        "freeze": {"rows": 1, "columns": 1}
    });
    assert_eq!(layout(&c, &api, &log, None).await?, all);
    // Column C back to the default, then a column inserted before B: the widths move with it.
    append_ok(&c, &api, &log, widths("C", 1, Value::Null)).await?;
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "insert-columns", "body": {"at": "A", "count": 1}}),
    )
    .await?;
    assert_eq!(
        layout(&c, &api, &log, None).await?,
        json!({
            "columns": [{"at": "C", "count": 1, "width": 140}, {"at": "E", "count": 1, "width": 140}],
            "rows": [{"at": 1, "count": 1, "height": 36}],
            "freeze": {"rows": 1, "columns": 2}
        })
    );
    // Older versions read as they were: after the freeze, and before any of it.
    assert_eq!(layout(&c, &api, &log, Some(frozen + 1)).await?, all);
    assert_eq!(layout(&c, &api, &log, Some(first + 1)).await?, Value::Null);
    // A snapshot keeps it: the same answers once one past the freeze is built and the reads
    // start from it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let (_, v) = send_json(c.get(api.url(&format!("/logs/{log}"))), None).await?;
        if v["snapshot"]["seq"].as_u64().is_some_and(|s| s > frozen)
            && v["snapshot"]["status"] == "complete"
        {
            break;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "no snapshot: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(layout(&c, &api, &log, Some(frozen + 1)).await?, all);
    assert_eq!(layout(&c, &api, &log, Some(first + 1)).await?, Value::Null);
    // The cells never moved for it.
    let (_, cells) = send_json(
        c.get(api.url(&format!("/logs/{log}/cells?range=A1:B1"))),
        None,
    )
    .await?;
    assert_eq!(cells["values"], json!([[null, "Item"]]));
    Ok(())
}

#[tokio::test]
async fn bad_layout_entries_are_refused_naming_the_field() -> anyhow::Result<()> {
    let api = TestApi::start("layout-bad").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    for (entry, field) in [
        (widths("B", 1, json!(0)), "width"),
        (widths("B", 1, json!(5000)), "width"),
        (
            json!({"type": "resize-rows", "body": {"at": 1, "count": 20000, "height": 30}}),
            "count",
        ),
        (json!({"type": "freeze", "body": {"rows": 5000}}), "rows"),
    ] {
        let (status, v) = post_entry(&c, &api, &log, entry.clone()).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{entry}: {v}");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(field), "{entry}: {v}");
    }
    assert_eq!(layout(&c, &api, &log, None).await?, Value::Null);
    Ok(())
}

async fn post(c: &ApiClient, api: &TestApi, path: &str, body: Value) -> anyhow::Result<Value> {
    let (status, v) = send_json(c.post(api.url(path)), Some(body)).await?;
    anyhow::ensure!(status.is_success(), "{path}: {status} {v}");
    Ok(v)
}

/// A resize pushed against an older view lands on the columns its author saw, through a column
/// someone inserted inside them; the group's undo gives them back their widths, and redo again.
#[tokio::test]
async fn a_pushed_resize_follows_its_columns_and_is_undone() -> anyhow::Result<()> {
    let api = TestApi::start("layout-sync").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    append_ok(&c, &api, &log, widths("C", 1, json!(60))).await?;
    let pull = format!("/logs/{log}/replicache/pull");
    let first = post(&c, &api, &pull, pull_body("g", Value::Null)).await?;
    let cookie = first["cookie"].clone();
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "insert-columns", "body": {"at": "C", "count": 1}}),
    )
    .await?;
    // B:C as the author saw them are B and D now; the inserted C keeps the default width.
    let m = json!([{"clientID": "c", "id": 1, "name": "resize-columns", "timestamp": 1,
        "args": {"at": "B", "count": 2, "width": 200, "baseSeq": cookie}}]);
    let v = post(
        &c,
        &api,
        &format!("/logs/{log}/replicache/push"),
        push_body("g", m),
    )
    .await?;
    assert!(v.get("error").is_none(), "{v}");
    let resized = json!({"columns": [
        {"at": "B", "count": 1, "width": 200},
        {"at": "D", "count": 1, "width": 200}
    ]});
    assert_eq!(layout(&c, &api, &log, None).await?, resized);
    post(
        &c,
        &api,
        &format!("/logs/{log}/undo"),
        json!({"clientGroupId": "g"}),
    )
    .await?;
    assert_eq!(
        layout(&c, &api, &log, None).await?,
        json!({"columns": [{"at": "D", "count": 1, "width": 60}]})
    );
    post(
        &c,
        &api,
        &format!("/logs/{log}/redo"),
        json!({"clientGroupId": "g"}),
    )
    .await?;
    assert_eq!(layout(&c, &api, &log, None).await?, resized);
    Ok(())
}

#[tokio::test]
async fn an_xlsx_export_carries_the_layout() -> anyhow::Result<()> {
    let api = TestApi::start("layout-export").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[("A1", json!("Region")), ("B2", json!(3))]),
    )
    .await?;
    append_ok(&c, &api, &log, widths("A", 1, json!(200))).await?;
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "freeze", "body": {"rows": 1}}),
    )
    .await?;
    let (status, answer) = send_json(
        c.get(api.url(&format!("/logs/{log}/export?format=xlsx"))),
        None,
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let url = answer["url"].as_str().unwrap_or_default();
    let bytes = reqwest::get(url).await?.bytes().await?.to_vec();
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))?;
    let mut xml = String::new();
    zip.by_name("xl/worksheets/sheet1.xml")?
        .read_to_string(&mut xml)?;
    assert!(xml.contains("<col min=\"1\" max=\"1\" width="), "{xml}");
    assert!(
        xml.contains("<pane ySplit=\"1\" topLeftCell=\"A2\""),
        "{xml}"
    );
    // The workbook imported into another sheet through the upload flow brings its layout.
    let copy = new_log(&c, &api).await?;
    let file = reqwest::get(url).await?.bytes().await?.to_vec();
    let u = upload_file(
        &c,
        &api,
        &copy,
        json!({"type": "import", "body": {"format": "xlsx"}}),
        &file,
    )
    .await?;
    let id = u["uploadId"].as_str().unwrap_or_default();
    let r = c
        .post(api.url(&format!("/logs/{copy}/uploads/{id}/commit")))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(
        layout(&c, &api, &copy, None).await?,
        layout(&c, &api, &log, None).await?
    );
    assert_eq!(
        layout(&c, &api, &copy, None).await?,
        json!({"columns": [{"at": "A", "count": 1, "width": 200}], "freeze": {"rows": 1, "columns": 0}})
    );
    Ok(())
}
