//! Acting on history through the HTTP API: `POST /logs/{logId}/restore` makes the sheet what it
//! was at an earlier version with one entry, keeps everything after that version in history, is
//! itself undone by restoring the version before it, survives the snapshot worker building past
//! it, resets the Replicache clients' views, and refuses what it cannot do before writing.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_tests::api::{
    ApiClient, TestApi, append_ok, commit_upload, new_log, post_entry, send_json_with as send_json,
    upload_file,
};
use sheetlog_tests::fixtures::{pull_body, set_body};

const RANGE: &str = "A1:D12";

/// The sheet's cells in [`RANGE`] as of `at` (now when `None`): values, formulas and formats.
async fn sheet(c: &ApiClient, api: &TestApi, log: &str, at: Option<u64>) -> anyhow::Result<Value> {
    let at = at.map(|a| format!("&at={a}")).unwrap_or_default();
    let path = format!("/logs/{log}/cells?range={RANGE}{at}");
    let (status, v) = send_json(c.get(api.url(&path)), None).await?;
    anyhow::ensure!(status == StatusCode::OK, "{path}: {status} {v}");
    Ok(json!({"values": v["values"], "formulas": v["formulas"], "formats": v["formats"]}))
}

async fn restore(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    body: Value,
) -> anyhow::Result<(StatusCode, Value)> {
    send_json(c.post(api.url(&format!("/logs/{log}/restore"))), Some(body)).await
}

/// Appends a sheet's worth of history: values, a formula, a format, row inserts and deletes.
/// Answers the sequence after the first half (the version restored below).
async fn history(c: &ApiClient, api: &TestApi, log: &str) -> anyhow::Result<u64> {
    for i in 1..=6 {
        let cells = [
            (format!("A{i}"), json!(i * 10)),
            (format!("B{i}"), json!(format!("row {i}"))),
        ];
        append_ok(c, api, log, set_body(&cells)).await?;
    }
    append_ok(
        c,
        api,
        log,
        json!({"type": "set", "body": {"cells": [
            {"ref": "C1", "value": "=SUM(A1:A6)"},
            {"ref": "D1", "value": 0.25, "format": "0.00%"},
        ]}}),
    )
    .await?;
    let version = append_ok(
        c,
        api,
        log,
        json!({"type": "insert-rows", "body": {"at": 3, "count": 2}}),
    )
    .await?
        + 1;
    // After the version: overwrites, a delete, new cells.
    append_ok(
        c,
        api,
        log,
        set_body(&[("A1", json!("changed")), ("B9", json!(true))]),
    )
    .await?;
    append_ok(
        c,
        api,
        log,
        json!({"type": "delete-rows", "body": {"at": 1, "count": 2}}),
    )
    .await?;
    append_ok(c, api, log, set_body(&[("D5", json!("later"))])).await?;
    Ok(version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restore_makes_the_sheet_an_earlier_version_and_keeps_what_came_after()
-> anyhow::Result<()> {
    let cfg = ApiConfig {
        snapshot_interval: 4,
        ..ApiConfig::default()
    };
    let Some(api) = TestApi::start_with_pipeline("restore", cfg).await? else {
        return Ok(()); // a deployment runs its own pipeline; this test drives the local one
    };
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let version = history(&c, &api, &log).await?;
    let then = sheet(&c, &api, &log, Some(version)).await?;
    let before = sheet(&c, &api, &log, None).await?;
    assert_ne!(then, before, "the history changed the sheet");
    assert_eq!(then["values"][0][2], 210, "the formula as of then: {then}");

    let (status, r) = restore(&c, &api, &log, json!({"seq": version})).await?;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let restored_at = r["seq"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no seq: {r}"))?;
    assert_eq!(
        sheet(&c, &api, &log, None).await?,
        then,
        "the sheet is then's"
    );
    assert_eq!(
        sheet(&c, &api, &log, Some(restored_at)).await?,
        before,
        "what came after the version stays in history"
    );
    let (_, entries) = send_json(
        c.get(api.url(&format!("/logs/{log}/entries?from={restored_at}&limit=1"))),
        None,
    )
    .await?;
    assert_eq!(
        entries["entries"][0]["type"], "restore",
        "one entry: {entries}"
    );
    assert_eq!(entries["entries"][0]["body"], json!({"seq": version}));

    // Edits go on from the restored sheet; the formula computes over it.
    append_ok(&c, &api, &log, set_body(&[("A2", json!(1000))])).await?;
    let mut expected = then.clone();
    expected["values"][1][0] = json!(1000);
    expected["values"][0][2] = json!(1190);
    let now = sheet(&c, &api, &log, None).await?;
    assert_eq!(now, expected, "an edit after the restore");

    // The snapshot worker builds through the restore: once a snapshot after it is complete,
    // reads start from it and agree.
    let next = restored_at + 1;
    wait_for_snapshot_after(&c, &api, &log, next).await?;
    assert_eq!(
        sheet(&c, &api, &log, None).await?,
        expected,
        "from the snapshot"
    );

    // Undo: restoring the version just before the restore brings back what it replaced.
    let (status, r) = restore(&c, &api, &log, json!({"seq": restored_at})).await?;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    assert_eq!(sheet(&c, &api, &log, None).await?, before, "undone");
    Ok(())
}

/// Waits until the log's newest completed snapshot is at or after `seq`.
async fn wait_for_snapshot_after(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    seq: u64,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, v) = send_json(c.get(api.url(&format!("/logs/{log}"))), None).await?;
        if v["snapshot"]["seq"].as_u64() >= Some(seq) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "no snapshot after {seq}: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_restore_refuses_what_it_cannot_do_before_writing() -> anyhow::Result<()> {
    let api = TestApi::start("restore-errors").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let version = history(&c, &api, &log).await?;
    let (_, head) = send_json(c.get(api.url(&format!("/logs/{log}"))), None).await?;
    let next = head["nextSeq"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("{head}"))?;

    let (status, v) = restore(&c, &api, &log, json!({"seq": next + 5})).await?;
    assert_eq!(status, StatusCode::RANGE_NOT_SATISFIABLE, "{v}");
    let (status, v) = restore(&c, &api, &log, json!({"seq": version, "at": 1})).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "unknown field: {v}");
    let (status, v) = restore(&c, &api, &log, json!({"seq": "three"})).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    let (status, v) = restore(
        &c,
        &api,
        &log,
        json!({"seq": version, "expectedSeq": next - 1}),
    )
    .await?;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    // A restore entry cannot be appended as is: its state is kept by the restore route.
    let (status, v) = post_entry(
        &c,
        &api,
        &log,
        json!({"type": "restore", "body": {"seq": version}}),
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/restore")),
        "{v}"
    );
    let (_, after) = send_json(c.get(api.url(&format!("/logs/{log}"))), None).await?;
    assert_eq!(after["nextSeq"], next, "nothing was written: {after}");

    // With an idempotency key, a retried restore is the same entry.
    let send = || {
        c.post(api.url(&format!("/logs/{log}/restore")))
            .header("Idempotency-Key", "restore-once")
            .json(&json!({"seq": version}))
            .send()
    };
    let first = send().await?;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first: Value = first.json().await?;
    let again = send().await?;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(
        again
            .headers()
            .get("Idempotent-Replayed")
            .and_then(|h| h.to_str().ok()),
        Some("true")
    );
    let again: Value = again.json().await?;
    assert_eq!(again["seq"], first["seq"], "{again}");
    Ok(())
}

#[tokio::test]
async fn a_replicache_client_that_pulls_after_a_restore_gets_the_restored_sheet()
-> anyhow::Result<()> {
    let api = TestApi::start("restore-pull").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    append_ok(&c, &api, &log, set_body(&[("A1", json!("old"))])).await?;
    let version = append_ok(&c, &api, &log, set_body(&[("B2", json!(2))])).await? + 1;
    let pull = |cookie: Value| {
        send_json(
            c.post(api.url(&format!("/logs/{log}/replicache/pull"))),
            Some(pull_body("g1", cookie)),
        )
    };
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[("A1", json!("new")), ("C3", json!(3))]),
    )
    .await?;
    let (status, first) = pull(Value::Null).await?;
    assert_eq!(status, StatusCode::OK, "{first}");
    let (status, r) = restore(&c, &api, &log, json!({"seq": version})).await?;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let (status, next) = pull(first["cookie"].clone()).await?;
    assert_eq!(status, StatusCode::OK, "{next}");
    let patch = next["patch"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("{next}"))?;
    assert_eq!(patch[0], json!({"op": "clear"}), "a reset: {next}");
    let put = |key: &str| {
        patch
            .iter()
            .find(|p| p["op"] == "put" && p["key"] == key)
            .map(|p| p["value"]["value"].clone())
    };
    assert_eq!(put("cell/A1"), Some(json!("old")), "{next}");
    assert_eq!(put("cell/B2"), Some(json!(2)), "{next}");
    assert_eq!(put("cell/C3"), None, "C3 came after the version: {next}");
    Ok(())
}

/// The changes between two versions, every page of them (`limit` per page), as `ref → (before,
/// after)` values.
async fn diff_all(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    query: &str,
    limit: u64,
) -> anyhow::Result<(Vec<Value>, usize)> {
    let mut out = Vec::new();
    let mut pages = 0;
    let mut row = 1;
    loop {
        let path = format!("/logs/{log}/diff?{query}&limit={limit}&row={row}");
        let (status, v) = send_json(c.get(api.url(&path)), None).await?;
        anyhow::ensure!(status == StatusCode::OK, "{path}: {status} {v}");
        pages += 1;
        out.extend(v["changes"].as_array().cloned().unwrap_or_default());
        match v["nextRow"].as_u64() {
            Some(next) => {
                anyhow::ensure!(v["complete"] == false && next > row, "{v}");
                row = next;
            }
            None => {
                anyhow::ensure!(v["complete"] == true, "{v}");
                return Ok((out, pages));
            }
        }
    }
}

#[tokio::test]
async fn a_diff_lists_the_cells_that_differ_between_two_versions_page_by_page() -> anyhow::Result<()>
{
    let api = TestApi::start("diff").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[("A1", json!(1)), ("B1", json!("same")), ("A2", json!(2))]),
    )
    .await?;
    let from = append_ok(
        &c,
        &api,
        &log,
        json!({"type": "set", "body": {"cells": [
            {"ref": "C3", "value": "=A1+A2"},
            {"ref": "D3", "value": 0.5, "format": "0%"},
        ]}}),
    )
    .await?
        + 1;
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "set", "body": {"cells": [
            {"ref": "A1", "value": 10},
            {"ref": "A2", "value": null},
            {"ref": "C3", "value": "=A1*2"},
            {"ref": "D3", "value": 0.5, "format": "0.0%"},
            {"ref": "E7", "value": true},
        ]}}),
    )
    .await?;
    // B1 is written again with the same value: not a change.
    let to = append_ok(&c, &api, &log, set_body(&[("B1", json!("same"))])).await? + 1;
    let expected = vec![
        json!({"ref": "A1", "before": {"value": 1}, "after": {"value": 10}}),
        json!({"ref": "A2", "before": {"value": 2}, "after": {"value": null}}),
        json!({"ref": "C3", "before": {"value": "=A1+A2"}, "after": {"value": "=A1*2"}}),
        json!({"ref": "D3", "before": {"value": 0.5, "format": "0%"}, "after": {"value": 0.5, "format": "0.0%"}}),
        json!({"ref": "E7", "before": {"value": null}, "after": {"value": true}}),
    ];
    let (all, pages) = diff_all(&c, &api, &log, &format!("from={from}&to={to}"), 1000).await?;
    assert_eq!(all, expected);
    assert_eq!(pages, 1);
    // A page of one change ends at a row: the two changes of row 3 come together.
    let (paged, pages) = diff_all(&c, &api, &log, &format!("from={from}"), 1).await?;
    assert_eq!(paged, expected, "`to` defaults to the whole log");
    assert_eq!(pages, 4, "rows 1, 2, 3 and 7");
    // The other way round swaps before and after; a version against itself has no changes.
    let (back, _) = diff_all(&c, &api, &log, &format!("from={to}&to={from}"), 1000).await?;
    assert_eq!(back.len(), expected.len());
    assert_eq!(back[0]["before"], json!({"value": 10}));
    let (none, _) = diff_all(&c, &api, &log, &format!("from={to}&to={to}"), 1000).await?;
    assert!(none.is_empty());
    // A restore in between reads like any other version.
    let (status, r) = restore(&c, &api, &log, json!({"seq": from})).await?;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let (none, _) = diff_all(&c, &api, &log, &format!("from={from}"), 1000).await?;
    assert!(
        none.is_empty(),
        "the restored sheet is the version: {none:?}"
    );

    for (query, want) in [
        ("to=3".to_string(), StatusCode::BAD_REQUEST),
        (format!("from={from}&limit=0"), StatusCode::BAD_REQUEST),
        (format!("from={from}&limit=1001"), StatusCode::BAD_REQUEST),
        (format!("from={from}&row=0"), StatusCode::BAD_REQUEST),
        (format!("from={from}&at=1"), StatusCode::BAD_REQUEST),
        ("from=999".to_string(), StatusCode::RANGE_NOT_SATISFIABLE),
        (
            format!("from={from}&to=999"),
            StatusCode::RANGE_NOT_SATISFIABLE,
        ),
    ] {
        let path = format!("/logs/{log}/diff?{query}");
        let (status, v) = send_json(c.get(api.url(&path)), None).await?;
        assert_eq!(status, want, "{path}: {v}");
    }
    Ok(())
}

/// A sheet wider and longer than one window of the comparison (100,000 cells): the changes past
/// the first window are found, and nothing of the unchanged rows is listed.
#[tokio::test]
async fn a_diff_of_a_sheet_larger_than_a_window_finds_changes_in_every_window() -> anyhow::Result<()>
{
    let api = TestApi::start("diff-windows").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let (rows, cols) = (3_500, 30);
    let mut csv = String::new();
    for r in 0..rows {
        let line: Vec<String> = (0..cols).map(|c| (r * cols + c).to_string()).collect();
        csv.push_str(&line.join(","));
        csv.push('\n');
    }
    let upload = upload_file(
        &c,
        &api,
        &log,
        json!({"type": "import", "body": {"format": "csv"}}),
        csv.as_bytes(),
    )
    .await?;
    let r = commit_upload(&c, &api, &log, &upload).await?;
    anyhow::ensure!(r.status() == StatusCode::CREATED, "commit: {}", r.status());
    let from = append_ok(&c, &api, &log, set_body(&[("B2", json!("top"))])).await? + 1;
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[("AD3400", json!("bottom")), ("A3500", json!(null))]),
    )
    .await?;
    let (changes, pages) = diff_all(&c, &api, &log, &format!("from={from}"), 1000).await?;
    assert_eq!(pages, 1);
    assert_eq!(
        changes,
        vec![
            json!({"ref": "AD3400", "before": {"value": 3399 * 30 + 29}, "after": {"value": "bottom"}}),
            json!({"ref": "A3500", "before": {"value": 3499 * 30}, "after": {"value": null}}),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn named_versions_are_listed_newest_first_renamed_and_forgotten() -> anyhow::Result<()> {
    let api = TestApi::start("named-versions").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let version = history(&c, &api, &log).await?;
    let name = |body: Value| {
        send_json(
            c.post(api.url(&format!("/logs/{log}/versions"))),
            Some(body),
        )
    };
    let list = || send_json(c.get(api.url(&format!("/logs/{log}/versions"))), None);

    let (status, v) = name(json!({"seq": version, "name": "  before the Q3 import "})).await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["name"], "before the Q3 import", "trimmed: {v}");
    assert_eq!(v["seq"], version);
    assert!(
        v["createdAt"].as_str().is_some_and(|t| t.starts_with("20")),
        "RFC 3339, as the sheet list: {v}"
    );
    let (status, _) = name(json!({"seq": 2, "name": "first rows"})).await?;
    assert_eq!(status, StatusCode::CREATED);
    let (_, all) = list().await?;
    let names: Vec<_> = all["versions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| (v["seq"].clone(), v["name"].clone()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        vec![
            (json!(version), json!("before the Q3 import")),
            (json!(2), json!("first rows")),
        ],
        "newest first: {all}"
    );
    // Its state is kept where a restore finds it: the version reads and restores from it.
    let key = sheetlog_core::snapshot::restore_manifest_key(uuid::Uuid::parse_str(&log)?, version);
    let bucket = api
        .stack()
        .ok_or_else(|| anyhow::anyhow!("an in-process stack"))?
        .bucket();
    assert!(sheetlog_core::snapshot::BlobStore::exists(&bucket, &key).await?);

    // Renamed, then forgotten; the kept state stays (a restore may point at it).
    let path = format!("/logs/{log}/versions/{version}");
    let (status, v) = send_json(c.put(api.url(&path)), Some(json!({"name": "Q3"}))).await?;
    assert_eq!((status, &v["name"]), (StatusCode::OK, &json!("Q3")), "{v}");
    assert_eq!(
        v["createdAt"], all["versions"][0]["createdAt"],
        "first named then"
    );
    let (status, _) = send_json(c.delete(api.url(&path)), None).await?;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, all) = list().await?;
    assert_eq!(all["versions"].as_array().map(Vec::len), Some(1), "{all}");
    assert!(sheetlog_core::snapshot::BlobStore::exists(&bucket, &key).await?);

    // What it refuses, writing nothing.
    for (body, want) in [
        (json!({"seq": 3, "name": "  "}), StatusCode::BAD_REQUEST),
        (
            json!({"seq": 3, "name": "x".repeat(101)}),
            StatusCode::BAD_REQUEST,
        ),
        (json!({"seq": 3}), StatusCode::BAD_REQUEST),
        (
            json!({"seq": 3, "name": "a", "at": 1}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"seq": 999, "name": "future"}),
            StatusCode::RANGE_NOT_SATISFIABLE,
        ),
    ] {
        let (status, v) = name(body.clone()).await?;
        assert_eq!(status, want, "{body}: {v}");
    }
    let (status, v) = send_json(c.put(api.url(&path)), Some(json!({"name": "gone"}))).await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "version-not-found");
    let (status, _) = send_json(c.delete(api.url(&path)), None).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send_json(
        c.delete(api.url(&format!("/logs/{log}/versions/three"))),
        None,
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let missing = "00000000-0000-4000-8000-000000000000";
    let (status, _) = send_json(c.get(api.url(&format!("/logs/{missing}/versions"))), None).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, all) = list().await?;
    assert_eq!(all["versions"].as_array().map(Vec::len), Some(1), "{all}");
    Ok(())
}
