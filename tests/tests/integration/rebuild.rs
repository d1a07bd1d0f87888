//! The restore drill for snapshots (`sheetlog-maintenance rebuild-snapshots`): a log with an
//! import, history over several segments (two archived to S3) and large bodies, a fork of it with
//! history of its own and its fork markers, and a deleted log; every object under `snapshots/`
//! is recorded with every version's read, then deleted (the fork's own first snapshot too, which
//! comes back from the source its entry 0 records); the rebuild, reading in small pages, brings back the same bytes under the same keys and every
//! version reads exactly as before: through the core (`sheet_as_of`), and through the API router
//! as clients read it (a CSV export's extent and cells at every version, and Replicache pulls
//! from a null cookie and from every cookie).

use std::collections::BTreeMap;

use anyhow::{bail, ensure};
use bytes::Bytes;
use serde_json::json;
use sheetlog_core::aws::DynamoPurge;
use sheetlog_core::domain::{LogId, SnapshotJob};
use sheetlog_core::log::purge::fork_markers;
use sheetlog_core::log::{AppendOptions, ForkOrigin};
use sheetlog_core::ports::{LogPurge, ObjectPurge, PayloadStore};
use sheetlog_core::snapshot::materialize;
use sheetlog_core::snapshot_input::{fork_snapshot, restore_snapshot, sheet_as_of};
use sheetlog_maintenance::{
    Mode, Policy, RebuildOptions, RebuildReport, RebuildTables, Rebuilder, Retention, RunOptions,
};
use sheetlog_sheet::sample::write_sample_csv;
use sheetlog_snapshot_worker::Worker;
use sheetlog_tests::fixtures::{
    event_entry, numbered_edit_entry, offloaded_set_entry, snapshot_entry,
};
use sheetlog_tests::pipeline::{
    PipelineStack, TEST_BUILD, drive_to_completion, test_worker_config,
};
use sheetlog_tests::stack::AwsLog;

/// `edits` edits then a built snapshot; with `big`, one edit large enough to live in S3.
async fn edits(
    px: &PipelineStack,
    worker: &Worker,
    log: LogId,
    from: u32,
    edits: u32,
    big: bool,
) -> anyhow::Result<()> {
    for i in from..from + edits {
        let e = numbered_edit_entry(i, 40);
        px.log.append(log, e, AppendOptions::default()).await?;
    }
    if big {
        let e = offloaded_set_entry();
        px.log.append(log, e, AppendOptions::default()).await?;
    }
    let a = px
        .log
        .append(log, snapshot_entry(), AppendOptions::default())
        .await?;
    drive_to_completion(worker, SnapshotJob::new(log, a.segment, a.entry)).await
}

/// Every object under `snapshots/<log>/` with its bytes (checkpoints are scratch, not state).
async fn objects(px: &PipelineStack, log: LogId) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for key in px.snapshot_objects(log).await? {
        if key.contains("/checkpoints/") {
            continue;
        }
        let bytes = px.blobs.get_object(&key).await?.unwrap_or_default();
        out.insert(key, bytes.to_vec());
    }
    Ok(out)
}

/// The sheet as of every sequence of the log, read the way `cells?at=` reads it: the newest
/// snapshot at or before it (its chunks, every row) and the entries after it.
async fn reads(px: &PipelineStack, log: LogId) -> anyhow::Result<Vec<String>> {
    reads_from(&px.log, px, log).await
}

async fn reads_from(
    events: &AwsLog,
    px: &PipelineStack,
    log: LogId,
) -> anyhow::Result<Vec<String>> {
    let (next, _) = events.next_seq(log).await?;
    let mut out = Vec::new();
    for at in 0..=next {
        let s = sheet_as_of(events, &px.blobs, log, at).await?;
        let rows = match &s.base {
            Some(m) => format!("{:?}", materialize(&px.blobs, m).await?),
            None => String::new(),
        };
        out.push(format!("{at}: {rows} {:?}", s.entries));
    }
    Ok(out)
}

/// What clients read through the API at every version of `log`: a CSV export (the extent, then
/// every cell of it, as `sheetlog export` and the web page's download read it) and a Replicache
/// pull from a null cookie and from every cookie, each answer with its status, byte for byte.
/// The API is a fresh process over the same tables and bucket, so nothing is cached across the
/// rebuild.
async fn api_reads(px: &PipelineStack, log: LogId) -> anyhow::Result<Vec<String>> {
    let state = sheetlog_api::AppState::from_sdk(
        &px.sdk,
        &px.stack.resources,
        sheetlog_core::config::LogConfig::default(),
        sheetlog_api::ApiConfig::default(),
    )?;
    let (base, server) =
        sheetlog_tests::api::serve(sheetlog_api::router(std::sync::Arc::new(state))).await?;
    let http = reqwest::Client::new();
    let get = |path: String| {
        let http = http.clone();
        let url = format!("{base}/logs/{log}/{path}");
        async move {
            let r = http.get(&url).send().await?;
            anyhow::Ok((r.status().as_u16(), r.text().await?))
        }
    };
    let (next, _) = px.log.next_seq(log).await?;
    let mut out = Vec::new();
    for at in 0..=next {
        let (status, extent) = get(format!("extent?at={at}")).await?;
        out.push(format!("extent {at}: {status} {extent}"));
        let v: serde_json::Value = serde_json::from_str(&extent).unwrap_or_default();
        let (rows, cols) = (v["rows"].as_u64(), v["columns"].as_u64());
        if let (Some(rows @ 1..), Some(cols @ 1..)) = (rows, cols) {
            let last = sheetlog_sheet::a1::column_name(u32::try_from(cols - 1)?);
            let (status, cells) = get(format!("cells?range=A1:{last}{rows}&at={at}")).await?;
            out.push(format!("cells {at}: {status} {cells}"));
        }
    }
    let cookies = std::iter::once(serde_json::Value::Null).chain((0..=next).map(|c| json!(c)));
    for cookie in cookies {
        let r = http
            .post(format!("{base}/logs/{log}/replicache/pull"))
            .json(
                &json!({"pullVersion": 1, "clientGroupID": "drill-group", "cookie": cookie,
                "profileID": "drill", "schemaVersion": ""}),
            )
            .send()
            .await?;
        out.push(format!(
            "pull {cookie}: {} {}",
            r.status().as_u16(),
            r.text().await?
        ));
    }
    server.abort();
    Ok(out)
}

async fn delete(px: &PipelineStack, keys: impl Iterator<Item = &String>) -> anyhow::Result<()> {
    for key in keys {
        px.stack
            .s3
            .delete_object()
            .bucket(&px.stack.resources.bucket)
            .key(key)
            .send()
            .await?;
    }
    Ok(())
}

/// A run over `log` (or every log) with the chunk size the test worker builds with.
fn opts(log: Option<LogId>, dry_run: bool) -> RebuildOptions {
    RebuildOptions {
        log,
        dry_run,
        build: TEST_BUILD,
        // Small pages, so the walk pages across segments, archived ones included.
        page_entries: 5,
        ..RebuildOptions::default()
    }
}

fn rebuilder(px: &PipelineStack) -> anyhow::Result<Rebuilder> {
    let r = &px.stack.resources;
    let tables = RebuildTables {
        entry_table: r.entry_table.clone(),
        segment_table: r.segment_table.clone(),
        clients_table: r.require_clients_table()?.to_owned(),
    };
    Ok(Rebuilder::new(
        px.stack.dynamo.clone(),
        &tables,
        px.stack.bucket(),
    )?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_snapshot_comes_back_byte_for_byte_from_the_log() -> anyhow::Result<()> {
    let px = PipelineStack::new("rebuild").await?;
    let worker = px.worker(test_worker_config())?;

    // An import, then four segments of history, each with two snapshots; the oldest two are
    // archived to S3.
    let log = px.log.create().await?.log;
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, 60)?;
    let key = format!("payloads/{log}/uploads/import-1");
    px.payloads()
        .put_discardable(&key, Bytes::from(csv))
        .await?;
    let import =
        event_entry(json!({"type": "import", "body": {"format": "csv"}})).with_payload(&key);
    px.log.append(log, import, AppendOptions::default()).await?;
    let mut n = 0;
    for s in 0..4 {
        edits(&px, &worker, log, n, 6, s == 0).await?;
        if s == 3 {
            // A restore to a version of segment 1, as `POST /logs/{logId}/restore` makes it: its
            // kept state first, then the entry. The rebuild must bring that state back before
            // the snapshot after it, which starts from it.
            restore_snapshot(&px.log, &px.blobs, &px.blobs, TEST_BUILD, log, 20).await?;
            let restore = event_entry(json!({"type": "restore", "body": {"seq": 20}}));
            px.log
                .append(log, restore, AppendOptions::default())
                .await?;
        }
        edits(&px, &worker, log, n + 6, 6, false).await?;
        n += 12;
        if s < 3 {
            let started = px.log.start_segment(log).await?;
            drive_to_completion(&worker, SnapshotJob::new(log, started.segment, 0)).await?;
        }
    }
    let archived = Retention::new(
        px.stack.dynamo.clone(),
        &px.stack.resources.entry_table,
        &px.stack.resources.segment_table,
        px.stack.bucket(),
        Policy {
            mode: Mode::Archive,
            keep_segments: 2,
            after_days: None,
        },
    )
    .run(
        RunOptions {
            now: sheetlog_core::domain::now_secs(),
            dry_run: false,
            deadline: None,
        },
        &mut |_, _| {},
    )
    .await?;
    ensure!(archived.segments_archived == 2, "{archived:?}");

    // A fork from the middle of the log, with history of its own.
    let fork = LogId::new_random();
    let built = fork_snapshot(&px.log, &px.blobs, &px.blobs, TEST_BUILD, log, 40, fork).await?;
    // The markers the API writes with each log whose chunks the fork shares.
    let fork_manifest = built.manifest()?;
    let sources: std::collections::BTreeSet<_> =
        fork_manifest.chunks.iter().filter_map(|c| c.log).collect();
    ensure!(
        sources.len() == 1,
        "the fork shares the source's chunks: {sources:?}"
    );
    for marker in fork_markers(log, fork) {
        px.blobs.put_marker(&marker).await?;
    }
    px.log
        .create_fork(
            fork,
            built.manifest_key.clone(),
            Some(ForkOrigin {
                source: log,
                at: 40,
            }),
        )
        .await?;
    edits(&px, &worker, fork, 1000, 10, false).await?;
    // The fork's own first snapshot: its manifest and the chunks under its prefix.
    let fork_base: Vec<String> = std::iter::once(built.manifest_key.clone())
        .chain(
            fork_manifest
                .chunks
                .iter()
                .filter(|c| c.log.is_none())
                .map(|c| c.key(*fork.as_uuid(), fork_manifest.format)),
        )
        .collect();

    // A deleted log: its tombstone makes the rebuild skip it.
    let gone = px.log.create().await?.log;
    edits(&px, &worker, gone, 0, 3, false).await?;
    let r = &px.stack.resources;
    let purge = DynamoPurge::new(
        px.stack.dynamo.clone(),
        &r.entry_table,
        &r.segment_table,
        r.require_pending_table()?,
        r.require_clients_table()?,
    );
    // The tombstone, written first by `DELETE /logs/{logId}`: what a rebuild racing a delete
    // sees (its items and objects are about to go).
    purge
        .mark_deleted(gone, sheetlog_core::domain::now_secs())
        .await?;

    let before = (
        objects(&px, log).await?,
        objects(&px, fork).await?,
        reads(&px, log).await?,
        reads(&px, fork).await?,
    );
    let api_before = (api_reads(&px, log).await?, api_reads(&px, fork).await?);
    ensure!(
        api_before
            .0
            .iter()
            .any(|r| r.starts_with("cells") && r.contains(": 200 "))
            && api_before
                .0
                .iter()
                .any(|r| r.starts_with("pull null: 200 ")),
        "{:?}",
        &api_before.0[..api_before.0.len().min(5)]
    );
    ensure!(
        before.0.len() > 10 && before.1.len() > 2,
        "{:?}",
        before.0.keys()
    );

    // With everything present a run builds nothing (every snapshot is intact); a verifying dry
    // run builds every snapshot and writes nothing, finding every object present.
    let tool = rebuilder(&px)?;
    let dry = tool.run(opts(Some(log), true), &mut |_, _| {}).await?;
    ensure!(
        dry.objects_written == 0 && dry.snapshots_rebuilt == 0 && dry.snapshots_intact == 11,
        "{dry:?}"
    );
    let verify = RebuildOptions {
        verify: true,
        ..opts(Some(log), true)
    };
    let dry = tool.run(verify, &mut |_, _| {}).await?;
    ensure!(
        dry.objects_written == 0
            && dry.objects_present > 0
            && dry.snapshots_rebuilt == 11
            && dry.roots_fixed == 0,
        "{dry:?}"
    );

    // Lose every snapshot object, the fork's own first snapshot included.
    ensure!(fork_base.len() > 1, "{fork_base:?}");
    delete(&px, before.0.keys()).await?;
    delete(&px, before.1.keys()).await?;
    ensure!(px.snapshot_objects(fork).await?.is_empty());
    ensure!(px.snapshot_objects(log).await?.is_empty());
    ensure!(
        before.1.keys().any(|k| k.contains("/sources/")),
        "{:?}",
        before.1.keys()
    );

    let mut progress = Vec::new();
    let report = tool
        .run(opts(None, false), &mut |l, _| progress.push(l))
        .await?;
    ensure!(
        progress.len() == 3 && progress.contains(&fork) && progress.contains(&gone),
        "{progress:?}"
    );
    // The source comes back before the fork that shares its chunks.
    let (at_log, at_fork) = (
        progress.iter().position(|l| *l == log),
        progress.iter().position(|l| *l == fork),
    );
    ensure!(at_log < at_fork, "{progress:?}");
    ensure!(
        report.objects_written > 10
            && report.roots_fixed == 0
            && report.logs_deleted == 1
            && report.fork_bases_rebuilt == 1
            && report.fork_bases_missing == 0
            && report.restores_rebuilt == 1,
        "{report:?}"
    );
    let after = (
        objects(&px, log).await?,
        objects(&px, fork).await?,
        reads(&px, log).await?,
        reads(&px, fork).await?,
    );
    ensure!(
        after.0 == before.0,
        "the log's snapshot objects differ after the rebuild"
    );
    ensure!(
        after.1 == before.1,
        "the fork's snapshot objects differ after the rebuild"
    );
    ensure!(
        after.2 == before.2,
        "a version of the log reads differently"
    );
    ensure!(
        after.3 == before.3,
        "a version of the fork reads differently"
    );
    let api_after = (api_reads(&px, log).await?, api_reads(&px, fork).await?);
    for (name, b, a) in [
        ("log", &api_before.0, &api_after.0),
        ("fork", &api_before.1, &api_after.1),
    ] {
        let differs = b.iter().zip(a).find(|(b, a)| b != a);
        ensure!(
            b.len() == a.len() && differs.is_none(),
            "the {name}'s exports or pulls read differently after the rebuild: {differs:?}"
        );
    }

    // Idempotent and resumable: a second run finds every snapshot whole, builds none and
    // writes nothing.
    let again = tool.run(opts(None, false), &mut |_, _| {}).await?;
    ensure!(
        again.objects_written == 0
            && again.snapshots_rebuilt == 0
            && again.snapshots_intact == report.snapshots_rebuilt + report.snapshots_intact
            && again.fork_bases_rebuilt == 0
            && again.restores_rebuilt == 0,
        "{again:?} after {report:?}"
    );

    // The source's marker for the fork is recreated (it keeps a deleted source's chunks alive).
    ensure!(
        px.blobs
            .get_object(&fork_markers(log, fork)[0])
            .await?
            .is_some()
    );

    // A fork made before origins were recorded (entry 0 names no source) whose first snapshot
    // is gone is reported, not guessed at.
    let old = LogId::new_random();
    let old_base = fork_snapshot(&px.log, &px.blobs, &px.blobs, TEST_BUILD, log, 30, old).await?;
    for marker in fork_markers(log, old) {
        px.blobs.put_marker(&marker).await?;
    }
    px.log
        .create_fork(old, old_base.manifest_key.clone(), None)
        .await?;
    delete(&px, std::iter::once(&old_base.manifest_key)).await?;
    let lost = tool.run(opts(Some(old), false), &mut |_, _| {}).await?;
    ensure!(
        lost == RebuildReport {
            logs: 1,
            entries_read: lost.entries_read,
            fork_bases_missing: 1,
            ..RebuildReport::default()
        },
        "{lost:?}"
    );
    Ok(())
}

/// The stand-in for a point-in-time restore (the emulator has none): every item of `table` copied
/// into a new table with the same keys, as `restore-table-to-point-in-time` gives a new table.
async fn restore_table(px: &PipelineStack, table: &str) -> anyhow::Result<String> {
    let ddb = &px.stack.dynamo;
    let restored = format!("{table}-restored");
    let described = ddb.describe_table().table_name(table).send().await?;
    let Some(t) = described.table else {
        bail!("{table}: no description");
    };
    // A restore keeps the table's global secondary indexes (the Clients table's `byLog`).
    let indexes = t
        .global_secondary_indexes
        .filter(|described| !described.is_empty())
        .map(|described| {
            described
                .into_iter()
                .map(|d| {
                    aws_sdk_dynamodb::types::GlobalSecondaryIndex::builder()
                        .set_index_name(d.index_name)
                        .set_key_schema(d.key_schema)
                        .set_projection(d.projection)
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    ddb.create_table()
        .table_name(&restored)
        .billing_mode(aws_sdk_dynamodb::types::BillingMode::PayPerRequest)
        .set_key_schema(t.key_schema)
        .set_attribute_definitions(t.attribute_definitions)
        .set_global_secondary_indexes(indexes)
        .send()
        .await?;
    let mut start = None;
    loop {
        let page = ddb
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await?;
        for item in page.items() {
            ddb.put_item()
                .table_name(&restored)
                .set_item(Some(item.clone()))
                .send()
                .await?;
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            return Ok(restored);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_table_restored_from_a_backup_reads_the_same() -> anyhow::Result<()> {
    let px = PipelineStack::new("restore").await?;
    let worker = px.worker(test_worker_config())?;

    // Three segments with snapshots, the oldest archived; a fork.
    let log = px.log.create().await?.log;
    for s in 0..3 {
        edits(&px, &worker, log, s * 10, 10, s == 0).await?;
        if s < 2 {
            let started = px.log.start_segment(log).await?;
            drive_to_completion(&worker, SnapshotJob::new(log, started.segment, 0)).await?;
        }
    }
    let r = &px.stack.resources;
    Retention::new(
        px.stack.dynamo.clone(),
        &r.entry_table,
        &r.segment_table,
        px.stack.bucket(),
        Policy {
            mode: Mode::Archive,
            keep_segments: 2,
            after_days: None,
        },
    )
    .run(
        RunOptions {
            now: sheetlog_core::domain::now_secs(),
            dry_run: false,
            deadline: None,
        },
        &mut |_, _| {},
    )
    .await?;
    let fork = LogId::new_random();
    let built = fork_snapshot(&px.log, &px.blobs, &px.blobs, TEST_BUILD, log, 15, fork).await?;
    for marker in fork_markers(log, fork) {
        px.blobs.put_marker(&marker).await?;
    }
    px.log
        .create_fork(
            fork,
            built.manifest_key,
            Some(ForkOrigin {
                source: log,
                at: 15,
            }),
        )
        .await?;
    edits(&px, &worker, fork, 500, 5, false).await?;
    let before = (reads(&px, log).await?, reads(&px, fork).await?);

    // Restore every table, then read through the restored ones only.
    let mut restored = Vec::new();
    for table in [
        r.entry_table.as_str(),
        r.segment_table.as_str(),
        r.require_pending_table()?,
        r.require_clients_table()?,
    ] {
        restored.push(restore_table(&px, table).await?);
    }
    if let Some(dedupe) = &r.dedupe_table {
        restore_table(&px, dedupe).await?;
    }
    let store = sheetlog_core::aws::DynamoLogStore::new(
        px.stack.dynamo.clone(),
        &restored[0],
        &restored[1],
    );
    let events: AwsLog =
        sheetlog_core::log::EventLog::new(store, px.stack.bucket(), Default::default())?;
    let after = (
        reads_from(&events, &px, log).await?,
        reads_from(&events, &px, fork).await?,
    );
    ensure!(
        after.0 == before.0,
        "a version of the log reads differently from the restored tables"
    );
    ensure!(
        after.1 == before.1,
        "a version of the fork reads differently from the restored tables"
    );

    // The restored tables name every snapshot object the bucket holds: a rebuild over them writes
    // nothing.
    let tables = RebuildTables {
        entry_table: restored[0].clone(),
        segment_table: restored[1].clone(),
        clients_table: restored[3].clone(),
    };
    let report = Rebuilder::new(px.stack.dynamo.clone(), &tables, px.stack.bucket())?
        .run(opts(None, false), &mut |_, _| {})
        .await?;
    ensure!(
        report.logs == 2 && report.objects_written == 0 && report.objects_present > 0,
        "{report:?}"
    );
    Ok(())
}
