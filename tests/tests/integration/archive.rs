//! Segment retention against the emulator: archiving old segments to S3 and deleting them
//! (`sheetlog-maintenance archive`), with readers that must not notice an archive.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail, ensure};
use sheetlog_core::LogError;
use sheetlog_core::SegmentHint;
use sheetlog_core::aws::{S3Bucket, s3_client};
use sheetlog_core::domain::{Entry, LogId, SegmentRecord, SnapshotJob};
use sheetlog_core::log::AppendOptions;
use sheetlog_core::ports::{Consistency, LogEntries};
use sheetlog_core::snapshot::BuildConfig;
use sheetlog_core::snapshot_input::{InputError, as_of, restore_snapshot, sheet_as_of};
use sheetlog_maintenance::archive::Step;
use sheetlog_maintenance::{Mode, Policy, Retention, RetentionReport, RunOptions};
use sheetlog_snapshot_worker::Worker;
use sheetlog_tests::fixtures::{numbered_edit_entry, offloaded_set_entry, snapshot_entry};
use sheetlog_tests::pipeline::{PipelineStack, drive_to_completion, test_worker_config};

/// A log of `segments` segments, each of 30 edits and a built snapshot, every segment's first
/// snapshot built too; one edit in segment 0 has a body large enough to live in S3.
async fn history(px: &PipelineStack, worker: &Worker, segments: u32) -> anyhow::Result<LogId> {
    let log = px.log.create().await?.log;
    let mut i = 0;
    for s in 0..segments {
        for _ in 0..30 {
            px.log
                .append(log, numbered_edit_entry(i, 50), AppendOptions::default())
                .await?;
            i += 1;
        }
        if s == 0 {
            px.log
                .append(log, offloaded_set_entry(), AppendOptions::default())
                .await?;
        }
        let a = px
            .log
            .append(log, snapshot_entry(), AppendOptions::default())
            .await?;
        drive_to_completion(worker, SnapshotJob::new(log, a.segment, a.entry)).await?;
        if s + 1 < segments {
            let started = px.log.start_segment(log).await?;
            drive_to_completion(worker, SnapshotJob::new(log, started.segment, 0)).await?;
        }
    }
    Ok(log)
}

/// Every entry of the log, from sequence 0, through the reader every other reader uses.
async fn all_entries(px: &PipelineStack, log: LogId) -> Result<Vec<Entry>, LogError> {
    let page = px
        .log
        .read_from(
            log,
            SegmentHint {
                segment: 0,
                base_seq: 0,
            },
            0,
            100_000,
        )
        .await?;
    Ok(page.entries)
}

async fn segments(px: &PipelineStack, log: LogId) -> anyhow::Result<Vec<SegmentRecord>> {
    Ok(px.log.segments(log).await?.0)
}

/// Entry items left in the Entry table for a segment.
async fn items(px: &PipelineStack, log: LogId, segment: u64) -> anyhow::Result<usize> {
    let mut units = Default::default();
    Ok(px
        .log
        .store()
        .read_entries(log, segment, 0, 10_000, Consistency::Strong, &mut units)
        .await?
        .entries
        .len())
}

/// The archiver's tool over the stack, calling AWS with the archiver's role (checked against the
/// template's with the IAM check of `./scripts/test`).
async fn retention(px: &PipelineStack, mode: Mode) -> anyhow::Result<Retention> {
    let context = match mode {
        Mode::Archive => "retentionMode=archive",
        Mode::Delete => "retentionMode=delete",
    };
    let role = px.stack.roles(&[context], None, None).await?.archiver;
    Ok(Retention::new(
        aws_sdk_dynamodb::Client::new(&role),
        &px.stack.resources.entry_table,
        &px.stack.resources.segment_table,
        S3Bucket::new(s3_client(&role), &px.stack.resources.bucket),
        Policy {
            mode,
            keep_segments: 2,
            after_days: None,
        },
    ))
}

fn opts() -> RunOptions {
    RunOptions {
        now: sheetlog_core::domain::now_secs(),
        dry_run: false,
        deadline: None,
    }
}

/// The reads "as of" a few sequences in what will be archived, and at the end.
async fn history_reads(px: &PipelineStack, log: LogId, at: &[u64]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for &seq in at {
        let a = as_of(&px.log, log, seq).await?;
        out.push(format!("{:?} {:?}", a.base, a.entries));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn archived_segments_read_the_same_every_way_and_survive_a_crash_after_each_step()
-> anyhow::Result<()> {
    let px = PipelineStack::new("archive-read").await?;
    let worker = px.worker(test_worker_config())?;
    let log = history(&px, &worker, 6).await?;
    let before = all_entries(&px, log).await?;
    let probes = [5, 33, 64, 100, 140, before.len() as u64 - 1];
    let reads_before = history_reads(&px, log, &probes).await?;
    let tool = retention(&px, Mode::Archive).await?;
    let selected: Vec<u64> = tool
        .selected(log, opts().now)
        .await?
        .iter()
        .map(|s| s.num)
        .collect();
    ensure!(
        selected == vec![0, 1, 2, 3],
        "keep 2: the four oldest of six: {selected:?}"
    );

    // A crash after each step of segment 0, then of segment 1 part way through deleting; the
    // log reads the same after every one.
    let mut report = RetentionReport::default();
    for (segment, stop) in [
        (0, Step::Written),
        (0, Step::Marked),
        (1, Step::Marked),
        (1, Step::Deleted(1)),
    ] {
        let seg = segments(&px, log).await?[segment].clone();
        tool.segment(log, &seg, Some(stop), &mut report).await?;
        ensure!(
            all_entries(&px, log).await? == before,
            "after {stop:?} of segment {segment}"
        );
    }
    let half = items(&px, log, 1).await?;
    ensure!(
        half > 0 && half < 31,
        "segment 1 is half deleted: {half} items left"
    );
    ensure!(history_reads(&px, log, &probes).await? == reads_before);

    // The rest, as a scheduled run does it: it finishes the interrupted segments too.
    let report = tool.run(opts(), &mut |_, _| {}).await?;
    ensure!(report.segments_archived == 4, "{report:?}");
    for s in 0..4 {
        ensure!(
            items(&px, log, s).await? == 0,
            "segment {s} still has items"
        );
        ensure!(segments(&px, log).await?[s as usize].archive.is_some());
    }
    ensure!(items(&px, log, 4).await? > 0 && items(&px, log, 5).await? > 0);
    // Every reader: paging from 0, history as of old sequences, and the worker building on.
    ensure!(
        all_entries(&px, log).await? == before,
        "read back from the archives"
    );
    // The same with stale replicas, as AWS may answer eventually consistent reads: a stale page
    // must never pass for a gap (and send a live segment to its archive) or hide one.
    for seed in 1..=5 {
        let stale = px.stack.faulty_log(
            sheetlog_core::faults::FaultProfile::named("stale").context("stale profile")?,
            seed,
        )?;
        let page = stale
            .read_from(
                log,
                SegmentHint {
                    segment: 0,
                    base_seq: 0,
                },
                0,
                100_000,
            )
            .await?;
        ensure!(page.entries == before, "stale reads, seed {seed}");
    }
    ensure!(history_reads(&px, log, &probes).await? == reads_before);
    let a = px
        .log
        .append(log, numbered_edit_entry(999, 50), AppendOptions::default())
        .await?;
    let s = px
        .log
        .append(log, snapshot_entry(), AppendOptions::default())
        .await?;
    drive_to_completion(&worker, SnapshotJob::new(log, s.segment, s.entry)).await?;
    ensure!(
        all_entries(&px, log).await?.len() == before.len() + 2,
        "{a:?}"
    );
    // Nothing is left to do.
    let again = tool.run(opts(), &mut |_, _| {}).await?;
    ensure!(again.segments_selected == 0, "{again:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_appender_and_a_reader_during_archiving_see_no_gap_and_no_change() -> anyhow::Result<()>
{
    let px = Arc::new(PipelineStack::new("archive-live").await?);
    let worker = px.worker(test_worker_config())?;
    let log = history(&px, &worker, 5).await?;
    let before = all_entries(&px, log).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let appender = {
        let (px, stop) = (px.clone(), stop.clone());
        tokio::spawn(async move {
            let mut seqs = Vec::new();
            let mut i = 10_000;
            while !stop.load(Ordering::SeqCst) {
                seqs.push(
                    px.log
                        .append(log, numbered_edit_entry(i, 50), AppendOptions::default())
                        .await?
                        .seq,
                );
                i += 1;
            }
            anyhow::Ok(seqs)
        })
    };
    let reader = {
        let (px, stop, before) = (px.clone(), stop.clone(), before.clone());
        tokio::spawn(async move {
            let mut reads = 0;
            while !stop.load(Ordering::SeqCst) {
                let now = all_entries(&px, log).await?;
                ensure!(
                    now.len() >= before.len() && now[..before.len()] == before[..],
                    "a read changed"
                );
                ensure!(
                    now.iter().enumerate().all(|(i, e)| e.seq == i as u64),
                    "a read has a gap"
                );
                reads += 1;
            }
            anyhow::Ok(reads)
        })
    };
    let report = retention(&px, Mode::Archive)
        .await?
        .run(opts(), &mut |_, _| {})
        .await?;
    stop.store(true, Ordering::SeqCst);
    let seqs = appender.await??;
    let reads = reader.await??;
    ensure!(report.segments_archived == 3, "{report:?}");
    ensure!(reads > 0 && !seqs.is_empty());
    ensure!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1) && seqs[0] == before.len() as u64,
        "appends during archiving are gapless: {seqs:?}"
    );
    ensure!(all_entries(&px, log).await?.len() == before.len() + seqs.len());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_delete_policy_removes_only_history_and_says_so() -> anyhow::Result<()> {
    let px = PipelineStack::new("archive-delete").await?;
    let worker = px.worker(test_worker_config())?;
    let log = history(&px, &worker, 4).await?;
    let before = all_entries(&px, log).await?;
    // A fifth segment whose first snapshot is not built: the newest completed snapshot is in
    // segment 3, so segment 3 and later stay whatever the policy says.
    px.log.start_segment(log).await?;
    // Version 5 is named (its state kept, as `POST /logs/{logId}/versions` keeps it) before
    // its history goes.
    let version = |at| sheet_as_of(&px.log, &px.blobs, log, at);
    let then = version(5).await?;
    restore_snapshot(
        &px.log,
        &px.blobs,
        &px.blobs,
        BuildConfig::default(),
        log,
        5,
    )
    .await?;
    let report = retention(&px, Mode::Delete)
        .await?
        .run(opts(), &mut |_, _| {})
        .await?;
    ensure!(
        report.segments_deleted == 3,
        "segments 0–2 only: {report:?}"
    );
    let segs = segments(&px, log).await?;
    ensure!(
        segs[..3]
            .iter()
            .all(|s| s.archive.as_deref() == Some("deleted"))
    );
    ensure!(segs[3..].iter().all(|s| s.archive.is_none()));
    match all_entries(&px, log).await {
        Err(LogError::HistoryDeleted { segment: 0, .. }) => {}
        other => bail!("reading deleted history: {other:?}"),
    }
    // What is left reads as before: from segment 3 on, and history as of its sequences.
    let seg3 = &segs[3];
    let rest = px
        .log
        .read_from(
            log,
            SegmentHint {
                segment: 3,
                base_seq: seg3.base_seq,
            },
            0,
            10_000,
        )
        .await?
        .entries;
    let kept = &before[seg3.base_seq as usize..];
    ensure!(
        rest.len() == kept.len() + 2 && rest[..kept.len()] == kept[..],
        "segment 3 on reads as before (plus its End Segment and segment 4's Snapshot entry)"
    );
    let last = before.len() as u64 - 1;
    as_of(&px.log, log, last).await.context("as of the end")?;
    match as_of(&px.log, log, 5).await {
        Err(InputError::Log(LogError::HistoryDeleted { .. })) => {}
        other => bail!("as of deleted history: {:?}", other.map(|_| ())),
    }
    // The named version still reads, from its kept state, and the same; its neighbour does not.
    let now = version(5).await?;
    let cells = |s: &sheetlog_core::snapshot_input::SheetAsOf| {
        let blobs = px.blobs.clone();
        let (base, entries) = (s.base.clone(), s.entries.clone());
        async move {
            let range = "A1:Z200".parse().context("range")?;
            let (values, _) = sheetlog_core::snapshot::read_range(
                &blobs,
                &blobs,
                *log.as_uuid(),
                base.as_ref(),
                &entries,
                range,
            )
            .await?;
            anyhow::Ok(values)
        }
    };
    ensure!(
        cells(&now).await? == cells(&then).await?,
        "the kept version reads as before"
    );
    match version(6).await {
        Err(InputError::Log(LogError::HistoryDeleted { .. })) => {}
        other => bail!(
            "an unnamed version of deleted history: {:?}",
            other.map(|_| ())
        ),
    }
    Ok(())
}
