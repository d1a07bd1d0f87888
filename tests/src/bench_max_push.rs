//! The push limits' worst case for `./scripts/bench log` (`docs/sync.md`, "Push limits"): a
//! maximal push (at `MAX_PUSH_MUTATIONS`, one client, every mutation a one-cell `set` with a
//! `baseSeq` that 100 row inserts by others have moved since) queued through the HTTP API and
//! applied by the sync writer on the local stack, and the wait of another editor who pushes one
//! mutation to the same sheet right after it.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use reqwest::StatusCode;
use serde::Serialize;
use serde_json::{Value, json};
use sheetlog_core::sync_queue::MAX_PUSH_MUTATIONS;

use crate::api::{ApiClient, ApiConfig, TestApi, json_str};
use crate::fixtures::{push_body, set_body};

/// Row inserts committed between the push's base and the push (what each mutation is rebased
/// through).
const INSERTS_SINCE_BASE: u64 = 100;

#[derive(Debug, Default, Serialize)]
pub struct MaxPushBench {
    /// Mutations in the maximal push (the limit).
    pub max_push_mutations: usize,
    /// From the API's answer to the maximal push until its last mutation is applied.
    pub max_push_apply_ms: f64,
    /// From another editor's one-mutation push, sent right after the maximal one, until it is
    /// applied (on the same sheet, so behind the maximal push in the sheet's FIFO group).
    pub max_push_other_editor_wait_ms: f64,
}

async fn last_id(c: &ApiClient, api: &TestApi, log: &str, client: &str) -> anyhow::Result<u64> {
    let r = c
        .get(api.url(&format!("/logs/{log}/clients/{client}")))
        .send()
        .await?;
    if r.status() != StatusCode::OK {
        return Ok(0);
    }
    Ok(r.json::<Value>().await?["lastMutationId"]
        .as_u64()
        .unwrap_or(0))
}

/// Polls until `client` reaches `last`; the time it took since `from`.
async fn until_applied(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    client: &str,
    last: u64,
    from: Instant,
) -> anyhow::Result<f64> {
    let deadline = from + Duration::from_secs(300);
    loop {
        if last_id(c, api, log, client).await? >= last {
            return Ok(from.elapsed().as_secs_f64() * 1e3);
        }
        ensure!(Instant::now() < deadline, "{client} did not reach {last}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn run() -> anyhow::Result<MaxPushBench> {
    eprintln!("a maximal push through the queue and the sync writer…");
    let api = TestApi::start_with_pipeline("bench-max-push", ApiConfig::default())
        .await?
        .context("the max-push bench needs the local stack")?;
    let c = api.client().await?;
    let r = c.post(api.url("/logs")).send().await?;
    ensure!(r.status() == StatusCode::CREATED, "create: {}", r.status());
    let log = json_str(&r.json::<Value>().await?, "/logId").to_owned();
    let entries = api.url(&format!("/logs/{log}/entries"));
    let r = c
        .post(&entries)
        .json(&set_body(&[("A1", json!("top"))]))
        .send()
        .await?;
    ensure!(r.status() == StatusCode::CREATED, "set: {}", r.status());
    let base = r.json::<Value>().await?["nextSeq"]
        .as_u64()
        .unwrap_or_default();
    for _ in 0..INSERTS_SINCE_BASE {
        let r = c
            .post(&entries)
            .json(&json!({"type": "insert-rows", "body": {"at": 1, "count": 1}}))
            .send()
            .await?;
        ensure!(r.status() == StatusCode::CREATED, "insert: {}", r.status());
    }
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let n = MAX_PUSH_MUTATIONS as u64;
    let big: Vec<Value> = (1..=n)
        .map(|id| {
            json!({"clientID": "big", "id": id, "name": "set",
                   "args": {"cells": [{"ref": format!("B{}", 1 + id % 1000), "value": id}],
                            "baseSeq": base}})
        })
        .collect();
    let r = c
        .post(&push)
        .json(&push_body("gbig", json!(big)))
        .send()
        .await?;
    ensure!(r.status() == StatusCode::OK, "big push: {}", r.status());
    let accepted = Instant::now();
    let small = json!([{"clientID": "other", "id": 1, "name": "set",
                        "args": {"cells": [{"ref": "C1", "value": 1}], "baseSeq": base}}]);
    let sent = Instant::now();
    let r = c
        .post(&push)
        .json(&push_body("gother", small))
        .send()
        .await?;
    ensure!(r.status() == StatusCode::OK, "small push: {}", r.status());
    let (apply, wait) = tokio::join!(
        until_applied(&c, &api, &log, "big", n, accepted),
        until_applied(&c, &api, &log, "other", 1, sent)
    );
    Ok(MaxPushBench {
        max_push_mutations: MAX_PUSH_MUTATIONS,
        max_push_apply_ms: (apply? * 10.0).round() / 10.0,
        max_push_other_editor_wait_ms: (wait? * 10.0).round() / 10.0,
    })
}
