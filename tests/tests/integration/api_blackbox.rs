//! Black-box tests of the HTTP API over real HTTP: every route's success path, every documented
//! error, the three-step upload, and concurrent clients. They run against the router served in
//! this process on a fresh emulator stack, or against a deployment named by `SHEETLOG_API_URL`
//! (tests that must reach behind the API skip themselves there).

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_core::LogId;
use sheetlog_tests::api::ApiClient as Client;
use sheetlog_tests::api::{
    TestApi, all_entries, json_array, json_str, new_log as create_log, post_entry as append,
    upload_file,
};
use sheetlog_tests::fixtures::set_body;

async fn next_seq(c: &Client, api: &TestApi, log: &str) -> anyhow::Result<u64> {
    let v: Value = c
        .get(api.url(&format!("/logs/{log}")))
        .send()
        .await?
        .json()
        .await?;
    v["nextSeq"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no nextSeq in {v}"))
}

/// Asserts a response is the documented error and returns its body.
async fn expect_error(
    r: reqwest::Response,
    want_status: StatusCode,
    code: &str,
) -> anyhow::Result<Value> {
    let status = r.status();
    let body: Value = r.json().await?;
    assert_error(status, &body, want_status, code);
    Ok(body)
}

fn assert_error(status: StatusCode, body: &Value, want_status: StatusCode, code: &str) {
    assert_eq!(status, want_status, "body: {body}");
    assert_eq!(body["error"]["code"], code, "body: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.len() > 10),
        "a human message is expected: {body}"
    );
}

#[tokio::test]
async fn every_route_succeeds_and_entries_round_trip() -> anyhow::Result<()> {
    let api = TestApi::start("routes").await?;
    let c = api.client().await?;
    let health = c.get(api.url("/health")).send().await?;
    assert_eq!(health.status(), StatusCode::OK);
    let doc: Value = c.get(api.url("/openapi.json")).send().await?.json().await?;
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
    // How the web page signs in: IAM authorization in process (a deployment names its own).
    let config: Value = c.get(api.url("/config.json")).send().await?.json().await?;
    if api.stack().is_some() {
        assert_eq!(config["auth"], "iam", "{config}");
        assert_eq!(config["cognito"], Value::Null, "{config}");
    } else {
        assert!(config["auth"].is_string(), "{config}");
    }
    for path in [
        "/logs",
        "/logs/{logId}",
        "/logs/{logId}/entries",
        "/logs/{logId}/uploads",
        "/logs/{logId}/uploads/{uploadId}/commit",
        "/logs/{logId}/segments",
        "/logs/{logId}/cells",
    ] {
        assert!(
            doc["paths"].get(path).is_some(),
            "{path} missing from the OpenAPI document"
        );
    }

    let log = create_log(&c, &api).await?;
    let written = vec![
        json!({"type": "set", "body": {"cells": [
            {"ref": "A1", "value": "Item"}, {"ref": "B1", "value": 0.25, "format": "0.00%"},
            {"ref": "C1", "value": true}, {"ref": "D1", "value": null}, {"ref": "E1", "value": {"error": "#DIV/0!"}}]}}),
        json!({"type": "insert-rows", "body": {"at": 1, "count": 1, "values": [["Nails", 0.01, 80]]}}),
        json!({"type": "insert-columns", "body": {"at": "B", "count": 2}}),
        json!({"type": "delete-columns", "body": {"at": "B", "count": 1}}),
        json!({"type": "delete-rows", "body": {"at": 5, "count": 2}}),
    ];
    for (i, entry) in written.iter().enumerate() {
        let (status, v) = append(&c, &api, &log, entry.clone()).await?;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        assert_eq!(v["seq"], i as u64 + 1);
        assert_eq!(v["nextSeq"], i as u64 + 2);
        assert_eq!(
            (v["segment"].as_u64(), v["entry"].as_u64()),
            (Some(0), Some(i as u64 + 1))
        );
    }

    let entries = all_entries(&c, &api, &log).await?;
    assert_eq!(entries.len(), 6);
    assert_eq!(entries[0]["type"], "snapshot");
    for (got, want) in entries[1..].iter().zip(&written) {
        assert_eq!(got["type"], want["type"]);
        assert_eq!(
            got["body"], want["body"],
            "entries read back in the form they were written"
        );
        assert!(got["created"].as_str().is_some_and(|t| t.ends_with('Z')));
    }

    let cells: Value = c
        .get(api.url(&format!("/logs/{log}/cells?range=A1:D2")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(cells["seq"], 6);
    assert_eq!(
        cells["values"],
        json!([["Nails", null, 0.01, 80], ["Item", null, 0.25, true]])
    );
    // The formatted cell moved from B1 to C2 with the inserted row and columns.
    assert_eq!(cells["formats"], json!({"C2": "0.00%"}));
    let before: Value = c
        .get(api.url(&format!("/logs/{log}/cells?range=A1:B1&at=2")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        before["values"],
        json!([["Item", 0.25]]),
        "at=2 is the state before the insert"
    );
    assert_eq!(before["formats"], json!({"B1": "0.00%"}));
    let plain: Value = c
        .get(api.url(&format!("/logs/{log}/cells?range=A1&at=2")))
        .send()
        .await?
        .json()
        .await?;
    assert!(
        plain.get("formats").is_none(),
        "no formats, no field: {plain}"
    );

    // The web client's page and bundle, on the same origin (no storage read).
    let page = c
        .get(api.url("/sheets/00000000-0000-4000-8000-000000000000"))
        .send()
        .await?;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(
        page.headers()["content-type"]
            .to_str()?
            .starts_with("text/html")
    );
    let missing = c.get(api.url("/app/no-such-file.js")).send().await?;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let escape = c.get(api.url("/app/..%2FCargo.toml")).send().await?;
    assert_eq!(escape.status(), StatusCode::NOT_FOUND);

    let loaded: Value = c
        .get(api.url(&format!("/logs/{log}")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(loaded["logId"], log.as_str());
    assert_eq!(
        loaded["snapshot"],
        json!({"seq": 0, "status": "complete", "chunks": []}),
        "the empty sheet has no manifest"
    );
    assert_eq!(loaded["entries"].as_array().map(Vec::len), Some(5));
    assert_eq!(
        (loaded["nextSeq"].as_u64(), loaded["complete"].as_bool()),
        (Some(6), Some(true))
    );

    let segs: Value = c
        .get(api.url(&format!("/logs/{log}/segments")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(segs["segments"][0]["segment"], 0);
    assert_eq!(segs["segments"][0]["baseSeq"], 0);
    assert_eq!(segs["segments"][0]["lastSnapshotSeq"], 0);
    Ok(())
}

#[tokio::test]
async fn rejected_appends_report_the_problem_and_leave_the_log_unchanged() -> anyhow::Result<()> {
    let api = TestApi::start("append-errors").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    append(&c, &api, &log, set_body(&[("A1", json!(1))])).await?;
    let before = next_seq(&c, &api, &log).await?;

    let cases = [
        (
            json!({"type": "set", "body": {"cells": [{"ref": "B0", "value": 1}]}}),
            "cells[0].ref",
        ),
        (
            json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": [1]}]}}),
            "cells[0].value",
        ),
        (json!({"type": "frobnicate", "body": {}}), "frobnicate"),
        (
            json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": 1}]}, "extra": 1}),
            "extra",
        ),
        (
            json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": 1, "colour": "red"}]}}),
            "colour",
        ),
        (
            json!({"type": "insert-rows", "body": {"at": 2_000_000, "count": 1}}),
            "at",
        ),
        (
            json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": "x".repeat(40_000)}]}}),
            "32767",
        ),
        (
            json!({"type": "import", "body": {"format": "csv"}}),
            "upload",
        ),
        (json!({"type": "snapshot", "body": {}}), "snapshot"),
    ];
    for (entry, mention) in cases {
        let (status, v) = append(&c, &api, &log, entry).await?;
        assert_error(status, &v, StatusCode::BAD_REQUEST, "invalid-entry");
        let msg = json_str(&v, "/error/message");
        assert!(msg.contains(mention), "{msg:?} should mention {mention:?}");
    }

    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .body("{\"type\": \"set\",")
        .send()
        .await?;
    expect_error(r, StatusCode::BAD_REQUEST, "invalid-json").await?;

    let stale =
        json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": 2}]}, "expectedSeq": 1});
    let (status, v) = append(&c, &api, &log, stale).await?;
    assert_error(status, &v, StatusCode::CONFLICT, "conflict");
    assert_eq!(v["error"]["nextSeq"], before);

    // A valid entry whose encoded body passes 1 MB: 40 cells of 30,000 characters.
    let big: Vec<_> = (1..=40)
        .map(|i| (format!("A{i}"), json!("y".repeat(30_000))))
        .collect();
    let (status, v) = append(&c, &api, &log, set_body(&big)).await?;
    assert_error(status, &v, StatusCode::PAYLOAD_TOO_LARGE, "entry-too-large");
    assert_eq!(v["error"]["uploadPath"], "/logs/{logId}/uploads");

    let huge = format!(
        "{{\"type\":\"set\",\"body\":{{\"cells\":[{{\"ref\":\"A1\",\"value\":\"{}\"}}]}}}}",
        "z".repeat(7 << 20)
    );
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .body(huge)
        .send()
        .await?;
    expect_error(r, StatusCode::PAYLOAD_TOO_LARGE, "request-too-large").await?;

    let unknown = LogId::new_random();
    let (status, v) = append(
        &c,
        &api,
        &unknown.to_string(),
        set_body(&[("A1", json!(1))]),
    )
    .await?;
    assert_error(status, &v, StatusCode::NOT_FOUND, "log-not-found");
    let (status, v) = append(&c, &api, "not-a-uuid", set_body(&[("A1", json!(1))])).await?;
    assert_error(status, &v, StatusCode::BAD_REQUEST, "invalid-log-id");

    assert_eq!(
        next_seq(&c, &api, &log).await?,
        before,
        "no rejected request changed the log"
    );
    let ok = json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": 2}]}, "expectedSeq": before});
    let (status, v) = append(&c, &api, &log, ok).await?;
    assert_eq!(
        (status, v["seq"].as_u64()),
        (StatusCode::CREATED, Some(before))
    );
    Ok(())
}

#[tokio::test]
async fn a_100_kb_set_body_round_trips_inline() -> anyhow::Result<()> {
    let api = TestApi::start("big-set").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let cells: Vec<Value> = (1..=4)
        .map(|i| json!({"ref": format!("B{i}"), "value": format!("{i}{}", "q".repeat(25_599))}))
        .collect();
    let body = json!({"cells": cells});
    let (status, v) = append(&c, &api, &log, json!({"type": "set", "body": body.clone()})).await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let entries = all_entries(&c, &api, &log).await?;
    assert_eq!(entries[1]["body"], body);
    assert!(
        entries[1].get("payloadUrl").is_none(),
        "a server-offloaded body comes back inline"
    );
    Ok(())
}

/// Runs the upload flow's first two steps; returns the upload id.
async fn upload(
    c: &Client,
    api: &TestApi,
    log: &str,
    request: Value,
    file: &[u8],
) -> anyhow::Result<String> {
    let u = upload_file(c, api, log, request, file).await?;
    assert_eq!(u["method"], "PUT");
    assert!(u["expiresAt"].as_str().is_some_and(|t| t.ends_with('Z')));
    Ok(json_str(&u, "/uploadId").to_owned())
}

#[tokio::test]
async fn three_step_upload_commits_once_and_serves_the_file() -> anyhow::Result<()> {
    let api = TestApi::start("upload").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let csv = b"name,price,qty\nNails,0.01,80\nScrews,0.02,15\n";
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads")))
        .json(&json!({"type": "import", "size": csv.len()}))
        .send()
        .await?;
    let u: Value = r.json().await?;
    assert_eq!(
        u["headers"]["x-amz-tagging"], "sheetlog-auto-delete=true",
        "the object is born discardable"
    );
    assert_eq!(
        u["headers"]["content-length"],
        csv.len().to_string(),
        "the length is part of the signature"
    );
    let url = reqwest::Url::parse(json_str(&u, "/url"))?;
    let signed = url
        .query_pairs()
        .find(|(k, _)| k == "X-Amz-SignedHeaders")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    assert!(
        signed.split(';').any(|h| h == "content-length"),
        "S3 refuses a body of another length only if the length is signed: {signed}"
    );
    let id = upload(
        &c,
        &api,
        &log,
        json!({"type": "import", "contentType": "text/csv"}),
        csv,
    )
    .await?;

    let commit = api.url(&format!("/logs/{log}/uploads/{id}/commit"));
    let r = c
        .post(&commit)
        .json(&json!({"expectedSeq": 1}))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let first: Value = r.json().await?;
    assert_eq!(first["seq"], 1);
    let r = c.post(&commit).send().await?;
    assert_eq!(
        r.status(),
        StatusCode::CREATED,
        "a second commit answers as the first did"
    );
    assert_eq!(
        r.headers().get("idempotent-replayed").map(|v| v.as_bytes()),
        Some(&b"true"[..]),
        "and says it was not repeated"
    );
    let second: Value = r.json().await?;
    assert_eq!(second["seq"], first["seq"]);
    assert_eq!(
        next_seq(&c, &api, &log).await?,
        2,
        "only one entry was written"
    );

    let entries = all_entries(&c, &api, &log).await?;
    assert_eq!(entries[1]["type"], "import");
    assert_eq!(entries[1]["body"], json!({"format": "csv"}));
    let url = json_str(&entries[1], "/payloadUrl");
    let served = reqwest::Client::new()
        .get(url)
        .send()
        .await?
        .bytes()
        .await?;
    assert_eq!(served.as_ref(), csv, "payloadUrl serves the uploaded bytes");

    let cells: Value = c
        .get(api.url(&format!("/logs/{log}/cells?range=A1:C3")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        cells["values"],
        json!([
            ["name", "price", "qty"],
            ["Nails", 0.01, 80],
            ["Screws", 0.02, 15]
        ])
    );
    Ok(())
}

#[tokio::test]
async fn upload_errors_are_reported_and_write_nothing() -> anyhow::Result<()> {
    let api = TestApi::start("upload-errors").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let other = create_log(&c, &api).await?;

    // Commit before the file was PUT.
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads")))
        .json(&json!({"type": "import", "size": 10}))
        .send()
        .await?;
    let u: Value = r.json().await?;
    let id = json_str(&u, "/uploadId");
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{id}/commit")))
        .send()
        .await?;
    expect_error(r, StatusCode::NOT_FOUND, "upload-not-found").await?;

    // Another log's upload cannot be committed here.
    let theirs = upload(&c, &api, &other, json!({"type": "import"}), b"a,b\n1,2\n").await?;
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{theirs}/commit")))
        .send()
        .await?;
    expect_error(r, StatusCode::NOT_FOUND, "upload-not-found").await?;

    // A well-formed id that was never handed out: one key read and one HEAD, then 404.
    let forged = format!("u1-{}", "0123456789abcdef".repeat(2));
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{forged}/commit")))
        .send()
        .await?;
    expect_error(r, StatusCode::NOT_FOUND, "upload-not-found").await?;

    // Too large for the stack's limit: refused before any URL is signed.
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads")))
        .json(&json!({"type": "import", "size": ApiConfig::default().max_upload_bytes + 1}))
        .send()
        .await?;
    let v = expect_error(r, StatusCode::PAYLOAD_TOO_LARGE, "upload-too-large").await?;
    assert_eq!(v["error"]["limit"], ApiConfig::default().max_upload_bytes);

    // No size at all.
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads")))
        .json(&json!({"type": "import"}))
        .send()
        .await?;
    let v = expect_error(r, StatusCode::BAD_REQUEST, "invalid-entry").await?;
    assert!(json_str(&v, "/error/message").contains("size"), "{v}");

    // A file that does not parse as what it claims to be.
    let bad = upload(
        &c,
        &api,
        &log,
        json!({"type": "import", "body": {"format": "xlsx"}}),
        b"this is not a zip",
    )
    .await?;
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{bad}/commit")))
        .send()
        .await?;
    expect_error(r, StatusCode::UNPROCESSABLE_ENTITY, "invalid-payload").await?;

    // A workbook sent as CSV (the default format) is refused in words, not imported as bytes.
    let zip = upload(
        &c,
        &api,
        &log,
        json!({"type": "import"}),
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00 rest of a zip",
    )
    .await?;
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{zip}/commit")))
        .send()
        .await?;
    let v = expect_error(r, StatusCode::UNPROCESSABLE_ENTITY, "invalid-payload").await?;
    assert!(
        json_str(&v, "/error/message").contains("an XLSX workbook"),
        "{v}"
    );

    // A file that breaks a limit: the error names it.
    let mut endless = b"a,b\n\"".to_vec();
    endless.extend(std::iter::repeat_n(b'x', 5 * 1024 * 1024));
    let long = upload(&c, &api, &log, json!({"type": "import"}), &endless).await?;
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{long}/commit")))
        .send()
        .await?;
    let v = expect_error(r, StatusCode::UNPROCESSABLE_ENTITY, "invalid-payload").await?;
    assert_eq!(v["error"]["limitName"], "maxCsvRecordBytes", "{v}");
    assert_eq!(v["error"]["limit"], 4 * 1024 * 1024, "{v}");

    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/nonsense/commit")))
        .send()
        .await?;
    expect_error(r, StatusCode::NOT_FOUND, "upload-not-found").await?;

    let r = c
        .post(api.url(&format!("/logs/{log}/uploads")))
        .json(&json!({"type": "set", "size": 3}))
        .send()
        .await?;
    expect_error(r, StatusCode::BAD_REQUEST, "invalid-entry").await?;

    assert_eq!(
        next_seq(&c, &api, &log).await?,
        1,
        "nothing was written to the log"
    );
    assert_eq!(next_seq(&c, &api, &other).await?, 1);
    Ok(())
}

#[tokio::test]
async fn entry_reads_page_and_reject_bad_ranges() -> anyhow::Result<()> {
    let api = TestApi::start("paging").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    for i in 1..=120 {
        let (status, _) = append(&c, &api, &log, set_body(&[(format!("A{i}"), json!(i))])).await?;
        assert_eq!(status, StatusCode::CREATED);
    }
    let v: Value = c
        .get(api.url(&format!("/logs/{log}/entries")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        v["entries"].as_array().map(Vec::len),
        Some(100),
        "default page size"
    );
    assert_eq!(
        (v["nextSeq"].as_u64(), v["complete"].as_bool()),
        (Some(100), Some(false))
    );
    let v: Value = c
        .get(api.url(&format!("/logs/{log}/entries?from=100&limit=1000")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(v["complete"], true);
    let end = v["nextSeq"].as_u64().unwrap_or(0);
    assert!(
        end > 120,
        "120 appends plus the Snapshot entry the trigger added"
    );
    let kinds: Vec<&str> = all_entries(&c, &api, &log)
        .await?
        .iter()
        .filter_map(|e| e["type"].as_str())
        .map(|s| if s == "snapshot" { "s" } else { "e" })
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "s").count(),
        2,
        "entry 0 and one triggered after 100 entries"
    );

    for (query, code) in [
        ("from=-1", "invalid-query"),
        ("from=abc", "invalid-query"),
        ("limit=0", "invalid-query"),
        ("limit=1001", "invalid-query"),
        ("frm=1", "invalid-query"),
    ] {
        let r = c
            .get(api.url(&format!("/logs/{log}/entries?{query}")))
            .send()
            .await?;
        expect_error(r, StatusCode::BAD_REQUEST, code).await?;
    }
    let r = c
        .get(api.url(&format!("/logs/{log}/entries?from={}", end + 5)))
        .send()
        .await?;
    let v = expect_error(r, StatusCode::RANGE_NOT_SATISFIABLE, "out-of-range").await?;
    assert_eq!(v["error"]["nextSeq"], end);
    let r = c
        .get(api.url(&format!("/logs/{log}/cells?range=A1:ZZZZ9")))
        .send()
        .await?;
    expect_error(r, StatusCode::BAD_REQUEST, "invalid-query").await?;
    // The largest sequence there is: out of range, not an overflow and a dropped connection.
    let r = c
        .get(api.url(&format!("/logs/{log}/cells?range=A1:B2&at={}", u64::MAX)))
        .send()
        .await?;
    let v = expect_error(r, StatusCode::RANGE_NOT_SATISFIABLE, "out-of-range").await?;
    assert_eq!(v["error"]["nextSeq"], end);
    // A path that is not valid percent-encoded UTF-8 is a JSON 400 like every other error.
    let r = c.get(api.url("/logs/%FF%FE/entries")).send().await?;
    expect_error(r, StatusCode::BAD_REQUEST, "invalid-request").await?;
    Ok(())
}

#[tokio::test]
async fn readers_behind_the_retained_segments_get_410() -> anyhow::Result<()> {
    let api = TestApi::start("truncated").await?;
    let Some(stack) = &api.stack else {
        return Ok(());
    }; // needs to complete snapshots directly
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let id: LogId = log.parse()?;
    let core = stack.log()?;
    core.start_segment(id).await?;
    core.complete_snapshot(id, 1, 0, "root-1").await?;
    core.start_segment(id).await?;
    let r = c
        .get(api.url(&format!("/logs/{log}/entries?from=0")))
        .send()
        .await?;
    let v = expect_error(r, StatusCode::GONE, "truncated").await?;
    assert_eq!(v["error"]["firstSeq"], 2);
    Ok(())
}

#[tokio::test]
async fn snapshot_trigger_starts_a_new_segment_once_the_snapshot_is_complete() -> anyhow::Result<()>
{
    let cfg = ApiConfig {
        snapshot_interval: 4,
        segment_max_entries: 8,
        ..ApiConfig::default()
    };
    let api = TestApi::start_with("trigger", cfg).await?;
    if api.stack.is_none() {
        return Ok(()); // the deployment's interval is not ours to set
    }
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let mut last = json!(null);
    for i in 1..=12 {
        let (status, v) = append(&c, &api, &log, set_body(&[(format!("A{i}"), json!(i))])).await?;
        assert_eq!(status, StatusCode::CREATED);
        last = v;
    }
    let segs: Value = c
        .get(api.url(&format!("/logs/{log}/segments")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        segs["segments"].as_array().map(Vec::len),
        Some(2),
        "segment 0 was complete, so it rolled: {segs}"
    );
    let entries = all_entries(&c, &api, &log).await?;
    let seqs: Vec<u64> = entries.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert!(entries.iter().any(|e| e["type"] == "end-segment"));
    assert_eq!(
        last["nextSeq"].as_u64(),
        Some(seqs.len() as u64),
        "nextSeq counts the server's own entries"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_get_contiguous_unique_sequences() -> anyhow::Result<()> {
    let _slot = sheetlog_tests::heavy_test_slot().await;
    let api = TestApi::start("http-concurrent").await?;
    let log = create_log(&api.client().await?, &api).await?;
    let mut tasks = Vec::new();
    for client in 0..8 {
        let url = api.url(&format!("/logs/{log}/entries"));
        let c = api.client().await?;
        tasks.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..20 {
                let entry = set_body(&[(format!("A{}", client * 20 + i + 1), json!(client))]);
                // Eight writers on one log: an append that loses too many races answers 503
                // with Retry-After, and clients are told to send it again (docs/api.md). A 503'd
                // append wrote nothing, which the check below holds: the log has exactly the
                // acknowledged ones.
                let mut attempt = 0;
                let r = loop {
                    let r = c.post(&url).json(&entry).send().await?;
                    attempt += 1;
                    if r.status() != StatusCode::SERVICE_UNAVAILABLE || attempt == 20 {
                        break r;
                    }
                    let wait = r
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                        .unwrap_or(1);
                    tokio::time::sleep(std::time::Duration::from_millis(
                        (wait * 1000).min(1000) / 4 + 50 * attempt,
                    ))
                    .await;
                };
                anyhow::ensure!(
                    r.status() == StatusCode::CREATED,
                    "append failed after {attempt} attempts: {}",
                    r.status()
                );
                let v: Value = r.json().await?;
                seqs.push(v["seq"].as_u64().unwrap_or(u64::MAX));
            }
            Ok(seqs)
        }));
    }
    let mut acked = BTreeSet::new();
    for t in tasks {
        for s in t.await?? {
            assert!(acked.insert(s), "sequence {s} acknowledged twice");
        }
    }
    assert_eq!(acked.len(), 160);
    let entries = all_entries(&api.client().await?, &api, &log).await?;
    let seqs: Vec<u64> = entries.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "contiguous from 0"
    );
    let set_seqs: BTreeSet<u64> = entries
        .iter()
        .filter(|e| e["type"] == "set")
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert_eq!(
        set_seqs, acked,
        "exactly the acknowledged appends are in the log"
    );
    Ok(())
}

/// Entry pages and loads stop before the response limit (AWS Lambda's 6 MB; small here) and
/// say where to continue, so paging returns every entry once however big the entries are; a
/// range read too big for it is refused.
#[tokio::test]
async fn answers_stay_within_the_response_limit() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        max_response_bytes: 20_000,
        ..ApiConfig::default()
    };
    let api = TestApi::start_with("api-page-bytes", cfg).await?;
    if api.stack.is_none() {
        return Ok(()); // a deployment has the real 6 MB limit; nothing small to test against
    }
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    // 30 entries of about 2.5 KB of JSON each: 75 KB in all, about 7 per page.
    for i in 0..30 {
        let text = format!("{i:03}").repeat(800);
        let (s, v) = append(
            &c,
            &api,
            &log,
            set_body(&[(format!("A{}", i + 1), json!(text))]),
        )
        .await?;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let r = c
        .get(api.url(&format!("/logs/{log}/entries?from=0&limit=1000")))
        .send()
        .await?;
    let bytes = r.bytes().await?;
    assert!(bytes.len() <= 20_000, "{} bytes", bytes.len());
    let v: Value = serde_json::from_slice(&bytes)?;
    assert_eq!(v["complete"], false);
    let got = json_array(&v, "/entries").len() as u64;
    assert!((2..30).contains(&got), "{got} entries in the first page");
    assert_eq!(
        v["nextSeq"], got,
        "continue right after the last entry returned"
    );
    let all = all_entries(&c, &api, &log).await?;
    let seqs: Vec<u64> = all.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(
        seqs,
        (0..31).collect::<Vec<_>>(),
        "every entry once, in order"
    );

    let r = c.get(api.url(&format!("/logs/{log}"))).send().await?;
    let bytes = r.bytes().await?;
    assert!(bytes.len() <= 20_000, "load: {} bytes", bytes.len());
    let v: Value = serde_json::from_slice(&bytes)?;
    assert_eq!(v["complete"], false);

    // A range whose values would not fit is refused, naming the limit, before it is all read;
    // a smaller one is served.
    let (s, v) = expect_status(&c, &api.url(&format!("/logs/{log}/cells?range=A1:A30"))).await?;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["code"], "range-too-large");
    assert_eq!(v["error"]["limit"], 20_000);
    let (s, v) = expect_status(&c, &api.url(&format!("/logs/{log}/cells?range=A1:A5"))).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(json_array(&v, "/values").len(), 5);
    Ok(())
}

/// The bytes a body takes in the Lambda response payload: as a JSON string (how `lambda_http`
/// carries a JSON body), counted independently of the API's own arithmetic.
fn lambda_payload(body: &[u8]) -> anyhow::Result<usize> {
    Ok(serde_json::to_string(std::str::from_utf8(body)?)?.len())
}

/// The limit counts what Lambda counts: entries full of quotes are about twice their wire size
/// in the Lambda response payload, and pages, loads and range reads stay under the limit there.
#[tokio::test]
async fn answers_stay_within_the_response_limit_as_lambda_counts_it() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        max_response_bytes: 20_000,
        ..ApiConfig::default()
    };
    let api = TestApi::start_with("api-page-escaped", cfg).await?;
    if api.stack.is_none() {
        return Ok(());
    }
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    // Each value is 600 quotes: 1,200 bytes in the entry's JSON, 2,400 in the payload.
    for i in 0..30 {
        let (s, v) = append(
            &c,
            &api,
            &log,
            set_body(&[(format!("A{}", i + 1), json!("\"".repeat(600)))]),
        )
        .await?;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    for path in [
        format!("/logs/{log}/entries?from=0&limit=1000"),
        format!("/logs/{log}"),
    ] {
        let r = c.get(api.url(&path)).send().await?;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let bytes = r.bytes().await?;
        let payload = lambda_payload(&bytes)?;
        assert!(
            payload <= 20_000,
            "{path}: {payload} bytes in the Lambda payload"
        );
        // Filled up to the limit as Lambda counts it, so about half of it on the wire.
        assert!(
            payload > 15_000,
            "{path}: {payload} bytes: the page is filled"
        );
        assert!(
            bytes.len() < 11_000,
            "{path}: {} bytes on the wire",
            bytes.len()
        );
    }
    let all = all_entries(&c, &api, &log).await?;
    assert_eq!(all.len(), 31, "paging still returns every entry once");
    // 12 values of 600 quotes: about 15 KB on the wire, over 28 KB in the payload.
    let (s, v) = expect_status(&c, &api.url(&format!("/logs/{log}/cells?range=A1:A12"))).await?;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["code"], "range-too-large");
    Ok(())
}

async fn expect_status(c: &Client, url: &str) -> anyhow::Result<(StatusCode, Value)> {
    let r = c.get(url).send().await?;
    Ok((r.status(), r.json().await?))
}

/// The objects under `prefix` in the test stack's bucket.
async fn objects_under(api: &TestApi, prefix: &str) -> anyhow::Result<Vec<String>> {
    let stack = api
        .stack
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("needs the in-process stack"))?;
    let out = stack
        .emulator
        .s3()
        .await
        .list_objects_v2()
        .bucket(&stack.resources.bucket)
        .prefix(prefix)
        .send()
        .await?;
    Ok(out
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect())
}

#[tokio::test]
async fn uploads_take_only_mime_types_and_serve_files_as_attachments() -> anyhow::Result<()> {
    let api = TestApi::start("upload-mime").await?;
    if api.stack.is_none() {
        return Ok(());
    }
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;

    // A content type with a header smuggled in: 400, not 500, and no URL is signed.
    for bad in ["text/csv\r\nx-amz-acl: public-read", "csv", "text/html\n"] {
        let r = c
            .post(api.url(&format!("/logs/{log}/uploads")))
            .json(&json!({"type": "import", "size": 8, "contentType": bad}))
            .send()
            .await?;
        let v = expect_error(r, StatusCode::BAD_REQUEST, "invalid-entry").await?;
        assert!(
            json_str(&v, "/error/message").contains("contentType"),
            "{v}"
        );
    }

    // A file uploaded as text/html is served as a download, never as a page.
    let csv = b"a,b\n<script>1</script>,2\n";
    let id = upload(
        &c,
        &api,
        &log,
        json!({"type": "import", "contentType": "text/html", "body": {"format": "csv"}}),
        csv,
    )
    .await?;
    let commit = api.url(&format!("/logs/{log}/uploads/{id}/commit"));
    // A commit that fails after the copy (a stale expectedSeq), retried twice: one copy.
    for _ in 0..2 {
        let r = c
            .post(&commit)
            .json(&json!({"expectedSeq": 7}))
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::CONFLICT);
    }
    let r = c.post(&commit).send().await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let files = objects_under(&api, &format!("payloads/{log}/files/")).await?;
    assert_eq!(files.len(), 1, "one copy for three commits: {files:?}");

    let entries = all_entries(&c, &api, &log).await?;
    let url = json_str(&entries[1], "/payloadUrl");
    let r = reqwest::Client::new().get(url).send().await?;
    assert_eq!(r.status(), StatusCode::OK);
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(header("content-type"), "application/octet-stream");
    assert_eq!(header("content-disposition"), "attachment");
    assert_eq!(r.bytes().await?.as_ref(), csv);
    Ok(())
}

#[tokio::test]
async fn web_routes_send_security_headers() -> anyhow::Result<()> {
    let api = TestApi::start("web-headers").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    // Where the page PUTs uploads: the origin of a presigned URL.
    let u = upload_file(&c, &api, &log, json!({"type": "import"}), b"a\n").await?;
    let put = reqwest::Url::parse(json_str(&u, "/url"))?;
    let bucket_origin = put.origin().ascii_serialization();
    for path in ["/", &format!("/sheets/{log}"), "/app/app.js"] {
        let r = c.get(api.url(path)).send().await?;
        let h = |name: &str| {
            r.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let csp = h("content-security-policy");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("default-src 'none'"), "{path}: {csp}");
        assert!(
            csp.contains("script-src 'self' 'wasm-unsafe-eval';"),
            "{path}: {csp}"
        );
        assert!(
            csp.contains(&format!("connect-src 'self' {bucket_origin};")),
            "{path}: {csp} (uploads go to {bucket_origin})"
        );
        // Only WebAssembly may be compiled (the formula engine), never script text evaluated.
        assert!(
            !csp.replace("'wasm-unsafe-eval'", "").contains("unsafe"),
            "{path}: {csp}"
        );
        assert_eq!(h("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(h("referrer-policy"), "no-referrer", "{path}");
        assert_eq!(h("x-frame-options"), "DENY", "{path}");
    }
    Ok(())
}
