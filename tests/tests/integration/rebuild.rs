//! The restore drill for snapshots (`sheetlog-maintenance rebuild-snapshots`): a log with
//! history over several segments (one archived to S3) and large bodies, and a fork of it with
//! history of its own; every object under `snapshots/` is recorded with every version's read,
//! then deleted; the rebuild brings back the same bytes under the same keys and every version
//! reads exactly as before.

use std::collections::BTreeMap;

use anyhow::{bail, ensure};
use serde_json::json;
use sheetlog_core::domain::{LogId, SnapshotJob};
use sheetlog_core::log::AppendOptions;
use sheetlog_core::snapshot::{BuildConfig, materialize};
use sheetlog_core::snapshot_input::{fork_snapshot, sheet_as_of};
use sheetlog_maintenance::{
    Mode, Policy, RebuildOptions, RebuildReport, Rebuilder, Retention, RunOptions,
};
use sheetlog_snapshot_worker::{Outcome, Worker};
use sheetlog_tests::pipeline::{PipelineStack, drive, event, snapshot_entry, test_worker_config};

async fn build(worker: &Worker, job: SnapshotJob) -> anyhow::Result<()> {
    match drive(worker, job).await?.last() {
        Some(Outcome::Completed { .. } | Outcome::AlreadyComplete) => Ok(()),
        other => bail!("snapshot {job:?}: {other:?}"),
    }
}

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
        let e = event(json!({"type": "set", "body": {"cells": [
            {"ref": format!("A{}", i % 40 + 1), "value": format!("edit {i}")},
            {"ref": format!("B{}", i % 40 + 1), "value": i}
        ]}}))?;
        px.log.append(log, e, AppendOptions::default()).await?;
    }
    if big {
        let cells: Vec<_> = (1..=700)
            .map(|r| json!({"ref": format!("C{r}"), "value": format!("a long value for row {r}")}))
            .collect();
        let e = event(json!({"type": "set", "body": {"cells": cells}}))?;
        px.log.append(log, e, AppendOptions::default()).await?;
    }
    let a = px
        .log
        .append(log, snapshot_entry(), AppendOptions::default())
        .await?;
    build(worker, SnapshotJob::new(log, a.segment, a.entry)).await
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
    let (next, _) = px.log.next_seq(log).await?;
    let mut out = Vec::new();
    for at in 0..=next {
        let s = sheet_as_of(&px.log, &px.blobs, log, at).await?;
        let rows = match &s.base {
            Some(m) => format!("{:?}", materialize(&px.blobs, m).await?),
            None => String::new(),
        };
        out.push(format!("{at}: {rows} {:?}", s.entries));
    }
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

fn rebuilder(px: &PipelineStack) -> anyhow::Result<Rebuilder> {
    Ok(Rebuilder::new(
        px.stack.dynamo.clone(),
        &px.stack.resources.entry_table,
        &px.stack.resources.segment_table,
        px.stack.bucket(),
    )?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_snapshot_comes_back_byte_for_byte_from_the_log() -> anyhow::Result<()> {
    let px = PipelineStack::new("rebuild").await?;
    let worker = px.worker(test_worker_config())?;

    // Four segments of history, each with two snapshots; the oldest is archived to S3.
    let log = px.log.create().await?.log;
    let mut n = 0;
    for s in 0..4 {
        edits(&px, &worker, log, n, 12, s == 0).await?;
        edits(&px, &worker, log, n + 12, 12, false).await?;
        n += 24;
        if s < 3 {
            let started = px.log.start_segment(log).await?;
            build(&worker, SnapshotJob::new(log, started.segment, 0)).await?;
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

    // A fork from the middle of segment 1, with history of its own.
    let fork = LogId::new_random();
    let built = fork_snapshot(
        &px.log,
        &px.blobs,
        &px.blobs,
        BuildConfig::default(),
        log,
        40,
        fork,
    )
    .await?;
    px.log.create_fork(fork, built.manifest_key.clone()).await?;
    edits(&px, &worker, fork, 1000, 10, false).await?;

    let before = (
        objects(&px, log).await?,
        objects(&px, fork).await?,
        reads(&px, log).await?,
        reads(&px, fork).await?,
    );
    ensure!(before.0.len() > 10 && before.1.len() > 2, "{:?}", before.0.keys());

    // A dry run writes nothing and reports everything present.
    let tool = rebuilder(&px)?;
    let dry = tool
        .run(
            RebuildOptions {
                log: Some(log),
                dry_run: true,
            },
            &mut |_, _| {},
        )
        .await?;
    ensure!(
        dry.objects_written == 0 && dry.objects_present > 0 && dry.snapshots_rebuilt == 11,
        "{dry:?}"
    );

    // Lose every snapshot object (but the fork's first manifest, which the log cannot rebuild:
    // it does not name the fork's source).
    delete(&px, before.0.keys()).await?;
    delete(&px, before.1.keys().filter(|k| **k != built.manifest_key)).await?;
    ensure!(px.snapshot_objects(log).await?.is_empty());

    let mut progress = Vec::new();
    let report = tool
        .run(RebuildOptions::default(), &mut |l, _| progress.push(l))
        .await?;
    ensure!(progress.len() == 2 && progress.contains(&fork), "{progress:?}");
    ensure!(report.objects_written > 10 && report.roots_fixed == 0, "{report:?}");
    let after = (
        objects(&px, log).await?,
        objects(&px, fork).await?,
        reads(&px, log).await?,
        reads(&px, fork).await?,
    );
    ensure!(after.0 == before.0, "the log's snapshot objects differ after the rebuild");
    ensure!(after.1 == before.1, "the fork's snapshot objects differ after the rebuild");
    ensure!(after.2 == before.2, "a version of the log reads differently");
    ensure!(after.3 == before.3, "a version of the fork reads differently");

    // Idempotent: a second run writes nothing.
    let again = tool.run(RebuildOptions::default(), &mut |_, _| {}).await?;
    ensure!(
        again.objects_written == 0 && again.objects_present == report.objects_written + report.objects_present,
        "{again:?} after {report:?}"
    );

    // A fork whose first snapshot is gone is reported, not guessed at.
    delete(&px, std::iter::once(&built.manifest_key)).await?;
    let lost = tool
        .run(
            RebuildOptions {
                log: Some(fork),
                dry_run: false,
            },
            &mut |_, _| {},
        )
        .await?;
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
