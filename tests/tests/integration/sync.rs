//! Sync clients on the emulator: `mutations` entries and their range items in one transaction,
//! read back raw over the wire; Replicache push and pull through the API; the client queries.
//! The real Replicache client runs against the same routes in `clients/replicache` (`./scripts/test-sync-client`).

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_core::LogError;
use sheetlog_core::domain::clients::client_key;
use sheetlog_core::log::{PushedMutation, RunOutcome, RunSource};
use sheetlog_tests::TestStack;
use sheetlog_tests::api::new_log as create_log;
use sheetlog_tests::api::{ApiClient, TestApi, json_str};
use sheetlog_tests::fixtures::{pull_body, push_body, pushed_set, set_body, set_mutation};

/// Pushed mutations `ids`, each setting A1 to its own id.
fn muts(ids: std::ops::RangeInclusive<u64>) -> Vec<PushedMutation> {
    ids.map(|id| pushed_set(id, &[("A1", json!(id as i64))]))
        .collect()
}

#[tokio::test]
async fn a_run_is_one_transaction_of_entry_and_range_item() -> anyhow::Result<()> {
    let stack = TestStack::new("sync-tx").await?;
    let log = stack.log()?;
    let id = log.create().await?.log;
    let out = log
        .push_run(id, "g1", "c1", &muts(1..=1), None, RunSource::Push)
        .await?;
    let RunOutcome::Applied {
        range, appended, ..
    } = out
    else {
        anyhow::bail!("{out:?}");
    };
    // A client's first run also joins its group: three items, 2 WRU each.
    assert_eq!(appended.units.write, 6.0);
    let out = log
        .push_run(id, "g1", "c1", &muts(2..=2), None, RunSource::Push)
        .await?;
    let RunOutcome::Applied { appended, .. } = out else {
        anyhow::bail!("{out:?}");
    };
    assert_eq!(
        appended.units.write, 4.0,
        "one mutation: a transaction of two items under 1 KB"
    );
    assert_eq!(range.seq, 1);
    // 100 small mutations in one push: one entry and one range item.
    let out = log
        .push_run(id, "g1", "c1", &muts(3..=102), None, RunSource::Push)
        .await?;
    let RunOutcome::Applied {
        range, appended, ..
    } = out
    else {
        anyhow::bail!("{out:?}");
    };
    assert_eq!((range.first, range.last), (3, 102));
    assert!(appended.units.write <= 12.0, "{:?}", appended.units);

    // The range items as DynamoDB holds them.
    let table = stack
        .resources
        .clients_table
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("no Clients table"))?;
    let out = stack
        .dynamo
        .query()
        .table_name(table)
        .key_condition_expression("k = :k")
        .expression_attribute_values(":k", AttributeValue::B(client_key(id, "c1").into()))
        .consistent_read(true)
        .send()
        .await?;
    let firsts: Vec<&str> = out
        .items()
        .iter()
        .filter_map(|i| i.get("m").and_then(|v| v.as_n().ok()).map(String::as_str))
        .collect();
    assert_eq!(firsts, ["1", "2", "3"]);

    // A retry applies nothing; a gap is refused.
    assert!(matches!(
        log.push_run(id, "g1", "c1", &muts(1..=102), None, RunSource::Push)
            .await?,
        RunOutcome::AlreadyApplied { .. }
    ));
    let err = log
        .push_run(id, "g1", "c1", &muts(104..=105), None, RunSource::Push)
        .await
        .err();
    assert!(
        matches!(
            err,
            Some(LogError::MutationGap {
                expected: 103,
                got: 104,
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(
        log.find_mutation(id, "c1", 50).await?.map(|r| r.seq),
        Some(3)
    );
    assert_eq!(log.group_clients(id, "g1").await?, vec!["c1".to_owned()]);
    Ok(())
}

/// The sync writer's deferred range items on the emulator: a batch without a new client is one
/// plain conditional put, complete windows are indexed as one item per client (with its runs),
/// the index mark and the items refuse to go backwards, and every reader agrees with the log.
#[tokio::test]
async fn deferred_runs_are_indexed_by_window_on_the_emulator() -> anyhow::Result<()> {
    use sheetlog_core::domain::RequestUnits;
    use sheetlog_core::domain::clients::mark_key;
    use sheetlog_core::log::{ClientPush, INDEX_WINDOW, KnownClients};
    use sheetlog_core::ports::ClientRuns;

    let stack = TestStack::new("sync-deferred").await?;
    // The sync writer's work, with its role (IAM-checked when ./scripts/test records calls).
    let log = stack.log_as(&stack.roles(&[], None, None).await?.sync_writer)?;
    let id = log.create().await?.log;
    let mut known = KnownClients::default();
    let clients = ["c1", "c2", "c3"];
    let rounds = INDEX_WINDOW + 8;
    let mut batch_writes = Vec::new();
    for upto in 1..=rounds {
        let pushes: Vec<ClientPush> = clients
            .iter()
            .map(|c| ClientPush {
                group: "g1".into(),
                client: (*c).into(),
                mutations: muts(1..=upto),
            })
            .collect();
        let out = log.push_batch_known(id, &pushes, None, &mut known).await?;
        anyhow::ensure!(out.appended.len() == 1, "{out:?}");
        batch_writes.push(out.units.write);
    }
    // Every batch is one plain put of 1 WRU (new clients too), except the first, which also
    // sets the index mark (1). Indexing is the writer's next step, after the batch.
    assert_eq!(batch_writes[0], 2.0, "{batch_writes:?}");
    let plain = batch_writes.iter().filter(|w| **w == 1.0).count();
    assert_eq!(plain, batch_writes.len() - 1, "{batch_writes:?}");
    assert!(known.index_due().is_some());
    log.index_known(id, &mut known).await?;
    assert!(known.index_due().is_none());

    let table = stack
        .resources
        .clients_table
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("no Clients table"))?;
    let mark_item = stack
        .dynamo
        .get_item()
        .table_name(table)
        .key("k", AttributeValue::B(mark_key(id).into()))
        .key("m", AttributeValue::N("0".into()))
        .consistent_read(true)
        .send()
        .await?;
    let mark: u64 = mark_item
        .item()
        .and_then(|i| i.get("w"))
        .and_then(|v| v.as_n().ok())
        .ok_or_else(|| anyhow::anyhow!("no index mark: {mark_item:?}"))?
        .parse()?;
    assert_eq!(mark, INDEX_WINDOW - 1, "the first window is indexed");
    let items = stack
        .dynamo
        .query()
        .table_name(table)
        .key_condition_expression("k = :k")
        .expression_attribute_values(":k", AttributeValue::B(client_key(id, "c1").into()))
        .consistent_read(true)
        .send()
        .await?;
    // One item for the first window, keyed 1, listing its runs (sequences 1 to 63).
    assert_eq!(items.items().len(), 1, "{:?}", items.items());
    let runs = items.items()[0]
        .get("r")
        .and_then(|v| v.as_s().ok())
        .ok_or_else(|| anyhow::anyhow!("no runs attribute"))?;
    assert_eq!(runs.split(',').count() as u64, INDEX_WINDOW - 1, "{runs}");
    assert_eq!(log.group_clients(id, "g1").await?.len(), 3);
    let mut u = RequestUnits::default();
    let mut members = log.store().group_clients(id, "g1", &mut u).await?;
    members.sort();
    assert_eq!(
        members, clients,
        "indexing joined the clients to their group"
    );

    // The mark does not go backwards, and indexing the window again (a second indexer, from
    // the mark it started at) writes the same items, 25 to a BatchWriteItem.
    let store = log.store();
    assert!(!store.start_index_mark(id, 0, &mut u).await?);
    assert!(!store.advance_index_mark(id, mark - 1, &mut u).await?);
    assert!(!store.advance_index_mark(id, mark, &mut u).await?);
    let newest = store.client_ranges(id, "c1", None, 1, &mut u).await?;
    let (next, at) = log.next_seq_from(id, None).await?;
    assert_eq!(log.index_deferred(id, 0, next, at, &mut u).await?, mark);
    assert_eq!(
        store.client_ranges(id, "c1", None, 1, &mut u).await?,
        newest
    );

    // Every reader: the runs past the mark and the merged items.
    for c in clients {
        let last = log.last_mutation(id, c).await?.map(|r| r.last);
        assert_eq!(last, Some(rounds), "{c}");
        for m in [1, 2, INDEX_WINDOW / 2, rounds - 1, rounds] {
            let found = log
                .find_mutation(id, c, m)
                .await?
                .ok_or_else(|| anyhow::anyhow!("{c} {m} not found"))?;
            // Batch k (from 1) holds mutation k, at sequence k: entry 0 is the log's first.
            assert_eq!(found.seq, m, "{c} mutation {m}");
        }
        assert_eq!(log.last_mutation_before(id, c, 10).await?, 9);
        assert_eq!(log.last_mutation_before(id, c, rounds).await?, rounds - 1);
    }
    let group = log
        .group_last_mutations_before(id, "g1", rounds + 1)
        .await?;
    assert_eq!(group.len(), 3);
    assert!(group.values().all(|l| *l == rounds));
    // A direct push after them starts where the writer left each client.
    let out = log
        .push_run(id, "g1", "c2", &muts(1..=rounds + 1), None, RunSource::Push)
        .await?;
    assert!(
        matches!(&out, RunOutcome::Applied { range, .. } if range.first == rounds + 1),
        "{out:?}"
    );
    Ok(())
}

#[tokio::test]
async fn lost_responses_on_the_emulator_never_apply_twice() -> anyhow::Result<()> {
    let stack = TestStack::new("sync-lossy").await?;
    let log = stack.lossy_log(5)?;
    let id = log.create().await?.log;
    for end in [3u64, 6, 9] {
        // Every transaction's answer is lost and the call retried: the retry finds the range
        // taken, reads the client again, and sees its own run applied.
        loop {
            match log
                .push_run(id, "g", "c", &muts(1..=end), None, RunSource::Push)
                .await?
            {
                RunOutcome::Applied { .. } => continue,
                RunOutcome::AlreadyApplied { newest, .. } => {
                    assert_eq!(newest.last, end);
                    break;
                }
            }
        }
    }
    let page = log.read_since(id, 0, 100).await?;
    assert_eq!(page.entries.len(), 4, "entry 0 and three runs");
    Ok(())
}

async fn post(c: &ApiClient, url: &str, body: &Value) -> anyhow::Result<(StatusCode, Value)> {
    let r = c.post(url).json(body).send().await?;
    Ok((r.status(), r.json().await?))
}

/// The patch as key → value (`None` for a `del`), and whether it starts with `clear`.
fn patch_map(pull: &Value) -> (bool, std::collections::BTreeMap<String, Option<Value>>) {
    let ops = pull["patch"].as_array().cloned().unwrap_or_default();
    let clear = ops.first().is_some_and(|o| o["op"] == "clear");
    let mut m = std::collections::BTreeMap::new();
    for o in ops {
        match o["op"].as_str() {
            Some("put") => {
                m.insert(json_str(&o, "/key").to_owned(), Some(o["value"].clone()));
            }
            Some("del") => {
                m.insert(json_str(&o, "/key").to_owned(), None);
            }
            _ => {}
        }
    }
    (clear, m)
}

/// Applies a pull response's patch to a client's view, as Replicache does.
fn apply_patch(
    view: &mut std::collections::BTreeMap<String, Value>,
    pull: &Value,
) -> anyhow::Result<()> {
    for op in pull["patch"].as_array().into_iter().flatten() {
        match op["op"].as_str() {
            Some("clear") => view.clear(),
            Some("put") => {
                view.insert(json_str(op, "/key").to_owned(), op["value"].clone());
            }
            Some("del") => {
                view.remove(json_str(op, "/key"));
            }
            other => anyhow::bail!("unknown op {other:?}"),
        }
    }
    Ok(())
}

#[tokio::test]
async fn push_and_pull_speak_replicache_version_1() -> anyhow::Result<()> {
    let api = TestApi::start("sync-api").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let pull = api.url(&format!("/logs/{log}/replicache/pull"));

    // A push from two clients of one group, one mutation rejected.
    let body = push_body(
        "g1",
        json!([
            set_mutation("c1", 1, "A1", json!(1)),
            set_mutation("c1", 2, "B2", json!("two")),
            {"clientID": "c1", "id": 3, "name": "set", "args": {"cells": [{"ref": "ZZZZ1", "value": 1}]}},
            {"clientID": "c2", "id": 1, "name": "insert-rows", "args": {"at": 1, "count": 1}},
            {"clientID": "c2", "id": 2, "name": "no-such-mutator", "args": {}},
        ]),
    );
    let (s, v) = post(&c, &push, &body).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["applied"], 3);
    assert_eq!(v["rejected"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v["lastMutationIDs"], json!({"c1": 3, "c2": 2}));
    // The same push again applies nothing.
    let (s, _) = post(&c, &push, &body).await?;
    assert_eq!(s, StatusCode::OK);
    let entries: Value = c
        .get(api.url(&format!("/logs/{log}/entries?from=0")))
        .send()
        .await?
        .json()
        .await?;
    let kinds: Vec<&str> = entries["entries"]
        .as_array()
        .map(|es| es.iter().filter_map(|e| e["type"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(kinds, ["snapshot", "mutations", "mutations"]);
    assert_eq!(entries["entries"][1]["body"]["rejected"], json!([3]));
    assert_eq!(
        entries["entries"][1]["body"]["mutations"][1]["args"]["cells"][0]["ref"],
        "B2"
    );

    // First pull: clear, every cell (c2's row insert moved A1 and B2 down a row), meta/seq.
    let (s, first) = post(&c, &pull, &pull_body("g1", Value::Null)).await?;
    assert_eq!(s, StatusCode::OK, "{first}");
    assert_eq!(first["cookie"], 3);
    assert_eq!(first["lastMutationIDChanges"], json!({"c1": 3, "c2": 2}));
    let (clear, cells) = patch_map(&first);
    assert!(clear);
    assert_eq!(
        cells.get("cell/A2"),
        Some(&Some(json!({"value": 1}))),
        "{first}"
    );
    assert_eq!(cells.get("cell/B3"), Some(&Some(json!({"value": "two"}))));
    assert_eq!(cells.get("meta/seq"), Some(&Some(json!(3))));
    assert_eq!(cells.len(), 3);

    // Another group sees no lastMutationIDChanges for g1's clients.
    let (_, other) = post(&c, &pull, &pull_body("g2", Value::Null)).await?;
    assert_eq!(other["lastMutationIDChanges"], json!({}));

    // Incremental: a set and a clear since the cookie give a put and a del, no clear.
    let body = push_body(
        "g1",
        json!([
            set_mutation("c1", 4, "C1", json!(true)),
            {"clientID": "c1", "id": 5, "name": "set",
             "args": {"cells": [{"ref": "A2", "value": null}, {"ref": "D4", "value": 2, "format": "0.00"}]}},
        ]),
    );
    let (s, _) = post(&c, &push, &body).await?;
    assert_eq!(s, StatusCode::OK);
    let (_, next) = post(&c, &pull, &pull_body("g1", json!(3))).await?;
    assert_eq!(next["cookie"], 4);
    assert_eq!(next["lastMutationIDChanges"], json!({"c1": 5}));
    let (clear, cells) = patch_map(&next);
    assert!(!clear, "{next}");
    assert_eq!(cells.get("cell/C1"), Some(&Some(json!({"value": true}))));
    assert_eq!(cells.get("cell/A2"), Some(&None));
    assert_eq!(
        cells.get("cell/D4"),
        Some(&Some(json!({"value": 2, "format": "0.00"})))
    );
    // Nothing new: the same cookie and an empty patch.
    let (_, same) = post(&c, &pull, &pull_body("g1", json!(4))).await?;
    assert_eq!(
        (same["cookie"].clone(), same["patch"].clone()),
        (json!(4), json!([]))
    );

    // The client queries.
    let v: Value = c
        .get(api.url(&format!("/logs/{log}/clients/c1")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        (v["lastMutationId"].clone(), v["seq"].clone()),
        (json!(5), json!(3))
    );
    let r = c
        .get(api.url(&format!("/logs/{log}/clients/c1/mutations/3")))
        .send()
        .await?;
    let v: Value = r.json().await?;
    assert_eq!(
        (v["seq"].clone(), v["status"].clone()),
        (json!(1), json!("rejected"))
    );
    let r = c
        .get(api.url(&format!("/logs/{log}/clients/c1/mutations/6")))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = c
        .get(api.url(&format!("/logs/{log}/clients/nobody")))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let v: Value = r.json().await?;
    assert_eq!(v["error"]["code"], "client-not-found");
    Ok(())
}

#[tokio::test]
async fn the_protocol_errors_are_replicaches_and_a_gap_writes_nothing() -> anyhow::Result<()> {
    let api = TestApi::start("sync-errors").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let pull = api.url(&format!("/logs/{log}/replicache/pull"));

    let mut old = push_body("g", json!([]));
    old["pushVersion"] = json!(0);
    let (s, v) = post(&c, &push, &old).await?;
    assert_eq!(
        (s, v),
        (
            StatusCode::OK,
            json!({"error": "VersionNotSupported", "versionType": "push"})
        )
    );
    let mut schema = pull_body("g", Value::Null);
    schema["schemaVersion"] = json!("v9");
    let (_, v) = post(&c, &pull, &schema).await?;
    assert_eq!(
        v,
        json!({"error": "VersionNotSupported", "versionType": "schema"})
    );
    // A cookie past the end of the log, or a client that is past mutation 1 but unknown here:
    // the server has lost the client's state.
    let (_, v) = post(&c, &pull, &pull_body("g", json!(99))).await?;
    assert_eq!(v, json!({"error": "ClientStateNotFound"}));
    let (_, v) = post(
        &c,
        &push,
        &push_body("g", json!([set_mutation("c", 7, "A1", json!(1))])),
    )
    .await?;
    assert_eq!(v, json!({"error": "ClientStateNotFound"}));

    // A gap: mutation 1 applies, 3 is refused with a 409 and nothing after it is applied.
    let body = push_body(
        "g",
        json!([
            set_mutation("c", 1, "A1", json!(1)),
            set_mutation("c", 3, "A2", json!(3)),
            set_mutation("d", 1, "A3", json!(1)),
        ]),
    );
    let (s, v) = post(&c, &push, &body).await?;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "mutation-gap");
    assert_eq!(v["error"]["expectedMutationID"], 2);
    let r = c
        .get(api.url(&format!("/logs/{log}/clients/d")))
        .send()
        .await?;
    assert_eq!(
        r.status(),
        StatusCode::NOT_FOUND,
        "nothing after the gap was applied"
    );

    // Bad requests are 400s; a client registered in another group is refused.
    for bad in [
        json!({"pushVersion": 1, "clientGroupID": "", "mutations": []}),
        json!({"pushVersion": 1, "clientGroupID": "g"}),
        json!({"pushVersion": 1, "clientGroupID": "g", "mutations": [{"clientID": "c", "id": -1, "name": "set"}]}),
        push_body("other", json!([set_mutation("c", 2, "A1", json!(1))])),
    ] {
        let (s, v) = post(&c, &push, &bad).await?;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad} → {v}");
    }
    let (s, _) = post(&c, &pull, &pull_body("g", json!("abc"))).await?;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let r = c
        .post(api.url("/logs/00000000-0000-4000-8000-000000000000/replicache/pull"))
        .json(&pull_body("g", Value::Null))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    Ok(())
}

/// Clients of several groups push at once, each push sent twice: every mutation once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_pushes_from_many_clients_apply_each_mutation_once() -> anyhow::Result<()> {
    let api = TestApi::start("sync-race").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let start = Arc::new(tokio::sync::Barrier::new(8));
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let (c, push, start) = (api.client().await?, push.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            // Tasks t and t+4 are one client (a tab and its retry); groups by parity.
            let client = format!("c{}", t % 4);
            let group = format!("g{}", t % 2);
            start.wait().await;
            for end in (2..=20).step_by(2) {
                let ms: Vec<Value> = (1..=end)
                    .map(|id| set_mutation(&client, id, &format!("A{}", t % 4 + 1), json!(id)))
                    .collect();
                loop {
                    let (s, v) = post(&c, &push, &push_body(&group, json!(ms))).await?;
                    match s {
                        StatusCode::OK => break,
                        StatusCode::SERVICE_UNAVAILABLE => continue,
                        other => anyhow::bail!("{other}: {v}"),
                    }
                }
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let entries: Value = c
        .get(api.url(&format!("/logs/{log}/entries?from=0&limit=1000")))
        .send()
        .await?
        .json()
        .await?;
    let mut seen: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for e in entries["entries"].as_array().into_iter().flatten() {
        if e["type"] == "mutations" {
            let ids = seen
                .entry(json_str(e, "/body/clientID").to_owned())
                .or_default();
            for m in e["body"]["mutations"].as_array().into_iter().flatten() {
                ids.push(m["id"].as_u64().unwrap_or(0));
            }
        }
    }
    assert_eq!(seen.len(), 4);
    for (client, ids) in seen {
        assert_eq!(ids, (1..=20).collect::<Vec<_>>(), "client {client}");
    }
    // And the sheet: each client's cell holds its last value.
    let v: Value = c
        .get(api.url(&format!("/logs/{log}/cells?range=A1:A4")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(v["values"], json!([[20], [20], [20], [20]]));
    Ok(())
}

/// A client view over the response limit is a 413 naming the limit, whether it has too many
/// cells or too many bytes; under the limit it is served.
#[tokio::test]
async fn a_view_over_the_response_limit_is_refused_with_the_limit() -> anyhow::Result<()> {
    let cfg = sheetlog_api::config::ApiConfig {
        max_response_bytes: 8_000,
        ..Default::default()
    };
    let api = TestApi::start_with("sync-limit", cfg).await?;
    let c = api.client().await?;
    let pull_url = |log: &str| api.url(&format!("/logs/{log}/replicache/pull"));
    let append = |log: &str, entry: Value| {
        c.post(api.url(&format!("/logs/{log}/entries")))
            .json(&entry)
            .send()
    };

    // Many small cells: the read stops at the cell budget (8,000 / 40 = 200).
    let many = create_log(&c, &api).await?;
    let cells: Vec<_> = (1..=250).map(|r| (format!("A{r}"), json!(r))).collect();
    assert_eq!(
        append(&many, set_body(&cells)).await?.status(),
        StatusCode::CREATED
    );
    let (s, v) = post(&c, &pull_url(&many), &pull_body("g", Value::Null)).await?;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["code"], "view-too-large");
    assert_eq!(v["error"]["limit"], 8_000);
    assert!(
        json_str(&v, "/error/message").contains("8000-byte response limit"),
        "{v}"
    );

    // Few long cells: the serialized view is over the limit.
    let long = create_log(&c, &api).await?;
    let text = "x".repeat(3_000);
    let cells: Vec<_> = (1..=3).map(|r| (format!("B{r}"), json!(text))).collect();
    assert_eq!(
        append(&long, set_body(&cells)).await?.status(),
        StatusCode::CREATED
    );
    let (s, v) = post(&c, &pull_url(&long), &pull_body("g", Value::Null)).await?;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert!(
        v["error"]["size"].as_u64().is_some_and(|n| n > 9_000),
        "{v}"
    );

    // Under the limit, and incrementally after it, the view is served.
    let small = create_log(&c, &api).await?;
    assert_eq!(
        append(&small, set_body(&[("C3", json!("ok"))]))
            .await?
            .status(),
        StatusCode::CREATED
    );
    let (s, v) = post(&c, &pull_url(&small), &pull_body("g", Value::Null)).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = post(&c, &pull_url(&many), &pull_body("g", json!(2))).await?;
    assert_eq!((s, v["patch"].clone()), (StatusCode::OK, json!([])));
    Ok(())
}

/// `view=none` (the web client's pull): only `meta/seq` and the mutation ids, so a sheet far over
/// the response limit still syncs; the cells are read by range instead.
#[tokio::test]
async fn a_pull_without_cells_serves_any_sheet_and_still_confirms_mutations() -> anyhow::Result<()>
{
    let cfg = sheetlog_api::config::ApiConfig {
        max_response_bytes: 8_000,
        ..Default::default()
    };
    let api = TestApi::start_with("sync-none", cfg).await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let cells: Vec<_> = (1..=250).map(|r| (format!("A{r}"), json!(r))).collect();
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .json(&set_body(&cells))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let cells_view = api.url(&format!("/logs/{log}/replicache/pull"));
    let (s, _) = post(&c, &cells_view, &pull_body("g", Value::Null)).await?;
    assert_eq!(
        s,
        StatusCode::PAYLOAD_TOO_LARGE,
        "the cells view is too large"
    );

    let none = api.url(&format!("/logs/{log}/replicache/pull?view=none"));
    let (s, v) = post(&c, &none, &pull_body("g", Value::Null)).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["cookie"], 2);
    assert_eq!(
        v["patch"],
        json!([
            {"op": "clear"},
            {"op": "put", "key": "meta/seq", "value": 2},
            {"op": "put", "key": "meta/changed", "value": {"from": null, "to": 2, "events": null}}
        ])
    );

    // A push; the next pull moves the cookie and confirms the mutations, with no cell in it.
    let body = push_body(
        "g",
        json!([
            set_mutation("c1", 1, "B1", json!("x")),
            set_mutation("c1", 2, "B2", json!("y"))
        ]),
    );
    let (s, v) = post(&c, &push, &body).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = post(&c, &none, &pull_body("g", json!(2))).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["cookie"], 3);
    assert_eq!(v["lastMutationIDChanges"], json!({"c1": 2}));
    // And what the mutations did, for the client to patch the blocks it read at the cookie
    // rather than read them again.
    assert_eq!(
        v["patch"],
        json!([
            {"op": "put", "key": "meta/seq", "value": 3},
            {"op": "put", "key": "meta/changed", "value": {"from": 2, "to": 3, "events": [
                {"type": "set", "body": {"cells": [{"ref": "B1", "value": "x"}]}},
                {"type": "set", "body": {"cells": [{"ref": "B2", "value": "y"}]}}
            ]}}
        ])
    );
    // Rows moved: no reset (there are no cells to move), the change itself as a `move/` key,
    // for the client to rebase its pending edits with.
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .json(&json!({"type": "insert-rows", "body": {"at": 1, "count": 1}}))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let (s, v) = post(&c, &none, &pull_body("g", json!(3))).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    // Incremental, not a reset: no client of the group moved since the cookie.
    assert_eq!(v["lastMutationIDChanges"], json!({}));
    assert_eq!(
        v["patch"],
        json!([
            {"op": "put", "key": "move/000000000003/00000",
             "value": {"seq": 3, "applied": [{"axis": "rows", "op": "insert", "at": 0, "count": 1}]}},
            {"op": "put", "key": "meta/seq", "value": 4},
            // Cells moved: the client reads the view again.
            {"op": "put", "key": "meta/changed", "value": {"from": 3, "to": 4, "events": null}}
        ])
    );
    // A client's row change names the client and the mutation.
    let body = push_body(
        "g",
        json!([{"clientID": "c1", "id": 3, "name": "delete-columns", "args": {"at": "B", "count": 2}}]),
    );
    let (s, v) = post(&c, &push, &body).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = post(&c, &none, &pull_body("g", json!(4))).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        v["patch"][0],
        json!({"op": "put", "key": "move/000000000004/00000", "value": {"seq": 4, "client": "c1", "id": 3,
            "applied": [{"axis": "columns", "op": "delete", "at": 1, "count": 2}]}})
    );

    // A style and a number format are carried with the set after them, in log order; a
    // formula is not (its value is the server's to compute), nor is an over-large change.
    let changed = |from: u64| {
        let (c, none) = (&c, &none);
        async move {
            let (s, v) = post(c, none, &pull_body("g", json!(from))).await?;
            anyhow::ensure!(s == StatusCode::OK, "{v}");
            let patch = v["patch"].as_array().cloned().unwrap_or_default();
            let last = patch.last().cloned().unwrap_or_default();
            anyhow::ensure!(last["key"] == "meta/changed", "{v}");
            anyhow::Ok(last["value"].clone())
        }
    };
    let entries = api.url(&format!("/logs/{log}/entries"));
    for body in [
        json!({"type": "style", "body": {"ranges": ["A1:B2"], "style": {"bold": true, "format": "0.00"}}}),
        set_body(&[("A1", json!(1.5))]),
    ] {
        let r = c.post(entries.clone()).json(&body).send().await?;
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    assert_eq!(
        changed(5).await?,
        json!({"from": 5, "to": 7, "events": [
            {"type": "style", "body": {"ranges": ["A1:B2"], "style": {"bold": true, "format": "0.00"}}},
            {"type": "set", "body": {"cells": [{"ref": "A1", "value": 1.5}]}}
        ]})
    );
    let r = c
        .post(entries.clone())
        .json(&set_body(&[("C1", json!("=A1*2"))]))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(changed(7).await?["events"], Value::Null, "a formula");
    let r = c
        .post(entries.clone())
        .json(&json!({"type": "style", "body": {"ranges": ["A1:J101"], "style": {"italic": true}}}))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(changed(8).await?["events"], Value::Null, "1,010 cells");

    let bad = api.url(&format!("/logs/{log}/replicache/pull?view=some"));
    let (s, v) = post(&c, &bad, &pull_body("g", Value::Null)).await?;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "invalid-query");
    Ok(())
}

/// Replaying one log's client mutations onto another keeps their ids: the target gets the same
/// cells, and a second replay appends nothing.
#[tokio::test]
async fn a_replay_onto_another_log_is_idempotent() -> anyhow::Result<()> {
    let api = TestApi::start("sync-replay").await?;
    let c = api.client().await?;
    let source = create_log(&c, &api).await?;
    let target = create_log(&c, &api).await?;
    let push = api.url(&format!("/logs/{source}/replicache/push"));
    for (client, cells) in [
        ("c1", ["A1", "A2"]),
        ("c2", ["B1", "B2"]),
        ("c1", ["A3", "A4"]),
    ] {
        let base = if cells[0] == "A3" { 2 } else { 0 };
        let ms: Vec<Value> = cells
            .iter()
            .enumerate()
            .map(|(i, r)| set_mutation(client, base + i as u64 + 1, r, json!(r)))
            .collect();
        let (s, v) = post(&c, &push, &push_body("g", json!(ms))).await?;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    // A plain append in the source is not a client mutation and is not replayed.
    let r = c
        .post(api.url(&format!("/logs/{source}/entries")))
        .json(&set_body(&[("Z9", json!(1))]))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);

    let replay = api.url(&format!("/logs/{target}/replay"));
    // In two halves, then the whole range again.
    let (s, v) = post(&c, &replay, &json!({"source": source, "from": 0, "to": 2})).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        (v["mutationsApplied"].clone(), v["entriesAppended"].clone()),
        (json!(2), json!(1))
    );
    let (_, v) = post(&c, &replay, &json!({"source": source, "from": 2, "to": 5})).await?;
    assert_eq!(
        (v["mutationsApplied"].clone(), v["entriesRead"].clone()),
        (json!(4), json!(3))
    );
    let (_, v) = post(&c, &replay, &json!({"source": source, "from": 0, "to": 5})).await?;
    assert_eq!(
        (
            v["mutationsApplied"].clone(),
            v["mutationsSkipped"].clone(),
            v["entriesAppended"].clone()
        ),
        (json!(0), json!(6), json!(0)),
        "replaying again appends nothing: {v}"
    );
    let cells = |log: String| {
        let c = &c;
        let url = api.url(&format!("/logs/{log}/cells?range=A1:B4"));
        async move { anyhow::Ok(c.get(url).send().await?.json::<Value>().await?["values"].clone()) }
    };
    assert_eq!(cells(target.clone()).await?, cells(source.clone()).await?);
    let v: Value = c
        .get(api.url(&format!("/logs/{target}/clients/c1")))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        v["lastMutationId"], 4,
        "the mutations keep their client and ids: {v}"
    );

    // Bad requests write nothing.
    for bad in [
        json!({"source": target, "from": 0, "to": 1}),
        json!({"source": source, "from": 3, "to": 1}),
        json!({"source": "nope", "from": 0, "to": 1}),
        json!({"source": source, "from": 0}),
    ] {
        let (s, v) = post(&c, &replay, &bad).await?;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad} → {v}");
    }
    let (s, _) = post(&c, &replay, &json!({"source": source, "from": 0, "to": 99})).await?;
    assert_eq!(s, StatusCode::RANGE_NOT_SATISFIABLE);
    Ok(())
}

/// Under stale reads (as DynamoDB's eventually consistent queries have them), every incremental
/// pull still gives a view that holds exactly the mutations its lastMutationID says: a read that
/// has not caught up never lets the cookie move past changes the patch left out.
#[tokio::test]
async fn incremental_pulls_stay_exact_under_stale_reads() -> anyhow::Result<()> {
    let mut profile = sheetlog_core::faults::FaultProfile::named("stale")
        .ok_or_else(|| anyhow::anyhow!("no profile"))?;
    profile.stale_read = 0.7;
    let faults = sheetlog_core::faults::Faults::new(profile, 11);
    let Some(api) = TestApi::start_with_faults(
        "sync-stale",
        sheetlog_api::config::ApiConfig::default(),
        faults.clone(),
    )
    .await?
    else {
        return Ok(());
    };
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let pull = api.url(&format!("/logs/{log}/replicache/pull"));
    // Mutation i sets A(i % 7 + 1) to i, or clears it when i is a multiple of 5.
    let value = |i: u64| {
        if i.is_multiple_of(5) {
            Value::Null
        } else {
            json!(i)
        }
    };
    let expected = |last: u64| {
        let mut m = std::collections::BTreeMap::new();
        for i in 1..=last {
            let key = format!("cell/A{}", i % 7 + 1);
            match value(i) {
                Value::Null => m.remove(&key),
                v => m.insert(key, json!({ "value": v })),
            };
        }
        m
    };
    let mut view: std::collections::BTreeMap<String, Value> = Default::default();
    let (mut cookie, mut last) = (Value::Null, 0u64);
    for i in 1..=40u64 {
        let m = set_mutation("c", i, &format!("A{}", i % 7 + 1), value(i));
        let (s, v) = post(&c, &push, &push_body("g", json!([m]))).await?;
        assert_eq!(s, StatusCode::OK, "{v}");
        if !i.is_multiple_of(2) {
            // Pull after every second push, the first of the two entries old enough to show in
            // an eventually consistent read and the second not: a page that stops short.
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            continue;
        }
        let (s, v) = post(&c, &pull, &pull_body("g", cookie.clone())).await?;
        if s == StatusCode::SERVICE_UNAVAILABLE {
            continue; // a read had not caught up; Replicache retries later, and so do we
        }
        assert_eq!(s, StatusCode::OK, "mutation {i}, cookie {cookie}: {v}");
        apply_patch(&mut view, &v)?;
        if let Some(l) = v["lastMutationIDChanges"]["c"].as_u64() {
            last = l;
        }
        cookie = v["cookie"].clone();
        view.retain(|k, _| k.starts_with("cell/"));
        assert_eq!(
            view,
            expected(last),
            "after mutation {i}, cookie {cookie}, last {last}"
        );
    }
    // Once reads have caught up, one more pull brings the view to the end: nothing was lost
    // behind a cookie that moved too far.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (s, v) = post(&c, &pull, &pull_body("g", cookie.clone())).await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    apply_patch(&mut view, &v)?;
    view.retain(|k, _| k.starts_with("cell/"));
    assert_eq!(view, expected(40), "the final view holds every mutation");
    assert!(
        faults
            .counts
            .stale_reads
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0,
        "reads were stale"
    );
    Ok(())
}

/// The entry-size rule holds for Replicache pushes: a mutation whose entry would be over
/// `max_entry_bytes` (here 4.8 MB of cells, which `POST /entries` refuses with 413) is rejected
/// with that reason, recorded as processed with no effect (so the client's last mutation id
/// moves past it), and the rest of the push goes on.
#[tokio::test]
async fn a_mutation_over_the_entry_limit_is_rejected_not_written() -> anyhow::Result<()> {
    let api = TestApi::start("sync-oversize").await?;
    let c = api.client().await?;
    let log = create_log(&c, &api).await?;
    let push = api.url(&format!("/logs/{log}/replicache/push"));
    let cells: Vec<Value> = (1..=44_000)
        .map(|r| json!({"ref": format!("A{r}"), "value": "x".repeat(100)}))
        .collect();
    let huge = json!({"clientID": "c1", "id": 2, "name": "set", "timestamp": 1,
                      "args": {"cells": cells}});
    assert!(serde_json::to_vec(&huge)?.len() > 4_800_000);

    // The same cells through `POST /entries`: 413.
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .json(&json!({"type": "set", "body": {"cells": huge["args"]["cells"]}}))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let v: Value = r.json().await?;
    assert_eq!(v["error"]["code"], "entry-too-large", "{v}");

    let (s, v) = post(
        &c,
        &push,
        &push_body("g", json!([set_mutation("c1", 1, "B1", json!(1))])),
    )
    .await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    let before = c
        .get(api.url(&format!("/logs/{log}/entries?from=0")))
        .send()
        .await?
        .json::<Value>()
        .await?;
    let (s, v) = post(
        &c,
        &push,
        &push_body("g", json!([huge, set_mutation("c1", 3, "B3", json!(3))])),
    )
    .await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["applied"], 1, "{v}");
    assert_eq!(v["lastMutationIDs"]["c1"], 3, "{v}");
    let rejected = v["rejected"].as_array().cloned().unwrap_or_default();
    assert_eq!(rejected.len(), 1, "{v}");
    assert_eq!(rejected[0]["id"], 2);
    assert!(
        json_str(&rejected[0], "/error").starts_with("entry-too-large"),
        "{v}"
    );

    // The log holds the earlier entries unchanged and one new run: mutation 2 rejected (no
    // event), mutation 3 applied; no entry is over the limit.
    let after = c
        .get(api.url(&format!("/logs/{log}/entries?from=0")))
        .send()
        .await?
        .json::<Value>()
        .await?;
    let key = |e: &Value| (e["seq"].clone(), e["type"].clone(), e["body"].clone());
    let old: Vec<_> = before["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(key)
        .collect();
    let all = after["entries"].as_array().cloned().unwrap_or_default();
    let kept: Vec<_> = all.iter().take(old.len()).map(key).collect();
    assert_eq!(kept, old);
    let new: Vec<&Value> = all[old.len()..]
        .iter()
        .filter(|e| e["type"] == "mutations")
        .collect();
    assert_eq!(new.len(), 1, "{after}");
    assert_eq!(new[0]["body"]["rejected"], json!([2]));
    let applied: Vec<u64> = new[0]["body"]["mutations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_u64())
        .collect();
    assert_eq!(applied, vec![3]);
    assert!(
        serde_json::to_vec(&after)?.len() < 100_000,
        "the rejected cells were not written"
    );

    // The client is not stuck: a pull confirms mutation 3, and the next push goes on.
    let (s, v) = post(
        &c,
        &api.url(&format!("/logs/{log}/replicache/pull")),
        &pull_body("g", Value::Null),
    )
    .await?;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["lastMutationIDChanges"]["c1"], 3, "{v}");
    let (s, v) = post(
        &c,
        &push,
        &push_body("g", json!([set_mutation("c1", 4, "B4", json!(4))])),
    )
    .await?;
    assert_eq!((s, v["applied"].clone()), (StatusCode::OK, json!(1)), "{v}");
    Ok(())
}

/// Group ownership on the emulator's Clients table: of many concurrent first claims exactly one
/// subject wins and every claimant learns which; the claim shares the group's item with its
/// client list and neither disturbs the other.
#[tokio::test]
async fn concurrent_first_claims_of_a_group_agree_on_one_owner() -> anyhow::Result<()> {
    use sheetlog_core::ports::{ClientRuns, GroupOwners};
    let stack = TestStack::new("sync-owner").await?;
    let log = stack.log()?;
    let id = log.create().await?.log;
    let store = Arc::new(stack.log_store());
    let claims = (0..8).map(|i| {
        let store = store.clone();
        async move {
            let mut units = sheetlog_core::RequestUnits::default();
            store
                .claim_group(id, "g1", &format!("user-{i}"), &mut units)
                .await
        }
    });
    let owners = futures::future::try_join_all(claims).await?;
    let first = owners[0].clone();
    assert!(owners.iter().all(|o| *o == first), "{owners:?}");
    assert!(first.starts_with("user-"), "{first}");
    // The group's clients join the same item after the claim; the owner stays.
    log.push_run(id, "g1", "c1", &muts(1..=1), None, RunSource::Push)
        .await?;
    let mut units = sheetlog_core::RequestUnits::default();
    assert_eq!(
        store.group_clients(id, "g1", &mut units).await?,
        vec!["c1".to_owned()]
    );
    assert_eq!(
        store
            .claim_group(id, "g1", "someone-else", &mut units)
            .await?,
        first
    );
    Ok(())
}
