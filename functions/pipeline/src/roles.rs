//! Each function of the local stack calls AWS as itself, as it does deployed.
//!
//! On AWS every function runs with its own execution role, and a call its role does not allow
//! fails with `AccessDenied`. The emulator enforces no IAM, so locally each function instead
//! signs with credentials of its own whose access key id names it and the stack
//! (`role:<binary>:<stack>`, [`Roles::per_function`]); the emulator's recorder
//! (`scripts/lib/iam_recorder.py`, on when `SHEETLOG_IAM_RECORD` names a file) writes down the IAM
//! action and resource of every call signed so, and `cdk/bin/iam-calls.ts` evaluates them against
//! that function's role in the synthesized template. [`record_stack`] writes, to the same file,
//! which local resource stands for each of the template's ([`Counterparts`]), so the template's
//! ARNs can be turned into the local stack's.
//!
//! Lambda's event-source mappings read the stream and queues with the consuming function's role,
//! so the local drivers that stand in for them use that function's credentials too.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{Context, bail, ensure};
use aws_config::SdkConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use serde::{Deserialize, Serialize};

use sheetlog_core::config::Resources;

use crate::LocalStack;
use crate::authorizer::SigV4Header;
use crate::provision::{QueueUrls, SyncQueueUrls};

/// What an access key id of a function's local credentials starts with.
pub const ROLE_KEY_PREFIX: &str = "role:";
/// The file the emulator records calls to, and [`record_stack`] writes a stack's counterparts to.
pub const IAM_RECORD_VAR: &str = "SHEETLOG_IAM_RECORD";
/// The emulator's account (moto's default): in the ARNs of local resources and local callers.
pub const LOCAL_ACCOUNT: &str = "123456789012";

/// The IAM record's file, when calls are being recorded (`SHEETLOG_IAM_RECORD` is set).
pub fn recording() -> Option<std::ffi::OsString> {
    std::env::var_os(IAM_RECORD_VAR).filter(|p| !p.is_empty())
}

/// Appends `line` (one JSON document and its newline) to the IAM record: one write, in append
/// mode, since the emulators and the local Event API append to the same file.
fn append_to_record(path: &std::ffi::OsStr, line: &[u8]) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line))
}

/// The functions' binaries, as the template names them (`CRATES` in `cdk/lib/stack/names.ts`).
pub const API: &str = "sheetlog-api";
pub const STREAM_ROUTER: &str = "sheetlog-stream-router";
pub const SNAPSHOT_WORKER: &str = "sheetlog-snapshot-worker";
pub const SYNC_WRITER: &str = "sheetlog-sync-writer";
pub const ARCHIVER: &str = "sheetlog-archiver";

/// The SDK configuration each function calls AWS with.
#[derive(Debug, Clone)]
pub struct Roles {
    pub api: SdkConfig,
    pub stream_router: SdkConfig,
    pub snapshot_worker: SdkConfig,
    pub sync_writer: SdkConfig,
    pub archiver: SdkConfig,
}

impl Roles {
    /// The configuration of the function whose binary is `binary`.
    pub fn of(&self, binary: &str) -> Option<&SdkConfig> {
        Some(match binary {
            API => &self.api,
            STREAM_ROUTER => &self.stream_router,
            SNAPSHOT_WORKER => &self.snapshot_worker,
            SYNC_WRITER => &self.sync_writer,
            ARCHIVER => &self.archiver,
            _ => return None,
        })
    }

    /// Every function with `sdk`'s own credentials (tests that do not look at roles).
    pub fn shared(sdk: &SdkConfig) -> Self {
        Self {
            api: sdk.clone(),
            stream_router: sdk.clone(),
            snapshot_worker: sdk.clone(),
            sync_writer: sdk.clone(),
            archiver: sdk.clone(),
        }
    }

    /// Each function with credentials of its own, `role:<binary>:<stack>`: what the emulator's
    /// recorder attributes calls by. For the emulator only (AWS would refuse the keys).
    pub fn per_function(sdk: &SdkConfig, prefix: &str) -> Self {
        let as_role = |binary: &str| {
            let key = role_key(binary, prefix);
            sdk.to_builder()
                .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                    key,
                    "local-role-secret",
                    None,
                    None,
                    "sheetlog-local-role",
                )))
                .build()
        };
        Self {
            api: as_role(API),
            stream_router: as_role(STREAM_ROUTER),
            snapshot_worker: as_role(SNAPSHOT_WORKER),
            sync_writer: as_role(SYNC_WRITER),
            archiver: as_role(ARCHIVER),
        }
    }
}

/// The access key id of `binary`'s local credentials in the stack named `stack`.
pub fn role_key(binary: &str, stack: &str) -> String {
    format!("{ROLE_KEY_PREFIX}{binary}:{stack}")
}

/// Which local resource stands for each of the template's, by logical id: tables and buckets by
/// name, queues by URL. The user pool and the Event API are one each, so they need no id.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counterparts {
    pub tables: BTreeMap<String, String>,
    pub buckets: BTreeMap<String, String>,
    pub queues: BTreeMap<String, String>,
    /// The local user pool's id (authMode=cognito).
    pub user_pool: Option<String>,
}

// The parts of the description (`npx tsx cdk/bin/local-resources.ts`) the pairing reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Description {
    tables: Vec<Named>,
    buckets: Vec<Named>,
    queues: Vec<Queue>,
    stream_consumers: Vec<StreamConsumer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Named {
    logical_id: String,
    env: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Queue {
    logical_id: String,
    env: Option<String>,
    dead_letter: Option<DeadLetter>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeadLetter {
    logical_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StreamConsumer {
    on_failure_queue: Option<String>,
}

impl Counterparts {
    /// Pairs the template's resources (the description's JSON) with the local stack's, through
    /// what the functions are told (the environment variable naming each resource) and the
    /// references between resources (a queue's dead-letter target, the stream consumer's
    /// failure queue). A template resource with no counterpart is an error: the local stack must
    /// create it. `catalog_table` is the local catalog (authMode=cognito), if any.
    pub fn pair(
        description: &[u8],
        stack: &LocalStack,
        catalog_table: Option<&str>,
    ) -> anyhow::Result<Self> {
        let desc = Self::description(description)?;
        let mut c = Self::pair_tables(&desc, &stack.resources, catalog_table)?;
        c.pair_queues(
            &desc,
            Some(&stack.queues),
            Some(&stack.sync_queues),
            Some(&stack.stream_failure_queue),
        );
        for q in &desc.queues {
            ensure!(
                c.queues.contains_key(&q.logical_id),
                "template queue {} has no local counterpart: create it in create_local_stack and \
                 pair it here",
                q.logical_id
            );
        }
        Ok(c)
    }

    /// The tables, the bucket, and the snapshot queues and the stream router's failure queue
    /// if given, for a test stack that has no other queues (its template's other queues stay
    /// unpaired, so a call on them is refused).
    pub fn pair_storage(
        description: &[u8],
        resources: &Resources,
        snapshot_queues: Option<&QueueUrls>,
        stream_failure_queue: Option<&String>,
    ) -> anyhow::Result<Self> {
        let desc = Self::description(description)?;
        let mut c = Self::pair_tables(&desc, resources, None)?;
        c.pair_queues(&desc, snapshot_queues, None, stream_failure_queue);
        Ok(c)
    }

    fn pair_queues(
        &mut self,
        desc: &Description,
        snapshot: Option<&QueueUrls>,
        sync: Option<&SyncQueueUrls>,
        stream_failure: Option<&String>,
    ) {
        for q in &desc.queues {
            let (queue, dead_letter) = match (q.env.as_deref(), snapshot, sync) {
                (Some("SHEETLOG_SNAPSHOT_QUEUE_URL"), Some(s), _) => {
                    (&s.snapshot_queue, &s.dead_letter_queue)
                }
                (Some("SHEETLOG_SYNC_QUEUE_URL"), _, Some(s)) => (&s.queue, &s.dead_letter_queue),
                _ => continue,
            };
            self.queues.insert(q.logical_id.clone(), queue.clone());
            if let Some(dl) = &q.dead_letter {
                self.queues
                    .insert(dl.logical_id.clone(), dead_letter.clone());
            }
        }
        if let Some(url) = stream_failure {
            for s in &desc.stream_consumers {
                if let Some(id) = &s.on_failure_queue {
                    self.queues.insert(id.clone(), url.clone());
                }
            }
        }
    }

    fn description(description: &[u8]) -> anyhow::Result<Description> {
        serde_json::from_slice(description)
            .context("reading the template's description (cdk/bin/local-resources.ts)")
    }

    fn pair_tables(
        desc: &Description,
        r: &Resources,
        catalog_table: Option<&str>,
    ) -> anyhow::Result<Self> {
        let mut c = Counterparts::default();
        for t in &desc.tables {
            let local = match t.env.as_deref() {
                Some("SHEETLOG_ENTRY_TABLE") => Some(r.entry_table.clone()),
                Some("SHEETLOG_SEGMENT_TABLE") => Some(r.segment_table.clone()),
                Some("SHEETLOG_PENDING_TABLE") => r.pending_table.clone(),
                Some("SHEETLOG_DEDUPE_TABLE") => r.dedupe_table.clone(),
                Some("SHEETLOG_CLIENTS_TABLE") => r.clients_table.clone(),
                Some("SHEETLOG_CATALOG_TABLE") => catalog_table.map(str::to_owned),
                _ => None,
            };
            let Some(local) = local else {
                bail!(
                    "template table {} (environment variable {:?}) has no local counterpart: \
                     create it in create_local_stack and pair it here",
                    t.logical_id,
                    t.env
                );
            };
            c.tables.insert(t.logical_id.clone(), local);
        }
        for b in &desc.buckets {
            match b.env.as_deref() {
                Some("SHEETLOG_BUCKET") => {
                    c.buckets.insert(b.logical_id.clone(), r.bucket.clone());
                }
                other => bail!(
                    "template bucket {} (environment variable {other:?}) has no local counterpart",
                    b.logical_id
                ),
            }
        }
        Ok(c)
    }
}

/// One stack's line in the IAM record: its name (the part of its role keys after the binary),
/// the context its template was described with, and its counterparts.
#[derive(Serialize)]
struct StackLine<'a> {
    kind: &'static str,
    stack: &'a str,
    context: &'a [String],
    counterparts: &'a Counterparts,
}

/// Appends the stack's line to the file in `SHEETLOG_IAM_RECORD`, when it is set: the IAM check
/// needs it to evaluate the calls signed with this stack's role keys. `context` is what the
/// template was described with (`KEY=VALUE`, as `-c` takes them).
pub fn record_stack(
    stack: &str,
    context: &[String],
    counterparts: &Counterparts,
) -> anyhow::Result<()> {
    let Some(path) = recording() else {
        return Ok(());
    };
    let mut line = serde_json::to_vec(&StackLine {
        kind: "stack",
        stack,
        context,
        counterparts,
    })?;
    line.push(b'\n');
    append_to_record(&path, &line)
        .with_context(|| format!("appending to {IAM_RECORD_VAR}={}", path.to_string_lossy()))
}

/// The local Event API's id in the ARNs of its channel namespaces: the IAM check puts it in
/// place of the template's `EventApi.ApiId`.
pub const LOCAL_EVENT_API_ID: &str = "local";

/// Records an `appsync:EventPublish` the local Event API served, when the request was signed
/// with a function's role key and `SHEETLOG_IAM_RECORD` is set (the emulator records every
/// other service's calls; AppSync Events is not in the emulator). `authorization` is the
/// request's SigV4 `Authorization` header; `channel` a normalized channel path.
pub fn record_event_publish(authorization: &str, channel: &str) {
    static SEEN: std::sync::Mutex<Option<std::collections::HashSet<String>>> =
        std::sync::Mutex::new(None);
    let Some(path) = recording() else {
        return;
    };
    let Ok(SigV4Header { key, region, .. }) = SigV4Header::parse(authorization) else {
        return;
    };
    if !key.starts_with(ROLE_KEY_PREFIX) {
        return;
    }
    let namespace = channel
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    let resource = format!(
        "arn:aws:appsync:{region}:{LOCAL_ACCOUNT}:apis/{LOCAL_EVENT_API_ID}/channelNamespace/{namespace}"
    );
    {
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if !seen
            .get_or_insert_with(Default::default)
            .insert(format!("{key} {resource}"))
        {
            return;
        }
    }
    let line = serde_json::json!({
        "kind": "call",
        "key": key,
        "action": "appsync:EventPublish",
        "resource": resource,
        "call": "POST /event",
    });
    if let Err(e) = append_to_record(&path, format!("{line}\n").as_bytes()) {
        tracing::warn!(error = %e, "recording an Event API publish for the IAM check failed");
    }
}
