//! Per-person undo and redo through the HTTP API (`POST /logs/{logId}/undo`, `/redo`): a client
//! group undoes only its own steps, the undo follows rows others inserted since, a cell someone
//! else changed since is skipped and reported, a deleted range comes back with its values and
//! formats, two undos at once take back two steps, and a Replicache pull brings the undo.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_tests::api::{ApiClient, TestApi, new_log, post_entry, send_json_with as send_json};
use sheetlog_tests::fixtures::{pull_body, push_body, set_body};

const RANGE: &str = "A1:D8";

struct Sheet<'a> {
    c: &'a ApiClient,
    api: &'a TestApi,
    log: String,
}

impl Sheet<'_> {
    async fn start<'a>(c: &'a ApiClient, api: &'a TestApi) -> anyhow::Result<Sheet<'a>> {
        // Again on a failure: under the fault adapter, creating the log can be throttled too.
        let mut log = new_log(c, api).await;
        for _ in 0..20 {
            if log.is_ok() {
                break;
            }
            log = new_log(c, api).await;
        }
        Ok(Sheet { log: log?, c, api })
    }

    /// Pushes one mutation of `client` in group `group` (ids from 1, in order per client), again
    /// while the answer is a 5xx (a throttled or failed push, as Replicache retries it).
    async fn push(
        &self,
        group: &str,
        client: &str,
        id: u64,
        name: &str,
        args: Value,
    ) -> anyhow::Result<()> {
        let m = json!([{"clientID": client, "id": id, "name": name, "timestamp": 1, "args": args}]);
        let path = format!("/logs/{}/replicache/push", self.log);
        for _ in 0..20 {
            let (status, v) = send_json(
                self.c.post(self.api.url(&path)),
                Some(push_body(group, m.clone())),
            )
            .await?;
            if status.is_server_error() {
                continue;
            }
            anyhow::ensure!(status == StatusCode::OK, "push: {status} {v}");
            anyhow::ensure!(v.get("error").is_none(), "push: {v}");
            return Ok(());
        }
        anyhow::bail!("push: still failing after 20 tries")
    }

    async fn append(&self, entry: Value) -> anyhow::Result<()> {
        let (status, v) = post_entry(self.c, self.api, &self.log, entry).await?;
        anyhow::ensure!(status == StatusCode::CREATED, "append: {status} {v}");
        Ok(())
    }

    async fn act(&self, what: &str, group: &str) -> anyhow::Result<(StatusCode, Value)> {
        let path = format!("/logs/{}/{what}", self.log);
        send_json(
            self.c.post(self.api.url(&path)),
            Some(json!({"clientGroupId": group})),
        )
        .await
    }

    async fn undo(&self, group: &str) -> anyhow::Result<Value> {
        let (status, v) = self.act("undo", group).await?;
        anyhow::ensure!(status == StatusCode::CREATED, "undo: {status} {v}");
        Ok(v)
    }

    /// Values, formulas and formats of [`RANGE`].
    async fn cells(&self) -> anyhow::Result<Value> {
        let path = format!("/logs/{}/cells?range={RANGE}", self.log);
        let (status, v) = send_json(self.c.get(self.api.url(&path)), None).await?;
        anyhow::ensure!(status == StatusCode::OK, "{path}: {status} {v}");
        Ok(json!({"values": v["values"], "formulas": v["formulas"], "formats": v["formats"]}))
    }

    async fn value(&self, a1: &str) -> anyhow::Result<Value> {
        let path = format!("/logs/{}/cells?range={a1}:{a1}", self.log);
        for _ in 0..20 {
            let (status, v) = send_json(self.c.get(self.api.url(&path)), None).await?;
            if status.is_server_error() {
                continue;
            }
            anyhow::ensure!(status == StatusCode::OK, "{path}: {status} {v}");
            return Ok(v["values"][0][0].clone());
        }
        anyhow::bail!("{path}: still failing after 20 tries")
    }
}

fn cells(list: &[(&str, Value)]) -> Value {
    json!({"cells": list.iter().map(|(r, v)| json!({"ref": r, "value": v})).collect::<Vec<_>>()})
}

#[tokio::test]
async fn a_group_undoes_and_redoes_only_its_own_steps() -> anyhow::Result<()> {
    let api = TestApi::start("undo-own").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.append(set_body(&[("B2", json!("before"))])).await?;
    s.push("ga", "a1", 1, "set", cells(&[("B2", json!("mine"))]))
        .await?;
    s.push("gb", "b1", 1, "set", cells(&[("C3", json!("theirs"))]))
        .await?;
    s.push(
        "ga",
        "a1",
        2,
        "set",
        cells(&[("A1", json!(1)), ("A2", json!(2))]),
    )
    .await?;

    // The paste of two cells is one step.
    let v = s.undo("ga").await?;
    assert_eq!(
        v["target"],
        json!({"seq": v["target"]["seq"], "clientId": "a1", "mutationId": 2}),
        "{v}"
    );
    assert_eq!(
        (s.value("A1").await?, s.value("A2").await?),
        (Value::Null, Value::Null)
    );
    let v = s.undo("ga").await?;
    assert_eq!(v["target"]["mutationId"], 1, "{v}");
    assert_eq!(v["skipped"], 0, "{v}");
    assert_eq!(s.value("B2").await?, json!("before"));
    assert_eq!(
        s.value("C3").await?,
        json!("theirs"),
        "the other group's edit stays"
    );
    let (status, v) = s.act("undo", "ga").await?;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "nothing-to-undo", "{v}");

    // Redo re-applies, newest undo first; a redo can be undone again.
    let (status, v) = s.act("redo", "ga").await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["redo"], true, "{v}");
    assert_eq!(s.value("B2").await?, json!("mine"));
    s.undo("ga").await?;
    assert_eq!(s.value("B2").await?, json!("before"));
    s.act("redo", "ga").await?;
    s.act("redo", "ga").await?;
    assert_eq!(
        (s.value("B2").await?, s.value("A2").await?),
        (json!("mine"), json!(2))
    );
    let (status, v) = s.act("redo", "ga").await?;
    assert_eq!(
        (status, &v["error"]["code"]),
        (StatusCode::CONFLICT, &json!("nothing-to-redo")),
        "{v}"
    );

    // A new step empties the redo stack.
    s.undo("ga").await?;
    s.push("ga", "a1", 3, "set", cells(&[("D4", json!("new"))]))
        .await?;
    let (status, _) = s.act("redo", "ga").await?;
    assert_eq!(status, StatusCode::CONFLICT);

    // The other group's undo takes back its own edit only.
    s.undo("gb").await?;
    assert_eq!(s.value("C3").await?, Value::Null);
    assert_eq!(s.value("D4").await?, json!("new"));
    Ok(())
}

#[tokio::test]
async fn an_undo_lands_on_the_cells_a_concurrent_row_insert_moved() -> anyhow::Result<()> {
    let api = TestApi::start("undo-insert").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.append(set_body(&[("B5", json!("old")), ("B6", json!("next"))]))
        .await?;
    s.push("ga", "a1", 1, "set", cells(&[("B5", json!("mine"))]))
        .await?;
    s.push("gb", "b1", 1, "insert-rows", json!({"at": 1, "count": 2}))
        .await?;
    let before_undo = s.cells().await?;
    assert_eq!(s.value("B7").await?, json!("mine"));
    let v = s.undo("ga").await?;
    assert_eq!(v["skipped"], 0, "{v}");
    assert_eq!(
        s.value("B7").await?,
        json!("old"),
        "the moved cell is undone"
    );
    assert_eq!(s.value("B8").await?, json!("next"));
    assert_eq!(s.value("B5").await?, Value::Null, "not the cell now at B5");
    let mut want = before_undo;
    want["values"][6][1] = json!("old");
    assert_eq!(s.cells().await?, want);

    // Undoing the insert removes the rows wherever they are now.
    s.push("gb", "b1", 2, "set", cells(&[("A1", json!("top"))]))
        .await?;
    s.undo("gb").await?;
    s.undo("gb").await?;
    assert_eq!(s.value("B5").await?, json!("old"));
    Ok(())
}

#[tokio::test]
async fn an_undo_skips_and_reports_a_cell_someone_else_changed() -> anyhow::Result<()> {
    let api = TestApi::start("undo-overwritten").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.push(
        "ga",
        "a1",
        1,
        "set",
        cells(&[("B2", json!(1)), ("C2", json!(1))]),
    )
    .await?;
    s.push("gb", "b1", 1, "set", cells(&[("B2", json!(9))]))
        .await?;
    let v = s.undo("ga").await?;
    assert_eq!(v["skipped"], 1, "{v}");
    assert_eq!(v["changed"], json!(["B2"]), "{v}");
    assert_eq!(s.value("B2").await?, json!(9), "someone else's value stays");
    assert_eq!(s.value("C2").await?, Value::Null);

    // A step whose every cell was changed is skipped whole, and nothing is left to redo.
    s.push("ga", "a1", 2, "set", cells(&[("D1", json!("x"))]))
        .await?;
    s.push("gb", "b1", 2, "delete-rows", json!({"at": 1, "count": 1}))
        .await?;
    let v = s.undo("ga").await?;
    assert_eq!(
        (v["skipped"].clone(), v["events"].clone()),
        (json!(1), json!([])),
        "{v}"
    );
    Ok(())
}

#[tokio::test]
async fn an_undone_delete_brings_back_values_formulas_and_formats() -> anyhow::Result<()> {
    let api = TestApi::start("undo-delete").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.append(json!({"type": "set", "body": {"cells": [
        {"ref": "A1", "value": "head"},
        {"ref": "A2", "value": 0.25, "format": "0%"},
        {"ref": "B3", "value": "=A2*2"},
        {"ref": "C4", "value": true},
        {"ref": "A5", "value": "tail"}]}}))
        .await?;
    let before = s.cells().await?;
    s.push("ga", "a1", 1, "delete-rows", json!({"at": 2, "count": 3}))
        .await?;
    s.push(
        "ga",
        "a1",
        2,
        "delete-columns",
        json!({"at": "A", "count": 1}),
    )
    .await?;
    assert_ne!(s.cells().await?, before);
    s.undo("ga").await?;
    s.undo("ga").await?;
    assert_eq!(s.cells().await?, before);
    Ok(())
}

#[tokio::test]
async fn two_undos_at_once_take_back_two_steps() -> anyhow::Result<()> {
    let api = TestApi::start("undo-race").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.push("ga", "a1", 1, "set", cells(&[("A1", json!(1))]))
        .await?;
    s.push("ga", "a1", 2, "set", cells(&[("A2", json!(2))]))
        .await?;
    let (a, b) = tokio::join!(s.act("undo", "ga"), s.act("undo", "ga"));
    let (a, b) = (a?, b?);
    assert_eq!(
        (a.0, b.0),
        (StatusCode::CREATED, StatusCode::CREATED),
        "{a:?} {b:?}"
    );
    let mut ids = [
        a.1["target"]["mutationId"].clone(),
        b.1["target"]["mutationId"].clone(),
    ];
    ids.sort_by_key(|v| v.as_u64());
    assert_eq!(ids, [json!(1), json!(2)]);
    assert_eq!(
        (s.value("A1").await?, s.value("A2").await?),
        (Value::Null, Value::Null)
    );
    Ok(())
}

#[tokio::test]
async fn a_retried_undo_with_its_key_undoes_once() -> anyhow::Result<()> {
    let api = TestApi::start("undo-retry").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.push("ga", "a1", 1, "set", cells(&[("A1", json!(1))]))
        .await?;
    s.push("ga", "a1", 2, "set", cells(&[("A2", json!(2))]))
        .await?;
    let path = format!("/logs/{}/undo", s.log);
    let send = || {
        c.post(api.url(&path))
            .header("idempotency-key", "undo-once")
            .json(&json!({"clientGroupId": "ga"}))
            .send()
    };
    let first = send().await?;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first: Value = first.json().await?;
    let again = send().await?;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(
        again
            .headers()
            .get("idempotent-replayed")
            .map(|v| v.as_bytes()),
        Some(&b"true"[..])
    );
    let again: Value = again.json().await?;
    assert_eq!(
        (again["seq"].clone(), again["target"].clone()),
        (first["seq"].clone(), first["target"].clone())
    );
    assert_eq!(
        s.value("A1").await?,
        json!(1),
        "the retry did not undo the step before"
    );
    assert_eq!(s.value("A2").await?, Value::Null);
    Ok(())
}

#[tokio::test]
async fn a_pull_brings_the_undo_and_bad_requests_change_nothing() -> anyhow::Result<()> {
    let api = TestApi::start("undo-pull").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.push("ga", "a1", 1, "set", cells(&[("B2", json!("x"))]))
        .await?;
    let pull_path = format!("/logs/{}/replicache/pull", s.log);
    let (_, first) = send_json(
        c.post(api.url(&pull_path)),
        Some(pull_body("gb", Value::Null)),
    )
    .await?;
    s.undo("ga").await?;
    let (status, next) = send_json(
        c.post(api.url(&pull_path)),
        Some(pull_body("gb", first["cookie"].clone())),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{next}");
    assert!(
        next["patch"]
            .as_array()
            .is_some_and(|p| p.contains(&json!({"op": "del", "key": "cell/B2"}))),
        "{next}"
    );

    let entries_before = s.cells().await?;
    for (body, code) in [
        (json!({}), "invalid-entry"),
        (json!({"clientGroupId": ""}), "invalid-entry"),
        (json!({"clientGroupId": "ga", "extra": 1}), "invalid-entry"),
    ] {
        let path = format!("/logs/{}/undo", s.log);
        let (status, v) = send_json(c.post(api.url(&path)), Some(body.clone())).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(v["error"]["code"], code, "{body}: {v}");
    }
    let missing = uuid::Uuid::new_v4();
    let (status, _) = send_json(
        c.post(api.url(&format!("/logs/{missing}/undo"))),
        Some(json!({"clientGroupId": "ga"})),
    )
    .await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(s.cells().await?, entries_before);
    Ok(())
}

/// Stale reads, lost responses, transaction conflicts and throttling (the fault adapter): a client
/// that retries each undo with its key (as the CLI does) takes back exactly its last three steps,
/// once each, in order, and another group's edits stay.
#[tokio::test]
async fn undos_under_faults_take_back_each_step_once() -> anyhow::Result<()> {
    use sheetlog_core::faults::{FaultProfile, Faults};
    let mut profile = FaultProfile::named("hostile").ok_or_else(|| anyhow::anyhow!("profile"))?;
    profile.throttle = 0.05;
    let faults = Faults::new(profile, 46);
    let Some(api) = TestApi::start_with_faults(
        "undo-faults",
        sheetlog_api::ApiConfig::default(),
        faults.clone(),
    )
    .await?
    else {
        return Ok(());
    };
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    for i in 1..=6 {
        s.push("ga", "a1", i, "set", cells(&[(&format!("A{i}"), json!(i))]))
            .await?;
        s.push(
            "gb",
            "b1",
            i,
            "set",
            cells(&[(&format!("B{i}"), json!(-(i as i64)))]),
        )
        .await?;
    }
    let path = format!("/logs/{}/undo", s.log);
    let mut last = 0;
    for n in 0..3 {
        let key = format!("undo-{n}");
        let mut tries = 0;
        loop {
            tries += 1;
            let r = c
                .post(api.url(&path))
                .header("idempotency-key", &key)
                .json(&json!({"clientGroupId": "ga"}))
                .send()
                .await?;
            let status = r.status();
            let v: Value = r.json().await.unwrap_or(Value::Null);
            if status == StatusCode::CREATED {
                last = v["seq"].as_u64().unwrap_or(0);
                break;
            }
            anyhow::ensure!(
                status.is_server_error() && tries < 20,
                "undo {n}: {status} {v}"
            );
        }
    }
    // Entry listings are eventually consistent reads: read until the last undo shows.
    let list = api.url(&format!("/logs/{}/entries?from=0&limit=1000", s.log));
    let mut entries = Vec::new();
    for _ in 0..50 {
        let (status, v) = send_json(c.get(&list), None).await?;
        entries = v["entries"].as_array().cloned().unwrap_or_default();
        if status == StatusCode::OK && entries.iter().any(|e| e["seq"] == last) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let undone: Vec<Value> = entries
        .iter()
        .filter(|e| e["type"] == "undo")
        .map(|e| e["body"]["target"]["mutationID"].clone())
        .collect();
    assert_eq!(
        undone,
        vec![json!(6), json!(5), json!(4)],
        "each step once, newest first"
    );
    for i in 1..=6 {
        let a = if i <= 3 { json!(i) } else { Value::Null };
        assert_eq!(s.value(&format!("A{i}")).await?, a, "A{i}");
        assert_eq!(s.value(&format!("B{i}")).await?, json!(-(i as i64)), "B{i}");
    }
    assert!(faults.counts.total() > 0, "no fault was injected");
    Ok(())
}

/// Imports `csv` through the upload flow as client group `group`; the import's sequence.
async fn import_as(s: &Sheet<'_>, group: &str, csv: &str) -> anyhow::Result<u64> {
    let u = sheetlog_tests::api::upload_file(
        s.c,
        s.api,
        &s.log,
        json!({"type": "import", "contentType": "text/csv"}),
        csv.as_bytes(),
    )
    .await?;
    let id = u["uploadId"].as_str().unwrap_or_default();
    let path = format!("/logs/{}/uploads/{id}/commit", s.log);
    let (status, v) = send_json(
        s.c.post(s.api.url(&path)),
        Some(json!({"clientGroupId": group})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "commit: {status} {v}");
    v["seq"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no seq in {v}"))
}

#[tokio::test]
async fn an_import_undoes_as_one_step_while_nothing_came_after_it() -> anyhow::Result<()> {
    let api = TestApi::start("undo-import").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.push(
        "ga",
        "a1",
        1,
        "set",
        cells(&[("A1", json!("typed")), ("D8", json!("kept?"))]),
    )
    .await?;
    let before = s.cells().await?;
    let seq = import_as(&s, "ga", "x,y\n1,2\n").await?;
    let imported = s.cells().await?;
    assert_eq!(imported["values"][0], json!(["x", "y", null, null]));

    // The import is the group's last step: one undo brings back the sheet before it, whole.
    let v = s.undo("ga").await?;
    assert_eq!(v["target"], json!({"seq": seq}), "{v}");
    assert_eq!(
        v["events"],
        json!([{"type": "restore", "body": {"seq": seq}}]),
        "{v}"
    );
    assert_eq!(s.cells().await?, before);
    let (status, v) = s.act("redo", "ga").await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(s.cells().await?, imported);
    s.undo("ga").await?;
    assert_eq!(s.cells().await?, before);
    // Then the mutation before it.
    s.undo("ga").await?;
    assert_eq!(s.value("A1").await?, Value::Null);

    // An import someone edited after: undoing it would drop their edit, so it is skipped.
    import_as(&s, "ga", "p,q\n").await?;
    s.push("gb", "b1", 1, "set", cells(&[("C3", json!("theirs"))]))
        .await?;
    let v = s.undo("ga").await?;
    assert_eq!(
        (v["skipped"].clone(), v["events"].clone()),
        (json!(1), json!([])),
        "{v}"
    );
    assert_eq!(s.value("A1").await?, json!("p"));
    assert_eq!(s.value("C3").await?, json!("theirs"));

    // A malformed group is refused before anything is committed.
    let u = sheetlog_tests::api::upload_file(
        &c,
        &api,
        &s.log,
        json!({"type": "import", "contentType": "text/csv"}),
        b"z\n",
    )
    .await?;
    let path = format!(
        "/logs/{}/uploads/{}/commit",
        s.log,
        u["uploadId"].as_str().unwrap_or_default()
    );
    let (status, v) = send_json(c.post(api.url(&path)), Some(json!({"clientGroupId": ""}))).await?;
    assert_eq!(
        (status, &v["error"]["code"]),
        (StatusCode::BAD_REQUEST, &json!("invalid-entry")),
        "{v}"
    );
    assert_eq!(s.value("A1").await?, json!("p"), "nothing was imported");
    Ok(())
}

#[tokio::test]
async fn a_restore_the_group_made_is_undone_by_one_undo() -> anyhow::Result<()> {
    let api = TestApi::start("undo-restore").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.push("ga", "a1", 1, "set", cells(&[("A1", json!("v1"))]))
        .await?;
    let version = s.cells().await?;
    s.push(
        "gb",
        "b1",
        1,
        "set",
        cells(&[("A1", json!("v2")), ("B2", json!("later"))]),
    )
    .await?;
    let before = s.cells().await?;
    let path = format!("/logs/{}/restore", s.log);
    let (status, r) = send_json(
        c.post(api.url(&path)),
        Some(json!({"seq": 2, "clientGroupId": "ga"})),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    assert_eq!(s.cells().await?, version);
    let v = s.undo("ga").await?;
    assert_eq!(
        v["target"],
        json!({"seq": r["seq"]}),
        "the restore is the group's last step: {v}"
    );
    assert_eq!(s.cells().await?, before);
    let (status, _) = s.act("redo", "ga").await?;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(s.cells().await?, version);
    // A malformed group is refused before anything is restored.
    let (status, v) = send_json(
        c.post(api.url(&path)),
        Some(json!({"seq": 1, "clientGroupId": ""})),
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    Ok(())
}

#[tokio::test]
async fn an_entry_appended_for_a_group_is_its_step_rebased_or_not() -> anyhow::Result<()> {
    let api = TestApi::start("undo-authored").await?;
    let c = api.client().await?;
    let s = Sheet::start(&c, &api).await?;
    s.append(set_body(&[("B3", json!("before"))])).await?;
    let path = format!("/logs/{}/entries", s.log);
    let (status, v) = send_json(
        c.post(api.url(&path)),
        Some(
            json!({"type": "set", "body": {"cells": [{"ref": "B3", "value": "cli"}]},
            "clientGroupId": "cli-1"}),
        ),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let base = v["nextSeq"].as_u64().unwrap_or_default();
    // Someone inserts a row above; the next edit is made against the view before it.
    s.append(json!({"type": "insert-rows", "body": {"at": 1, "count": 1}}))
        .await?;
    let (status, v) = send_json(
        c.post(api.url(&path)),
        Some(
            json!({"type": "set", "body": {"cells": [{"ref": "C3", "value": "moved"}]},
            "baseSeq": base, "clientGroupId": "cli-1"}),
        ),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(
        s.value("C4").await?,
        json!("moved"),
        "rebased onto the row's new place"
    );
    // Each undo takes back one of the group's edits, where its cells are now.
    s.undo("cli-1").await?;
    assert_eq!(s.value("C4").await?, Value::Null);
    s.undo("cli-1").await?;
    assert_eq!(s.value("B4").await?, json!("before"));
    let (status, v) = s.act("undo", "cli-1").await?;
    assert_eq!(
        (status, &v["error"]["code"]),
        (StatusCode::CONFLICT, &json!("nothing-to-undo")),
        "{v}"
    );
    // The listing shows the edit as its event, with the group.
    let (_, listed) = send_json(c.get(api.url(&format!("{path}?from=2&limit=1"))), None).await?;
    assert_eq!(listed["entries"][0]["type"], "set", "{listed}");
    assert_eq!(
        listed["entries"][0]["body"]["clientGroupID"], "cli-1",
        "{listed}"
    );
    let (status, v) = send_json(
        c.post(api.url(&path)),
        Some(json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": 1}]}, "clientGroupId": " "})),
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    Ok(())
}
