//! The API with the side-effect pipeline running (stream router and snapshot worker driven from
//! the emulator's stream and queue, as `sheetlog dev` runs them): appends past the snapshot
//! interval produce completed snapshots, loads start from them, range reads from them match a
//! full replay, and new segments start once a segment's snapshot is done.

use std::io::Cursor;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_core::sheet::import::ReadSeek;
use sheetlog_core::sheet::{Event, Range, Sheet};
use sheetlog_tests::api::{ApiClient, TestApi, json_array, json_object, json_str};

async fn get(c: &ApiClient, url: &str) -> anyhow::Result<Value> {
    let r = c.get(url).send().await?;
    anyhow::ensure!(r.status() == StatusCode::OK, "GET {url}: {}", r.status());
    Ok(r.json().await?)
}

/// Replays the log's entries (as the API returns them) up to `at` into an in-memory sheet.
async fn replay(c: &ApiClient, api: &TestApi, log: &str, at: u64) -> anyhow::Result<Sheet> {
    let mut sheet = Sheet::new();
    let v = get(
        c,
        &api.url(&format!("/logs/{log}/entries?from=0&limit=1000")),
    )
    .await?;
    for e in json_array(&v, "/entries") {
        if e["seq"].as_u64().unwrap_or(u64::MAX) >= at {
            break;
        }
        let kind = json_str(e, "/type");
        if kind == "snapshot" || kind == "end-segment" {
            continue;
        }
        let event =
            Event::from_parts(kind, e["body"].clone()).map_err(|err| anyhow::anyhow!("{err}"))?;
        let payload = match e["payloadUrl"].as_str() {
            Some(url) => {
                let bytes = reqwest::get(url).await?.bytes().await?;
                Some(Box::new(Cursor::new(bytes)) as Box<dyn ReadSeek>)
            }
            None => None,
        };
        sheet.apply(&event, payload)?;
    }
    Ok(sheet)
}

async fn wait_for<F, Fut>(what: &str, mut check: F) -> anyhow::Result<Value>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<Value>>>,
{
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn snapshots_complete_through_the_pipeline_and_reads_use_them() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        snapshot_interval: 10,
        segment_max_entries: 30,
        ..ApiConfig::default()
    };
    let Some(api) = TestApi::start_with_pipeline("api-snapshots", cfg).await? else {
        return Ok(()); // a deployment runs its own pipeline; this test drives the local one
    };
    let c = api.client().await?;
    let r = c.post(api.url("/logs")).send().await?;
    let log = json_str(&r.json::<Value>().await?, "/logId").to_owned();

    // An import as the base, then edits past the snapshot interval.
    let u: Value = c
        .post(api.url(&format!("/logs/{log}/uploads")))
        .json(&json!({"type": "import"}))
        .send()
        .await?
        .json()
        .await?;
    let csv: String = (1..=50)
        .map(|i| format!("item{i},{},{}\n", i * 3, i % 2 == 0))
        .collect();
    let mut put = reqwest::Client::new().put(json_str(&u, "/url")).body(csv);
    for (k, v) in json_object(&u, "/headers") {
        put = put.header(k, v.as_str().unwrap_or_else(|| panic!("header {k} is {v}")));
    }
    assert!(put.send().await?.status().is_success());
    let id = json_str(&u, "/uploadId");
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{id}/commit")))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    for i in 1..=14 {
        let entry =
            json!({"type": "set", "body": {"cells": [{"ref": format!("D{}", i * 3), "value": i}]}});
        let r = c
            .post(api.url(&format!("/logs/{log}/entries")))
            .json(&entry)
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::CREATED);
    }

    // The trigger appended a Snapshot entry at entry 10; the pipeline builds it.
    let loaded = wait_for("the first snapshot to complete", || async {
        let v = get(&c, &api.url(&format!("/logs/{log}"))).await?;
        Ok((v["snapshot"]["seq"].as_u64() > Some(0)).then_some(v))
    })
    .await?;
    let snap_seq = loaded["snapshot"]["seq"].as_u64().unwrap_or(0);
    assert_eq!(loaded["snapshot"]["status"], "complete");
    let first = loaded["entries"][0]["seq"].as_u64();
    assert_eq!(
        first,
        Some(snap_seq + 1),
        "the load starts right after its snapshot"
    );

    // The snapshot itself comes straight from S3 through the presigned URLs.
    let manifest: Value = reqwest::get(json_str(&loaded, "/snapshot/manifestUrl"))
        .await?
        .json()
        .await?;
    assert_eq!(manifest["seq"], snap_seq);
    let chunks = json_array(&loaded, "/snapshot/chunks");
    assert!(!chunks.is_empty());
    for chunk in chunks {
        let r = reqwest::get(json_str(chunk, "/url")).await?;
        assert_eq!(r.status(), StatusCode::OK);
        assert!(!r.bytes().await?.is_empty());
    }

    // Range reads from the snapshot (plus the entries after it) equal a full replay, now and in the past.
    let range: Range = "A1:D50".parse()?;
    let head = get(
        &c,
        &api.url(&format!("/logs/{log}/entries?from=0&limit=1000")),
    )
    .await?["nextSeq"]
        .as_u64()
        .unwrap_or(0);
    for at in [head, snap_seq, snap_seq + 2, 3] {
        let cells = get(
            &c,
            &api.url(&format!("/logs/{log}/cells?range=A1:D50&at={at}")),
        )
        .await?;
        let expected = replay(&c, &api, &log, at).await?.read_range(range);
        assert_eq!(
            cells["values"],
            serde_json::to_value(expected)?,
            "cells as of {at}"
        );
        assert_eq!(cells["seq"], at);
    }

    // Keep writing: once the segment is full and its snapshot complete, a new segment starts.
    for i in 15..=40 {
        let entry =
            json!({"type": "set", "body": {"cells": [{"ref": format!("E{i}"), "value": i}]}});
        c.post(api.url(&format!("/logs/{log}/entries")))
            .json(&entry)
            .send()
            .await?;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    wait_for("a second segment", || async {
        let v = get(&c, &api.url(&format!("/logs/{log}/segments"))).await?;
        Ok((v["segments"].as_array().map(Vec::len) > Some(1)).then_some(v))
    })
    .await?;
    // Every Snapshot entry eventually reports complete.
    wait_for("every snapshot to complete", || async {
        let v = get(
            &c,
            &api.url(&format!("/logs/{log}/entries?from=0&limit=1000")),
        )
        .await?;
        let snaps: Vec<Value> = json_array(&v, "/entries")
            .iter()
            .filter(|e| e["type"] == "snapshot")
            .cloned()
            .collect();
        Ok(snaps
            .iter()
            .all(|e| e["snapshotStatus"] == "complete")
            .then_some(v))
    })
    .await?;
    let head = get(
        &c,
        &api.url(&format!("/logs/{log}/entries?from=0&limit=1000")),
    )
    .await?["nextSeq"]
        .as_u64()
        .unwrap_or(0);
    let cells = get(&c, &api.url(&format!("/logs/{log}/cells?range=A1:E50"))).await?;
    let expected = replay(&c, &api, &log, head)
        .await?
        .read_range("A1:E50".parse()?);
    assert_eq!(cells["values"], serde_json::to_value(expected)?);
    Ok(())
}
