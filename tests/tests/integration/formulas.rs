//! Formulas through the HTTP API: reads answer computed values and the formula texts, row and
//! column edits rewrite references, history reads compute old values, snapshots carry formulas
//! (a structural edit after a snapshot opens its chunks) and keep their values beside them, an
//! XLSX import keeps its formulas, a formula typed against an older view follows the rows others
//! moved, and the limits answer clear errors.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_tests::api::{
    ApiClient, TestApi, append_ok, commit_upload, new_log, post_entry, upload_file,
};
use sheetlog_tests::fixtures::set_body;

async fn cells(c: &ApiClient, api: &TestApi, log: &str, query: &str) -> anyhow::Result<Value> {
    let r = c
        .get(api.url(&format!("/logs/{log}/cells?{query}")))
        .send()
        .await?;
    let status = r.status();
    let body: Value = r.json().await?;
    anyhow::ensure!(status == StatusCode::OK, "cells?{query}: {status} {body}");
    Ok(body)
}

#[tokio::test]
async fn reads_answer_computed_values_and_formulas() -> anyhow::Result<()> {
    let api = TestApi::start("formulas").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let first = append_ok(
        &c,
        &api,
        &log,
        set_body(&[
            ("A1", json!(10)),
            ("A2", json!(20)),
            ("A3", json!(30)),
            ("A4", json!("=SUM(A1:A3)")),
            ("B1", json!("Ada")),
            ("B2", json!("=B1&\" Lovelace\"")),
            ("B3", json!("=IF(A4>50,\"big\",\"small\")")),
            ("B4", json!("=VLOOKUP(20,A1:B3,2,FALSE)")),
            ("C1", json!("=DATE(2024,2,29)")),
            ("C2", json!("=MONTH(C1)")),
            ("C3", json!("=A1/0")),
            ("C4", json!("=C5")),
            ("C5", json!("=C4")),
            ("D1", json!("'=not a formula")),
            ("D2", json!("=NOPE(1)")),
        ]),
    )
    .await?;
    let v = cells(&c, &api, &log, "range=A1:D5").await?;
    assert_eq!(
        v["values"],
        json!([
            [10, "Ada", 45351, "=not a formula"],
            [20, "Ada Lovelace", 2, {"error": "#NAME?"}],
            [30, "big", {"error": "#DIV/0!"}, null],
            [60, "Ada Lovelace", {"error": "#CIRC!"}, null],
            [null, null, {"error": "#CIRC!"}, null],
        ]),
        "{v}"
    );
    assert_eq!(v["formulas"]["A4"], "=SUM(A1:A3)", "{v}");
    assert_eq!(v["formulas"]["C5"], "=C4", "{v}");
    assert!(
        v["formulas"].get("D1").is_none(),
        "a quoted text is no formula: {v}"
    );
    // A range without formulas still says so: a client knows the values are computed.
    let plain = cells(&c, &api, &log, "range=A1:A3").await?;
    assert_eq!(plain["formulas"], json!({}), "{plain}");
    // A range holding only the formula still reads the cells it reads.
    let one = cells(&c, &api, &log, "range=A4").await?;
    assert_eq!(one["values"], json!([[60]]), "{one}");
    // The log keeps the formula as typed, and a literal text as written.
    let entries: Value = c
        .get(api.url(&format!("/logs/{log}/entries?from={first}&limit=1")))
        .send()
        .await?
        .json()
        .await?;
    let written = &entries["entries"][0]["body"]["cells"];
    assert!(
        written
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c["value"] == "=SUM(A1:A3)")),
        "{entries}"
    );
    assert!(
        written
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c["value"] == "'=not a formula")),
        "{entries}"
    );

    // Edit an input: the sum follows. The read at the earlier sequence still computes the old.
    let before_edit = append_ok(&c, &api, &log, set_body(&[("A2", json!(25))])).await?;
    let now = cells(&c, &api, &log, "range=A4").await?;
    assert_eq!(now["values"], json!([[65]]), "{now}");
    let old = cells(&c, &api, &log, &format!("range=A4&at={before_edit}")).await?;
    assert_eq!(
        old["values"],
        json!([[60]]),
        "history computes old values: {old}"
    );
    Ok(())
}

#[tokio::test]
async fn row_and_column_edits_rewrite_references() -> anyhow::Result<()> {
    let api = TestApi::start("formula-refs").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[
            ("A1", json!(1)),
            ("A2", json!(2)),
            ("A3", json!(3)),
            ("B1", json!("=SUM(A1:A3)")),
            ("B2", json!("=A3*10")),
            ("C1", json!("=B2+1")),
        ]),
    )
    .await?;
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "insert-rows", "body": {"at": 2, "count": 1, "values": [[100]]}}),
    )
    .await?;
    let v = cells(&c, &api, &log, "range=A1:C4").await?;
    assert_eq!(v["formulas"]["B1"], "=SUM(A1:A4)", "the range grew: {v}");
    assert_eq!(v["formulas"]["B3"], "=A4*10", "{v}");
    assert_eq!(v["formulas"]["C1"], "=B3+1", "{v}");
    assert_eq!(v["values"][0], json!([1, 106, 31]), "{v}");

    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "insert-columns", "body": {"at": "A", "count": 1}}),
    )
    .await?;
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "delete-rows", "body": {"at": 4, "count": 1}}),
    )
    .await?;
    let v = cells(&c, &api, &log, "range=A1:D3").await?;
    assert_eq!(v["formulas"]["C1"], "=SUM(B1:B3)", "the range shrank: {v}");
    assert_eq!(
        v["formulas"]["C3"], "=#REF!*10",
        "its cell was deleted: {v}"
    );
    assert_eq!(
        v["values"][0],
        json!([null, 1, 103, {"error": "#REF!"}]),
        "{v}"
    );
    Ok(())
}

#[tokio::test]
async fn formulas_over_the_limits_are_refused() -> anyhow::Result<()> {
    let api = TestApi::start("formula-limits").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let long = format!("={}", "1+".repeat(4096) + "1");
    let (status, v) = post_entry(&c, &api, &log, set_body(&[("A1", json!(long))])).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("formula is 8193 characters, the limit is 8192"),
        "{v}"
    );
    let deep = format!("={}1{}", "(".repeat(65), ")".repeat(65));
    let (status, v) = post_entry(&c, &api, &log, set_body(&[("A1", json!(deep))])).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn formulas_read_through_snapshots_and_move_with_later_edits() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        snapshot_interval: 4,
        ..ApiConfig::default()
    };
    let Some(api) = TestApi::start_with_pipeline("formula-snapshots", cfg).await? else {
        return Ok(()); // a deployment runs its own pipeline; this test drives the local one
    };
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    // A chain down column B, 600 rows: B(i) = B(i+1) + A(i); A is 1 everywhere, B600 = 0.
    for block in 0..6u32 {
        let mut batch = Vec::new();
        for i in block * 100 + 1..=block * 100 + 100 {
            batch.push((format!("A{i}"), json!(1)));
            let b = if i == 600 {
                json!(0)
            } else {
                json!(format!("=B{}+A{i}", i + 1))
            };
            batch.push((format!("B{i}"), b));
        }
        append_ok(&c, &api, &log, set_body(&batch)).await?;
    }
    // Wait for a completed snapshot, so the read below starts from its chunks.
    let deadline = Instant::now() + Duration::from_secs(120);
    let loaded = loop {
        let v: Value = c
            .get(api.url(&format!("/logs/{log}")))
            .send()
            .await?
            .json()
            .await?;
        if v["snapshot"]["seq"].as_u64() > Some(0) && v["snapshot"]["status"] == "complete" {
            break v;
        }
        anyhow::ensure!(Instant::now() < deadline, "no snapshot completed: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let url = loaded["snapshot"]["manifestUrl"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no manifestUrl: {loaded}"))?;
    let stored = reqwest::get(url).await?.bytes().await?;
    let manifest = sheetlog_core::snapshot::Manifest::from_bytes("manifest", &stored)?;
    let formulas: u64 = manifest.chunks.iter().map(|c| c.formulas).sum();
    assert!(
        formulas > 0,
        "the chunks count their formulas: {:?}",
        manifest.chunks
    );
    // The worker kept the formulas' values beside the snapshot before completing it.
    let bucket = api
        .stack()
        .ok_or_else(|| anyhow::anyhow!("an in-process stack"))?
        .bucket();
    let key = sheetlog_core::snapshot::values_key(manifest.log_id, manifest.seq);
    let index = sheetlog_core::snapshot::BlobStore::get(&bucket, &key)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no values index at {key}"))?;
    let index: sheetlog_core::snapshot::ValuesIndex = serde_json::from_slice(&index)?;
    let kept: u64 = index.chunks.iter().map(|c| c.formulas).sum();
    assert_eq!(kept, formulas, "every formula's value kept: {index:?}");
    let v = cells(&c, &api, &log, "range=B1").await?;
    assert_eq!(
        v["values"],
        json!([[599]]),
        "the whole chain was loaded: {v}"
    );
    // Rows inserted at the top after the snapshot: every formula in its chunks moves.
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "insert-rows", "body": {"at": 1, "count": 2}}),
    )
    .await?;
    let v = cells(&c, &api, &log, "range=B3").await?;
    assert_eq!(v["values"], json!([[599]]), "{v}");
    assert_eq!(v["formulas"]["B3"], "=B4+A3", "{v}");
    let v = cells(&c, &api, &log, "range=B500").await?;
    assert_eq!(v["formulas"]["B500"], "=B501+A500", "{v}");
    assert_eq!(v["values"], json!([[102]]), "{v}");
    Ok(())
}

#[tokio::test]
async fn an_xlsx_import_keeps_its_formulas_and_reads_compute_them() -> anyhow::Result<()> {
    use rust_xlsxwriter::Workbook;
    let api = TestApi::start("formula-xlsx").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let mut book = Workbook::new();
    let ws = book.add_worksheet();
    for r in 0..3u32 {
        ws.write_number(r, 0, f64::from(r + 1))?;
    }
    ws.write_formula(0, 1, "=SUM(A1:A3)")?;
    ws.set_formula_result(0, 1, "6");
    // A cached value the file got wrong: reads compute, they do not trust it.
    ws.write_formula(1, 1, "A1*10")?;
    ws.set_formula_result(1, 1, "999");
    ws.write_formula(2, 1, r#"IF(A3>2,"big","small")"#)?;
    ws.set_formula_result(2, 1, "big");
    let file = book.save_to_buffer()?;
    let upload = upload_file(
        &c,
        &api,
        &log,
        json!({"type": "import", "body": {"format": "xlsx"}}),
        &file,
    )
    .await?;
    let r = commit_upload(&c, &api, &log, &upload).await?;
    anyhow::ensure!(r.status() == StatusCode::CREATED, "commit: {}", r.status());

    let v = cells(&c, &api, &log, "range=A1:B3").await?;
    assert_eq!(v["values"], json!([[1, 6], [2, 10], [3, "big"]]), "{v}");
    assert_eq!(
        v["formulas"],
        json!({"B1": "=SUM(A1:A3)", "B2": "=A1*10", "B3": "=IF(A3>2,\"big\",\"small\")"}),
        "{v}"
    );
    // An edit after the import: the imported formulas compute from it.
    append_ok(&c, &api, &log, set_body(&[("A1", json!(5))])).await?;
    let v = cells(&c, &api, &log, "range=B1:B2").await?;
    assert_eq!(v["values"], json!([[10], [50]]), "{v}");
    Ok(())
}

#[tokio::test]
async fn a_formula_typed_against_an_older_view_follows_the_rows_others_moved() -> anyhow::Result<()>
{
    let api = TestApi::start("formula-rebase").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let inputs: Vec<(String, Value)> = (1..=5).map(|i| (format!("A{i}"), json!(i))).collect();
    let refs: Vec<(&str, Value)> = inputs
        .iter()
        .map(|(r, v)| (r.as_str(), v.clone()))
        .collect();
    let base = append_ok(&c, &api, &log, set_body(&refs)).await? + 1;
    // Someone else inserts a row above row 2 after the view the formulas are typed in.
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "insert-rows", "body": {"at": 2, "count": 1}}),
    )
    .await?;
    let mut entry = set_body(&[("B1", json!("=SUM(A1:A5)")), ("C1", json!("=A5*10"))]);
    entry["baseSeq"] = json!(base);
    append_ok(&c, &api, &log, entry).await?;
    // The references name the cells their author saw: the range grew over the new row, A5 is A6.
    let v = cells(&c, &api, &log, "range=B1:C1").await?;
    assert_eq!(
        v["formulas"],
        json!({"B1": "=SUM(A1:A6)", "C1": "=A6*10"}),
        "{v}"
    );
    assert_eq!(v["values"], json!([[15, 50]]), "{v}");
    Ok(())
}
