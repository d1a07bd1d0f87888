//! Idempotency keys on the emulator: the Dedupe table's transaction with the entry put, its month
//! columns read back raw over the wire, and the `Idempotency-Key` header through the API.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use aws_sdk_dynamodb::types::AttributeValue;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_core::LogError;
use sheetlog_core::domain::dedupe::{DedupeKey, SUFFIX_BYTES, column_name, month_index};
use sheetlog_core::log::{AppendOnce, AppendOptions, Clock, IdempotencyKey};
use sheetlog_tests::TestStack;
use sheetlog_tests::api::new_log as create_log;
use sheetlog_tests::api::{ApiClient, TestApi, json_str};
use sheetlog_tests::fixtures::{raw_set_entry, set_body};

/// Unix seconds of `secs` past midnight UTC on a date.
fn at(y: i32, m: u8, d: u8, secs: i64) -> anyhow::Result<i64> {
    let date = time::Date::from_calendar_date(y, time::Month::try_from(m)?, d)?;
    Ok(date.midnight().assume_utc().unix_timestamp() + secs)
}

/// The Dedupe item of a key as DynamoDB holds it: month column → binary set elements.
async fn raw_item(
    stack: &TestStack,
    key: &DedupeKey,
) -> anyhow::Result<std::collections::BTreeMap<String, Vec<Vec<u8>>>> {
    let table = stack
        .resources
        .dedupe_table
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("no Dedupe table"))?;
    let out = stack
        .dynamo
        .get_item()
        .table_name(table)
        .key("p", AttributeValue::B(key.prefix.clone().into()))
        .consistent_read(true)
        .send()
        .await?;
    let mut columns = std::collections::BTreeMap::new();
    for (name, value) in out.item.unwrap_or_default() {
        if name == "p" {
            continue;
        }
        let AttributeValue::Bs(set) = value else {
            anyhow::bail!("column {name} is not a binary set: {value:?}");
        };
        columns.insert(name, set.into_iter().map(|b| b.into_inner()).collect());
    }
    Ok(columns)
}

#[tokio::test]
async fn a_retried_key_appends_once_through_one_transaction() -> anyhow::Result<()> {
    let stack = TestStack::new("dedupe-retry").await?;
    let log = stack.log()?;
    let id = log.create().await?.log;
    let key = IdempotencyKey::request("order-1");
    let first = log
        .append_once(id, raw_set_entry(b"7"), AppendOptions::default(), &key)
        .await?;
    let AppendOnce::Appended(a) = &first else {
        anyhow::bail!("first append was {first:?}");
    };
    // The emulator charges what DynamoDB would: two items of one transaction, 2 WRU each.
    assert_eq!(a.units.write, 4.0);

    for _ in 0..3 {
        let again = log
            .append_once(id, raw_set_entry(b"7"), AppendOptions::default(), &key)
            .await?;
        assert!(
            matches!(again, AppendOnce::Duplicate { seq, .. } if seq == a.seq),
            "{again:?}"
        );
    }
    match log
        .append_once(id, raw_set_entry(b"8"), AppendOptions::default(), &key)
        .await
    {
        Err(LogError::KeyReused { seq }) => assert_eq!(seq, a.seq),
        other => anyhow::bail!("expected KeyReused, got {other:?}"),
    }
    // Per log: the same key elsewhere is a new key.
    let other = log.create().await?.log;
    let there = log
        .append_once(other, raw_set_entry(b"7"), AppendOptions::default(), &key)
        .await?;
    assert!(matches!(there, AppendOnce::Appended(_)), "{there:?}");
    assert_eq!(log.read_since(id, 0, 10).await?.entries.len(), 2);

    // The item holds this month's column with the bare suffix and the suffix with the request's
    // fingerprint and seq: two elements for one key.
    let dk = DedupeKey::new(log.config().dedupe_prefix_bits, id, key.kind, &key.key);
    let item = raw_item(&stack, &dk).await?;
    let this_month = column_name(month_index(
        time::OffsetDateTime::now_utc().unix_timestamp(),
    ));
    let set = item
        .get(&this_month)
        .ok_or_else(|| anyhow::anyhow!("no column {this_month} in {item:?}"))?;
    let ours: Vec<_> = set
        .iter()
        .filter(|e| e[..SUFFIX_BYTES] == dk.suffix[..])
        .collect();
    assert_eq!(ours.len(), 2, "{set:?}");
    Ok(())
}

/// The window on the real wire protocol: a key from the last second of January is still a
/// duplicate on 2 March and forgotten on 3 March, and the write that records it again leaves no
/// January column in the item (REMOVE in the same conditional update, no TTL, no job).
#[tokio::test]
async fn keys_age_out_with_their_month_column() -> anyhow::Result<()> {
    let stack = TestStack::new("dedupe-months").await?;
    let now = Arc::new(AtomicI64::new(at(2026, 1, 31, 86_399)?));
    let log = stack.log()?.with_clock(Clock::new({
        let now = now.clone();
        move || now.load(Ordering::SeqCst)
    }));
    let id = log.create().await?.log;
    let key = IdempotencyKey::request("late-january");
    let dk = DedupeKey::new(log.config().dedupe_prefix_bits, id, key.kind, &key.key);
    let append = || log.append_once(id, raw_set_entry(b"x"), AppendOptions::default(), &key);
    let first = append().await?;
    assert!(
        matches!(first, AppendOnce::Appended(ref a) if a.seq == 1),
        "{first:?}"
    );
    let jan = column_name(month_index(now.load(Ordering::SeqCst)));
    assert_eq!(
        raw_item(&stack, &dk).await?.keys().collect::<Vec<_>>(),
        [&jan]
    );

    // 30 days later, still known.
    for (m, d, s) in [(2, 1, 0), (2, 28, 86_399), (3, 2, 86_399)] {
        now.store(at(2026, m, d, s)?, Ordering::SeqCst);
        let again = append().await?;
        assert!(
            matches!(again, AppendOnce::Duplicate { seq: 1, .. }),
            "{m}/{d}: {again:?}"
        );
    }
    // 3 March: January is no longer checked, so the key is new again, and its column is removed.
    now.store(at(2026, 3, 3, 0)?, Ordering::SeqCst);
    let fresh = append().await?;
    assert!(
        matches!(fresh, AppendOnce::Appended(ref a) if a.seq == 2),
        "{fresh:?}"
    );
    let mar = column_name(month_index(now.load(Ordering::SeqCst)));
    let item = raw_item(&stack, &dk).await?;
    assert_eq!(
        item.keys().collect::<Vec<_>>(),
        [&mar],
        "January's column is gone from the item"
    );
    Ok(())
}

/// A lost transaction response (the write happened, the answer did not arrive) is retried by the
/// adapter as the SDK would; the log recognises its own entry and answers Appended, not a
/// duplicate, and nothing is appended twice.
#[tokio::test]
async fn a_lost_transaction_response_is_our_own_write_on_the_emulator() -> anyhow::Result<()> {
    let stack = TestStack::new("dedupe-lossy").await?;
    let log = stack.lossy_log(5)?;
    let id = log.create().await?.log;
    for i in 1..=5u64 {
        let key = IdempotencyKey::request(format!("lossy-{i}"));
        let out = log
            .append_once(id, raw_set_entry(b"x"), AppendOptions::default(), &key)
            .await?;
        assert!(
            matches!(out, AppendOnce::Appended(ref a) if a.seq == i),
            "{out:?}"
        );
    }
    assert_eq!(log.read_since(id, 0, 100).await?.entries.len(), 6);
    Ok(())
}

async fn post_entry(
    c: &ApiClient,
    url: &str,
    key: Option<&str>,
    entry: &Value,
) -> anyhow::Result<(StatusCode, bool, Value)> {
    let mut req = c.post(url).json(entry);
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let r = req.send().await?;
    let status = r.status();
    let replayed = r
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v.as_bytes() == b"true");
    Ok((status, replayed, r.json().await?))
}

async fn entry_count(c: &ApiClient, api: &TestApi, log: &str) -> anyhow::Result<usize> {
    let v: Value = c
        .get(api.url(&format!("/logs/{log}/entries?from=0&limit=1000")))
        .send()
        .await?
        .json()
        .await?;
    Ok(v["entries"].as_array().map_or(0, Vec::len))
}

#[tokio::test]
async fn the_idempotency_key_header_replays_refuses_and_validates() -> anyhow::Result<()> {
    let api = TestApi::start("dedupe-api").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let url = api.url(&format!("/logs/{log}/entries"));
    let entry = set_body(&[("A1", json!(7))]);

    let (s, replayed, first) = post_entry(&c, &url, Some("key-1"), &entry).await?;
    assert_eq!((s, replayed), (StatusCode::CREATED, false), "{first}");
    let (s, replayed, again) = post_entry(&c, &url, Some("key-1"), &entry).await?;
    assert_eq!((s, replayed), (StatusCode::CREATED, true), "{again}");
    for field in ["seq", "segment", "entry"] {
        assert_eq!(again[field], first[field], "{field}");
    }
    // Same key, different request: 409 naming the sequence the key made.
    let other = set_body(&[("A1", json!(8))]);
    let (s, _, err) = post_entry(&c, &url, Some("key-1"), &other).await?;
    assert_eq!(s, StatusCode::CONFLICT, "{err}");
    assert_eq!(err["error"]["code"], "idempotency-key-reused");
    assert_eq!(err["error"]["seq"], first["seq"]);
    // Without a key, the same body appends again, as it always did.
    let (s, _, plain) = post_entry(&c, &url, None, &entry).await?;
    assert_eq!(s, StatusCode::CREATED);
    assert_ne!(plain["seq"], first["seq"]);
    assert_eq!(entry_count(&c, &api, &log).await?, 3);

    // Bad keys are 400s that write nothing.
    let long = "k".repeat(256);
    for bad in ["", long.as_str(), "tab\there", "caf\u{e9}"] {
        let r = c
            .post(&url)
            .header("Idempotency-Key", bad.as_bytes())
            .json(&entry)
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "key {bad:?}");
        let v: Value = r.json().await?;
        assert_eq!(v["error"]["code"], "invalid-header", "{v}");
    }
    let r = c
        .post(&url)
        .header("Idempotency-Key", "a")
        .header("Idempotency-Key", "b")
        .json(&entry)
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // 255 printable characters, spaces included, are fine.
    let longest = format!("{} {}", "x".repeat(127), "y".repeat(127));
    let (s, replayed, _) = post_entry(&c, &url, Some(&longest), &entry).await?;
    assert_eq!((s, replayed), (StatusCode::CREATED, false));
    assert_eq!(entry_count(&c, &api, &log).await?, 4);
    Ok(())
}

/// 32 clients send one request with one key at the same moment: one entry, one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_with_one_key_make_one_entry() -> anyhow::Result<()> {
    let api = TestApi::start("dedupe-race").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let url = api.url(&format!("/logs/{log}/entries"));
    let entry = set_body(&[("B2", json!("once"))]);
    let start = Arc::new(tokio::sync::Barrier::new(32));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (c, url, entry, start) = (
            api.client().await?,
            url.clone(),
            entry.clone(),
            start.clone(),
        );
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            post_entry(&c, &url, Some("same-key"), &entry).await
        }));
    }
    let mut seqs = std::collections::BTreeSet::new();
    let mut fresh = 0;
    for t in tasks {
        let (status, replayed, v) = t.await??;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        fresh += usize::from(!replayed);
        seqs.insert(v["seq"].as_u64());
    }
    assert_eq!(seqs.len(), 1, "every answer names the same seq: {seqs:?}");
    assert_eq!(fresh, 1, "exactly one answer is not a replay");
    assert_eq!(entry_count(&c, &api, &log).await?, 2, "entry 0 and one set");
    Ok(())
}

/// Two commits of one upload at the same instant make one entry (the upload id is the key).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commits_of_one_upload_make_one_entry() -> anyhow::Result<()> {
    let api = TestApi::start("dedupe-commit").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let u = sheetlog_tests::api::upload_file(
        &c,
        &api,
        &log,
        json!({"type": "import", "contentType": "text/csv"}),
        b"a,b\n1,2\n3,4\n",
    )
    .await?;
    let commit = api.url(&format!(
        "/logs/{log}/uploads/{}/commit",
        json_str(&u, "/uploadId")
    ));
    let start = Arc::new(tokio::sync::Barrier::new(8));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (c, commit, start) = (api.client().await?, commit.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let r = c.post(&commit).send().await?;
            let status = r.status();
            let v: Value = r.json().await?;
            anyhow::Ok((status, v))
        }));
    }
    let mut seqs = std::collections::BTreeSet::new();
    for t in tasks {
        let (status, v) = t.await??;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        seqs.insert(v["seq"].as_u64());
    }
    assert_eq!(seqs.len(), 1, "{seqs:?}");
    assert_eq!(
        entry_count(&c, &api, &log).await?,
        2,
        "entry 0 and one import"
    );
    Ok(())
}
