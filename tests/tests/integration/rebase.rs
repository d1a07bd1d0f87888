//! `baseSeq` on `POST /logs/{logId}/entries` over real HTTP on the emulator: an edit made against
//! an older view lands on the row its author meant, or is refused with a reason (docs/sync.md,
//! "Edits made against an older view").

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_tests::api::ApiClient as Client;
use sheetlog_tests::api::{TestApi, json_str, post_entry as post};
use sheetlog_tests::fixtures::set_body;

async fn cells(c: &Client, api: &TestApi, log: &str, range: &str) -> anyhow::Result<Value> {
    Ok(c.get(api.url(&format!("/logs/{log}/cells?range={range}")))
        .send()
        .await?
        .json::<Value>()
        .await?["values"]
        .clone())
}

/// A sheet with r1..r6 in A1:A6, and the sequence a reader of it had.
async fn sheet_with_rows(c: &Client, api: &TestApi) -> anyhow::Result<(String, u64)> {
    let r = c.post(api.url("/logs")).send().await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let log = json_str(&r.json().await?, "/logId").to_owned();
    let rows: Vec<_> = (1..=6)
        .map(|i| (format!("A{i}"), json!(format!("r{i}"))))
        .collect();
    let (status, v) = post(c, api, &log, set_body(&rows)).await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    Ok((log, v["nextSeq"].as_u64().unwrap_or_default()))
}

#[tokio::test]
async fn an_edit_with_base_seq_follows_its_row_through_an_insert() -> anyhow::Result<()> {
    let api = TestApi::start("rebase-entries").await?;
    let c = api.client().await?;
    let (log, base) = sheet_with_rows(&c, &api).await?;
    // Someone inserts a row at 2; the author, who read the sheet before, notes r5 in B5.
    let (status, _) = post(
        &c,
        &api,
        &log,
        json!({"type": "insert-rows", "body": {"at": 2, "count": 1}}),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED);
    let note = json!({"type": "set", "body": {"cells": [{"ref": "B5", "value": "note for r5"}]}, "baseSeq": base});
    let (status, v) = post(&c, &api, &log, note).await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["appliedAs"], set_body(&[("B6", json!("note for r5"))]));
    assert_eq!(
        cells(&c, &api, &log, "A5:B6").await?,
        json!([["r4", null], ["r5", "note for r5"]])
    );
    // Nothing moved since: written as sent, and no appliedAs.
    let now = v["nextSeq"].as_u64().unwrap_or_default();
    let (status, v) = post(
        &c,
        &api,
        &log,
        json!({"type": "set", "body": {"cells": [{"ref": "C1", "value": 1}]}, "baseSeq": now}),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert!(v.get("appliedAs").is_none(), "{v}");
    Ok(())
}

#[tokio::test]
async fn base_seq_errors_are_clear() -> anyhow::Result<()> {
    let api = TestApi::start("rebase-errors").await?;
    let c = api.client().await?;
    let (log, base) = sheet_with_rows(&c, &api).await?;
    let (status, _) = post(
        &c,
        &api,
        &log,
        json!({"type": "delete-rows", "body": {"at": 4, "count": 2}}),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED);
    let head = base + 1;
    // Its row is gone: refused, with the reason, and nothing is written.
    let (status, v) = post(
        &c,
        &api,
        &log,
        json!({"type": "set", "body": {"cells": [{"ref": "B5", "value": "x"}]}, "baseSeq": base}),
    )
    .await?;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "edit-rejected");
    assert!(
        json_str(&v, "/error/message").contains("B5: its row was deleted"),
        "{v}"
    );
    // A base the log has not reached.
    let (status, v) = post(&c, &api, &log, json!({"type": "set", "body": {"cells": [{"ref": "B1", "value": "x"}]}, "baseSeq": head + 3})).await?;
    assert_eq!(status, StatusCode::RANGE_NOT_SATISFIABLE, "{v}");
    assert_eq!(v["error"]["code"], "out-of-range");
    // expectedSeq and baseSeq contradict each other.
    let (status, v) = post(&c, &api, &log, json!({"type": "set", "body": {"cells": [{"ref": "B1", "value": "x"}]}, "baseSeq": base, "expectedSeq": head})).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "invalid-entry");
    let next: Value = c
        .get(api.url(&format!("/logs/{log}")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(next["nextSeq"], head, "nothing was written: {next}");
    Ok(())
}
