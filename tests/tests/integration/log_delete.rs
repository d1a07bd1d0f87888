//! `DELETE /logs/{logId}` (`docs/api.md`, "Deleting a log"; `docs/storage.md`, "Deleting a
//! log"): every item and object of the log is gone, counted on the emulator, another log is
//! untouched, and every route of the deleted log answers `410 log-deleted`.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::LogId;
use sheetlog_core::domain::dedupe::{DedupeKey, KeyKind};
use sheetlog_tests::api::new_log as create_log;
use sheetlog_tests::api::{ApiClient, JWT_CLAIMS_HEADER, TestApi, json_str, upload_file};
use sheetlog_tests::fixtures::{push_body, pushed_set, set_body, set_mutation};
use sheetlog_tests::stack::TestStack;

async fn append(c: &ApiClient, api: &TestApi, log: &str, body: Value) -> anyhow::Result<()> {
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(
        r.status() == StatusCode::CREATED,
        "append: {}",
        r.text().await?
    );
    Ok(())
}

async fn wait_for<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check().await? {
        anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Where an idempotency key of `log` sits in the Dedupe table, as the API (default settings)
/// records it.
fn dedupe_key(log: &str, kind: KeyKind, key: &str) -> anyhow::Result<DedupeKey> {
    let id = LogId::from_uuid(uuid::Uuid::parse_str(log)?);
    Ok(DedupeKey::new(
        LogConfig::default().dedupe_prefix_bits,
        id,
        kind,
        key,
    ))
}

/// `POST /entries` with an `Idempotency-Key`; returns where the key sits.
async fn append_keyed(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    key: &str,
    body: Value,
) -> anyhow::Result<DedupeKey> {
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(
        r.status() == StatusCode::CREATED,
        "keyed append: {}",
        r.text().await?
    );
    dedupe_key(log, KeyKind::Request, key)
}

/// Everything a sheet can own: entries with a snapshot, a committed import (its upload id is an
/// idempotency key), an offloaded body, idempotent appends and a sync client (pushed through
/// the queue and applied). Returns the idempotency keys the log recorded.
async fn fill(c: &ApiClient, api: &TestApi, log: &str) -> anyhow::Result<Vec<DedupeKey>> {
    let csv = "a,1\nb,2\n";
    let u = upload_file(c, api, log, json!({"type": "import"}), csv.as_bytes()).await?;
    let id = json_str(&u, "/uploadId");
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{id}/commit")))
        .send()
        .await?;
    anyhow::ensure!(r.status() == StatusCode::CREATED, "commit: {}", r.status());
    let mut keys = vec![dedupe_key(log, KeyKind::Upload, id)?];
    for i in 1..=6 {
        append(c, api, log, set_body(&[(format!("B{i}"), json!(i))])).await?;
    }
    // Over the 16 KB inline threshold: the body lives in S3.
    append(c, api, log, set_body(&[("C1", json!("x".repeat(20_000)))])).await?;
    for i in 1..=3 {
        let key = format!("key-{i}-{log}");
        keys.push(append_keyed(c, api, log, &key, set_body(&[(format!("D{i}"), json!(i))])).await?);
    }
    let push = push_body("g1", json!([set_mutation("c1", 1, "E1", json!(5))]));
    let r = c
        .post(api.url(&format!("/logs/{log}/replicache/push")))
        .json(&push)
        .send()
        .await?;
    anyhow::ensure!(r.status() == StatusCode::OK, "push: {}", r.text().await?);
    wait_for("the push to be applied", || async {
        let r = c
            .get(api.url(&format!("/logs/{log}/clients/c1")))
            .send()
            .await?;
        Ok(r.status() == StatusCode::OK)
    })
    .await?;
    // A named version: its item in the Clients table and its kept state in S3 go too.
    let r = c
        .post(api.url(&format!("/logs/{log}/versions")))
        .json(&json!({"seq": 3, "name": "early"}))
        .send()
        .await?;
    anyhow::ensure!(
        r.status() == StatusCode::CREATED,
        "name: {}",
        r.text().await?
    );
    snapshots_complete(c, api, log).await?;
    Ok(keys)
}

/// Waits until the log has Snapshot entries besides its first and every one is complete, so the
/// worker is done with the log.
async fn snapshots_complete(c: &ApiClient, api: &TestApi, log: &str) -> anyhow::Result<()> {
    wait_for("every snapshot to complete", || async {
        let r = c
            .get(api.url(&format!("/logs/{log}/entries?from=0&limit=1000")))
            .send()
            .await?;
        let v: Value = r.json().await?;
        let entries = v["entries"].as_array().cloned().unwrap_or_default();
        let snapshots: Vec<&Value> = entries.iter().filter(|e| e["type"] == "snapshot").collect();
        Ok(snapshots.len() >= 2 && snapshots.iter().all(|e| e["snapshotStatus"] == "complete"))
    })
    .await
}

/// Items and objects of one log, counted on the emulator by scanning every table and listing the
/// bucket.
#[derive(Debug, Default, PartialEq, Eq)]
struct Holdings {
    entries: usize,
    segments: usize,
    pending: usize,
    /// Client range and group items (not the metadata item).
    clients: usize,
    /// The metadata item (creator, tombstone).
    meta: usize,
    payloads: usize,
    snapshots: usize,
    /// Dedupe elements of the log's idempotency keys (two per key).
    dedupe: usize,
}

fn starts_with_log(v: Option<&AttributeValue>, log: &[u8]) -> bool {
    matches!(v, Some(AttributeValue::B(b)) if b.as_ref().starts_with(log))
}

async fn scan_all(
    stack: &TestStack,
    table: &str,
) -> anyhow::Result<Vec<std::collections::HashMap<String, AttributeValue>>> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let out = stack
            .dynamo
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start)
            .send()
            .await?;
        items.extend(out.items.unwrap_or_default());
        start = out.last_evaluated_key;
        if start.is_none() {
            return Ok(items);
        }
    }
}

async fn count_objects(stack: &TestStack, prefix: &str) -> anyhow::Result<usize> {
    let out = stack
        .s3
        .list_objects_v2()
        .bucket(&stack.resources.bucket)
        .prefix(prefix)
        .send()
        .await?;
    Ok(out.contents.unwrap_or_default().len())
}

/// The Dedupe table's items as prefix → every element of every month column.
async fn dedupe_items(stack: &TestStack) -> anyhow::Result<Vec<(Vec<u8>, Vec<Vec<u8>>)>> {
    let table = stack.resources.dedupe_table.as_deref().unwrap_or_default();
    Ok(scan_all(stack, table)
        .await?
        .into_iter()
        .map(|item| {
            let prefix = match item.get("p") {
                Some(AttributeValue::B(b)) => b.as_ref().to_vec(),
                _ => Vec::new(),
            };
            let elements = item
                .values()
                .filter_map(|v| match v {
                    AttributeValue::Bs(set) => Some(set.iter().map(|b| b.as_ref().to_vec())),
                    _ => None,
                })
                .flatten()
                .collect();
            (prefix, elements)
        })
        .collect())
}

/// Elements of the given keys in the Dedupe table: in the key's item, starting with its suffix.
async fn dedupe_elements(stack: &TestStack, keys: &[DedupeKey]) -> anyhow::Result<usize> {
    let items = dedupe_items(stack).await?;
    Ok(keys
        .iter()
        .map(|k| {
            items
                .iter()
                .filter(|(p, _)| *p == k.prefix)
                .flat_map(|(_, els)| els)
                .filter(|e| e.starts_with(&k.suffix))
                .count()
        })
        .sum())
}

/// A key of `log` that lands in the same Dedupe item as `other` (found by trying names).
fn key_sharing_an_item(log: &str, other: &DedupeKey) -> anyhow::Result<String> {
    for i in 0..50_000_000u64 {
        let key = format!("share-{i}");
        if dedupe_key(log, KeyKind::Request, &key)?.prefix == other.prefix {
            return Ok(key);
        }
    }
    anyhow::bail!("no key shares the item")
}

async fn holdings(stack: &TestStack, log: &str, keys: &[DedupeKey]) -> anyhow::Result<Holdings> {
    let id = uuid::Uuid::parse_str(log)?;
    let bytes = id.as_bytes();
    let r = &stack.resources;
    let count = |items: Vec<std::collections::HashMap<String, AttributeValue>>, key: &str| {
        items
            .iter()
            .filter(|i| starts_with_log(i.get(key), bytes))
            .count()
    };
    let mut meta_key = bytes.to_vec();
    meta_key.push(b'l');
    let clients = scan_all(stack, r.clients_table.as_deref().unwrap_or_default()).await?;
    let meta = clients
        .iter()
        .filter(|i| matches!(i.get("k"), Some(AttributeValue::B(b)) if b.as_ref() == meta_key))
        .count();
    Ok(Holdings {
        entries: count(scan_all(stack, &r.entry_table).await?, "s"),
        segments: count(scan_all(stack, &r.segment_table).await?, "l"),
        pending: count(
            scan_all(stack, r.pending_table.as_deref().unwrap_or_default()).await?,
            "l",
        ),
        clients: count(clients, "k") - meta,
        meta,
        payloads: count_objects(stack, &format!("payloads/{log}/")).await?,
        snapshots: count_objects(stack, &format!("snapshots/{log}/")).await?,
        dedupe: dedupe_elements(stack, keys).await?,
    })
}

/// Sends DELETE until it answers done; returns how many requests it took.
async fn delete_until_done(c: &ApiClient, api: &TestApi, log: &str) -> anyhow::Result<usize> {
    for calls in 1..=100 {
        let r = c.delete(api.url(&format!("/logs/{log}"))).send().await?;
        let status = r.status();
        let v: Value = r.json().await?;
        match status {
            StatusCode::OK => {
                anyhow::ensure!(v["done"] == true, "{v}");
                return Ok(calls);
            }
            StatusCode::ACCEPTED => anyhow::ensure!(v["done"] == false, "{v}"),
            other => anyhow::bail!("DELETE: {other} {v}"),
        }
    }
    anyhow::bail!("the delete never finished")
}

/// Every route of a deleted log, as (method, path, body), and the two that read it from another
/// log's request: a fork of it, and a replay of it onto the live log `other`.
fn routes_of(log: &str, other: &str) -> Vec<(&'static str, String, Option<Value>)> {
    let pull = json!({"pullVersion": 1, "clientGroupID": "g1", "cookie": null,
        "profileID": "p", "schemaVersion": ""});
    let push = json!({"pushVersion": 1, "clientGroupID": "g1", "profileID": "p",
        "schemaVersion": "", "mutations": []});
    vec![
        ("GET", format!("/logs/{log}"), None),
        ("GET", format!("/logs/{log}/entries?from=0"), None),
        (
            "POST",
            format!("/logs/{log}/entries"),
            Some(set_body(&[("A1", json!(1))])),
        ),
        (
            "POST",
            format!("/logs/{log}/uploads"),
            Some(json!({"type": "import", "size": 3})),
        ),
        ("POST", format!("/logs/{log}/uploads/u1/commit"), None),
        ("GET", format!("/logs/{log}/segments"), None),
        ("GET", format!("/logs/{log}/cells?range=A1:B2"), None),
        ("GET", format!("/logs/{log}/extent"), None),
        ("POST", format!("/logs/{log}/replicache/push"), Some(push)),
        ("POST", format!("/logs/{log}/replicache/pull"), Some(pull)),
        ("GET", format!("/logs/{log}/clients/c1"), None),
        ("GET", format!("/logs/{log}/clients/c1/mutations/1"), None),
        (
            "POST",
            format!("/logs/{log}/replay"),
            Some(json!({"source": log, "from": 0})),
        ),
        (
            "POST",
            "/logs".to_owned(),
            Some(json!({"from": {"logId": log, "seq": 0}})),
        ),
        (
            "POST",
            format!("/logs/{other}/replay"),
            Some(json!({"source": log, "from": 0, "to": 1})),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_removes_every_item_and_object_and_the_log_answers_410() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        snapshot_interval: 4,
        ..ApiConfig::default()
    };
    let Some(api) = TestApi::start_with_pipeline("log-delete", cfg).await? else {
        return Ok(()); // the counts need the emulator
    };
    let stack = api
        .stack
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no stack"))?;
    let c = api.client().await?;
    let doomed = create_log(&c, &api).await?;
    let kept = create_log(&c, &api).await?;
    let doomed_keys = fill(&c, &api, &doomed).await?;
    let mut kept_keys = fill(&c, &api, &kept).await?;
    // The kept log also has a key in the Dedupe item of each of the doomed log's keys: a Dedupe
    // item holds keys of many logs, and only the doomed log's may go.
    for (i, k) in doomed_keys.iter().enumerate() {
        let key = key_sharing_an_item(&kept, k)?;
        kept_keys.push(
            append_keyed(
                &c,
                &api,
                &kept,
                &key,
                set_body(&[(format!("F{}", i + 1), json!(i))]),
            )
            .await?,
        );
    }
    snapshots_complete(&c, &api, &kept).await?;
    let shared: Vec<Vec<u8>> = doomed_keys.iter().map(|k| k.prefix.clone()).collect();
    // The queued push's range item waits for its window; a direct push writes one (and its
    // group's item) at once, beside the index mark the queued push's writer set.
    let doomed_id: LogId = doomed.parse()?;
    stack
        .log()?
        .push_run(
            doomed_id,
            "g2",
            "c2",
            &[pushed_set(1, &[("Z1", json!(1))])],
            None,
            sheetlog_core::log::RunSource::Push,
        )
        .await?;

    // A snapshot still pending when the delete comes (a worker mid-build): its item goes too.
    {
        use sheetlog_core::ports::PendingSnapshots;
        let pending = sheetlog_core::aws::DynamoPendingStore::new(
            stack.dynamo.clone(),
            stack.resources.require_pending_table()?,
        );
        let key = sheetlog_core::domain::PendingKey::new(doomed_id, 0, 1_000_000);
        pending
            .create(key, sheetlog_core::domain::now_secs())
            .await?;
    }

    let before = holdings(stack, &doomed, &doomed_keys).await?;
    // Everything the sheet owns is there to be deleted: range, group and index mark items too.
    assert!(before.entries >= 10, "{before:?}");
    assert!(before.segments >= 1 && before.clients >= 4, "{before:?}");
    assert!(before.payloads >= 2 && before.snapshots >= 1, "{before:?}");
    assert!(before.pending >= 1, "{before:?}");
    assert_eq!(before.dedupe, 2 * doomed_keys.len(), "{before:?}");
    let kept_before = holdings(stack, &kept, &kept_keys).await?;
    assert_eq!(kept_before.dedupe, 2 * kept_keys.len(), "{kept_before:?}");

    delete_until_done(&c, &api, &doomed).await?;
    let after = holdings(stack, &doomed, &doomed_keys).await?;
    assert_eq!(
        after,
        Holdings {
            meta: 1, // the tombstone
            ..Holdings::default()
        }
    );
    assert_eq!(
        holdings(stack, &kept, &kept_keys).await?,
        kept_before,
        "the other log changed"
    );
    // The shared Dedupe items are still there, holding only the kept log's elements.
    let items = dedupe_items(stack).await?;
    for prefix in &shared {
        let (_, elements) = items
            .iter()
            .find(|(p, _)| p == prefix)
            .ok_or_else(|| anyhow::anyhow!("a shared Dedupe item was deleted"))?;
        assert!(!elements.is_empty());
    }

    for (method, path, body) in routes_of(&doomed, &kept) {
        let mut req = c.request(
            reqwest::Method::from_bytes(method.as_bytes())?,
            api.url(&path),
        );
        if let Some(body) = body {
            req = req.json(&body);
        }
        let r = req.send().await?;
        let status = r.status();
        let v: Value = r.json().await?;
        assert_eq!(status, StatusCode::GONE, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], "log-deleted", "{method} {path}: {v}");
    }
    // Nothing those requests did wrote anything, and deleting again is the same success.
    assert_eq!(delete_until_done(&c, &api, &doomed).await?, 1);
    assert_eq!(
        holdings(stack, &doomed, &doomed_keys).await?,
        Holdings {
            meta: 1,
            ..Holdings::default()
        }
    );
    // The kept log still works.
    append(&c, &api, &kept, set_body(&[("Z9", json!(1))])).await?;
    // A log that never existed is 404, and gets no tombstone.
    let unknown = uuid::Uuid::new_v4().to_string();
    let r = c
        .delete(api.url(&format!("/logs/{unknown}")))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(holdings(stack, &unknown, &[]).await?, Holdings::default());
    Ok(())
}

/// A delete that runs out of time answers 202 with the tombstone written; repeating it finishes.
#[tokio::test]
async fn a_delete_cut_short_answers_202_and_repeating_it_finishes() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        delete_budget: Duration::ZERO,
        ..ApiConfig::default()
    };
    let api = TestApi::start_with("log-delete-resume", cfg).await?;
    let Some(stack) = api.stack.as_ref() else {
        return Ok(());
    };
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    // Every other append carries an idempotency key.
    let mut keys = Vec::new();
    for i in 0..230 {
        if i % 2 == 0 {
            keys.push(
                append_keyed(
                    &c,
                    &api,
                    &log,
                    &format!("k{i}"),
                    set_body(&[("A1", json!(i))]),
                )
                .await?,
            );
        } else {
            append(&c, &api, &log, set_body(&[("A1", json!(i))])).await?;
        }
    }
    assert_eq!(dedupe_elements(stack, &keys).await?, 2 * keys.len());
    let r = c.delete(api.url(&format!("/logs/{log}"))).send().await?;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let v: Value = r.json().await?;
    assert_eq!(v["done"], false, "{v}");
    assert_eq!(v["items"], 100, "{v}");
    // Cut off here: the log is already gone for every reader and writer.
    let r = c.get(api.url(&format!("/logs/{log}"))).send().await?;
    assert_eq!(r.status(), StatusCode::GONE);
    let cut = holdings(stack, &log, &keys).await?;
    assert!(cut.entries > 0, "nothing left to resume");
    // The first page's keys went with its entries (seq 0 is the log's first snapshot, then keyed
    // appends at odd seqs 1, 3, ... 99); the rest wait for their entries.
    assert_eq!(cut.dedupe, 2 * (keys.len() - 50), "{cut:?}");
    let calls = delete_until_done(&c, &api, &log).await?;
    assert!(calls >= 2, "{calls}");
    // Items that held only this log's keys are gone, not left holding just their prefix.
    let prefixes: Vec<&Vec<u8>> = keys.iter().map(|k| &k.prefix).collect();
    let left: Vec<_> = dedupe_items(stack)
        .await?
        .into_iter()
        .filter(|(p, _)| prefixes.contains(&p))
        .collect();
    assert_eq!(left, Vec::new(), "Dedupe items left");
    assert_eq!(
        holdings(stack, &log, &keys).await?,
        Holdings {
            meta: 1,
            ..Holdings::default()
        }
    );
    Ok(())
}

/// Under JWT authorization, the log's creator or the `*` grant may delete it; a writer who did
/// not create it, or a reader, gets 403 and the log stays.
#[tokio::test]
async fn only_the_creator_or_a_wildcard_grant_may_delete() -> anyhow::Result<()> {
    const CLAIM: &str = "sheetlog_logs";
    let cfg = ApiConfig {
        access_claim: Some(CLAIM.into()),
        ..ApiConfig::default()
    };
    let Some(api) = TestApi::start_with_jwt_claims("log-delete-access", cfg).await? else {
        return Ok(());
    };
    let http = reqwest::Client::new();
    let send = |method: reqwest::Method, path: String, sub: &str, grants: &str| {
        http.request(method, api.url(&path))
            .header(
                JWT_CLAIMS_HEADER,
                json!({"sub": sub, CLAIM: grants}).to_string(),
            )
            .send()
    };
    let create = |sub: &'static str| {
        let send = &send;
        async move {
            let r = send(reqwest::Method::POST, "/logs".into(), sub, "create").await?;
            anyhow::ensure!(r.status() == StatusCode::CREATED, "{}", r.status());
            Ok::<_, anyhow::Error>(json_str(&r.json::<Value>().await?, "/logId").to_owned())
        }
    };
    let delete = |log: &str, sub: &str, grants: &str| {
        send(reqwest::Method::DELETE, format!("/logs/{log}"), sub, grants)
    };

    let alices = create("alice").await?;
    // Bob may write Alice's log but did not create it; a reader may not either.
    for (sub, grants) in [
        ("bob", alices.clone()),
        ("bob", format!("{alices}:read")),
        ("alice", format!("{alices}:read")),
        ("bob", "*:read".to_owned()),
    ] {
        let r = delete(&alices, sub, &grants).await?;
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{sub} {grants}");
        let v: Value = r.json().await?;
        assert_eq!(v["error"]["code"], "forbidden", "{v}");
        let r = send(
            reqwest::Method::GET,
            format!("/logs/{alices}"),
            "alice",
            &alices,
        )
        .await?;
        assert_eq!(r.status(), StatusCode::OK, "a refused delete deleted");
    }
    // Alice, with her write grant, may.
    let r = delete(&alices, "alice", &alices).await?;
    assert_eq!(r.status(), StatusCode::OK);
    let r = send(
        reqwest::Method::GET,
        format!("/logs/{alices}"),
        "alice",
        &alices,
    )
    .await?;
    assert_eq!(r.status(), StatusCode::GONE);

    // A service token with `*` may delete anyone's log.
    let bobs = create("bob").await?;
    let r = delete(&bobs, "service", "*").await?;
    assert_eq!(r.status(), StatusCode::OK);
    let r = send(reqwest::Method::GET, format!("/logs/{bobs}"), "bob", &bobs).await?;
    assert_eq!(r.status(), StatusCode::GONE);
    Ok(())
}

/// A fork that fails after writing its first snapshot (here: creating its log is throttled past
/// the SDK's retries) leaves no objects behind; the same fork that succeeds keeps them.
#[tokio::test]
async fn a_failed_fork_removes_what_it_wrote() -> anyhow::Result<()> {
    let switches = sheetlog_core::faults::Faults::scripted();
    let Some(api) =
        TestApi::start_with_faults("fork-fail", ApiConfig::default(), switches.clone()).await?
    else {
        return Ok(());
    };
    let Some(stack) = api.stack() else {
        return Ok(());
    };
    let c = api.client().await?;
    let source = create_log(&c, &api).await?;
    for i in 1..=5 {
        append(&c, &api, &source, set_body(&[(format!("A{i}"), json!(i))])).await?;
    }
    assert_eq!(count_objects(stack, "snapshots/").await?, 0);
    let fork = json!({"from": {"logId": source, "seq": 6}});
    switches
        .script
        .fail_create_log
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let r = c.post(api.url("/logs")).json(&fork).send().await?;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        count_objects(stack, "snapshots/").await?,
        0,
        "the failed fork left objects"
    );
    switches
        .script
        .fail_create_log
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let r = c.post(api.url("/logs")).json(&fork).send().await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let v: Value = r.json().await?;
    let forked = json_str(&v, "/logId");
    assert!(count_objects(stack, &format!("snapshots/{forked}/")).await? > 0);
    Ok(())
}

/// A direct push of one mutation by client `c1` of group `g1` (range, group and mark items).
async fn push_one(stack: &TestStack, log: &str) -> anyhow::Result<()> {
    stack
        .log()?
        .push_run(
            log.parse()?,
            "g1",
            "c1",
            &[pushed_set(1, &[("A1", json!(1))])],
            None,
            sheetlog_core::log::RunSource::Push,
        )
        .await?;
    Ok(())
}

/// Issue 41: a delete read every customer's sync clients (a Scan of the whole Clients table, at
/// least twice per delete). Two sheets alike, one deleted with no other clients in the table and
/// one after 3,000 other sheets' clients were added: both deletes read the same units of the
/// Clients table, counted on the wire, and the other sheets' clients are all still there. A
/// delete repeated once nothing is left is a handful of requests, whatever the table holds.
#[tokio::test]
async fn a_delete_reads_only_the_deleted_sheets_clients() -> anyhow::Result<()> {
    let Some((api, wire)) = TestApi::start_counted("log-delete-cost", ApiConfig::default()).await?
    else {
        return Ok(());
    };
    let stack = api
        .stack
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no stack"))?;
    let table = stack.resources.require_clients_table()?.to_owned();
    let c = api.client().await?;
    let alone = create_log(&c, &api).await?;
    let among_others = create_log(&c, &api).await?;
    for log in [&alone, &among_others] {
        push_one(stack, log).await?;
    }
    let clients_read = |log: String| {
        let (c, api, wire, table) = (&c, &api, &wire, &table);
        async move {
            let before = wire.counts.read_units_of(table);
            delete_until_done(c, api, &log).await?;
            Ok::<_, anyhow::Error>(wire.counts.read_units_of(table) - before)
        }
    };
    let base = clients_read(alone.clone()).await?;
    sheetlog_tests::stack::put_other_sheets_clients(&stack.dynamo, &table, 3_000).await?;
    let with_others = clients_read(among_others.clone()).await?;
    assert_eq!(
        with_others,
        base,
        "the delete read other sheets' clients: {}",
        wire.counts.ops_summary()
    );
    let items = scan_all(stack, &table).await?;
    let of = |log: &str| -> anyhow::Result<usize> {
        let id: LogId = log.parse()?;
        Ok(items
            .iter()
            .filter(|i| starts_with_log(i.get("k"), id.as_bytes()))
            .count())
    };
    // Each deleted sheet keeps its tombstone only; the others' 6,000 items are all there.
    assert_eq!((of(&alone)?, of(&among_others)?), (1, 1));
    assert_eq!(items.len(), 6_000 + 2);

    // Nothing left: a repeat is a fixed handful of requests (tombstone, three Queries, four
    // listings), not a walk of the table.
    let before = wire.counts.requests();
    assert_eq!(delete_until_done(&c, &api, &among_others).await?, 1);
    let requests = wire.counts.requests() - before;
    assert!(
        requests <= 10,
        "{requests} requests: {}",
        wire.counts.ops_summary()
    );
    Ok(())
}

/// The delete budget bounds the client purge too: a sheet with 250 sync clients, deleted with
/// no time to spare, goes a page of at most 100 items per request (it went all at once, however
/// many, and the Scan behind it read the whole table).
#[tokio::test]
async fn a_delete_of_many_clients_goes_a_page_per_request() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        delete_budget: Duration::ZERO,
        ..ApiConfig::default()
    };
    let api = TestApi::start_with("log-delete-clients", cfg).await?;
    let Some(stack) = api.stack.as_ref() else {
        return Ok(());
    };
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let id: LogId = log.parse()?;
    let store = stack.log()?;
    let ranges: Vec<_> = (0..250)
        .map(|i| sheetlog_core::domain::clients::ClientRange {
            group: format!("g{i}"),
            client: format!("c{i}"),
            key: 1,
            first: 1,
            last: 1,
            seq: 1,
            rejected: Vec::new(),
            runs: Vec::new(),
        })
        .collect();
    let mut units = sheetlog_core::domain::RequestUnits::default();
    sheetlog_core::ports::ClientRuns::put_deferred_ranges(store.store(), id, &ranges, &mut units)
        .await?;
    let table = stack.resources.require_clients_table()?.to_owned();
    let count = || async {
        let items = scan_all(stack, &table).await?;
        Ok::<_, anyhow::Error>(
            items
                .iter()
                .filter(|i| starts_with_log(i.get("k"), id.as_bytes()))
                .count(),
        )
    };
    assert_eq!(count().await?, 250);
    let mut calls = 0;
    loop {
        calls += 1;
        anyhow::ensure!(calls < 20, "the delete never finished");
        let r = c.delete(api.url(&format!("/logs/{log}"))).send().await?;
        let status = r.status();
        let v: Value = r.json().await?;
        assert!(
            v["items"].as_u64().is_some_and(|n| n <= 100),
            "one request deleted more than a page: {v}"
        );
        if status == StatusCode::OK {
            break;
        }
        assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    }
    assert!(calls >= 3, "250 clients in {calls} requests");
    // The tombstone only.
    assert_eq!(count().await?, 1);
    Ok(())
}

/// Deletes are rate limited per caller: past `deletes_per_minute`, `429 rate-limited` with
/// `Retry-After` and the JSON error body; another caller is not held up.
#[tokio::test]
async fn deletes_past_the_limit_answer_429_with_retry_after() -> anyhow::Result<()> {
    let cfg = ApiConfig {
        deletes_per_minute: 2,
        ..ApiConfig::default()
    };
    let Some(api) = TestApi::start_with_jwt_claims("log-delete-rate", cfg).await? else {
        return Ok(());
    };
    let http = reqwest::Client::new();
    let delete = |sub: &str| {
        http.delete(api.url(&format!("/logs/{}", uuid::Uuid::new_v4())))
            .header(JWT_CLAIMS_HEADER, json!({"sub": sub}).to_string())
            .send()
    };
    // Five in a row: at most two a minute pass (four if a minute turns in between).
    let mut limited = None;
    let mut passed = 0;
    for _ in 0..5 {
        let r = delete("mallory").await?;
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(r);
            break;
        }
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        passed += 1;
    }
    let r = limited.ok_or_else(|| anyhow::anyhow!("five deletes, none limited"))?;
    assert!(passed >= 2, "limited after {passed}");
    let retry: u64 = r
        .headers()
        .get("retry-after")
        .ok_or_else(|| anyhow::anyhow!("no Retry-After"))?
        .to_str()?
        .parse()?;
    assert!((1..=60).contains(&retry), "Retry-After: {retry}");
    let v: Value = r.json().await?;
    assert_eq!(v["error"]["code"], "rate-limited", "{v}");
    assert_eq!(v["error"]["limit"], 2, "{v}");
    // Someone else deletes as usual.
    assert_eq!(delete("alice").await?.status(), StatusCode::NOT_FOUND);
    Ok(())
}
