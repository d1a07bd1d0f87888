//! Queued pushes on the emulator (`docs/sync.md`, "Queued pushes"): the API enqueues on the sync
//! FIFO queue, the sync writer applies each sheet's pushes with a group commit. Many clients on one
//! sheet, redelivery after the writer died before deleting its batch, a poison message, the
//! deduplication id.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_core::aws::SqsPushQueue;
use sheetlog_core::config::LogConfig;
use sheetlog_core::ports::PushQueue;
use sheetlog_core::sync_queue::{QueuedMutation, QueuedPush};
use sheetlog_pipeline::{SyncDriver, create_local_stack};
use sheetlog_sync_writer::{Handler, MessageOutcome, WriterConfig};
use sheetlog_tests::api::{ApiClient, ApiConfig, TestApi, json_str};
use sheetlog_tests::fixtures::{push_body, set_body, set_mutation};

/// Mutation `id` of `client`: A<id> set to `id`.
fn set_own_row(client: &str, id: u64) -> Value {
    set_mutation(client, id, &format!("A{id}"), json!(id))
}

/// The local stack with its pipeline (pushes queued), a client, and a new log's id; `None`
/// against a deployment.
async fn queued_log(label: &str) -> anyhow::Result<Option<(TestApi, ApiClient, String)>> {
    let Some(api) = TestApi::start_with_pipeline(label, ApiConfig::default()).await? else {
        return Ok(None);
    };
    let c = api.client().await?;
    let r = c.post(api.url("/logs")).send().await?;
    anyhow::ensure!(r.status() == StatusCode::CREATED, "{}", r.status());
    let log = json_str(&r.json::<Value>().await?, "/logId").to_owned();
    Ok(Some((api, c, log)))
}

/// Every client's mutation ids in log order, read back through `GET /entries` (single-client
/// entries and batch entries alike), and how many entries held more than one client.
async fn applied(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
) -> anyhow::Result<(BTreeMap<String, Vec<u64>>, usize)> {
    let v: Value = c
        .get(api.url(&format!("/logs/{log}/entries?from=0")))
        .send()
        .await?
        .json()
        .await?;
    let mut ids: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut batches = 0;
    for e in v["entries"].as_array().into_iter().flatten() {
        if e["type"] != "mutations" {
            continue;
        }
        let runs = match e["body"]["runs"].as_array() {
            Some(runs) => {
                batches += 1;
                runs.clone()
            }
            None => vec![e["body"].clone()],
        };
        for r in runs {
            let client = r["clientID"].as_str().unwrap_or_default().to_owned();
            let (first, last) = (
                r["firstMutationID"].as_u64().unwrap_or(0),
                r["lastMutationID"].as_u64().unwrap_or(0),
            );
            ids.entry(client).or_default().extend(first..=last);
        }
    }
    Ok((ids, batches))
}

#[tokio::test]
async fn sixty_four_clients_pushing_to_one_sheet_all_land_without_a_503() -> anyhow::Result<()> {
    let Some((api, c, log)) = queued_log("sync-queue-hot").await? else {
        return Ok(());
    };
    let api = Arc::new(api);
    const CLIENTS: usize = 64;
    const PER_CLIENT: u64 = 3;
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (api, c, log) = (api.clone(), c.clone(), log.clone());
            tokio::spawn(async move {
                let push = api.url(&format!("/logs/{log}/replicache/push"));
                let mut refusals = Vec::new();
                // Like Replicache: each push carries every pending mutation, oldest first.
                for k in 1..=PER_CLIENT {
                    let muts: Vec<Value> = (1..=k)
                        .map(|id| set_own_row(&format!("c{i}"), id))
                        .collect();
                    let r = c
                        .post(&push)
                        .json(&push_body(&format!("g{i}"), json!(muts)))
                        .send()
                        .await?;
                    if r.status() != StatusCode::OK {
                        refusals.push(r.status());
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                anyhow::Ok(refusals)
            })
        })
        .collect();
    for t in tasks {
        let refusals = t.await??;
        assert!(refusals.is_empty(), "pushes refused: {refusals:?}");
    }
    // Every client's last mutation reaches 3 once the writer has caught up.
    let deadline = Instant::now() + Duration::from_secs(90);
    for i in 0..CLIENTS {
        loop {
            let r = c
                .get(api.url(&format!("/logs/{log}/clients/c{i}")))
                .send()
                .await?;
            if r.status() == StatusCode::OK
                && r.json::<Value>().await?["lastMutationId"] == PER_CLIENT
            {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "client c{i} did not land");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let (ids, batches) = applied(&c, &api, &log).await?;
    assert_eq!(ids.len(), CLIENTS);
    for (client, got) in &ids {
        assert_eq!(
            got,
            &(1..=PER_CLIENT).collect::<Vec<_>>(),
            "client {client}: once each, in order"
        );
    }
    assert!(
        batches > 0,
        "no entry held more than one client: no group commit"
    );
    // A pull reads the batch entries' runs: a client's group sees its last mutation id, from a
    // full reset (null cookie) and from an incremental read (cookie 1).
    let pull = api.url(&format!("/logs/{log}/replicache/pull"));
    for cookie in [Value::Null, json!(1)] {
        let v: Value = c
            .post(&pull)
            .json(
                &json!({"pullVersion": 1, "clientGroupID": "g7", "cookie": cookie,
                          "profileID": "p", "schemaVersion": ""}),
            )
            .send()
            .await?
            .json()
            .await?;
        assert_eq!(
            v["lastMutationIDChanges"],
            json!({"c7": PER_CLIENT}),
            "{cookie}"
        );
    }
    Ok(())
}

fn queued(
    log: sheetlog_core::LogId,
    client: &str,
    ids: std::ops::RangeInclusive<u64>,
) -> QueuedPush {
    QueuedPush {
        v: 1,
        log,
        group: format!("g-{client}"),
        mutations: ids
            .map(|id| QueuedMutation {
                client_id: client.into(),
                id,
                name: "set".into(),
                args: json!({"cells": [{"ref": "A1", "value": id}]}),
            })
            .collect(),
        received: 0,
        subject: None,
    }
}

/// A stack on the emulator with the sync writer on its sync FIFO queue, driven as the pipeline
/// drives it.
struct WriterStack {
    emulator: sheetlog_tests::Emulator,
    sdk: aws_config::SdkConfig,
    stack: sheetlog_pipeline::LocalStack,
    sqs: aws_sdk_sqs::Client,
    queue: SqsPushQueue,
    driver: SyncDriver,
}

async fn writer_stack(label: &str) -> anyhow::Result<WriterStack> {
    let emulator = sheetlog_tests::Emulator::start()?;
    let sdk = emulator.sdk_config().await;
    let stack = create_local_stack(&sdk, &sheetlog_tests::emulator::unique_prefix(label)).await?;
    // The API sends pushes and the writer takes them, each with its own role (IAM-checked when
    // ./scripts/test records calls).
    let roles = sheetlog_tests::stack::recorded_roles(&sdk, &[], |description| {
        sheetlog_pipeline::Counterparts::pair(description, &stack, None)
    })
    .await?;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let queue = SqsPushQueue::new(
        aws_sdk_sqs::Client::new(&roles.api),
        &stack.sync_queues.queue,
    );
    let writer = Handler::from_sdk(
        &roles.sync_writer,
        &stack.resources,
        LogConfig::default(),
        WriterConfig::default(),
    )?;
    let driver = SyncDriver::new(
        aws_sdk_sqs::Client::new(&roles.sync_writer),
        &stack.sync_queues.queue,
        Arc::new(writer),
    );
    Ok(WriterStack {
        emulator,
        sdk,
        stack,
        sqs,
        queue,
        driver,
    })
}

#[tokio::test]
async fn a_redelivered_batch_applies_nothing_twice_and_poison_does_not_block_the_sheet()
-> anyhow::Result<()> {
    let WriterStack {
        emulator: _emulator,
        stack,
        sqs,
        queue,
        driver,
        ..
    } = writer_stack("sync-redeliver").await?;
    let log = driver.handler().log().create().await?.log;
    let group = log.to_string();

    // The deduplication id: the same push sent twice is one message.
    let first = queued(log, "a", 1..=2);
    for _ in 0..2 {
        queue
            .send(&group, &first.dedupe_id(), first.to_json())
            .await?;
    }
    let second = queued(log, "b", 1..=1);
    queue
        .send(&group, &second.dedupe_id(), second.to_json())
        .await?;
    let messages = driver.receive(Duration::from_secs(1)).await?;
    assert_eq!(messages.len(), 2, "the duplicate send was dropped");
    // The writer appends, then dies before deleting the messages.
    let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
    event.records = messages.clone();
    let results = driver.handler().handle_detailed(event).await;
    assert!(
        results.iter().all(|r| r.outcome == MessageOutcome::Applied),
        "{results:?}"
    );
    let after_first = driver.handler().log().next_seq(log).await?.0;
    // Their visibility timeout runs out: SQS delivers them again.
    for m in &messages {
        sqs.change_message_visibility()
            .queue_url(&stack.sync_queues.queue)
            .receipt_handle(m.receipt_handle.clone().unwrap_or_default())
            .visibility_timeout(0)
            .send()
            .await?;
    }
    let results = driver.poll_once(Duration::from_secs(1)).await?;
    assert_eq!(results.len(), 2, "redelivered");
    assert!(results.iter().all(|r| r.outcome == MessageOutcome::Applied));
    // The handler deleted them itself (before its poke), through SQS: none is left in flight.
    assert!(results.iter().all(|r| r.deleted), "{results:?}");
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&stack.sync_queues.queue)
        .attribute_names(
            aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        )
        .send()
        .await?;
    let in_flight = attrs
        .attributes()
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        })
        .cloned();
    assert_eq!(in_flight.as_deref(), Some("0"));
    assert_eq!(
        driver.handler().log().next_seq(log).await?.0,
        after_first,
        "nothing written twice"
    );

    // A poison message in the sheet's group, then the next push: the push applies.
    sqs.send_message()
        .queue_url(&stack.sync_queues.queue)
        .message_group_id(&group)
        .message_deduplication_id("poison")
        .message_body("{\"not\":\"a push\"}")
        .send()
        .await?;
    let next = queued(log, "a", 1..=3);
    queue
        .send(&group, &next.dedupe_id(), next.to_json())
        .await?;
    let mut outcomes = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while outcomes.len() < 2 && Instant::now() < deadline {
        outcomes.extend(driver.poll_once(Duration::from_secs(1)).await?);
    }
    assert!(
        matches!(
            outcomes.first().map(|r| &r.outcome),
            Some(MessageOutcome::Poison(_))
        ),
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.get(1).map(|r| &r.outcome),
        Some(&MessageOutcome::Applied)
    );
    let a = driver.handler().log().last_mutation(log, "a").await?;
    assert_eq!(a.map(|r| r.last), Some(3));
    // Nothing is left on the queue.
    assert!(driver.receive(Duration::ZERO).await?.is_empty());
    Ok(())
}

/// The A/B example through the queue and the sync writer: a inserts a row at 2, b (which
/// had not pulled that) sets B5 with the `baseSeq` of its view. The writer rebases b's set
/// through a's insert, whether the two pushes share a batch entry or not: the note lands in B6,
/// next to r5.
#[tokio::test]
async fn a_queued_push_with_base_seq_is_rebased_through_a_row_insert() -> anyhow::Result<()> {
    let Some((api, c, log)) = queued_log("sync-queue-rebase").await? else {
        return Ok(());
    };
    let rows: Vec<_> = (1..=6)
        .map(|i| (format!("A{i}"), json!(format!("r{i}"))))
        .collect();
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .json(&set_body(&rows))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let base = r.json::<Value>().await?["nextSeq"]
        .as_u64()
        .unwrap_or_default();
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    for (group, m) in [
        (
            "ga",
            json!({"clientID": "a", "id": 1, "name": "insert-rows",
                   "args": {"at": 2, "count": 1, "baseSeq": base}}),
        ),
        (
            "gb",
            json!({"clientID": "b", "id": 1, "name": "set",
                   "args": {"cells": [{"ref": "B5", "value": "note for r5"}], "baseSeq": base}}),
        ),
    ] {
        let r = c
            .post(&push)
            .json(&push_body(group, json!([m])))
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.json::<Value>().await?["queued"], 1);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for client in ["a", "b"] {
        loop {
            let r = c
                .get(api.url(&format!("/logs/{log}/clients/{client}")))
                .send()
                .await?;
            if r.status() == StatusCode::OK && r.json::<Value>().await?["lastMutationId"] == 1 {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "client {client} did not land");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let v: Value = c
        .get(api.url(&format!("/logs/{log}/cells?range=A5:B6")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        v["values"],
        json!([["r4", null], ["r5", "note for r5"]]),
        "the note follows r5"
    );
    let status: Value = c
        .get(api.url(&format!("/logs/{log}/clients/b/mutations/1")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(status["status"], "applied", "{status}");
    Ok(())
}

/// A queued push trusts the API instance's finding of the last second that its log is live (one
/// tombstone read a second on a hot sheet, not one per push), but a DELETE through the instance
/// forgets it: the next push is `410` at once.
#[tokio::test]
async fn a_queued_push_right_after_a_delete_is_refused() -> anyhow::Result<()> {
    let Some((api, c, log)) = queued_log("sync-queue-deleted").await? else {
        return Ok(());
    };
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    for id in 1..=2 {
        let muts: Vec<Value> = (1..=id).map(|m| set_own_row("c1", m)).collect();
        let r = c
            .post(&push)
            .json(&push_body("g1", json!(muts)))
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::OK, "push {id}");
    }
    let r = c.delete(api.url(&format!("/logs/{log}"))).send().await?;
    assert!(r.status().is_success(), "{}", r.status());
    let muts: Vec<Value> = (1..=3).map(|m| set_own_row("c1", m)).collect();
    let r = c
        .post(&push)
        .json(&push_body("g1", json!(muts)))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::GONE);
    Ok(())
}

/// A client whose runs are all past the log's index mark (no range item yet, its group's item
/// not naming it) pushes again from its second mutation: the API finds its group in the entries
/// past the mark instead of answering `ClientStateNotFound`.
#[tokio::test]
async fn a_client_known_only_from_entries_past_the_mark_may_push_on() -> anyhow::Result<()> {
    let Some((api, c, log)) = queued_log("sync-queue-unindexed").await? else {
        return Ok(());
    };
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let r = c
        .post(&push)
        .json(&push_body("g1", json!([set_own_row("c1", 1)])))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(30);
    while applied(&c, &api, &log).await?.0.get("c1") != Some(&vec![1]) {
        anyhow::ensure!(Instant::now() < deadline, "mutation 1 never applied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = c
        .post(&push)
        .json(&push_body("g1", json!([set_own_row("c1", 2)])))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await?;
    assert_eq!(body, json!({"queued": 1}), "{body}");
    while applied(&c, &api, &log).await?.0.get("c1") != Some(&vec![1, 2]) {
        anyhow::ensure!(Instant::now() < deadline, "mutation 2 never applied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Waits until `client`'s last applied mutation is `last`.
async fn landed(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    client: &str,
    last: u64,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let r = c
            .get(api.url(&format!("/logs/{log}/clients/{client}")))
            .send()
            .await?;
        if r.status() == StatusCode::OK && r.json::<Value>().await?["lastMutationId"] == last {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "client {client} did not reach {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A push over the push limits (`docs/sync.md`, "Push limits") is `413 push-too-large` naming
/// the limit, and nothing of it is enqueued or written: a later push on the same sheet (the same
/// FIFO group) lands alone. A push at the client limit is accepted.
#[tokio::test]
async fn a_push_over_the_limits_is_refused_with_nothing_written() -> anyhow::Result<()> {
    use sheetlog_core::sync_queue::{MAX_PUSH_CLIENTS, MAX_PUSH_MUTATIONS};
    let Some((api, c, log)) = queued_log("sync-queue-limits").await? else {
        return Ok(());
    };
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let too_many: Vec<Value> = (1..=MAX_PUSH_MUTATIONS as u64 + 1)
        .map(|id| set_own_row("many", id))
        .collect();
    let too_many_clients: Vec<Value> = (0..=MAX_PUSH_CLIENTS)
        .map(|i| set_own_row(&format!("c{i}"), 1))
        .collect();
    for (muts, count, limit, name) in [
        (
            too_many,
            MAX_PUSH_MUTATIONS + 1,
            MAX_PUSH_MUTATIONS,
            "maxPushMutations",
        ),
        (
            too_many_clients,
            MAX_PUSH_CLIENTS + 1,
            MAX_PUSH_CLIENTS,
            "maxPushClients",
        ),
    ] {
        let r = c
            .post(&push)
            .json(&push_body("g", json!(muts)))
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let body: Value = r.json().await?;
        assert_eq!(body["error"]["code"], "push-too-large", "{body}");
        assert_eq!(body["error"]["count"], count, "{body}");
        assert_eq!(body["error"]["limit"], limit, "{body}");
        assert_eq!(body["error"]["limitName"], name, "{body}");
    }
    // At the client limit: accepted.
    let at_limit: Vec<Value> = (0..MAX_PUSH_CLIENTS)
        .map(|i| set_own_row(&format!("ok{i}"), 1))
        .collect();
    let r = c
        .post(&push)
        .json(&push_body("g", json!(at_limit)))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await?["queued"], MAX_PUSH_CLIENTS);
    landed(&c, &api, &log, &format!("ok{}", MAX_PUSH_CLIENTS - 1), 1).await?;
    let (ids, _) = applied(&c, &api, &log).await?;
    assert_eq!(ids.len(), MAX_PUSH_CLIENTS, "{:?}", ids.keys());
    assert!(ids.keys().all(|k| k.starts_with("ok")), "{:?}", ids.keys());
    for client in ["many", "c0"] {
        let r = c
            .get(api.url(&format!("/logs/{log}/clients/{client}")))
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{client}");
    }
    Ok(())
}

/// A push at the mutation limit, every mutation made against an older view (`baseSeq`) that
/// another client's row insert moved, applies in full and in order; another editor's push on
/// the same sheet, sent while it is queued, lands too, and both follow the insert.
#[tokio::test]
async fn a_maximal_push_with_base_seq_applies_and_another_editor_lands_too() -> anyhow::Result<()> {
    use sheetlog_core::sync_queue::MAX_PUSH_MUTATIONS;
    let Some((api, c, log)) = queued_log("sync-queue-max-push").await? else {
        return Ok(());
    };
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .json(&set_body(&[("A1", json!("top"))]))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let base = r.json::<Value>().await?["nextSeq"]
        .as_u64()
        .unwrap_or_default();
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .json(&json!({"type": "insert-rows", "body": {"at": 1, "count": 1}}))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    // Row 1 as the big client saw it (A1, "top") is row 2 now; its edits of B1 follow it.
    let n = MAX_PUSH_MUTATIONS as u64;
    let big: Vec<Value> = (1..=n)
        .map(|id| {
            json!({"clientID": "big", "id": id, "name": "set",
                   "args": {"cells": [{"ref": "B1", "value": id}], "baseSeq": base}})
        })
        .collect();
    let r = c
        .post(&push)
        .json(&push_body("gbig", json!(big)))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await?["queued"], n);
    let small = json!([{"clientID": "other", "id": 1, "name": "set",
                        "args": {"cells": [{"ref": "C1", "value": "other"}], "baseSeq": base}}]);
    let r = c
        .post(&push)
        .json(&push_body("gother", small))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    landed(&c, &api, &log, "other", 1).await?;
    landed(&c, &api, &log, "big", n).await?;
    let (ids, _) = applied(&c, &api, &log).await?;
    assert_eq!(
        ids["big"],
        (1..=n).collect::<Vec<_>>(),
        "in order, once each"
    );
    let v: Value = c
        .get(api.url(&format!("/logs/{log}/cells?range=A2:C2")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(v["values"], json!([["top", n, "other"]]), "{v}");
    Ok(())
}

/// Issue 41: the sync writer never read the tombstone, so a push queued before a delete (or
/// while a delete is cut short) was applied to the deleted sheet, and its entries and client
/// items outlived the delete. It is dropped instead: its message is deleted from the queue, not
/// retried, and nothing is written.
#[tokio::test]
async fn a_push_to_a_deleted_sheet_is_dropped_not_applied() -> anyhow::Result<()> {
    use sheetlog_core::ports::LogPurge;
    let WriterStack {
        emulator: _emulator,
        sdk,
        stack,
        sqs,
        queue,
        driver,
    } = writer_stack("sync-deleted").await?;
    let log = driver.handler().log().create().await?.log;
    let push = queued(log, "a", 1..=2);
    queue
        .send(&log.to_string(), &push.dedupe_id(), push.to_json())
        .await?;
    // The delete's first step (all a delete cut short at once leaves): the tombstone.
    let tombstones = sheetlog_core::aws::DynamoPurge::tombstones(
        aws_sdk_dynamodb::Client::new(&sdk),
        stack.resources.require_clients_table()?,
    );
    tombstones
        .mark_deleted(log, sheetlog_core::domain::now_secs())
        .await?;
    let next_seq = driver.handler().log().next_seq(log).await?.0;

    let mut results = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while results.is_empty() && Instant::now() < deadline {
        results.extend(driver.poll_once(Duration::from_secs(1)).await?);
    }
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        matches!(&results[0].outcome, MessageOutcome::Poison(r) if r.contains("deleted")),
        "{results:?}"
    );
    assert!(!results[0].keep(), "kept for a retry");
    assert_eq!(
        driver.handler().log().next_seq(log).await?.0,
        next_seq,
        "the push was applied to the deleted sheet"
    );
    assert_eq!(driver.handler().log().last_mutation(log, "a").await?, None);
    // Not redelivered: nothing is left on the queue, in flight or visible.
    let left = driver.receive(Duration::ZERO).await?;
    assert!(
        left.is_empty(),
        "{} messages still on the queue",
        left.len()
    );
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&stack.sync_queues.queue)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(
            aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        )
        .send()
        .await?;
    for (name, value) in attrs.attributes().into_iter().flatten() {
        assert_eq!(value, "0", "{name:?}");
    }
    Ok(())
}

/// The page splits its pushes by limits of its own (`web/src/push.ts`); they must be the server's
/// (`docs/sync.md`, "Push limits"), or a page would send pushes the API refuses with `413`, or
/// split them smaller than it needs to. Read from the page's source, as the bundle has them.
#[test]
fn the_pages_push_limits_are_the_servers() -> anyhow::Result<()> {
    use sheetlog_core::sync_queue::{MAX_PUSH_CLIENTS, MAX_PUSH_MUTATIONS};
    let source = std::fs::read_to_string(
        sheetlog_tests::emulator::workspace_root().join("web/src/push.ts"),
    )?;
    let constant = |name: &str| -> anyhow::Result<u64> {
        let line = source
            .lines()
            .find_map(|l| l.strip_prefix(&format!("export const {name} = ")))
            .ok_or_else(|| anyhow::anyhow!("web/src/push.ts has no {name}"))?;
        let expr = line.trim_end_matches(';').replace('_', "");
        // `a * b * c - d * e` at most: the byte limit is written as arithmetic.
        let mut total: i64 = 0;
        for (i, term) in expr.split(" - ").enumerate() {
            let product: i64 = term
                .split(" * ")
                .map(|f| f.trim().parse::<i64>())
                .product::<Result<i64, _>>()?;
            total += if i == 0 { product } else { -product };
        }
        Ok(u64::try_from(total)?)
    };
    assert_eq!(constant("MAX_PUSH_MUTATIONS")?, MAX_PUSH_MUTATIONS as u64);
    assert_eq!(constant("MAX_PUSH_CLIENTS")?, MAX_PUSH_CLIENTS as u64);
    // The byte limit is Lambda's event, counted as the gateway counts it:
    // `local_gateway::the_page_counts_a_push_as_the_gateway_does`.
    Ok(())
}

/// A sync writer invocation still running at the function's timeout is cut off, as Lambda cuts
/// it off: the batch fails and its messages stay on the queue, in flight until their visibility
/// timeout runs out (`a_redelivered_batch_applies_nothing_twice...` shows a redelivery applies
/// nothing twice).
#[tokio::test]
async fn a_writer_invocation_past_the_functions_timeout_is_cut_off() -> anyhow::Result<()> {
    use anyhow::Context;
    let WriterStack {
        emulator: _emulator,
        stack,
        sqs,
        queue,
        driver,
        ..
    } = writer_stack("sync-timeout").await?;
    let cut = driver.with_timeout(Some(Duration::from_micros(1)));
    let log = cut.handler().log().create().await?.log;
    let push = queued(log, "a", 1..=2);
    queue
        .send(&log.to_string(), &push.dedupe_id(), push.to_json())
        .await?;
    let err = cut
        .poll_once(Duration::from_secs(1))
        .await
        .err()
        .context("a cut-off invocation fails")?;
    assert!(format!("{err:#}").contains("timeout"), "{err:#}");
    let messages = cut.receive(Duration::ZERO).await?;
    assert!(messages.is_empty(), "still in flight");
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&stack.sync_queues.queue)
        .attribute_names(
            aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        )
        .send()
        .await?;
    let in_flight = attrs
        .attributes()
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(in_flight, "1", "the message was not deleted");
    Ok(())
}

/// A queued batch whose entry body is over `inlineBodyMaxBytes` (16 KiB) is offloaded by the
/// writer to `payloads/` (with the auto-delete tag until it commits) and reads back whole: the
/// cells and the entry's body. Run with the functions' own roles, this is also where the IAM
/// check sees the writer's offload grants used.
#[tokio::test]
async fn a_queued_batch_over_the_inline_limit_is_offloaded_and_reads_back() -> anyhow::Result<()> {
    let Some((api, c, log)) = queued_log("sync-queue-offload").await? else {
        return Ok(());
    };
    let text = |id: u64| format!("{id}-{}", "x".repeat(8_000));
    let mutations: Vec<Value> = (1..=3)
        .map(|id| {
            json!({"clientID": "wide", "id": id, "name": "set",
                   "args": {"cells": [{"ref": format!("A{id}"), "value": text(id)}]}})
        })
        .collect();
    let r = c
        .post(api.url(&format!("/logs/{log}/replicache/push")))
        .json(&push_body("gwide", json!(mutations)))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    landed(&c, &api, &log, "wide", 3).await?;
    let v: Value = c
        .get(api.url(&format!("/logs/{log}/cells?range=A1:A3")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(v["values"], json!([[text(1)], [text(2)], [text(3)]]));
    let (ids, _) = applied(&c, &api, &log).await?;
    assert_eq!(ids["wide"], vec![1, 2, 3]);
    // The body went to S3: a payloads/ object of this log exists.
    let stack = api.stack.as_ref().context("an in-process stack")?;
    let listed = stack
        .s3
        .list_objects_v2()
        .bucket(&stack.resources.bucket)
        .prefix(format!("payloads/{log}/"))
        .send()
        .await?;
    assert!(
        listed.key_count().unwrap_or_default() > 0,
        "no offloaded body under payloads/{log}/"
    );
    Ok(())
}
