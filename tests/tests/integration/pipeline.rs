//! The side-effect pipeline against the emulator: Entry stream → stream router → snapshot queue
//! → snapshot worker (Pending Snapshots protocol), fault injection at every protocol step,
//! duplicates, ordering, hand-off, the reprocess tool and payload un-tagging.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use async_trait::async_trait;
use bytes::Bytes;
use serde_json::json;
use sheetlog_core::LogError;
use sheetlog_core::aws::{S3Bucket, SqsJobQueue, Untagged};
use sheetlog_core::domain::{Guarded, PendingKey};
use sheetlog_core::domain::{LogId, NewEntry, SnapshotJob};
use sheetlog_core::error::StoreError;
use sheetlog_core::log::AppendOptions;
use sheetlog_core::ports::PayloadStore;
use sheetlog_core::ports::PendingSnapshots;
use sheetlog_core::sheet::Range;
use sheetlog_core::snapshot::read_range;
use sheetlog_core::snapshot_input::{InputError, as_of, base_manifest, log_entries};
use sheetlog_maintenance::{ReprocessOptions, Reprocessor};
use sheetlog_pipeline::provision::{QueueSettings, create_stream_failure_queue};
use sheetlog_pipeline::{FilterPatterns, LocalPipelineConfig, StreamDriver};
use sheetlog_sheet::sample::write_sample_csv;
use sheetlog_snapshot_worker::{DeferReason, Outcome, Step, StepHook, WorkerError};
use sheetlog_stream_router::{AwsEffects, Effects};
use sheetlog_tests::fixtures::{
    event_entry, insert_rows_entry, raw_set_entry, set_entry, snapshot_entry,
};
use sheetlog_tests::pipeline::{PipelineStack, drive, test_worker_config};

fn later() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Where an appended entry landed.
#[derive(Debug, Clone, Copy)]
struct At {
    seq: u64,
    job: SnapshotJob,
}

async fn append(px: &PipelineStack, log: LogId, entry: NewEntry) -> anyhow::Result<At> {
    let a = px.log.append(log, entry, AppendOptions::default()).await?;
    Ok(At {
        seq: a.seq,
        job: SnapshotJob::new(log, a.segment, a.entry),
    })
}

/// A log with two Snapshot entries, the second with edits scattered over the first's chunks.
async fn two_snapshot_log(px: &PipelineStack) -> anyhow::Result<(LogId, At, At)> {
    let log = px.log.create().await?.log;
    append(px, log, insert_rows_entry(1, 80, "a")).await?;
    append(
        px,
        log,
        set_entry(&[("D1", json!("first")), ("B40", json!(1.5))]),
    )
    .await?;
    let first = append(px, log, snapshot_entry()).await?;
    append(
        px,
        log,
        set_entry(&[
            ("A3", json!("edited")),
            ("C50", json!(true)),
            ("B78", json!("late")),
        ]),
    )
    .await?;
    append(px, log, insert_rows_entry(20, 6, "b")).await?;
    append(
        px,
        log,
        event_entry(json!({"type": "delete-rows", "body": {"at": 60, "count": 3}})),
    )
    .await?;
    let second = append(px, log, snapshot_entry()).await?;
    Ok((log, first, second))
}

/// [`two_snapshot_log`] with a third Snapshot entry after one more edit.
async fn three_snapshot_log(px: &PipelineStack) -> anyhow::Result<(LogId, [At; 3])> {
    let (log, first, second) = two_snapshot_log(px).await?;
    append(px, log, set_entry(&[("E2", json!("third"))])).await?;
    let third = append(px, log, snapshot_entry()).await?;
    Ok((log, [first, second, third]))
}

/// The Snapshot entry's root and its segment's Last Snapshot.
async fn completion(
    px: &PipelineStack,
    job: SnapshotJob,
) -> anyhow::Result<(Option<String>, Option<u64>)> {
    let (seg, _) = px.log.segment(job.log_id, job.segment).await?;
    let seg = seg.context("segment missing")?;
    let mut units = Default::default();
    let entry = sheetlog_core::ports::LogEntries::read_entries(
        px.log.store(),
        job.log_id,
        job.segment,
        job.entry,
        1,
        sheetlog_core::ports::Consistency::Strong,
        &mut units,
    )
    .await?
    .entries
    .into_iter()
    .next()
    .context("entry missing")?;
    Ok((entry.snapshot_root, seg.last_snapshot))
}

/// Asserts the snapshot of `at` is complete and correct; returns its root.
async fn assert_complete(px: &PipelineStack, at: At) -> anyhow::Result<String> {
    let (root, last) = completion(px, at.job).await?;
    let root = root.with_context(|| format!("snapshot {:?} has no root", at.job))?;
    ensure!(
        last.is_some_and(|l| l >= at.job.entry),
        "Last Snapshot {last:?} does not cover entry {}",
        at.job.entry
    );
    ensure!(
        px.pending
            .get(PendingKey::new(at.job.log_id, at.job.segment, at.job.entry))
            .await?
            .is_none(),
        "pending item left behind"
    );
    px.check_snapshot(at.job.log_id, at.seq, &root).await?;
    Ok(root)
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check().await? {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("timed out waiting for {what}")
}

/// Records the steps a worker passes; stops at `kill` the first time it is reached.
#[derive(Debug, Default)]
struct Steps {
    seen: Mutex<Vec<Step>>,
    kill: Option<Step>,
    fired: AtomicBool,
}

#[async_trait]
impl StepHook for Steps {
    async fn reached(&self, step: Step) -> ControlFlow<()> {
        if let Ok(mut s) = self.seen.lock() {
            s.push(step);
        }
        if Some(step) == self.kill && !self.fired.swap(true, Ordering::SeqCst) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn snapshot_entries_flow_from_the_stream_to_completed_snapshots() -> anyhow::Result<()> {
    let (px, log) = PipelineStack::with_new_log("pipeline-e2e").await?;
    // An import (payload uploaded first, tagged for auto-delete), then edits, then a snapshot.
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, 40)?;
    let key = format!("payloads/{log}/uploads/import-1");
    px.payloads()
        .put_discardable(&key, Bytes::from(csv))
        .await?;
    append(
        &px,
        log,
        event_entry(json!({"type": "import", "body": {"format": "csv"}})).with_payload(&key),
    )
    .await?;
    append(&px, log, set_entry(&[("K2", json!("x"))])).await?;
    let first = append(&px, log, snapshot_entry()).await?;
    // A new segment starts with its own Snapshot entry; the next one must wait for it.
    let started = px.log.start_segment(log).await?;
    let second = At {
        seq: started.snapshot_seq,
        job: SnapshotJob::new(log, started.segment, 0),
    };
    ensure!(
        matches!(
            px.log.start_segment(log).await,
            Err(LogError::SnapshotIncomplete { .. })
        ),
        "a third segment started before the second's snapshot"
    );
    append(&px, log, insert_rows_entry(3, 10, "seg1")).await?;

    let pipeline = px.pipeline(
        LocalPipelineConfig::default(),
        px.worker(test_worker_config())?,
    )?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(pipeline.run(async {
        let _ = stopped.await;
    }));

    for at in [first, second] {
        wait_until("the snapshot", Duration::from_secs(60), || async {
            Ok(completion(&px, at.job).await?.0.is_some())
        })
        .await?;
    }
    let root1 = assert_complete(&px, first).await?;
    let root2 = assert_complete(&px, second).await?;
    ensure!(
        px.tagged(&key).await? == Some(false),
        "the committed import kept its tag"
    );

    // With the second segment's snapshot done, a third segment may start; the pipeline builds
    // its snapshot too.
    let third = px.log.start_segment(log).await?;
    let third = At {
        seq: third.snapshot_seq,
        job: SnapshotJob::new(log, third.segment, 0),
    };
    wait_until("the third snapshot", Duration::from_secs(60), || async {
        Ok(completion(&px, third.job).await?.0.is_some())
    })
    .await?;
    let root3 = assert_complete(&px, third).await?;
    let loaded = px.log.load(log).await?;
    ensure!(
        loaded.snapshot.seq == third.seq,
        "load did not start from the newest snapshot"
    );
    ensure!(loaded.snapshot.snapshot_root.as_deref() == Some(root3.as_str()));
    px.assert_no_orphans(log, &[&root1, &root2, &root3]).await?;
    wait_until("an empty queue", Duration::from_secs(10), || async {
        Ok(px.queue_depth(&px.queues.snapshot_queue).await? == (0, 0, 0))
    })
    .await?;

    let _ = stop.send(());
    running.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_killed_after_each_step_still_completes_byte_identical() -> anyhow::Result<()> {
    let px = PipelineStack::new("pipeline-kill").await?;
    let clean = px.worker(test_worker_config())?;

    // A clean run to learn the steps (the second snapshot's checkpoints included).
    let (_, first, second) = two_snapshot_log(&px).await?;
    drive(&clean, first.job).await?;
    let recorder = Arc::new(Steps::default());
    let recording = px.worker(test_worker_config())?.with_hook(recorder.clone());
    let outcomes = drive(&recording, second.job).await?;
    ensure!(matches!(outcomes.last(), Some(Outcome::Completed { .. })));
    let steps = recorder.seen.lock().expect("recorder lock").clone();
    let checkpoints = steps
        .iter()
        .filter(|s| matches!(s, Step::Checkpoint(_)))
        .count();
    ensure!(
        checkpoints >= 3,
        "too few checkpoints to be interesting: {steps:?}"
    );
    eprintln!("killing after each of {} steps: {steps:?}", steps.len());
    ensure!(steps.first() == Some(&Step::BeforePendingItem));
    ensure!(steps.last() == Some(&Step::PendingDeleted));

    for kill in steps {
        let (log, first, second) = two_snapshot_log(&px).await?;
        drive(&clean, first.job).await?;
        let hook = Arc::new(Steps {
            kill: Some(kill),
            ..Steps::default()
        });
        let killer = px.worker(test_worker_config())?.with_hook(hook);
        match killer.run(&second.job, later()).await {
            Err(WorkerError::Stopped(at)) if at == kill => {}
            other => bail!("expected a kill at {kill}, got {other:?}"),
        }
        let key = PendingKey::new(log, second.job.segment, second.job.entry);
        if let Step::Checkpoint(_) = kill {
            let p = px.pending.get(key).await?.context("pending item gone")?;
            ensure!(
                p.state.is_some() && p.active,
                "no checkpoint kept after {kill}"
            );
        }
        // The message comes back (after the pending timeout for a holder that died active).
        let outcomes = drive(&clean, second.job).await?;
        ensure!(
            matches!(
                outcomes.last(),
                Some(Outcome::Completed { .. } | Outcome::AlreadyComplete)
            ),
            "after a kill at {kill}: {outcomes:?}"
        );
        let root1 = assert_complete(&px, first).await?;
        let root2 = assert_complete(&px, second)
            .await
            .with_context(|| format!("after a kill at {kill}"))?;
        px.assert_no_orphans(log, &[&root1, &root2])
            .await
            .with_context(|| format!("after a kill at {kill}"))?;
    }

    // A resumed run can die too: killed after a checkpoint, then again right after the claim and
    // after the resumed run's first checkpoint, the snapshot still comes out the same.
    let (log, first, second) = two_snapshot_log(&px).await?;
    drive(&clean, first.job).await?;
    for kill in [Step::Checkpoint(1), Step::Claimed, Step::Checkpoint(1)] {
        let killer = px.worker(test_worker_config())?.with_hook(Arc::new(Steps {
            kill: Some(kill),
            ..Steps::default()
        }));
        let mut result = killer.run(&second.job, later()).await;
        // A holder that died active is only claimable once its timeout has passed.
        while let Ok(Outcome::Deferred { delay, .. }) = result {
            tokio::time::sleep(delay.min(Duration::from_secs(2))).await;
            result = killer.run(&second.job, later()).await;
        }
        ensure!(
            matches!(result, Err(WorkerError::Stopped(at)) if at == kill),
            "expected a kill at {kill}, got {result:?}"
        );
    }
    drive(&clean, second.job).await?;
    let root1 = assert_complete(&px, first).await?;
    let root2 = assert_complete(&px, second).await?;
    px.assert_no_orphans(log, &[&root1, &root2]).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_message_delivered_twice_concurrently_is_built_once() -> anyhow::Result<()> {
    let px = PipelineStack::new("pipeline-dup").await?;
    let cfg = LocalPipelineConfig {
        worker_concurrency: 2,
        ..LocalPipelineConfig::default()
    };
    // Both deliveries must be inside the protocol at once: each waits at the step before the
    // pending item is created until the other gets there too. Run one after the other, the
    // first would wait alone and stop (the test then fails), so passing proves the overlap.
    let meet = Arc::new(MeetAt {
        step: Step::BeforePendingItem,
        barrier: tokio::sync::Barrier::new(2),
        armed: AtomicUsize::new(0),
        met: AtomicUsize::new(0),
    });
    let worker = px.worker(test_worker_config())?.with_hook(meet.clone());
    let pipeline = px.pipeline(cfg, worker)?;
    let queue = px.job_queue();
    for _ in 0..3 {
        let (log, first, second) = two_snapshot_log(&px).await?;
        // Two copies of one job, received in one batch and run side by side. (The run that
        // builds it then starts the second snapshot, which has no twin to meet.)
        meet.armed.store(2, Ordering::SeqCst);
        queue.send(&first.job, Duration::ZERO).await?;
        queue.send(&first.job, Duration::ZERO).await?;
        let mut outcomes = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            for r in pipeline.queue.poll_once().await? {
                outcomes.push(r.result?);
            }
            if px.queue_depth(&px.queues.snapshot_queue).await? == (0, 0, 0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let root = assert_complete(&px, first).await?;
        let completed = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Completed { root: r } if *r == root))
            .count();
        ensure!(completed == 1, "built {completed} times: {outcomes:?}");
        eprintln!("two deliveries of one job: {outcomes:?}");
        ensure!(
            outcomes.iter().all(|o| matches!(
                o,
                Outcome::Completed { .. }
                    | Outcome::Duplicate
                    | Outcome::AlreadyComplete
                    | Outcome::Deferred {
                        reason: DeferReason::HeldElsewhere,
                        ..
                    }
            )),
            "{outcomes:?}"
        );
        // The build went on to the log's next snapshot by itself.
        let next = assert_complete(&px, second).await?;
        px.assert_no_orphans(log, &[&root, &next]).await?;
    }
    ensure!(
        meet.met.load(Ordering::SeqCst) == 6,
        "every delivery met its twin inside the protocol: {}",
        meet.met.load(Ordering::SeqCst)
    );
    ensure!(px.queue_depth(&px.queues.dead_letter_queue).await? == (0, 0, 0));
    Ok(())
}

/// Holds the next `armed` runs at `step` until another run reaches it too; a run left waiting
/// alone for ten seconds stops (as a killed process would).
#[derive(Debug)]
struct MeetAt {
    step: Step,
    barrier: tokio::sync::Barrier,
    armed: AtomicUsize,
    met: AtomicUsize,
}

#[async_trait]
impl StepHook for MeetAt {
    async fn reached(&self, step: Step) -> ControlFlow<()> {
        if step != self.step
            || self
                .armed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_err()
        {
            return ControlFlow::Continue(());
        }
        match tokio::time::timeout(Duration::from_secs(10), self.barrier.wait()).await {
            Ok(_) => {
                self.met.fetch_add(1, Ordering::SeqCst);
                ControlFlow::Continue(())
            }
            Err(_) => ControlFlow::Break(()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn snapshots_delivered_in_the_wrong_order_complete_in_log_order() -> anyhow::Result<()> {
    let (px, worker) = PipelineStack::with_worker("pipeline-order").await?;
    let (log, first, second) = two_snapshot_log(&px).await?;

    // Snapshot 2 first: it finds snapshot 1 unbuilt in the log, releases its item and waits.
    match worker.run(&second.job, later()).await? {
        Outcome::Deferred {
            reason: DeferReason::EarlierUnprocessed { segment, entry },
            ..
        } if (segment, entry) == (first.job.segment, first.job.entry) => {}
        other => bail!("expected a wait for snapshot 1, got {other:?}"),
    }
    let held = px
        .pending
        .get(PendingKey::new(log, second.job.segment, second.job.entry))
        .await?
        .context("snapshot 2 has no pending item")?;
    ensure!(!held.active, "a waiting snapshot must not stay active");
    ensure!(completion(&px, second.job).await?.0.is_none());

    // Snapshot 1 is not held up by the later pending item.
    let o1 = worker.run(&first.job, later()).await?;
    ensure!(matches!(o1, Outcome::Completed { .. }), "{o1:?}");
    // Snapshot 2, redelivered, claims its released item at once and builds on snapshot 1.
    let o2 = worker.run(&second.job.deferred(0), later()).await?;
    ensure!(matches!(o2, Outcome::Completed { .. }), "{o2:?}");
    let root1 = assert_complete(&px, first).await?;
    let root2 = assert_complete(&px, second).await?;
    px.assert_no_orphans(log, &[&root1, &root2]).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_as_of_any_sequence_start_from_the_newest_completed_snapshot() -> anyhow::Result<()> {
    let (px, worker) = PipelineStack::with_worker("pipeline-asof").await?;
    let (log, first, second) = two_snapshot_log(&px).await?;
    let tail = append(&px, log, set_entry(&[("A1", json!("tail"))])).await?;
    let end = tail.seq + 1;
    let range: Range = "A1:E90".parse()?;
    let imports = px.stack.bucket();
    let check = |at: u64, want_base: u64| {
        let (px, imports) = (&px, &imports);
        async move {
            let a = as_of(&px.log, log, at).await?;
            ensure!(
                a.base.seq == want_base,
                "as of {at}: base {} not {want_base}",
                a.base.seq
            );
            ensure!(a.entries.len() as u64 == at - want_base);
            let manifest = base_manifest(&px.blobs, log, &a.base).await?;
            let (values, _) = read_range(
                &px.blobs,
                imports,
                *log.as_uuid(),
                manifest.as_ref(),
                &log_entries(&a.entries)?,
                range,
            )
            .await?;
            ensure!(
                values == px.replay(log, at).await?.read_range(range),
                "values as of {at}"
            );
            Ok::<_, anyhow::Error>(())
        }
    };
    // Only the log's first snapshot is complete: everything reads from sequence 0.
    for at in [0, 1, first.seq, second.seq, end] {
        check(at, 0).await?;
    }
    drive(&worker, first.job).await?;
    for (at, base) in [
        (1, 0),
        (first.seq, first.seq),
        (second.seq, first.seq),
        (end, first.seq),
    ] {
        check(at, base).await?;
    }
    drive(&worker, second.job).await?;
    for (at, base) in [
        (first.seq - 1, 0),
        (first.seq + 1, first.seq),
        (second.seq, second.seq),
        (end, second.seq),
    ] {
        check(at, base).await?;
    }
    ensure!(matches!(
        as_of(&px.log, log, end + 1).await,
        Err(InputError::Log(LogError::OutOfRange { .. }))
    ));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_later_snapshot_waits_while_an_earlier_one_is_pending() -> anyhow::Result<()> {
    let px = PipelineStack::new("pipeline-wait").await?;
    // The killed holder must still look alive when its redelivery comes: a pending timeout of one
    // second (the other tests') was outrun on a loaded machine, and the redelivery took over.
    let cfg = sheetlog_snapshot_worker::WorkerConfig {
        pending_timeout: Duration::from_secs(8),
        ..test_worker_config()
    };
    let worker = px.worker(cfg.clone())?;
    let (log, first, second) = two_snapshot_log(&px).await?;
    let killer = px.worker(cfg.clone())?.with_hook(Arc::new(Steps {
        kill: Some(Step::PendingCreated),
        ..Steps::default()
    }));
    ensure!(matches!(
        killer.run(&first.job, later()).await,
        Err(WorkerError::Stopped(Step::PendingCreated))
    ));
    match worker.run(&second.job, later()).await? {
        Outcome::Deferred {
            reason: DeferReason::EarlierPending { segment, entry },
            ..
        } if (segment, entry) == (first.job.segment, first.job.entry) => {}
        other => bail!("expected a wait for pending snapshot 1, got {other:?}"),
    }
    ensure!(
        px.pending.list(log).await?.len() == 1,
        "the waiting snapshot must not create its item"
    );
    // The active item of snapshot 1 is fresh: its own redelivery waits out the timeout.
    match worker.run(&first.job, later()).await? {
        Outcome::Deferred {
            reason: DeferReason::HeldElsewhere,
            delay,
        } if delay <= cfg.pending_timeout + cfg.defer_min => {}
        other => bail!("expected to wait for the holder's timeout, got {other:?}"),
    }
    drive(&worker, first.job).await?;
    drive(&worker, second.job).await?;
    let root1 = assert_complete(&px, first).await?;
    let root2 = assert_complete(&px, second).await?;
    px.assert_no_orphans(log, &[&root1, &root2]).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tiny_time_budget_hands_off_several_times_and_completes() -> anyhow::Result<()> {
    let px = PipelineStack::new("pipeline-handoff").await?;
    let cfg = LocalPipelineConfig {
        worker_time_budget: Duration::ZERO,
        worker_concurrency: 1,
        ..LocalPipelineConfig::default()
    };
    let pipeline = px.pipeline(cfg, px.worker(test_worker_config())?)?;
    // The second snapshot: built on the first, it checkpoints after every chunk (a first
    // snapshot of rows inserted by events has no source to checkpoint against).
    let (log, first, second) = two_snapshot_log(&px).await?;
    drive(&px.worker(test_worker_config())?, first.job).await?;
    px.job_queue().send(&second.job, Duration::ZERO).await?;
    let mut handoffs = 0;
    let mut done = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done && Instant::now() < deadline {
        for r in pipeline.queue.poll_once().await? {
            match r.result? {
                Outcome::HandedOff { checkpoints } => {
                    ensure!(
                        checkpoints == 1,
                        "a zero budget allows one chunk per invocation"
                    );
                    handoffs += 1;
                }
                Outcome::Completed { .. } => done = true,
                other => bail!("unexpected {other:?}"),
            }
        }
    }
    ensure!(done, "not completed");
    ensure!(handoffs >= 3, "only {handoffs} hand-offs");
    let root1 = assert_complete(&px, first).await?;
    let root2 = assert_complete(&px, second).await?;
    px.assert_no_orphans(log, &[&root1, &root2]).await?;
    ensure!(px.queue_depth(&px.queues.snapshot_queue).await? == (0, 0, 0));
    ensure!(px.queue_depth(&px.queues.dead_letter_queue).await? == (0, 0, 0));
    Ok(())
}

/// A completed snapshot builds the log's later Snapshot entries in the same invocation, with no
/// queue round trip between them; once the invocation's time is up it sends the next as a job.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_completed_snapshot_builds_the_next_ones_in_the_same_invocation() -> anyhow::Result<()> {
    let px = PipelineStack::new("pipeline-chain").await?;
    let cfg = LocalPipelineConfig {
        worker_concurrency: 1,
        ..LocalPipelineConfig::default()
    };
    let pipeline = px.pipeline(cfg, px.worker(test_worker_config())?)?;
    let (log, snaps) = three_snapshot_log(&px).await?;
    px.job_queue().send(&snaps[0].job, Duration::ZERO).await?;
    let results = pipeline.queue.poll_once().await?;
    ensure!(results.len() == 1, "{results:?}");
    ensure!(
        matches!(results[0].result, Ok(Outcome::Completed { .. })),
        "{results:?}"
    );
    ensure!(results[0].chained == 2, "chained {}", results[0].chained);
    let mut roots = Vec::new();
    for at in snaps {
        roots.push(assert_complete(&px, at).await?);
    }
    let roots: Vec<&str> = roots.iter().map(String::as_str).collect();
    px.assert_no_orphans(log, &roots).await?;
    ensure!(
        px.queue_depth(&px.queues.snapshot_queue).await? == (0, 0, 0),
        "no job was sent for the chained snapshots"
    );

    // With no time left after the first, the second goes on as a job of its own.
    let cfg = LocalPipelineConfig {
        worker_time_budget: Duration::ZERO,
        worker_concurrency: 1,
        ..LocalPipelineConfig::default()
    };
    let pipeline = px.pipeline(cfg, px.worker(test_worker_config())?)?;
    let (_, snaps) = three_snapshot_log(&px).await?;
    px.job_queue().send(&snaps[0].job, Duration::ZERO).await?;
    let results = pipeline.queue.poll_once().await?;
    ensure!(
        matches!(results.as_slice(), [r] if r.chained == 0 && matches!(r.result, Ok(Outcome::Completed { .. }))),
        "{results:?}"
    );
    assert_complete(&px, snaps[0]).await?;
    ensure!(completion(&px, snaps[1].job).await?.0.is_none());
    ensure!(
        px.queue_depth(&px.queues.snapshot_queue).await? == (1, 0, 0),
        "the next snapshot was sent as a job"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deferrals_never_push_a_live_job_into_the_dead_letter_queue() -> anyhow::Result<()> {
    // Two receives and a job is dead-lettered: every deferral must start a fresh message.
    let settings = QueueSettings {
        max_receive_count: 2,
        ..QueueSettings::default()
    };
    let px = PipelineStack::with_queue_settings("pipeline-dlq", settings).await?;
    let pipeline = px.pipeline(
        LocalPipelineConfig::default(),
        px.worker(test_worker_config())?,
    )?;
    let (log, first, second) = two_snapshot_log(&px).await?;
    let killer = px.worker(test_worker_config())?.with_hook(Arc::new(Steps {
        kill: Some(Step::PendingCreated),
        ..Steps::default()
    }));
    ensure!(killer.run(&first.job, later()).await.is_err());
    px.job_queue().send(&second.job, Duration::ZERO).await?;
    let mut deferred = 0;
    while deferred < 4 {
        for r in pipeline.queue.poll_once().await? {
            match r.result? {
                Outcome::Deferred { .. } => {
                    ensure!(!r.keep, "a deferred message is replaced, not kept");
                    deferred += 1;
                }
                other => bail!("unexpected {other:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    drive(&px.worker(test_worker_config())?, first.job).await?;
    wait_until("snapshot 2", Duration::from_secs(30), || async {
        pipeline.queue.poll_once().await?;
        Ok(completion(&px, second.job).await?.0.is_some())
    })
    .await?;
    let root1 = assert_complete(&px, first).await?;
    let root2 = assert_complete(&px, second).await?;
    px.assert_no_orphans(log, &[&root1, &root2]).await?;
    ensure!(px.queue_depth(&px.queues.dead_letter_queue).await? == (0, 0, 0));

    // A message that is not a job at all is a poison message: it does end there.
    px.sqs
        .send_message()
        .queue_url(&px.queues.snapshot_queue)
        .message_body("{\"not\": \"a job\"}")
        .send()
        .await?;
    wait_until(
        "the poison message in the DLQ",
        Duration::from_secs(30),
        || async {
            for r in pipeline.queue.poll_once().await? {
                ensure!(r.keep, "a poison message must not be deleted");
            }
            Ok(px.queue_depth(&px.queues.dead_letter_queue).await?.0 == 1)
        },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_that_keeps_failing_ends_in_the_dead_letter_queue() -> anyhow::Result<()> {
    let settings = QueueSettings {
        max_receive_count: 3,
        ..QueueSettings::default()
    };
    let px = PipelineStack::with_queue_settings("pipeline-poison", settings).await?;
    let pipeline = px.pipeline(
        LocalPipelineConfig::default(),
        px.worker(test_worker_config())?,
    )?;
    let log = px.log.create().await?.log;
    append(&px, log, insert_rows_entry(1, 10, "a")).await?;
    // The log core stores any body; this one is not a spreadsheet event the worker can decode.
    append(&px, log, raw_set_entry([0xff, 0xff, 0xff])).await?;
    let snap = append(&px, log, snapshot_entry()).await?;
    px.job_queue().send(&snap.job, Duration::ZERO).await?;
    let mut failures = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while px.queue_depth(&px.queues.dead_letter_queue).await?.0 == 0 {
        ensure!(
            Instant::now() < deadline,
            "the failing job never reached the DLQ"
        );
        for r in pipeline.queue.poll_once().await? {
            ensure!(r.keep && r.result.is_err(), "{:?}", r.result);
            failures += 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ensure!(
        failures == 3,
        "{failures} failed invocations before the DLQ"
    );
    // Each failure released the item, so every retry took it straight over (no deferral that
    // would have reset the receive count).
    let item = px
        .pending
        .get(PendingKey::new(log, snap.job.segment, snap.job.entry))
        .await?
        .context("pending item")?;
    ensure!(!item.active && item.retries == 2, "{item:?}");
    ensure!(completion(&px, snap.job).await?.0.is_none());
    Ok(())
}

/// Router effects that fail to commit one key a given number of times, recording every call.
#[derive(Debug)]
struct Flaky {
    inner: AwsEffects,
    fail_key: String,
    failures_left: AtomicUsize,
    commits: Mutex<Vec<String>>,
    job_batches: Mutex<Vec<usize>>,
}

#[async_trait]
impl Effects for Flaky {
    async fn send_jobs(&self, jobs: &[SnapshotJob]) -> Vec<Result<(), StoreError>> {
        if let Ok(mut b) = self.job_batches.lock() {
            b.push(jobs.len());
        }
        self.inner.send_jobs(jobs).await
    }
    async fn commit_payload(&self, key: &str) -> Result<Untagged, StoreError> {
        if let Ok(mut c) = self.commits.lock() {
            c.push(key.to_owned());
        }
        if key == self.fail_key
            && self
                .failures_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(StoreError::service("S3", "DeleteObjectTagging", "injected"));
        }
        self.inner.commit_payload(key).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stream_router_retries_from_the_first_failed_record_as_lambda_does()
-> anyhow::Result<()> {
    let (px, log) = PipelineStack::with_new_log("pipeline-router").await?;
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, 5)?;
    let (good, bad) = (
        format!("payloads/{log}/uploads/good"),
        format!("payloads/{log}/uploads/bad"),
    );
    for key in [&good, &bad] {
        px.payloads()
            .put_discardable(key, Bytes::from(csv.clone()))
            .await?;
        append(
            &px,
            log,
            event_entry(json!({"type": "import", "body": {"format": "csv"}}))
                .with_payload(key.as_str()),
        )
        .await?;
    }
    append(&px, log, snapshot_entry()).await?;
    let effects = |failures| {
        Arc::new(Flaky {
            inner: px.router_effects(),
            fail_key: bad.clone(),
            failures_left: AtomicUsize::new(failures),
            commits: Mutex::new(Vec::new()),
            job_batches: Mutex::new(Vec::new()),
        })
    };

    // No retries: exactly one record is reported failed, the others' effects happened, and the
    // record given up on is described on the failure queue as Lambda's on-failure destination
    // would describe it.
    let failures = create_stream_failure_queue(
        &px.sqs,
        &sheetlog_tests::emulator::unique_prefix("router-failures"),
        QueueSettings::default(),
    )
    .await?;
    let flaky = effects(usize::MAX);
    let roles = px.roles_with_failure_queue(&failures).await?;
    let mut driver = StreamDriver::new(
        &roles.stream_router,
        &px.stack.resources.entry_table,
        flaky.clone(),
        FilterPatterns::entry_stream()?,
        0,
    )
    .with_failure_queue(aws_sdk_sqs::Client::new(&roles.stream_router), &failures);
    let report = driver.poll_once().await?;
    ensure!(report.failed.len() == 1, "{report:?}");
    let described = px
        .sqs
        .receive_message()
        .queue_url(&failures)
        .max_number_of_messages(10)
        .send()
        .await?
        .messages
        .unwrap_or_default();
    ensure!(described.len() == 1, "{described:?}");
    let info: serde_json::Value =
        serde_json::from_str(described[0].body().expect("a message body"))?;
    let batch = &info["DDBStreamBatchInfo"];
    ensure!(
        batch["batchSize"] == 1
            && batch["startSequenceNumber"] == json!(report.failed[0])
            && batch["endSequenceNumber"] == json!(report.failed[0])
            && batch["approximateArrivalOfFirstRecord"].is_string()
            && info["requestContext"]["condition"] == "RetryAttemptsExhausted",
        "{info}"
    );
    ensure!(
        report.jobs_sent == 1 && report.payloads_committed == 1,
        "{report:?}"
    );
    ensure!(px.tagged(&good).await? == Some(false));
    ensure!(px.tagged(&bad).await? == Some(true));
    ensure!(px.queue_depth(&px.queues.snapshot_queue).await?.0 == 1);

    // With retries, the batch goes round again from the failed record, as Lambda resends it:
    // the record before it is not sent again, the snapshot entry after it is.
    let flaky = effects(1);
    let mut driver = StreamDriver::new(
        &px.roles.stream_router,
        &px.stack.resources.entry_table,
        flaky.clone(),
        FilterPatterns::entry_stream()?,
        3,
    );
    let report = driver.poll_once().await?;
    ensure!(report.failed.is_empty(), "{report:?}");
    let commits = flaky.commits.lock().expect("commits lock").clone();
    ensure!(
        commits.iter().filter(|k| **k == bad).count() == 2
            && commits.iter().filter(|k| **k == good).count() == 1,
        "{commits:?}"
    );
    let batches = flaky
        .job_batches
        .lock()
        .map(|b| b.clone())
        .unwrap_or_default();
    ensure!(
        batches == vec![1, 1],
        "the snapshot entry after the failed record was not resent, as Lambda would: {batches:?}"
    );
    ensure!(px.tagged(&bad).await? == Some(false));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uploads_keep_their_tag_until_committed_and_lose_it_after() -> anyhow::Result<()> {
    let (px, log) = PipelineStack::with_new_log("pipeline-tags").await?;
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, 5)?;
    let committed = format!("payloads/{log}/uploads/committed");
    let abandoned = format!("payloads/{log}/uploads/abandoned");
    for key in [&committed, &abandoned] {
        px.payloads()
            .put_discardable(key, Bytes::from(csv.clone()))
            .await?;
    }
    append(
        &px,
        log,
        event_entry(json!({"type": "import", "body": {"format": "csv"}}))
            .with_payload(committed.as_str()),
    )
    .await?;
    // A body over the inline threshold is offloaded to S3 (tagged) by the append itself.
    let big: Vec<_> = (0..900)
        .map(|i| {
            (
                format!("A{}", i + 1),
                json!(format!("long text value number {i}")),
            )
        })
        .collect();
    let offloaded = append(&px, log, set_entry(&big)).await?;
    let mut units = Default::default();
    let offloaded_key = sheetlog_core::ports::LogEntries::read_entries(
        px.log.store(),
        log,
        offloaded.job.segment,
        offloaded.job.entry,
        1,
        sheetlog_core::ports::Consistency::Strong,
        &mut units,
    )
    .await?
    .entries
    .into_iter()
    .next()
    .and_then(|e| e.offloaded_body_key().map(str::to_owned))
    .context("the big body was not offloaded")?;
    ensure!(px.tagged(&offloaded_key).await? == Some(true));
    // Someone else's tag on the committed object (a cost-allocation tag, say) must survive.
    let tag = |k: &str, v: &str| aws_sdk_s3::types::Tag::builder().key(k).value(v).build();
    px.stack
        .s3
        .put_object_tagging()
        .bucket(&px.stack.resources.bucket)
        .key(&committed)
        .tagging(
            aws_sdk_s3::types::Tagging::builder()
                .tag_set(tag(
                    sheetlog_core::domain::keys::AUTO_DELETE_TAG_KEY,
                    "true",
                )?)
                .tag_set(tag("cost-centre", "finance")?)
                .build()?,
        )
        .send()
        .await?;

    let mut driver = StreamDriver::new(
        &px.roles.stream_router,
        &px.stack.resources.entry_table,
        Arc::new(px.router_effects()),
        FilterPatterns::entry_stream()?,
        3,
    );
    let report = driver.poll_once().await?;
    ensure!(report.payloads_committed == 2, "{report:?}");
    ensure!(
        px.tagged(&committed).await? == Some(false),
        "committed upload kept its tag"
    );
    let left = px
        .stack
        .s3
        .get_object_tagging()
        .bucket(&px.stack.resources.bucket)
        .key(&committed)
        .send()
        .await?
        .tag_set;
    ensure!(
        left.len() == 1 && left[0].key() == "cost-centre" && left[0].value() == "finance",
        "only our tag is removed: {left:?}"
    );
    ensure!(
        px.tagged(&offloaded_key).await? == Some(false),
        "offloaded body kept its tag"
    );
    ensure!(
        px.tagged(&abandoned).await? == Some(true),
        "an upload never committed lost its tag"
    );

    // An un-tagging that was lost (the tag put back) is redone by the reprocess tool; the
    // abandoned upload is still left to expire.
    px.stack
        .s3
        .put_object_tagging()
        .bucket(&px.stack.resources.bucket)
        .key(&committed)
        .tagging(
            aws_sdk_s3::types::Tagging::builder()
                .tag_set(
                    aws_sdk_s3::types::Tag::builder()
                        .key(sheetlog_core::domain::keys::AUTO_DELETE_TAG_KEY)
                        .value("true")
                        .build()?,
                )
                .build()?,
        )
        .send()
        .await?;
    let report = reprocessor(&px)?
        .run(
            ReprocessOptions {
                since: now_secs() - 3600,
                dry_run: false,
            },
            &mut |_, _| {},
        )
        .await?;
    ensure!(report.payloads_untagged == 1, "{report:?}");
    ensure!(report.payloads_already_committed == 1, "{report:?}");
    ensure!(px.tagged(&committed).await? == Some(false));
    ensure!(px.tagged(&abandoned).await? == Some(true));
    Ok(())
}

fn reprocessor(px: &PipelineStack) -> anyhow::Result<Reprocessor> {
    let pending = px
        .stack
        .resources
        .pending_table
        .as_deref()
        .context("the pipeline stack has a Pending Snapshots table")?;
    Ok(Reprocessor::new(
        px.stack.dynamo.clone(),
        &px.stack.resources.entry_table,
        &px.stack.resources.segment_table,
        pending,
        S3Bucket::new(px.stack.s3.clone(), &px.stack.resources.bucket),
        SqsJobQueue::new(px.sqs.clone(), &px.queues.snapshot_queue),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_reprocess_tool_recovers_a_dropped_snapshot_job() -> anyhow::Result<()> {
    let px = PipelineStack::new("pipeline-reprocess").await?;
    let pipeline = px.pipeline(
        LocalPipelineConfig::default(),
        px.worker(test_worker_config())?,
    )?;
    let mut stream = pipeline.stream;
    let queue = pipeline.queue;
    let (log, first, second) = two_snapshot_log(&px).await?;
    ensure!(stream.poll_once().await?.jobs_sent == 2);
    // Both jobs are lost (say, a purge by mistake, or they expired).
    px.sqs
        .purge_queue()
        .queue_url(&px.queues.snapshot_queue)
        .send()
        .await?;
    ensure!(queue.poll_once().await?.is_empty());
    ensure!(completion(&px, first.job).await?.0.is_none());

    let since = now_secs() - 3600;
    let opts = ReprocessOptions {
        since,
        dry_run: true,
    };
    let dry = reprocessor(&px)?.run(opts, &mut |_, _| {}).await?;
    ensure!(dry.jobs_enqueued == 2 && px.queue_depth(&px.queues.snapshot_queue).await?.0 == 0);
    let opts = ReprocessOptions {
        since,
        dry_run: false,
    };
    let mut progress = Vec::new();
    let report = reprocessor(&px)?
        .run(opts, &mut |l, r| progress.push((l, r.jobs_enqueued)))
        .await?;
    ensure!(report.jobs_enqueued == 2, "{report:?}");
    ensure!(progress.iter().any(|(l, _)| *l == log));
    wait_until("both snapshots", Duration::from_secs(60), || async {
        queue.poll_once().await?;
        let pending = px.pending.list(log).await?;
        Ok(pending.is_empty()
            && completion(&px, first.job).await?.0.is_some()
            && completion(&px, second.job).await?.0.is_some())
    })
    .await?;
    // Safe to run again: nothing is left to do, so nothing is enqueued.
    let again = reprocessor(&px)?.run(opts, &mut |_, _| {}).await?;
    ensure!(again.jobs_enqueued == 0, "{again:?}");
    let root1 = assert_complete(&px, first).await?;
    let root2 = assert_complete(&px, second).await?;
    px.assert_no_orphans(log, &[&root1, &root2]).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pending_items_only_move_forward_under_their_increment() -> anyhow::Result<()> {
    let px = PipelineStack::new("pipeline-pending").await?;
    let log = LogId::new_random();
    let p = &px.pending;
    let key = PendingKey::new(log, 1, 5);
    let Guarded::Done(created) = p.create(key, 100).await? else {
        bail!("first create lost")
    };
    ensure!(created.active && created.increment == 0);
    ensure!(
        p.create(key, 101).await? == Guarded::Lost,
        "a second create must lose"
    );

    let Guarded::Done(c1) = p.checkpoint(key, 0, "{\"a\":1}", 102).await? else {
        bail!("holder's checkpoint refused")
    };
    ensure!(c1.increment == 1 && c1.modified == 102 && c1.state.as_deref() == Some("{\"a\":1}"));
    // A writer still holding increment 0 has been overtaken.
    ensure!(p.checkpoint(key, 0, "{\"a\":0}", 103).await? == Guarded::Lost);
    ensure!(
        p.claim(&created, 104).await? == Guarded::Lost,
        "a claim on a stale read must lose"
    );

    let Guarded::Done(released) = p.release(key, 1, 105).await? else {
        bail!("release refused")
    };
    ensure!(!released.active && released.increment == 2);
    let Guarded::Done(claimed) = p.claim(&released, 106).await? else {
        bail!("claim refused")
    };
    ensure!(claimed.active && claimed.increment == 3 && claimed.retries == 1);
    ensure!(
        claimed.state.as_deref() == Some("{\"a\":1}"),
        "a claim keeps the checkpoint"
    );
    let Guarded::Done(beat) = p.heartbeat(key, 3, 107).await? else {
        bail!("heartbeat refused")
    };
    ensure!(beat.increment == 4 && beat.modified == 107);

    // Earliest is by (segment, entry), whatever the insertion order.
    p.create(PendingKey::new(log, 2, 0), 100).await?;
    p.create(PendingKey::new(log, 0, 300), 100).await?;
    let earliest = p.earliest(log).await?.context("no pending items")?;
    ensure!(earliest.key == PendingKey::new(log, 0, 300));
    // Deleting is conditional on the holder's increment; a delete of a gone item succeeds.
    ensure!(
        p.delete(key, 3).await? == Guarded::Lost,
        "a stale holder cannot delete"
    );
    ensure!(p.delete(PendingKey::new(log, 0, 300), 0).await? == Guarded::Done(()));
    ensure!(p.delete(PendingKey::new(log, 0, 300), 0).await? == Guarded::Done(()));
    ensure!(p.earliest(log).await?.map(|e| e.key) == Some(key));
    ensure!(p.list(log).await?.len() == 2);
    ensure!(p.earliest(LogId::new_random()).await?.is_none());
    Ok(())
}

/// A log whose first Snapshot entry (after 80 rows) was never built; returns it.
async fn one_snapshot_log(px: &PipelineStack) -> anyhow::Result<(LogId, At)> {
    let log = px.log.create().await?.log;
    append(px, log, insert_rows_entry(1, 80, "a")).await?;
    let at = append(px, log, snapshot_entry()).await?;
    Ok((log, at))
}

/// Runs `job` with a worker that stops (as if killed) right after `step`.
async fn kill_after(px: &PipelineStack, job: SnapshotJob, step: Step) -> anyhow::Result<()> {
    let hook = Arc::new(Steps {
        kill: Some(step),
        ..Steps::default()
    });
    match px
        .worker(test_worker_config())?
        .with_hook(hook)
        .run(&job, later())
        .await
    {
        Err(WorkerError::Stopped(s)) if s == step => Ok(()),
        other => bail!("expected a stop after {step}, got {other:?}"),
    }
}

/// Every state an unfinished snapshot can be left in, each with its queue message lost, and some
/// outside the segments the date selects: the reprocess tool finds them all, and the worker
/// finishes them from its jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_reprocess_tool_finds_every_unfinished_snapshot_state() -> anyhow::Result<()> {
    let (px, worker) = PipelineStack::with_worker("pipeline-reprocess-states").await?;

    // Never started.
    let (_, never) = one_snapshot_log(&px).await?;
    // Handed off, and the hand-off message lost: an inactive pending item with a checkpoint.
    let (_, first, handed) = two_snapshot_log(&px).await?;
    drive(&worker, first.job).await?;
    match worker.run(&handed.job, Instant::now()).await? {
        Outcome::HandedOff { .. } => {}
        other => bail!("expected a hand-off, got {other:?}"),
    }
    // Killed after recording the root: the item is still there (active, soon stale).
    let (_, rooted) = one_snapshot_log(&px).await?;
    kill_after(&px, rooted.job, Step::RootWritten).await?;
    // The same, and the item then removed by hand: only the root on the entry tells.
    let (_, cut) = one_snapshot_log(&px).await?;
    kill_after(&px, cut.job, Step::RootWritten).await?;
    let key = PendingKey::new(cut.job.log_id, cut.job.segment, cut.job.entry);
    let item = px
        .pending
        .get(key)
        .await?
        .context("item kept by the kill")?;
    ensure!(px.pending.delete(key, item.increment).await? == Guarded::Done(()));
    // Killed after advancing Last Snapshot: complete but for the pending item.
    let (_, advanced) = one_snapshot_log(&px).await?;
    kill_after(&px, advanced.job, Step::LastSnapshotAdvanced).await?;
    // In a segment older than any the date selects: segment 0 was closed with its second
    // Snapshot entry never built, and segment 1's first snapshot waits for it.
    let (old_log, old) = one_snapshot_log(&px).await?;
    let started = px.log.start_segment(old_log).await?;
    let newer = SnapshotJob::new(old_log, started.segment, 0);

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let opts = ReprocessOptions {
        since: now_secs() + 5,
        dry_run: false,
    };
    let report = reprocessor(&px)?.run(opts, &mut |_, _| {}).await?;
    ensure!(report.jobs_enqueued == 7, "{report:?}");
    ensure!(
        report.snapshots_not_started == 3,
        "never, old, newer: {report:?}"
    );
    ensure!(
        report.snapshots_pending == 3,
        "handed, rooted, advanced: {report:?}"
    );
    ensure!(
        report.snapshots_completion_cut_short == 1,
        "cut: {report:?}"
    );

    let pipeline = px.pipeline(LocalPipelineConfig::default(), worker.clone())?;
    let all = [never, handed, rooted, cut, advanced, old];
    wait_until("every snapshot", Duration::from_secs(90), || async {
        pipeline.queue.poll_once().await?;
        for at in &all {
            let (root, last) = completion(&px, at.job).await?;
            if root.is_none() || last.is_none_or(|l| l < at.job.entry) {
                return Ok(false);
            }
            // Deleting the pending item is a completion's last step; `advanced` looks complete
            // from the start, so without this the wait could end while its job still runs.
            let key = PendingKey::new(at.job.log_id, at.job.segment, at.job.entry);
            if px.pending.get(key).await?.is_some() {
                return Ok(false);
            }
        }
        let (root, _) = completion(&px, newer).await?;
        Ok(root.is_some())
    })
    .await?;
    for at in all {
        assert_complete(&px, at).await?;
    }
    // Nothing is left: a second run finds nothing to do.
    let again = reprocessor(&px)?.run(opts, &mut |_, _| {}).await?;
    ensure!(again.jobs_enqueued == 0, "{again:?}");
    Ok(())
}

/// A build that keeps handing off is parked at the hop cap instead of going round for ever (Lambda's
/// recursive-loop detection is off for the worker): no message is left, the pending item keeps
/// its checkpoint, and the reprocess tool sends it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_past_the_hand_off_cap_is_parked_and_reprocess_resumes_it() -> anyhow::Result<()> {
    let px = PipelineStack::new("pipeline-park").await?;
    let capped = sheetlog_snapshot_worker::WorkerConfig {
        max_handoffs: 2,
        ..test_worker_config()
    };
    let tiny = LocalPipelineConfig {
        worker_time_budget: Duration::ZERO,
        worker_concurrency: 1,
        ..LocalPipelineConfig::default()
    };
    let pipeline = px.pipeline(tiny, px.worker(capped)?)?;
    let (log, first, second) = two_snapshot_log(&px).await?;
    drive(&px.worker(test_worker_config())?, first.job).await?;
    px.job_queue().send(&second.job, Duration::ZERO).await?;
    let mut handoffs = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        for r in pipeline.queue.poll_once().await? {
            match r.result? {
                Outcome::HandedOff { .. } => handoffs += 1,
                other => bail!("unexpected {other:?}"),
            }
        }
        if handoffs > 0 && px.queue_depth(&px.queues.snapshot_queue).await? == (0, 0, 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ensure!(
        handoffs == 3,
        "sent round twice, parked on the third: {handoffs}"
    );
    ensure!(px.queue_depth(&px.queues.snapshot_queue).await? == (0, 0, 0));
    ensure!(px.queue_depth(&px.queues.dead_letter_queue).await? == (0, 0, 0));
    let key = PendingKey::new(log, second.job.segment, second.job.entry);
    let parked = px
        .pending
        .get(key)
        .await?
        .context("the parked job's item")?;
    ensure!(!parked.active && parked.state.is_some(), "{parked:?}");
    ensure!(completion(&px, second.job).await?.0.is_none());

    let report = reprocessor(&px)?
        .run(
            ReprocessOptions {
                since: now_secs(),
                dry_run: false,
            },
            &mut |_, _| {},
        )
        .await?;
    ensure!(
        report.snapshots_pending == 1 && report.jobs_enqueued == 1,
        "{report:?}"
    );
    let resumed = px.pipeline(
        LocalPipelineConfig::default(),
        px.worker(test_worker_config())?,
    )?;
    wait_until("the parked snapshot", Duration::from_secs(60), || async {
        resumed.queue.poll_once().await?;
        Ok(completion(&px, second.job).await?.0.is_some())
    })
    .await?;
    let root1 = assert_complete(&px, first).await?;
    let root2 = assert_complete(&px, second).await?;
    px.assert_no_orphans(log, &[&root1, &root2]).await?;
    Ok(())
}

/// A snapshot worker invocation still running at the function's timeout is cut off, as Lambda
/// cuts it off (issue 42: the local drivers ran handlers without the template's timeouts): it
/// fails, its message is not deleted (it comes back after the visibility timeout), and the job
/// still completes, with nothing orphaned, on the next try.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_invocation_past_the_functions_timeout_is_cut_off() -> anyhow::Result<()> {
    let px = PipelineStack::new("pipeline-timeout").await?;
    let cfg = LocalPipelineConfig {
        worker_concurrency: 1,
        timeouts: sheetlog_pipeline::FunctionTimeouts {
            snapshot_worker: Some(Duration::from_millis(1)),
            ..Default::default()
        },
        ..LocalPipelineConfig::default()
    };
    let pipeline = px.pipeline(cfg, px.worker(test_worker_config())?)?;
    let (log, at) = one_snapshot_log(&px).await?;
    px.job_queue().send(&at.job, Duration::ZERO).await?;
    let results = pipeline.queue.poll_once().await?;
    ensure!(results.len() == 1, "{results:?}");
    ensure!(
        matches!(results[0].result, Err(WorkerError::TimedOut(_))) && results[0].keep,
        "cut off and kept: {results:?}"
    );
    let (visible, in_flight, _) = px.queue_depth(&px.queues.snapshot_queue).await?;
    ensure!(
        visible + in_flight == 1,
        "the message stays on the queue ({visible} visible, {in_flight} in flight)"
    );
    drive(&px.worker(test_worker_config())?, at.job).await?;
    let root = assert_complete(&px, at).await?;
    px.assert_no_orphans(log, &[&root]).await?;
    Ok(())
}

/// A stream router invocation still running at the function's timeout is cut off: the batch
/// fails as a whole, is retried from its first record, and is given up on (described on the
/// failure queue) after the retries, as Lambda's stream source would.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_router_invocation_past_the_functions_timeout_fails_its_batch() -> anyhow::Result<()> {
    let (px, log) = PipelineStack::with_new_log("pipeline-router-timeout").await?;
    append(&px, log, insert_rows_entry(1, 80, "a")).await?;
    append(&px, log, snapshot_entry()).await?;
    let failures = create_stream_failure_queue(
        &px.sqs,
        &sheetlog_tests::emulator::unique_prefix("router-timeout"),
        QueueSettings::default(),
    )
    .await?;
    let roles = px.roles_with_failure_queue(&failures).await?;
    let mut driver = StreamDriver::new(
        &roles.stream_router,
        &px.stack.resources.entry_table,
        Arc::new(px.router_effects()),
        FilterPatterns::entry_stream()?,
        1,
    )
    .with_timeout(Some(Duration::from_micros(1)))
    .with_failure_queue(aws_sdk_sqs::Client::new(&roles.stream_router), &failures);
    let report = driver.poll_once().await?;
    ensure!(!report.failed.is_empty(), "the batch failed: {report:?}");
    let described = px
        .sqs
        .receive_message()
        .queue_url(&failures)
        .max_number_of_messages(10)
        .send()
        .await?
        .messages
        .unwrap_or_default();
    ensure!(
        described.len() == 1,
        "one description of the batch given up on: {described:?}"
    );
    Ok(())
}
