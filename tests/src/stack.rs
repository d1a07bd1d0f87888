//! A complete, uniquely named set of sheetlog resources on the emulator.

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use sheetlog_core::aws::{DynamoLogStore, S3Bucket};
use sheetlog_core::config::{LogConfig, Resources};
use sheetlog_core::domain::LogId;
use sheetlog_core::log::EventLog;
use sheetlog_pipeline::{Counterparts, QueueUrls, Roles};

use crate::emulator::{Emulator, unique_prefix};

/// The synthesized template's description under `context` (`KEY=VALUE`, as `-c` takes them):
/// `cdk/bin/local-resources.ts`, run once per context and test process (about 15 s each).
pub async fn described(context: &[&str]) -> anyhow::Result<&'static [u8]> {
    static DESCRIPTIONS: tokio::sync::Mutex<BTreeMap<Vec<String>, &'static [u8]>> =
        tokio::sync::Mutex::const_new(BTreeMap::new());
    let context: Vec<String> = context.iter().map(|c| (*c).to_owned()).collect();
    let mut cache = DESCRIPTIONS.lock().await;
    if let Some(d) = cache.get(&context) {
        return Ok(d);
    }
    // Kept for the process: one per context, and a test process uses a few.
    let d: &'static [u8] = Box::leak(
        sheetlog_local::dev::describe_template(&context)
            .await?
            .into_boxed_slice(),
    );
    cache.insert(context, d);
    Ok(d)
}

/// Each function's SDK configuration: with `SHEETLOG_IAM_RECORD` set, its own role key (see
/// [`sheetlog_pipeline::roles`]), and a line in the record pairing the template, described with
/// `context`, with the local resources by `pair`; otherwise `sdk` for every function.
pub async fn recorded_roles(
    sdk: &SdkConfig,
    context: &[&str],
    pair: impl FnOnce(&[u8]) -> anyhow::Result<Counterparts>,
) -> anyhow::Result<Roles> {
    if sheetlog_pipeline::roles::recording().is_none() {
        return Ok(Roles::shared(sdk));
    }
    let description = described(context).await?;
    let name = unique_prefix("roles");
    let context: Vec<String> = context.iter().map(|c| (*c).to_owned()).collect();
    sheetlog_pipeline::roles::record_stack(&name, &context, &pair(description)?)?;
    Ok(Roles::per_function(sdk, &name))
}

pub type AwsLog = EventLog<DynamoLogStore, S3Bucket>;

#[derive(Debug)]
pub struct TestStack {
    pub resources: Resources,
    pub dynamo: aws_sdk_dynamodb::Client,
    pub s3: aws_sdk_s3::Client,
    /// Kept last so the emulator outlives the clients above when the stack is dropped.
    pub emulator: Emulator,
}

impl TestStack {
    /// Starts an emulator and creates the tables and bucket under a prefix unique to `label`.
    pub async fn new(label: &str) -> anyhow::Result<Self> {
        Self::on(Emulator::start()?, label).await
    }

    /// The same on a given emulator (for example [`Emulator::start_racy`]).
    pub async fn on(emulator: Emulator, label: &str) -> anyhow::Result<Self> {
        let dynamo = emulator.dynamodb().await;
        let s3 = emulator.s3().await;
        // A freshly started moto listens before its backends are loaded; under load its first
        // requests can fail with a bare 500. One answered call each first. A full run loads two
        // cores with the other tests' emulators and builds: 20 s was once not enough there.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while dynamo.list_tables().send().await.is_err() || s3.list_buckets().send().await.is_err()
        {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the emulator at {} does not answer",
                emulator.endpoint()
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let resources = Resources::with_prefix(&unique_prefix(label));
        sheetlog_pipeline::provision::create_all(&dynamo, &s3, &resources).await?;
        Ok(Self {
            resources,
            dynamo,
            s3,
            emulator,
        })
    }

    /// Each function's SDK configuration over this stack: with `SHEETLOG_IAM_RECORD` set (as
    /// `./scripts/test` runs), each function's own role key and this stack's line in the record
    /// for the IAM check, its template described with `context` (`KEY=VALUE`, as `-c` takes
    /// them) and paired with the tables, the bucket, and `snapshot_queues` and
    /// `stream_failure_queue` when given; otherwise every function with the stack's own
    /// configuration.
    pub async fn roles(
        &self,
        context: &[&str],
        snapshot_queues: Option<&QueueUrls>,
        stream_failure_queue: Option<&String>,
    ) -> anyhow::Result<Roles> {
        let sdk = self.emulator.sdk_config().await;
        recorded_roles(&sdk, context, |description| {
            Counterparts::pair_storage(
                description,
                &self.resources,
                snapshot_queues,
                stream_failure_queue,
            )
        })
        .await
    }

    pub fn log_store(&self) -> DynamoLogStore {
        self.log_store_with(self.dynamo.clone())
    }

    fn log_store_with(&self, dynamo: aws_sdk_dynamodb::Client) -> DynamoLogStore {
        let store = DynamoLogStore::new(
            dynamo,
            &self.resources.entry_table,
            &self.resources.segment_table,
        );
        let store = match &self.resources.dedupe_table {
            Some(table) => store.with_dedupe_table(table),
            None => store,
        };
        match &self.resources.clients_table {
            Some(table) => store.with_clients_table(table),
            None => store,
        }
    }

    pub fn bucket(&self) -> S3Bucket {
        S3Bucket::new(self.s3.clone(), &self.resources.bucket)
    }

    /// An event log with the given configuration.
    pub fn log_with(&self, cfg: LogConfig) -> anyhow::Result<AwsLog> {
        Ok(EventLog::new(self.log_store(), self.bucket(), cfg)?)
    }

    /// An event log with the production defaults that calls AWS with `sdk` (a function's role
    /// from [`Self::roles`]).
    pub fn log_as(&self, sdk: &SdkConfig) -> anyhow::Result<AwsLog> {
        Ok(EventLog::new(
            self.log_store_with(aws_sdk_dynamodb::Client::new(sdk)),
            S3Bucket::new(sheetlog_core::aws::s3_client(sdk), &self.resources.bucket),
            LogConfig::default(),
        )?)
    }

    /// An event log with the production defaults.
    pub fn log(&self) -> anyhow::Result<AwsLog> {
        self.log_with(LogConfig::default())
    }

    /// The preamble of most log tests: a fresh stack named `label`, an event log over it with
    /// the production defaults, and a log created in it.
    pub async fn with_new_log(label: &str) -> anyhow::Result<(Self, AwsLog, LogId)> {
        let stack = Self::new(label).await?;
        let log = stack.log()?;
        let id = log.create().await?.log;
        Ok((stack, log, id))
    }

    /// The log with every write's response lost (and the write retried, as the SDK would):
    /// what a retry after a timeout sees on AWS, which the emulator never does.
    pub fn lossy_log(
        &self,
        seed: u64,
    ) -> anyhow::Result<
        sheetlog_core::log::EventLog<
            sheetlog_core::faults::FaultyLogStore<sheetlog_core::aws::DynamoLogStore>,
            sheetlog_core::aws::S3Bucket,
        >,
    > {
        use sheetlog_core::faults::FaultProfile;
        let mut profile =
            FaultProfile::named("none").ok_or_else(|| anyhow::anyhow!("no profile"))?;
        profile.lost_response = 1.0;
        self.faulty_log(profile, seed)
    }

    /// The log behind the fault-injecting adapter with a profile (say `FaultProfile::named("stale")`:
    /// half the eventually consistent reads answer from a replica that is behind, as AWS may).
    pub fn faulty_log(
        &self,
        profile: sheetlog_core::faults::FaultProfile,
        seed: u64,
    ) -> anyhow::Result<
        sheetlog_core::log::EventLog<
            sheetlog_core::faults::FaultyLogStore<sheetlog_core::aws::DynamoLogStore>,
            sheetlog_core::aws::S3Bucket,
        >,
    > {
        use sheetlog_core::faults::{Faults, FaultyLogStore};
        let store = FaultyLogStore::new(self.log_store(), Faults::new(profile, seed));
        Ok(sheetlog_core::log::EventLog::new(
            store,
            self.bucket(),
            LogConfig::default(),
        )?)
    }
}

impl TestStack {
    /// What the bucket's lifecycle rule does once the expiry has passed: deletes every object
    /// under `prefix` that still carries the auto-delete tag. Returns the keys it deleted.
    pub async fn expire_discardable(&self, prefix: &str) -> anyhow::Result<Vec<String>> {
        let bucket = self.bucket();
        let mut deleted = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .s3
                .list_objects_v2()
                .bucket(&self.resources.bucket)
                .prefix(prefix)
                .set_continuation_token(token)
                .send()
                .await?;
            for key in out.contents().iter().filter_map(|o| o.key()) {
                if bucket.has_auto_delete_tag(key).await? == Some(true) {
                    self.s3
                        .delete_object()
                        .bucket(&self.resources.bucket)
                        .key(key)
                        .send()
                        .await?;
                    deleted.push(key.to_owned());
                }
            }
            match out.next_continuation_token {
                Some(t) => token = Some(t),
                None => return Ok(deleted),
            }
        }
    }
}

/// `count` other sheets' sync clients, written straight into the Clients table `table` as pushes
/// leave them: each a new sheet's client with its first range item and its group's item.
pub async fn put_other_sheets_clients(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    count: usize,
) -> anyhow::Result<()> {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    use sheetlog_core::aws::items::{client_range_to_item, group_item};
    use sheetlog_core::domain::clients::ClientRange;
    let mut requests = Vec::new();
    for i in 0..count {
        let log = sheetlog_core::domain::LogId::new_random();
        let client = format!("client-{i}");
        let range = ClientRange {
            group: "g".into(),
            client: client.clone(),
            key: 1,
            first: 1,
            last: 3,
            seq: 1,
            rejected: Vec::new(),
            runs: Vec::new(),
        };
        for item in [
            client_range_to_item(log, &range),
            group_item(log, "g", &[client]),
        ] {
            requests.push(
                WriteRequest::builder()
                    .put_request(PutRequest::builder().set_item(Some(item)).build()?)
                    .build(),
            );
        }
    }
    for chunk in requests.chunks(25) {
        let mut left = Some(chunk.to_vec());
        while let Some(batch) = left.take().filter(|b| !b.is_empty()) {
            let out = dynamo
                .batch_write_item()
                .request_items(table, batch)
                .send()
                .await?;
            left = out.unprocessed_items.and_then(|mut u| u.remove(table));
        }
    }
    Ok(())
}
