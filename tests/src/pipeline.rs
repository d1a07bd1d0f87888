//! A test stack with the side-effect pipeline: the tables and bucket of [`TestStack`] plus the
//! snapshot queue pair, and helpers to build workers and drivers over them and to check a
//! completed snapshot against a replay and a from-scratch build. The entries to write are built
//! with [`crate::fixtures`].

use std::collections::BTreeSet;
use std::io::Cursor;
use std::time::Duration;

use anyhow::{Context, bail};
use aws_config::SdkConfig;
use aws_sdk_sqs::types::QueueAttributeName;
use sheetlog_core::aws::{DynamoPendingStore, S3Bucket, SqsJobQueue};
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::{Entry, LogId};
use sheetlog_core::log::SegmentHint;
use sheetlog_core::sheet::Sheet;
use sheetlog_core::snapshot::{
    BlobStore, BuildConfig, Manifest, MemBlobs, build_snapshot, materialize,
};
use sheetlog_core::snapshot_input::log_entries;
use sheetlog_pipeline::provision::{QueueSettings, QueueUrls, create_snapshot_queues};
use sheetlog_pipeline::{LocalPipeline, LocalPipelineConfig, Roles};
use sheetlog_snapshot_worker::{Handler, Worker, WorkerConfig};
use sheetlog_stream_router::AwsEffects;

use crate::emulator::unique_prefix;
use crate::stack::{AwsLog, TestStack};

/// A tiny chunk target, so the small sheets of the tests span many chunks and checkpoints.
pub const TEST_BUILD: BuildConfig = BuildConfig { chunk_target: 256 };

/// Worker settings for tests: short timeouts and waits, tiny chunks.
pub fn test_worker_config() -> WorkerConfig {
    WorkerConfig {
        pending_timeout: Duration::from_secs(1),
        handoff_reserve: Duration::ZERO,
        defer_min: Duration::from_secs(1),
        defer_max: Duration::from_secs(1),
        error_retry: Duration::from_secs(1),
        build: TEST_BUILD,
        ..WorkerConfig::default()
    }
}

#[derive(Debug)]
pub struct PipelineStack {
    pub sdk: SdkConfig,
    /// What the stream router and the snapshot worker call AWS with (their own role keys when
    /// `./scripts/test` records calls for the IAM check: [`TestStack::roles`]).
    pub roles: Roles,
    pub sqs: aws_sdk_sqs::Client,
    pub queues: QueueUrls,
    pub log: AwsLog,
    pub pending: DynamoPendingStore,
    /// The stack's bucket (payloads, snapshot blobs, import files).
    pub blobs: S3Bucket,
    /// Kept last so the emulator outlives the clients above.
    pub stack: TestStack,
}

impl PipelineStack {
    pub async fn new(label: &str) -> anyhow::Result<Self> {
        Self::with_queue_settings(label, QueueSettings::default()).await
    }

    /// The preamble of the worker tests: a fresh stack named `label` and a worker over it with
    /// [`test_worker_config`].
    pub async fn with_worker(label: &str) -> anyhow::Result<(Self, Worker)> {
        let px = Self::new(label).await?;
        let worker = px.worker(test_worker_config())?;
        Ok((px, worker))
    }

    /// The preamble of the log tests: a fresh stack named `label` and a log created in it.
    pub async fn with_new_log(label: &str) -> anyhow::Result<(Self, LogId)> {
        let px = Self::new(label).await?;
        let log = px.log.create().await?.log;
        Ok((px, log))
    }

    pub async fn with_queue_settings(label: &str, settings: QueueSettings) -> anyhow::Result<Self> {
        let stack = TestStack::new(label).await?;
        let sdk = stack.emulator.sdk_config().await;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let queues = create_snapshot_queues(&sqs, &unique_prefix(label), settings).await?;
        let roles = stack.roles(&[], Some(&queues), None).await?;
        let pending = DynamoPendingStore::new(
            stack.dynamo.clone(),
            stack.resources.require_pending_table()?,
        );
        Ok(Self {
            log: stack.log()?,
            blobs: stack.bucket(),
            pending,
            queues,
            sqs,
            sdk,
            roles,
            stack,
        })
    }

    pub fn worker(&self, cfg: WorkerConfig) -> anyhow::Result<Worker> {
        Ok(Worker::from_sdk(
            &self.roles.snapshot_worker,
            &self.stack.resources,
            LogConfig::default(),
            cfg,
        )?)
    }

    /// The functions' roles with the stream router's failure queue at `url` paired too (a test
    /// that creates one; a new line in the IAM record when calls are recorded).
    pub async fn roles_with_failure_queue(&self, url: &str) -> anyhow::Result<Roles> {
        self.stack
            .roles(&[], Some(&self.queues), Some(&url.to_owned()))
            .await
    }

    /// The stream router's effects over this stack (snapshot jobs, un-tagging payloads), with
    /// the router's role.
    pub fn router_effects(&self) -> AwsEffects {
        AwsEffects::new(
            SqsJobQueue::new(
                aws_sdk_sqs::Client::new(&self.roles.stream_router),
                &self.queues.snapshot_queue,
            ),
            S3Bucket::new(
                sheetlog_core::aws::s3_client(&self.roles.stream_router),
                &self.stack.resources.bucket,
            ),
        )
    }

    /// The snapshot queue as the worker's handler sends to it.
    pub fn job_queue(&self) -> SqsJobQueue {
        SqsJobQueue::new(
            aws_sdk_sqs::Client::new(&self.roles.snapshot_worker),
            &self.queues.snapshot_queue,
        )
    }

    pub fn handler(&self, worker: Worker) -> Handler {
        Handler::new(worker, self.job_queue())
    }

    pub fn payloads(&self) -> S3Bucket {
        self.stack.bucket()
    }

    /// Both local drivers over this stack, with the given worker.
    pub fn pipeline(
        &self,
        cfg: LocalPipelineConfig,
        worker: Worker,
    ) -> anyhow::Result<LocalPipeline> {
        LocalPipeline::with_worker(
            &self.roles,
            &self.stack.resources,
            &self.queues,
            cfg,
            worker,
        )
    }

    /// Messages on the snapshot queue: (visible, in flight, delayed).
    pub async fn queue_depth(&self, url: &str) -> anyhow::Result<(u64, u64, u64)> {
        let attrs = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await?
            .attributes
            .unwrap_or_default();
        let get = |k: QueueAttributeName| {
            attrs
                .get(&k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok((
            get(QueueAttributeName::ApproximateNumberOfMessages),
            get(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
            get(QueueAttributeName::ApproximateNumberOfMessagesDelayed),
        ))
    }

    /// Whether an object carries the auto-delete tag (`None`: no such object).
    pub async fn tagged(&self, key: &str) -> anyhow::Result<Option<bool>> {
        Ok(self.payloads().has_auto_delete_tag(key).await?)
    }

    /// Every object key under `snapshots/<log>/`.
    pub async fn snapshot_objects(&self, log: LogId) -> anyhow::Result<BTreeSet<String>> {
        let mut keys = BTreeSet::new();
        let mut token = None;
        loop {
            let out = self
                .stack
                .s3
                .list_objects_v2()
                .bucket(&self.stack.resources.bucket)
                .prefix(format!("snapshots/{log}/"))
                .set_continuation_token(token)
                .send()
                .await?;
            keys.extend(
                out.contents()
                    .iter()
                    .filter_map(|o| o.key().map(str::to_owned)),
            );
            match out.next_continuation_token {
                Some(t) => token = Some(t),
                None => return Ok(keys),
            }
        }
    }

    /// Entries `0..seq` of a log, bodies resolved.
    pub async fn entries_before(&self, log: LogId, seq: u64) -> anyhow::Result<Vec<Entry>> {
        if seq == 0 {
            return Ok(Vec::new());
        }
        let start = SegmentHint {
            segment: 0,
            base_seq: 0,
        };
        let page = self
            .log
            .read_from(log, start, 0, usize::try_from(seq).unwrap_or(usize::MAX))
            .await?;
        if page.entries.len() as u64 != seq {
            bail!("read {} entries, wanted {seq}", page.entries.len());
        }
        Ok(page.entries)
    }

    /// The sheet after entries `0..seq`, replayed in memory (the oracle).
    pub async fn replay(&self, log: LogId, seq: u64) -> anyhow::Result<Sheet> {
        let mut sheet = Sheet::new();
        for e in log_entries(&self.entries_before(log, seq).await?)? {
            for ev in e.entry.events() {
                let payload = match &e.payload {
                    Some(k) => Some(Box::new(Cursor::new(
                        self.payloads()
                            .get_object(k)
                            .await?
                            .with_context(|| format!("payload {k} is missing"))?,
                    ))
                        as Box<dyn sheetlog_core::sheet::import::ReadSeek>),
                    None => None,
                };
                sheet.apply(ev, payload)?;
            }
        }
        Ok(sheet)
    }

    /// Checks the completed snapshot whose manifest is `root` at `seq`: its cells equal a full
    /// replay, its manifest and chunks are byte-identical to a from-scratch build, and returns
    /// the manifest.
    pub async fn check_snapshot(
        &self,
        log: LogId,
        seq: u64,
        root: &str,
    ) -> anyhow::Result<Manifest> {
        let bytes = self
            .blobs
            .get_object(root)
            .await?
            .with_context(|| format!("manifest {root} is missing"))?;
        let manifest = Manifest::from_bytes(root, &bytes)?;
        anyhow::ensure!(
            manifest.seq == seq,
            "manifest is at {}, not {seq}",
            manifest.seq
        );
        let got = materialize(&self.blobs, &manifest).await?;
        let want = self.replay(log, seq).await?;
        anyhow::ensure!(got == want, "snapshot at {seq} differs from a replay");

        let reference = MemBlobs::new();
        let imports = self.stack.bucket();
        let built = build_snapshot(
            &reference,
            &imports,
            TEST_BUILD,
            *log.as_uuid(),
            seq,
            None,
            log_entries(&self.entries_before(log, seq).await?)?,
        )
        .await?;
        anyhow::ensure!(built.manifest_key == root, "manifest key differs");
        let reference_manifest = reference
            .get(&built.manifest_key)
            .await?
            .context("the reference build wrote no manifest")?;
        anyhow::ensure!(
            reference_manifest[..] == bytes[..],
            "manifest bytes differ from a from-scratch build"
        );
        for (key, blob) in reference.snapshot() {
            let stored = self
                .blobs
                .get_object(&key)
                .await?
                .with_context(|| format!("chunk {key} is missing"))?;
            anyhow::ensure!(
                stored == blob,
                "chunk {key} differs from a from-scratch build"
            );
        }
        Ok(manifest)
    }

    /// Every object under the log's snapshot prefix belongs to one of `manifests`.
    pub async fn assert_no_orphans(&self, log: LogId, roots: &[&str]) -> anyhow::Result<()> {
        let mut expected = BTreeSet::new();
        for root in roots {
            expected.insert((*root).to_owned());
            let bytes = self
                .blobs
                .get_object(root)
                .await?
                .context("manifest missing")?;
            let m = Manifest::from_bytes(root, &bytes)?;
            for c in &m.chunks {
                expected.insert(sheetlog_core::snapshot::chunk_key(
                    *log.as_uuid(),
                    &c.hash,
                    m.format,
                ));
            }
        }
        let found = self.snapshot_objects(log).await?;
        let orphans: Vec<_> = found.difference(&expected).collect();
        anyhow::ensure!(orphans.is_empty(), "orphaned snapshot objects: {orphans:?}");
        Ok(())
    }
}

/// Runs a snapshot job to completion ([`drive`]); an error unless the snapshot is complete.
pub async fn drive_to_completion<
    S: sheetlog_core::ports::LogStore,
    P: sheetlog_core::ports::PayloadStore,
>(
    worker: &Worker<S, P>,
    job: sheetlog_core::domain::SnapshotJob,
) -> anyhow::Result<()> {
    use sheetlog_snapshot_worker::Outcome;
    match drive(worker, job).await?.last() {
        Some(Outcome::Completed { .. } | Outcome::AlreadyComplete) => Ok(()),
        other => bail!("snapshot {job:?}: {other:?}"),
    }
}

/// Runs a snapshot job until it finishes, sleeping through deferrals (at most 2 s each) and
/// continuing after hand-offs; returns every outcome in order.
pub async fn drive<S: sheetlog_core::ports::LogStore, P: sheetlog_core::ports::PayloadStore>(
    worker: &Worker<S, P>,
    job: sheetlog_core::domain::SnapshotJob,
) -> anyhow::Result<Vec<sheetlog_snapshot_worker::Outcome>> {
    use sheetlog_snapshot_worker::Outcome;
    let mut outcomes = Vec::new();
    let mut job = job;
    for _ in 0..200 {
        let o = worker
            .run(&job, std::time::Instant::now() + Duration::from_secs(3600))
            .await?;
        outcomes.push(o.clone());
        match o {
            Outcome::Deferred { delay, .. } => {
                tokio::time::sleep(delay.min(Duration::from_secs(2))).await;
                job = job.deferred(sheetlog_core::domain::now_secs());
            }
            Outcome::HandedOff { .. } => {}
            _ => return Ok(outcomes),
        }
    }
    anyhow::bail!("job {job:?} did not finish: {outcomes:?}")
}
