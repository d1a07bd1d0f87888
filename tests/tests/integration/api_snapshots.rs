//! The API with the side-effect pipeline running (stream router and snapshot worker driven from
//! the emulator's stream and queue, as `sheetlog dev` runs them): appends past the snapshot
//! interval produce completed snapshots, loads start from them, range reads from them match a
//! full replay, and new segments start once a segment's snapshot is done.

use std::io::Cursor;
use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_core::sheet::import::ReadSeek;
use sheetlog_core::sheet::{Event, Range, Sheet};
use sheetlog_tests::api::new_log as create_log;
use sheetlog_tests::api::{ApiClient, TestApi, json_array, json_str, put_upload, upload_file};
use sheetlog_tests::fixtures::set_body;

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
    let log = create_log(&c, &api).await?;

    // An import as the base, then edits past the snapshot interval.
    let csv: String = (1..=50)
        .map(|i| format!("item{i},{},{}\n", i * 3, i % 2 == 0))
        .collect();
    let u = upload_file(&c, &api, &log, json!({"type": "import"}), csv.as_bytes()).await?;
    let id = json_str(&u, "/uploadId");
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{id}/commit")))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    for i in 1..=14 {
        let entry = set_body(&[(format!("D{}", i * 3), json!(i))]);
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

    // The snapshot itself comes straight from S3 through the presigned URLs. From snapshot
    // format 2 the manifest object is a zstd frame of its JSON (`docs/api.md`).
    let stored = reqwest::get(json_str(&loaded, "/snapshot/manifestUrl"))
        .await?
        .bytes()
        .await?;
    assert!(
        !stored.starts_with(b"{"),
        "a format-2 manifest is stored compressed"
    );
    let manifest = sheetlog_core::snapshot::Manifest::from_bytes("manifest", &stored)?;
    assert_eq!(manifest.seq, snap_seq);
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
        // The extent, from the snapshot's manifest and the entries after it (or from the
        // entries alone at 3): the 50 imported rows and column D of the edits.
        let extent = get(&c, &api.url(&format!("/logs/{log}/extent?at={at}"))).await?;
        assert_eq!(
            extent,
            json!({"seq": at, "rows": 50, "columns": 4, "range": "A1:D50"}),
            "extent as of {at}"
        );
    }

    // Keep writing: once the segment is full and its snapshot complete, a new segment starts.
    for i in 15..=40 {
        let entry = set_body(&[(format!("E{i}"), json!(i))]);
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
    // In the second segment, the extent still covers everything: now column E too.
    let extent = get(&c, &api.url(&format!("/logs/{log}/extent"))).await?;
    assert_eq!(
        extent,
        json!({"seq": head, "rows": 50, "columns": 5, "range": "A1:E50"})
    );
    Ok(())
}

/// A fork at a sequence reads as the source did there; its entry 0 is a completed snapshot whose
/// unchanged chunks are the source's own objects; writes to either side stay on that side; and
/// the fork's own snapshots build on the shared chunks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fork_reads_like_its_source_and_shares_its_chunks() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        snapshot_interval: 10,
        ..ApiConfig::default()
    };
    let Some(api) = TestApi::start_with_pipeline("api-fork", cfg).await? else {
        return Ok(());
    };
    let c = api.client().await?;
    let source = create_log(&c, &api).await?;
    let append = |log: String, i: u64| {
        let c = c.clone();
        let url = api.url(&format!("/logs/{log}/entries"));
        async move {
            let column = ["A", "B", "C"][(i % 3) as usize];
            let cells: Vec<_> = (0..40)
                .map(|r| {
                    (
                        format!("{column}{}", r * 25 + i + 1),
                        json!(format!("v{i}-{r}")),
                    )
                })
                .collect();
            let r = c.post(url).json(&set_body(&cells)).send().await?;
            anyhow::ensure!(r.status() == StatusCode::CREATED, "append: {}", r.status());
            anyhow::Ok(())
        }
    };
    for i in 0..13 {
        append(source.clone(), i).await?;
    }
    let snap = wait_for("the source's snapshot to complete", || async {
        let v = get(&c, &api.url(&format!("/logs/{source}"))).await?;
        Ok((v["snapshot"]["seq"].as_u64() > Some(0)).then_some(v))
    })
    .await?;
    let snap_seq = snap["snapshot"]["seq"].as_u64().unwrap_or(0);
    let create_fork = |seq: u64| {
        let c = c.clone();
        let url = api.url("/logs");
        let body = json!({"from": {"logId": source, "seq": seq}});
        async move {
            let r = c.post(url).json(&body).send().await?;
            anyhow::ensure!(r.status() == StatusCode::CREATED, "fork: {}", r.status());
            anyhow::Ok(json_str(&r.json::<Value>().await?, "/logId").to_owned())
        }
    };
    // Forked right at the source's snapshot: entry 0 is a completed snapshot made entirely of
    // the source's chunks, nothing copied.
    let at_snapshot = create_fork(snap_seq).await?;
    let loaded = get(&c, &api.url(&format!("/logs/{at_snapshot}"))).await?;
    assert_eq!(
        (
            loaded["snapshot"]["seq"].clone(),
            loaded["snapshot"]["status"].clone()
        ),
        (json!(0), json!("complete"))
    );
    let urls: Vec<&str> = json_array(&loaded, "/snapshot/chunks")
        .iter()
        .map(|ch| json_str(ch, "/url"))
        .collect();
    assert!(!urls.is_empty());
    for u in &urls {
        assert!(u.contains(&format!("/snapshots/{source}/chunks/")), "{u}");
    }
    // Forked two entries later: those entries are applied on top (the chunks they touch are the
    // fork's own).
    let at = snap_seq + 3;
    let fork = create_fork(at).await?;
    let range = "A1:C400";
    let cells = |log: &str, at: Option<u64>| {
        let q = at.map(|a| format!("&at={a}")).unwrap_or_default();
        let url = api.url(&format!("/logs/{log}/cells?range={range}{q}"));
        let c = c.clone();
        async move { get(&c, &url).await }
    };
    assert_eq!(
        cells(&fork, None).await?["values"],
        cells(&source, Some(at)).await?["values"]
    );
    assert_eq!(
        cells(&at_snapshot, None).await?["values"],
        cells(&source, Some(snap_seq)).await?["values"]
    );

    // Each side goes its own way.
    // Past the fork's own snapshot interval.
    for i in 13..26 {
        append(fork.clone(), i).await?;
    }
    let r = c
        .post(api.url(&format!("/logs/{source}/entries")))
        .json(&set_body(&[("A1", json!("source only"))]))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let fork_now = cells(&fork, None).await?;
    assert_ne!(fork_now["values"][0][0], "source only");
    // The fork's own snapshot completes and reads the same as before it.
    wait_for("the fork's snapshot to complete", || async {
        let v = get(&c, &api.url(&format!("/logs/{fork}"))).await?;
        Ok((v["snapshot"]["seq"].as_u64() > Some(0)).then_some(v))
    })
    .await?;
    assert_eq!(cells(&fork, None).await?["values"], fork_now["values"]);

    // Bad forks write nothing.
    for (body, status) in [
        (
            json!({"from": {"logId": source, "seq": 999}}),
            StatusCode::RANGE_NOT_SATISFIABLE,
        ),
        (
            json!({"from": {"logId": "00000000-0000-4000-8000-000000000000", "seq": 0}}),
            StatusCode::NOT_FOUND,
        ),
        (json!({"from": {"logId": source}}), StatusCode::BAD_REQUEST),
        (json!({"to": 1}), StatusCode::BAD_REQUEST),
    ] {
        let r = c.post(api.url("/logs")).json(&body).send().await?;
        assert_eq!(r.status(), status, "{body}");
    }
    Ok(())
}

/// The attack on committed data: after the commit, the holder of the upload URL PUTs other bytes
/// to it (S3 accepts that until the URL expires), which also puts the auto-delete tag back; then
/// the lifecycle rule runs. The entry must still read the committed bytes, and a retried commit
/// must still answer the original seq.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_committed_file_cannot_be_replaced_or_expired_through_its_upload_url()
-> anyhow::Result<()> {
    let Some(api) = TestApi::start_with_pipeline("api-upload-attack", ApiConfig::default()).await?
    else {
        return Ok(());
    };
    let stack = api.stack.as_ref().context("in-process stack")?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let original = b"name,qty\nNails,80\nScrews,15\n";
    let u = upload_file(&c, &api, &log, json!({"type": "import"}), original).await?;
    let commit = api.url(&format!(
        "/logs/{log}/uploads/{}/commit",
        json_str(&u, "/uploadId")
    ));
    let r = c.post(&commit).send().await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let seq = r.json::<Value>().await?["seq"].clone();

    // The stream router commits the entry's file (removes its tag).
    let entry = wait_for("the committed file to lose its auto-delete tag", || async {
        let v = get(&c, &api.url(&format!("/logs/{log}/entries?from=1&limit=1"))).await?;
        let url = reqwest::Url::parse(json_str(&v, "/entries/0/payloadUrl"))?;
        let key = url
            .path()
            .split_once(&format!("/{}/", stack.resources.bucket))
            .map(|(_, k)| k.to_owned())
            .context("bucket in the payload URL path")?;
        let tagged = stack.bucket().has_auto_delete_tag(&key).await?;
        Ok((tagged == Some(false)).then_some(json!({"key": key, "url": url.as_str()})))
    })
    .await?;
    let key = json_str(&entry, "/key").to_owned();
    assert!(
        !key.contains("/uploads/"),
        "the entry names a copy nobody can write, not the upload: {key}"
    );

    // The attack: same URL, same length, other bytes.
    let forged = b"name,qty\nNails,00\nHacker,99\n";
    assert_eq!(forged.len(), original.len());
    assert!(
        put_upload(&u, forged).await?.is_success(),
        "S3 takes the PUT"
    );
    let expired = stack
        .expire_discardable(&format!("payloads/{log}/"))
        .await?;
    assert!(
        expired.iter().any(|k| k.contains("/uploads/")),
        "the re-tagged upload object expires: {expired:?}"
    );
    assert!(!expired.contains(&key), "the committed file does not");

    let served = reqwest::get(json_str(&entry, "/url"))
        .await?
        .bytes()
        .await?;
    assert_eq!(
        served.as_ref(),
        original,
        "the entry still serves the committed bytes"
    );
    let cells = get(&c, &api.url(&format!("/logs/{log}/cells?range=A1:B3"))).await?;
    assert_eq!(
        cells["values"],
        json!([["name", "qty"], ["Nails", 80], ["Screws", 15]])
    );
    // The upload object is gone, and a retried commit still answers the original entry.
    let r = c.post(&commit).send().await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(
        r.headers().get("idempotent-replayed").map(|v| v.as_bytes()),
        Some(&b"true"[..])
    );
    assert_eq!(r.json::<Value>().await?["seq"], seq);
    Ok(())
}

/// A burst of appends with a short snapshot interval: each completed snapshot starts the next one
/// at once, so the chain finishes soon after the last append (before, each later snapshot waited
/// out its own exponential backoff behind the one before it, and the chain took minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_snapshots_completes_soon_after_the_last_append() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        snapshot_interval: 5,
        ..ApiConfig::default()
    };
    let Some(api) = TestApi::start_with_pipeline("api-snapshot-burst", cfg).await? else {
        return Ok(());
    };
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    for i in 1..=60 {
        let entry = set_body(&[(format!("A{i}"), json!(i))]);
        let r = c
            .post(api.url(&format!("/logs/{log}/entries")))
            .json(&entry)
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let last_append = Instant::now();
    // Every Snapshot entry the API added has its root (the deadline only stops a hang: the
    // measured lag is `./scripts/bench pipeline`'s `snapshot_chain_lag_s_p99`).
    let deadline = last_append + Duration::from_secs(120);
    let stack = api.stack.as_ref().context("in-process stack")?;
    let log_id: sheetlog_core::LogId = log.parse().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let store = stack.log_store();
    let (snapshots, done) = loop {
        let mut units = Default::default();
        let page = sheetlog_core::ports::LogEntries::read_entries(
            &store,
            log_id,
            0,
            0,
            1000,
            sheetlog_core::ports::Consistency::Strong,
            &mut units,
        )
        .await?;
        let snaps: Vec<_> = page
            .entries
            .iter()
            .filter(|e| e.kind == sheetlog_core::domain::EntryType::SNAPSHOT && e.num > 0)
            .collect();
        let done = snaps.iter().filter(|e| e.snapshot_root.is_some()).count();
        if done == snaps.len() || Instant::now() > deadline {
            break (snaps.len(), done);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "{done} of {snapshots} snapshots complete {:.1} s after the last append",
        last_append.elapsed().as_secs_f64()
    );
    assert!(
        snapshots >= 10,
        "the API added a Snapshot entry every 5 entries: {snapshots}"
    );
    assert_eq!(done, snapshots, "every snapshot completed");
    Ok(())
}

/// History through the API after old segments are archived: `cells?at=` (history as of old
/// sequences, read from the archives) and the load answer exactly as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_reads_the_same_after_old_segments_are_archived() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        snapshot_interval: 10,
        segment_max_entries: 30,
        ..ApiConfig::default()
    };
    let Some(api) = TestApi::start_with_pipeline("api-archive", cfg).await? else {
        return Ok(());
    };
    let stack = api.stack.as_ref().context("in-process stack")?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    // Write until the log has six segments (each starts once the previous one's snapshot is done).
    let mut i = 0;
    wait_for("six segments", || {
        i += 1;
        let (c, api, log) = (&c, &api, &log);
        async move {
            for k in 0..5 {
                let n = i * 5 + k;
                let entry = set_body(&[
                    (format!("A{}", n % 40 + 1), json!(n)),
                    (format!("B{}", n % 40 + 1), json!(format!("v{n}"))),
                ]);
                let r = c
                    .post(api.url(&format!("/logs/{log}/entries")))
                    .json(&entry)
                    .send()
                    .await?;
                anyhow::ensure!(r.status() == StatusCode::CREATED);
            }
            let v = get(c, &api.url(&format!("/logs/{log}/segments"))).await?;
            Ok((v["segments"].as_array().map_or(0, Vec::len) >= 6).then_some(v))
        }
    })
    .await?;
    // The load names the newest completed snapshot, which the worker may still be moving forward:
    // wait until no Snapshot entry is left after it, so that only archiving can change a read.
    wait_for("every snapshot completed", || {
        let (c, api, log) = (&c, &api, &log);
        async move {
            let load = get(c, &api.url(&format!("/logs/{log}"))).await?;
            let pending = load["entries"]
                .as_array()
                .is_none_or(|es| es.iter().any(|e| e["type"] == "snapshot"));
            Ok((!pending).then_some(Value::Null))
        }
    })
    .await?;
    let probes = [3, 20, 41, 66, 90];
    let reads = || async {
        let mut out = Vec::new();
        for at in probes {
            out.push(
                get(
                    &c,
                    &api.url(&format!("/logs/{log}/cells?range=A1:B40&at={at}")),
                )
                .await?,
            );
        }
        out.push(get(&c, &api.url(&format!("/logs/{log}"))).await?["snapshot"]["seq"].clone());
        // A Replicache pull from an old cookie (it resets from the newest snapshot) and from none.
        for cookie in [json!(5), Value::Null] {
            let r = c
                .post(api.url(&format!("/logs/{log}/replicache/pull")))
                .json(&json!({"pullVersion": 1, "clientGroupID": "g", "cookie": cookie}))
                .send()
                .await?;
            anyhow::ensure!(r.status() == StatusCode::OK, "pull: {}", r.status());
            out.push(r.json::<Value>().await?);
        }
        anyhow::Ok(out)
    };
    let before = reads().await?;

    let retention = sheetlog_maintenance::Retention::new(
        stack.dynamo.clone(),
        &stack.resources.entry_table,
        &stack.resources.segment_table,
        stack.bucket(),
        sheetlog_maintenance::Policy {
            mode: sheetlog_maintenance::Mode::Archive,
            keep_segments: 2,
            after_days: None,
        },
    );
    let report = retention
        .run(
            sheetlog_maintenance::RunOptions {
                now: sheetlog_core::domain::now_secs(),
                dry_run: false,
                deadline: None,
            },
            &mut |_, _| {},
        )
        .await?;
    assert!(report.segments_archived >= 3, "{report:?}");
    assert_eq!(
        reads().await?,
        before,
        "history as of old sequences, and the load"
    );
    Ok(())
}

/// A read as of a sequence whose entries after the nearest completed snapshot pass the read
/// budget answers `413 history-too-large` (with the snapshot and the budget) instead of holding
/// them; one whose entries fit is answered as before.
#[tokio::test]
async fn a_history_read_past_the_read_budget_is_413() -> anyhow::Result<()> {
    let log_cfg = sheetlog_core::config::LogConfig {
        read_budget_bytes: 20_000,
        ..sheetlog_core::config::LogConfig::default()
    };
    let api = TestApi::start_with_log("history-budget", log_cfg, ApiConfig::default()).await?;
    if api.stack.is_none() {
        return Ok(()); // a deployment's budget is its own
    }
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    // 20 entries of about 2 KB after the log's first snapshot (no worker runs here).
    for i in 1..=20 {
        let entry = set_body(&[(format!("A{i}"), json!("x".repeat(2000)))]);
        let r = c
            .post(api.url(&format!("/logs/{log}/entries")))
            .json(&entry)
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let fits = get(&c, &api.url(&format!("/logs/{log}/cells?range=A1:A3&at=4"))).await?;
    assert_eq!(fits["values"][2][0], json!("x".repeat(2000)));
    for path in [
        format!("/logs/{log}/cells?range=A1:A3&at=20"),
        format!("/logs/{log}/cells?range=A1:A3"),
        format!("/logs/{log}/extent?at=15"),
    ] {
        let r = c.get(api.url(&path)).send().await?;
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        let v: Value = r.json().await?;
        assert_eq!(v["error"]["code"], "history-too-large", "{path}: {v}");
        assert_eq!(v["error"]["snapshotSeq"], 0, "{path}: {v}");
        assert_eq!(v["error"]["limit"], 20_000, "{path}: {v}");
    }
    Ok(())
}
