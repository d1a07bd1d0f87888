//! `GET /logs/{logId}/export?format=xlsx`: the workbook the API writes to S3, downloaded through
//! its presigned URL and read back with calamine (a reader independent of the writer) and the
//! importer, compared with the cells the API reads, now and at an older version; served again
//! from S3 for the same version; refused in words when it cannot be written.

use std::io::Cursor;
use std::time::Duration;

use calamine::{Data, Reader, Xlsx};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_tests::api::{ApiClient, TestApi, append_ok, new_log, send_json_with as send_json};
use sheetlog_tests::fixtures::set_body;

const RANGE: &str = "A1:E12";

async fn export(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    query: &str,
) -> anyhow::Result<(StatusCode, Value)> {
    send_json(c.get(api.url(&format!("/logs/{log}/export?{query}"))), None).await
}

/// The file behind an export answer's URL, fetched with no credentials of the API's.
async fn download(answer: &Value) -> anyhow::Result<(Vec<u8>, Option<String>)> {
    let url = answer["url"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no url in {answer}"))?;
    let resp = reqwest::get(url).await?;
    anyhow::ensure!(
        resp.status() == StatusCode::OK,
        "GET {url}: {}",
        resp.status()
    );
    let disposition = resp
        .headers()
        .get(reqwest::header::CONTENT_DISPOSITION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok((resp.bytes().await?.to_vec(), disposition))
}

/// What the API reads for [`RANGE`] as of `at`: values shown, formulas, formats.
async fn cells(c: &ApiClient, api: &TestApi, log: &str, at: u64) -> anyhow::Result<Value> {
    let path = format!("/logs/{log}/cells?range={RANGE}&at={at}");
    let (status, v) = send_json(c.get(api.url(&path)), None).await?;
    anyhow::ensure!(status == StatusCode::OK, "{path}: {status} {v}");
    Ok(v)
}

/// A calamine cell as the API's JSON shows the same value.
fn as_json(d: &Data) -> Value {
    match d {
        Data::Empty => Value::Null,
        Data::String(s) => json!(s),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 9e15 => json!(*f as i64),
        Data::Float(f) => json!(f),
        Data::Int(i) => json!(i),
        Data::Bool(b) => json!(b),
        Data::Error(e) => json!({"error": e.to_string()}),
        other => json!(other.to_string()),
    }
}

/// The workbook read back: its one worksheet's values, formulas and (through the importer)
/// number formats, in the shapes of a cells answer.
fn workbook(bytes: &[u8]) -> anyhow::Result<Value> {
    let mut book = Xlsx::new(Cursor::new(bytes.to_vec()))?;
    let names = book.sheet_names();
    anyhow::ensure!(names == ["Sheet1"], "one worksheet: {names:?}");
    let range: sheetlog_core::sheet::Range = RANGE.parse()?;
    let read = book.worksheet_range("Sheet1")?;
    let formulas_read = book.worksheet_formula("Sheet1")?;
    let mut values = Vec::new();
    let mut formulas = serde_json::Map::new();
    for row in range.start.row..=range.end.row {
        let mut line = Vec::new();
        for col in range.start.col..=range.end.col {
            line.push(as_json(read.get_value((row, col)).unwrap_or(&Data::Empty)));
            // An error value is written as a formula of that error alone (`=#N/A`): a value,
            // not a formula, to the API.
            let formula = formulas_read
                .get_value((row, col))
                .filter(|f| !f.is_empty() && sheetlog_core::sheet::ErrorCode::parse(f).is_none());
            if let Some(f) = formula {
                let at = sheetlog_core::sheet::CellRef { row, col };
                formulas.insert(at.to_string(), json!(format!("={f}")));
            }
        }
        values.push(Value::Array(line));
    }
    let mut formats = serde_json::Map::new();
    sheetlog_core::sheet::import::read_rows(
        sheetlog_core::sheet::ImportFormat::Xlsx,
        Box::new(Cursor::new(bytes.to_vec())),
        Default::default(),
        sheetlog_core::sheet::import::Mode::Strict,
        &mut |row, _| {
            for (col, cell) in row.cells {
                if let Some(f) = cell.format {
                    let at = sheetlog_core::sheet::CellRef {
                        row: row.index,
                        col,
                    };
                    formats.insert(at.to_string(), json!(f));
                }
            }
            Ok(std::ops::ControlFlow::Continue(()))
        },
    )?;
    Ok(json!({"values": values, "formulas": formulas, "formats": formats}))
}

fn shown(cells: &Value) -> Value {
    json!({"values": cells["values"], "formulas": cells["formulas"], "formats": cells["formats"]})
}

#[tokio::test]
async fn an_xlsx_export_reads_back_as_the_api_reads_the_sheet_at_any_version() -> anyhow::Result<()>
{
    let api = TestApi::start("export-xlsx").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    for i in 1..=6 {
        let cells = [
            (format!("A{i}"), json!(i * 10)),
            (format!("B{i}"), json!(format!("row {i}"))),
        ];
        append_ok(&c, &api, &log, set_body(&cells)).await?;
    }
    append_ok(
        &c,
        &api,
        &log,
        json!({"type": "set", "body": {"cells": [
            {"ref": "C1", "value": "=SUM(A1:A6)"},
            {"ref": "C2", "value": "=B1&\"!\""},
            {"ref": "D1", "value": 0.25, "format": "0.00%"},
            {"ref": "D2", "value": true},
            {"ref": "D3", "value": {"error": "#N/A"}},
            {"ref": "E1", "value": "'=not a formula"},
        ]}}),
    )
    .await?;
    let old = append_ok(
        &c,
        &api,
        &log,
        json!({"type": "insert-rows", "body": {"at": 3, "count": 2}}),
    )
    .await?
        + 1;
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[("A1", json!("changed")), ("E9", json!(1.5))]),
    )
    .await?;

    let (status, now) = export(&c, &api, &log, "format=xlsx").await?;
    assert_eq!(status, StatusCode::OK, "{now}");
    assert_eq!(now["cached"], json!(false), "{now}");
    let seq = now["seq"].as_u64().unwrap_or_default();
    assert_eq!(seq, old + 1, "the whole log by default: {now}");
    let (bytes, disposition) = download(&now).await?;
    assert_eq!(Some(bytes.len() as u64), now["bytes"].as_u64());
    assert_eq!(
        disposition.as_deref(),
        Some(format!("attachment; filename=\"sheet-{}-v{seq}.xlsx\"", &log[..8]).as_str())
    );
    assert_eq!(workbook(&bytes)?, shown(&cells(&c, &api, &log, seq).await?));

    // An older version, and the same one again: written once, then served from S3.
    let (status, then) = export(&c, &api, &log, &format!("at={old}")).await?;
    assert_eq!(status, StatusCode::OK, "{then}");
    assert_eq!(then["seq"], json!(old));
    let (older, _) = download(&then).await?;
    assert_eq!(workbook(&older)?, shown(&cells(&c, &api, &log, old).await?));
    assert_ne!(workbook(&older)?, workbook(&bytes)?);
    let (status, again) = export(&c, &api, &log, &format!("format=xlsx&at={old}")).await?;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["cached"], json!(true), "{again}");
    assert_eq!(download(&again).await?.0, older);

    // Kept under the log's payloads, tagged to expire like any discardable object.
    if let Some(stack) = &api.stack {
        let key = format!("payloads/{log}/exports/{old:020}-v1.xlsx");
        let tags = stack
            .s3
            .get_object_tagging()
            .bucket(&stack.resources.bucket)
            .key(&key)
            .send()
            .await?;
        let tagged = tags
            .tag_set()
            .iter()
            .any(|t| t.key() == "sheetlog-auto-delete" && t.value() == "true");
        assert!(tagged, "{key}: {:?}", tags.tag_set());
    }
    Ok(())
}

#[tokio::test]
async fn an_export_refuses_what_it_cannot_do_in_words() -> anyhow::Result<()> {
    let api = TestApi::start("export-errors").await?;
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let next = append_ok(&c, &api, &log, set_body(&[("A1", json!(1))])).await? + 1;
    for (query, status, code) in [
        ("format=csv", StatusCode::BAD_REQUEST, "invalid-query"),
        (
            "format=xlsx&at=99",
            StatusCode::BAD_REQUEST,
            "invalid-query",
        ),
        (
            "format=xlsx&range=A1:B2",
            StatusCode::BAD_REQUEST,
            "invalid-query",
        ),
        ("at=-1", StatusCode::BAD_REQUEST, "invalid-query"),
    ] {
        let (got, v) = export(&c, &api, &log, query).await?;
        assert_eq!(got, status, "{query}: {v}");
        assert_eq!(v["error"]["code"], json!(code), "{query}: {v}");
    }
    let (got, v) = export(&c, &api, &log, &format!("at={next}")).await?;
    assert_eq!(got, StatusCode::OK, "the log's end is a version: {v}");
    let missing = uuid::Uuid::new_v4();
    let (got, v) = export(&c, &api, &missing.to_string(), "").await?;
    assert_eq!(got, StatusCode::NOT_FOUND, "{v}");
    Ok(())
}

/// A workbook that does not finish within the budget is refused, saying how far it got; nothing
/// is kept for the version.
#[tokio::test]
async fn an_export_past_its_time_budget_answers_413_and_keeps_nothing() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        export_budget: Duration::ZERO,
        ..ApiConfig::default()
    };
    let api = TestApi::start_with("export-budget", cfg).await?;
    if api.stack.is_none() {
        return Ok(()); // a deployment has its own budget
    }
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    // The sheet is 16,384 columns wide: a window holds 6 rows of it, so 7 rows take two.
    append_ok(
        &c,
        &api,
        &log,
        set_body(&[("A1", json!(1)), ("XFD7", json!(2))]),
    )
    .await?;
    let (status, v) = export(&c, &api, &log, "format=xlsx").await?;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["code"], json!("export-too-large"), "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("(6 of 7 rows written)"), "{message}");
    if let Some(stack) = &api.stack {
        let listed = stack
            .s3
            .list_objects_v2()
            .bucket(&stack.resources.bucket)
            .prefix(format!("payloads/{log}/exports/"))
            .send()
            .await?;
        assert_eq!(listed.key_count(), Some(0), "{listed:?}");
    }
    Ok(())
}
