//! The local stack creates the same resources as the CDK template.
//!
//! The template's side is `npx tsx cdk/bin/local-resources.ts` (a JSON description derived from the
//! synthesized template; shape in `cdk/lib/resources.ts`). The local side is what
//! [`create_local_stack`] — the function `sheetlog dev` runs — really created on a fresh emulator,
//! read back through the AWS APIs, plus the settings the local drivers apply in place of Lambda's
//! event-source mappings. The two are compared field by field.
//!
//! Compared: every table's keys and key types, billing mode, stream view type, TTL attribute and
//! global secondary indexes (keys, projection);
//! the bucket's lifecycle rules and CORS; every queue's FIFO flag, visibility timeout, retention
//! and redrive (dead-letter target and max receive count); the Entry-stream consumer's table,
//! starting position, batch size, filter patterns, per-record failures, retries and failure queue;
//! the snapshot-queue consumer's queue and batch size; the worker's timeout and pending timeout.
//! Also: every template table, bucket and queue has a local counterpart and the local stack
//! creates nothing the template lacks.
//!
//! The routes the template serves without an authorizer are checked against the local
//! authorizer stand-in (`sheetlog dev --auth jwt|cognito`) over HTTP: every route of the API and
//! every open route, with every method, is open locally exactly when the template has it open
//! ([`local_authorizer_opens_exactly_the_templates_open_routes`]).
//!
//! Not compared, on purpose: names (CloudFormation generates them; the local stack prefixes
//! them), and what the template adds for a production account that neither the emulator nor a
//! developer needs and the description leaves out — encryption, point-in-time recovery, deletion
//! protection and retention policies, public-access blocks and TLS-only policies, alarms.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use aws_sdk_sqs::types::QueueAttributeName;
use serde::Deserialize;
use serde_json::Value;
use sheetlog_pipeline::stream::BATCH_SIZE;
use sheetlog_pipeline::{
    Counterparts, FilterPatterns, LocalPipelineConfig, LocalStack, create_local_stack,
};
use sheetlog_snapshot_worker::WorkerConfig;
use sheetlog_tests::emulator::{Emulator, unique_prefix, workspace_root};

/// The format of the description this test understands (`LOCAL_RESOURCES_FORMAT`).
const FORMAT: u32 = 2;

// The description's types. `deny_unknown_fields`: a field added to the description is something
// the local stack may have to match, so it fails this test until it is compared here.

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Description {
    format: u32,
    tables: Vec<Table>,
    buckets: Vec<Bucket>,
    queues: Vec<Queue>,
    functions: Vec<Function>,
    stream_consumers: Vec<StreamConsumer>,
    queue_consumers: Vec<QueueConsumer>,
    /// Route keys (`GET /config.json`) of the HTTP API's routes without an authorizer; compared
    /// with what the local authorizer stand-in lets through by
    /// [`local_authorizer_opens_exactly_the_templates_open_routes`].
    open_routes: Vec<String>,
    /// The stage's throttle and the routes. `sheetlog dev` reads them from the description at
    /// start (`sheetlog_local::local_gateway`), so they are compared by reading them the same way
    /// ([`the_local_gateway_takes_its_settings_from_the_template`]).
    http_api: Option<HttpApi>,
    /// The user pool (authMode=cognito). `sheetlog dev --auth cognito` creates the local pool
    /// from it ([`the_local_user_pool_takes_its_settings_from_the_template`]).
    user_pool: Option<sheetlog_local::local_cognito::PoolSettings>,
    /// The Event API's channel namespaces, with their handler code: the local Event API runs the
    /// poke namespace's handler from here (`sheetlog_local::local_appsync`; run by
    /// `api_cognito::only_members_subscribe_to_a_sheets_poke_channel`).
    channel_namespaces: Vec<sheetlog_local::local_appsync::ChannelNamespace>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpApi {
    throttle: Option<StageThrottle>,
    routes: Vec<Route>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StageThrottle {
    rate_limit: f64,
    burst_limit: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Route {
    route_key: String,
    authorization_type: String,
    function: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Table {
    logical_id: String,
    env: Option<String>,
    partition_key: Key,
    sort_key: Option<Key>,
    billing_mode: String,
    stream_view_type: Option<String>,
    ttl_attribute: Option<String>,
    /// Present only on a table that has some (`LocalTable.globalSecondaryIndexes`).
    #[serde(default)]
    global_secondary_indexes: Vec<Index>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Index {
    name: String,
    partition_key: Key,
    sort_key: Option<Key>,
    projection: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Key {
    name: String,
    #[serde(rename = "type")]
    ty: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Bucket {
    logical_id: String,
    env: Option<String>,
    versioned: bool,
    lifecycle_rules: Vec<LifecycleRule>,
    cors: Vec<CorsRule>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LifecycleRule {
    id: Option<String>,
    enabled: bool,
    prefix: Option<String>,
    tags: BTreeMap<String, String>,
    expiration_days: Option<i64>,
    abort_incomplete_multipart_upload_days: Option<i64>,
    noncurrent_version_days: Option<i64>,
    expired_object_delete_marker: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CorsRule {
    allowed_methods: Vec<String>,
    allowed_origins: Vec<String>,
    allowed_headers: Vec<String>,
    exposed_headers: Vec<String>,
    max_age_seconds: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Queue {
    logical_id: String,
    env: Option<String>,
    fifo: bool,
    visibility_timeout_secs: u64,
    message_retention_secs: u64,
    dead_letter: Option<DeadLetter>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeadLetter {
    logical_id: String,
    max_receive_count: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Function {
    binary: String,
    timeout_secs: u64,
    /// Not reproduced locally: the functions run in one process with the machine's CPU and
    /// memory (Lambda's CPU share at a memory size is documented in docs/operations.md).
    memory_mb: u64,
    environment: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StreamConsumer {
    function: String,
    table: String,
    starting_position: String,
    batch_size: Option<i64>,
    filter_patterns: Vec<Value>,
    report_batch_item_failures: bool,
    maximum_retry_attempts: Option<i64>,
    on_failure_queue: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct QueueConsumer {
    function: String,
    queue: String,
    batch_size: Option<i64>,
    report_batch_item_failures: bool,
}

/// Runs `npx tsx cdk/bin/local-resources.ts` in the workspace root and parses its output.
async fn template_description(root: &Path, context: &[&str]) -> anyhow::Result<Description> {
    // Without the CDK app's packages there is nothing to compare with; failing (never skipping)
    // keeps a machine without them from passing this test silently.
    if !root.join("node_modules/.bin/tsx").exists() {
        bail!(
            "{}/node_modules is missing or incomplete (no .bin/tsx): run `npm ci` in the workspace \
             root first (./scripts/test does). This test compares the local stack with the CDK \
             template and needs the CDK app's npm packages.",
            root.display()
        );
    }
    let out = tokio::process::Command::new("npx")
        .args(["--no", "tsx", "cdk/bin/local-resources.ts"])
        .args(context.iter().flat_map(|c| ["-c", c]))
        .current_dir(root)
        .output()
        .await
        .context("running `npx tsx cdk/bin/local-resources.ts` (is Node.js installed?)")?;
    ensure!(
        out.status.success(),
        "`npx tsx cdk/bin/local-resources.ts` failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let desc: Description = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "cdk/bin/local-resources.ts printed something this test does not understand:\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    ensure!(
        desc.format == FORMAT,
        "local-resources format {} (this test knows {FORMAT})",
        desc.format
    );
    Ok(desc)
}

/// Reads back what the local stack created, in the description's shape (logical ids and
/// environment variable names copied from the template, since names are not compared).
async fn observe(
    emu: &Emulator,
    desc: &Description,
    stack: &LocalStack,
    pairs: &Counterparts,
) -> anyhow::Result<Description> {
    let sdk = emu.sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let s3 = emu.s3().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);

    let mut tables = Vec::new();
    for t in &desc.tables {
        let name = &pairs.tables[&t.logical_id];
        tables.push(observe_table(&dynamo, t, name).await?);
    }
    let mut buckets = Vec::new();
    for b in &desc.buckets {
        let name = &pairs.buckets[&b.logical_id];
        buckets.push(observe_bucket(&s3, b, name).await?);
    }
    // Queue ARN → logical id, to express a redrive target the way the template does.
    let mut ids_by_arn = BTreeMap::new();
    let mut attrs_by_id = BTreeMap::new();
    for (id, url) in &pairs.queues {
        let attrs = sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .with_context(|| format!("GetQueueAttributes {url}"))?
            .attributes
            .unwrap_or_default();
        let arn = attrs
            .get(&QueueAttributeName::QueueArn)
            .cloned()
            .with_context(|| format!("queue {url} has no ARN"))?;
        ids_by_arn.insert(arn, id.clone());
        attrs_by_id.insert(id.clone(), attrs);
    }
    let mut queues = Vec::new();
    for q in &desc.queues {
        let attrs = &attrs_by_id[&q.logical_id];
        let num = |k: QueueAttributeName| -> anyhow::Result<u64> {
            attrs
                .get(&k)
                .with_context(|| format!("queue {}: no {k:?}", q.logical_id))?
                .parse()
                .with_context(|| format!("queue {}: {k:?}", q.logical_id))
        };
        let dead_letter = match attrs.get(&QueueAttributeName::RedrivePolicy) {
            None => None,
            Some(policy) => {
                let policy: Value = serde_json::from_str(policy)
                    .with_context(|| format!("queue {}: RedrivePolicy {policy}", q.logical_id))?;
                let arn = policy["deadLetterTargetArn"].as_str().unwrap_or_default();
                // SQS returns the count as a number; accept a string as CloudFormation writes it.
                let count = match &policy["maxReceiveCount"] {
                    Value::Number(n) => n.as_u64(),
                    Value::String(s) => s.parse().ok(),
                    _ => None,
                };
                Some(DeadLetter {
                    logical_id: ids_by_arn
                        .get(arn)
                        .cloned()
                        .unwrap_or_else(|| format!("<not a stack queue: {arn}>")),
                    max_receive_count: count.with_context(|| {
                        format!("queue {}: RedrivePolicy {policy}", q.logical_id)
                    })?,
                })
            }
        };
        queues.push(Queue {
            logical_id: q.logical_id.clone(),
            env: q.env.clone(),
            fifo: attrs
                .get(&QueueAttributeName::FifoQueue)
                .is_some_and(|v| v == "true"),
            visibility_timeout_secs: num(QueueAttributeName::VisibilityTimeout)?,
            message_retention_secs: num(QueueAttributeName::MessageRetentionPeriod)?,
            dead_letter,
        });
    }
    Ok(Description {
        format: FORMAT,
        tables,
        buckets,
        queues,
        functions: local_functions(),
        stream_consumers: local_stream_consumers(desc, pairs)?,
        queue_consumers: local_queue_consumers(stack, pairs)?,
        // Not a resource: checked against the authorizer stand-in over HTTP (below).
        open_routes: desc.open_routes.clone(),
        // Read by the local gateway at start: checked by reading (below).
        http_api: desc.http_api.clone(),
        // Made by `sheetlog dev --auth cognito` from the description: checked by making it
        // (below).
        user_pool: desc.user_pool.clone(),
        // Run, not created: the local Event API runs the handler code from the description.
        channel_namespaces: desc.channel_namespaces.clone(),
    })
}

async fn observe_table(
    dynamo: &aws_sdk_dynamodb::Client,
    t: &Table,
    name: &str,
) -> anyhow::Result<Table> {
    let table = dynamo
        .describe_table()
        .table_name(name)
        .send()
        .await
        .with_context(|| format!("DescribeTable {name}"))?
        .table
        .with_context(|| format!("DescribeTable {name}: no table"))?;
    let types: BTreeMap<&str, &str> = table
        .attribute_definitions()
        .iter()
        .map(|a| (a.attribute_name(), a.attribute_type().as_str()))
        .collect();
    let key = |kind: aws_sdk_dynamodb::types::KeyType| {
        table
            .key_schema()
            .iter()
            .find(|k| *k.key_type() == kind)
            .map(|k| Key {
                name: k.attribute_name().to_owned(),
                ty: types
                    .get(k.attribute_name())
                    .copied()
                    .unwrap_or("?")
                    .to_owned(),
            })
    };
    let ttl = dynamo
        .describe_time_to_live()
        .table_name(name)
        .send()
        .await
        .with_context(|| format!("DescribeTimeToLive {name}"))?
        .time_to_live_description;
    let ttl_attribute = ttl.and_then(|d| {
        let on =
            d.time_to_live_status() == Some(&aws_sdk_dynamodb::types::TimeToLiveStatus::Enabled);
        on.then(|| d.attribute_name().unwrap_or_default().to_owned())
    });
    let stream = table.stream_specification();
    let mut global_secondary_indexes = Vec::new();
    for g in table.global_secondary_indexes() {
        let key_of = |kind: aws_sdk_dynamodb::types::KeyType| {
            g.key_schema()
                .iter()
                .find(|k| *k.key_type() == kind)
                .map(|k| Key {
                    name: k.attribute_name().to_owned(),
                    ty: types
                        .get(k.attribute_name())
                        .copied()
                        .unwrap_or("?")
                        .to_owned(),
                })
        };
        global_secondary_indexes.push(Index {
            name: g.index_name().unwrap_or_default().to_owned(),
            partition_key: key_of(aws_sdk_dynamodb::types::KeyType::Hash)
                .with_context(|| format!("index of {name} has no partition key"))?,
            sort_key: key_of(aws_sdk_dynamodb::types::KeyType::Range),
            projection: g
                .projection()
                .and_then(|p| p.projection_type())
                .map_or("?", |p| p.as_str())
                .to_owned(),
        });
    }
    global_secondary_indexes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Table {
        logical_id: t.logical_id.clone(),
        env: t.env.clone(),
        partition_key: key(aws_sdk_dynamodb::types::KeyType::Hash)
            .with_context(|| format!("table {name} has no partition key"))?,
        sort_key: key(aws_sdk_dynamodb::types::KeyType::Range),
        billing_mode: table
            .billing_mode_summary()
            .and_then(|b| b.billing_mode())
            .map_or("PROVISIONED", |m| m.as_str())
            .to_owned(),
        stream_view_type: stream
            .filter(|s| s.stream_enabled())
            .and_then(|s| s.stream_view_type())
            .map(|v| v.as_str().to_owned()),
        ttl_attribute,
        global_secondary_indexes,
    })
}

async fn observe_bucket(s3: &aws_sdk_s3::Client, b: &Bucket, name: &str) -> anyhow::Result<Bucket> {
    let rules = s3
        .get_bucket_lifecycle_configuration()
        .bucket(name)
        .send()
        .await
        .with_context(|| format!("GetBucketLifecycleConfiguration {name}"))?
        .rules
        .unwrap_or_default();
    let lifecycle_rules = rules
        .iter()
        .map(|r| {
            let filter = r.filter();
            let mut tags: BTreeMap<String, String> = BTreeMap::new();
            let mut prefix = filter.and_then(|f| f.prefix()).map(str::to_owned);
            if let Some(t) = filter.and_then(|f| f.tag()) {
                tags.insert(t.key().to_owned(), t.value().to_owned());
            }
            if let Some(and) = filter.and_then(|f| f.and()) {
                for t in and.tags() {
                    tags.insert(t.key().to_owned(), t.value().to_owned());
                }
                prefix = prefix.or_else(|| and.prefix().map(str::to_owned));
            }
            #[allow(deprecated)]
            let legacy_prefix = r.prefix().map(str::to_owned);
            LifecycleRule {
                id: r.id().map(str::to_owned),
                enabled: r.status().as_str() == "Enabled",
                // An empty prefix matches every object, as no prefix does: the S3 API needs a
                // filter element where CloudFormation may leave it out.
                prefix: prefix.or(legacy_prefix).filter(|p| !p.is_empty()),
                tags,
                expiration_days: r.expiration().and_then(|e| e.days()).map(i64::from),
                abort_incomplete_multipart_upload_days: r
                    .abort_incomplete_multipart_upload()
                    .and_then(|a| a.days_after_initiation())
                    .map(i64::from),
                noncurrent_version_days: r
                    .noncurrent_version_expiration()
                    .and_then(|n| n.noncurrent_days())
                    .map(i64::from),
                expired_object_delete_marker: r
                    .expiration()
                    .and_then(|e| e.expired_object_delete_marker())
                    .unwrap_or(false),
            }
        })
        .collect();
    let cors_rules = match s3.get_bucket_cors().bucket(name).send().await {
        Ok(out) => out.cors_rules.unwrap_or_default(),
        // A bucket without CORS answers NoSuchCORSConfiguration: that is "no rules".
        Err(e)
            if e.as_service_error()
                .and_then(aws_sdk_s3::error::ProvideErrorMetadata::code)
                == Some("NoSuchCORSConfiguration") =>
        {
            Vec::new()
        }
        Err(e) => return Err(anyhow::Error::new(e).context(format!("GetBucketCors {name}"))),
    };
    let cors = cors_rules
        .iter()
        .map(|r| CorsRule {
            allowed_methods: r.allowed_methods().to_vec(),
            allowed_origins: r.allowed_origins().to_vec(),
            allowed_headers: r.allowed_headers().to_vec(),
            exposed_headers: r.expose_headers().to_vec(),
            max_age_seconds: r.max_age_seconds().map(i64::from),
        })
        .collect();
    // moto answers GetBucketVersioning with a body the SDK cannot parse; a versioned bucket shows
    // instead as two versions of an object written twice.
    let probe = "versioning-probe";
    for body in ["1", "2"] {
        s3.put_object()
            .bucket(name)
            .key(probe)
            .body(body.as_bytes().to_vec().into())
            .send()
            .await
            .with_context(|| format!("PutObject {name}/{probe}"))?;
    }
    let versioned = s3
        .list_object_versions()
        .bucket(name)
        .prefix(probe)
        .send()
        .await
        .with_context(|| format!("ListObjectVersions {name}"))?
        .versions()
        .len()
        == 2;
    Ok(Bucket {
        logical_id: b.logical_id.clone(),
        env: b.env.clone(),
        versioned,
        lifecycle_rules,
        cors,
    })
}

/// The local pipeline's timings, in the shape of the template's functions. Only the snapshot
/// worker's have a local equivalent: its timeout (the local time budget plus the hand-off reserve,
/// which together stand for Lambda's timeout) and its pending timeout. The API and the router run
/// in-process without a timeout; the rest of the functions' environments name resources (compared
/// above) or settings `sheetlog dev` takes as flags.
fn local_functions() -> Vec<Function> {
    let worker = WorkerConfig::default();
    let budget = LocalPipelineConfig::default().worker_time_budget + worker.handoff_reserve;
    vec![Function {
        binary: "sheetlog-snapshot-worker".into(),
        timeout_secs: budget.as_secs(),
        memory_mb: 0,
        environment: BTreeMap::from([(
            "SHEETLOG_PENDING_TIMEOUT_SECS".to_owned(),
            Value::String(worker.pending_timeout.as_secs().to_string()),
        )]),
    }]
}

/// What the local stream driver does in place of the Entry-stream event-source mapping.
fn local_stream_consumers(
    desc: &Description,
    pairs: &Counterparts,
) -> anyhow::Result<Vec<StreamConsumer>> {
    let entry_table = desc
        .tables
        .iter()
        .find(|t| t.env.as_deref() == Some("SHEETLOG_ENTRY_TABLE"))
        .context("the template has no Entry table")?;
    let filter: Vec<Value> = FilterPatterns::entry_stream()?
        .patterns()
        .iter()
        .map(|p| Value::Object(p.clone()))
        .collect();
    let failure_queue = desc
        .stream_consumers
        .iter()
        .find_map(|s| s.on_failure_queue.clone())
        .filter(|id| pairs.queues.contains_key(id));
    Ok(vec![StreamConsumer {
        // The local pipeline runs the stream router's handler.
        function: "sheetlog-stream-router".into(),
        // `LocalPipeline` polls `resources.entry_table`'s stream.
        table: entry_table.logical_id.clone(),
        // `StreamDriver` reads every shard from TRIM_HORIZON.
        starting_position: "TRIM_HORIZON".into(),
        batch_size: Some(i64::from(BATCH_SIZE)),
        filter_patterns: filter,
        // `StreamDriver::deliver` retries only the records the router reports as failed.
        report_batch_item_failures: true,
        maximum_retry_attempts: Some(i64::from(
            LocalPipelineConfig::default().stream_retry_attempts,
        )),
        // `sheetlog dev` passes `LocalStack::stream_failure_queue` to the driver.
        on_failure_queue: failure_queue,
    }])
}

/// What the local queue driver does in place of the snapshot-queue event-source mapping.
fn local_queue_consumers(
    stack: &LocalStack,
    pairs: &Counterparts,
) -> anyhow::Result<Vec<QueueConsumer>> {
    let queue = pairs
        .queues
        .iter()
        .find(|(_, url)| **url == stack.queues.snapshot_queue)
        .map(|(id, _)| id.clone())
        .context("the template's snapshot queue was not paired")?;
    let sync_queue = pairs
        .queues
        .iter()
        .find(|(_, url)| **url == stack.sync_queues.queue)
        .map(|(id, _)| id.clone())
        .context("the template's sync queue was not paired")?;
    Ok(vec![
        QueueConsumer {
            function: "sheetlog-snapshot-worker".into(),
            queue,
            // `QueueDriver::invoke` hands the worker one message per invocation.
            batch_size: Some(1),
            // ... and deletes only the messages the handler did not report as failed.
            report_batch_item_failures: true,
        },
        QueueConsumer {
            function: "sheetlog-sync-writer".into(),
            queue: sync_queue,
            // `SyncDriver::receive` hands the writer up to ten messages per invocation ...
            batch_size: Some(sheetlog_pipeline::sync::SYNC_BATCH_SIZE as i64),
            // ... and `SyncDriver::delete` keeps the ones it reports as failed.
            report_batch_item_failures: true,
        },
    ])
}

/// Every difference between the template's description and the local one, one line each.
/// Orders that carry no meaning (lifecycle rules, the lists inside a CORS rule) are ignored.
fn differences(template: &Description, local: &Description) -> Vec<String> {
    let mut out = Vec::new();
    let mut diff = |what: String, t: &dyn std::fmt::Debug, l: &dyn std::fmt::Debug| {
        let (t, l) = (format!("{t:?}"), format!("{l:?}"));
        if t != l {
            out.push(format!("{what}: template {t}, local {l}"));
        }
    };
    diff("format".into(), &template.format, &local.format);
    for (kind, t_ids, l_ids) in [
        (
            "tables",
            ids(template.tables.iter().map(|t| &t.logical_id)),
            ids(local.tables.iter().map(|t| &t.logical_id)),
        ),
        (
            "buckets",
            ids(template.buckets.iter().map(|b| &b.logical_id)),
            ids(local.buckets.iter().map(|b| &b.logical_id)),
        ),
        (
            "queues",
            ids(template.queues.iter().map(|q| &q.logical_id)),
            ids(local.queues.iter().map(|q| &q.logical_id)),
        ),
    ] {
        diff(kind.into(), &t_ids, &l_ids);
    }
    for t in &template.tables {
        let Some(l) = local.tables.iter().find(|l| l.logical_id == t.logical_id) else {
            continue;
        };
        let at = |f: &str| format!("table {} {f}", t.logical_id);
        diff(at("partition key"), &t.partition_key, &l.partition_key);
        diff(at("sort key"), &t.sort_key, &l.sort_key);
        diff(at("billing mode"), &t.billing_mode, &l.billing_mode);
        diff(
            at("stream view type"),
            &t.stream_view_type,
            &l.stream_view_type,
        );
        diff(at("TTL attribute"), &t.ttl_attribute, &l.ttl_attribute);
        let mut indexes = t.global_secondary_indexes.clone();
        indexes.sort_by(|a, b| a.name.cmp(&b.name));
        diff(
            at("global secondary indexes"),
            &indexes,
            &l.global_secondary_indexes,
        );
    }
    for t in &template.buckets {
        let Some(l) = local.buckets.iter().find(|l| l.logical_id == t.logical_id) else {
            continue;
        };
        let at = |f: &str| format!("bucket {} {f}", t.logical_id);
        let by_id = |rules: &[LifecycleRule]| {
            let mut rules = rules.to_vec();
            rules.sort_by(|a, b| a.id.cmp(&b.id));
            rules
        };
        diff(
            at("lifecycle rules"),
            &by_id(&t.lifecycle_rules),
            &by_id(&l.lifecycle_rules),
        );
        let sorted = |rules: &[CorsRule]| {
            rules
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    for list in [
                        &mut r.allowed_methods,
                        &mut r.allowed_origins,
                        &mut r.allowed_headers,
                        &mut r.exposed_headers,
                    ] {
                        list.sort();
                    }
                    r
                })
                .collect::<Vec<_>>()
        };
        diff(at("CORS rules"), &sorted(&t.cors), &sorted(&l.cors));
    }
    for t in &template.queues {
        let Some(l) = local.queues.iter().find(|l| l.logical_id == t.logical_id) else {
            continue;
        };
        let at = |f: &str| format!("queue {} {f}", t.logical_id);
        diff(at("FIFO"), &t.fifo, &l.fifo);
        diff(
            at("visibility timeout (s)"),
            &t.visibility_timeout_secs,
            &l.visibility_timeout_secs,
        );
        diff(
            at("retention (s)"),
            &t.message_retention_secs,
            &l.message_retention_secs,
        );
        diff(at("dead-letter queue"), &t.dead_letter, &l.dead_letter);
    }
    // Only the settings the local pipeline has an equivalent of (see `local_functions`).
    for l in &local.functions {
        let at = |f: &str| format!("function {} {f}", l.binary);
        let t = template.functions.iter().find(|t| t.binary == l.binary);
        diff(at("in the template"), &t.is_some(), &true);
        let Some(t) = t else {
            continue;
        };
        diff(at("timeout (s)"), &t.timeout_secs, &l.timeout_secs);
        for (name, value) in &l.environment {
            diff(at(name), &t.environment.get(name), &Some(value));
        }
    }
    diff(
        "stream consumers".into(),
        &template.stream_consumers.len(),
        &local.stream_consumers.len(),
    );
    for (t, l) in template
        .stream_consumers
        .iter()
        .zip(&local.stream_consumers)
    {
        let at = |f: &str| format!("stream consumer {f}");
        diff(at("function"), &t.function, &l.function);
        diff(at("table"), &t.table, &l.table);
        diff(
            at("starting position"),
            &t.starting_position,
            &l.starting_position,
        );
        diff(at("batch size"), &t.batch_size, &l.batch_size);
        diff(
            at("filter patterns"),
            &t.filter_patterns,
            &l.filter_patterns,
        );
        diff(
            at("reports batch item failures"),
            &t.report_batch_item_failures,
            &l.report_batch_item_failures,
        );
        diff(
            at("retry attempts"),
            &t.maximum_retry_attempts,
            &l.maximum_retry_attempts,
        );
        diff(
            at("failure queue"),
            &t.on_failure_queue,
            &l.on_failure_queue,
        );
    }
    diff(
        "queue consumers".into(),
        &template.queue_consumers.len(),
        &local.queue_consumers.len(),
    );
    for (t, l) in template.queue_consumers.iter().zip(&local.queue_consumers) {
        let at = |f: &str| format!("queue consumer {f}");
        diff(at("function"), &t.function, &l.function);
        diff(at("queue"), &t.queue, &l.queue);
        diff(at("batch size"), &t.batch_size, &l.batch_size);
        diff(
            at("reports batch item failures"),
            &t.report_batch_item_failures,
            &l.report_batch_item_failures,
        );
    }
    out
}

/// An edit to the template's description, named for the failure message.
type Mutation = (&'static str, fn(&mut Description));

fn ids<'a>(ids: impl Iterator<Item = &'a String>) -> BTreeSet<&'a str> {
    ids.map(String::as_str).collect()
}

/// Everything with the stack's prefix on the emulator: what the local stack created, to catch a
/// resource the template does not have.
async fn created_names(
    emu: &Emulator,
    prefix: &str,
) -> anyhow::Result<(BTreeSet<String>, BTreeSet<String>, BTreeSet<String>)> {
    let sdk = emu.sdk_config().await;
    let mut tables = BTreeSet::new();
    let mut start = None;
    loop {
        let out = aws_sdk_dynamodb::Client::new(&sdk)
            .list_tables()
            .set_exclusive_start_table_name(start)
            .send()
            .await?;
        tables.extend(
            out.table_names()
                .iter()
                .filter(|n| n.starts_with(prefix))
                .cloned(),
        );
        match out.last_evaluated_table_name {
            Some(last) => start = Some(last),
            None => break,
        }
    }
    let buckets = emu
        .s3()
        .await
        .list_buckets()
        .send()
        .await?
        .buckets()
        .iter()
        .filter_map(|b| b.name())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_owned)
        .collect();
    let queues = aws_sdk_sqs::Client::new(&sdk)
        .list_queues()
        .queue_name_prefix(prefix)
        .send()
        .await?
        .queue_urls()
        .iter()
        .cloned()
        .collect();
    Ok((tables, buckets, queues))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_stack_creates_the_resources_of_the_cdk_template() -> anyhow::Result<()> {
    let root = workspace_root();
    let template = template_description(&root, &[]).await?;

    let emu = Emulator::start()?;
    let prefix = unique_prefix("template");
    let stack = create_local_stack(&emu.sdk_config().await, &prefix).await?;
    // The pairing `sheetlog dev` also writes down for the IAM check.
    let pairs = Counterparts::pair(
        sheetlog_tests::api::template_description().await?,
        &stack,
        None,
    )?;
    let local = observe(&emu, &template, &stack, &pairs).await?;

    let found = differences(&template, &local);
    ensure!(
        found.is_empty(),
        "the local stack differs from the CDK template:\n  {}",
        found.join("\n  ")
    );

    // Nothing more than the template's resources.
    let (tables, buckets, queues) = created_names(&emu, &prefix).await?;
    let want_tables: BTreeSet<String> = pairs.tables.values().cloned().collect();
    let want_buckets: BTreeSet<String> = pairs.buckets.values().cloned().collect();
    let want_queues: BTreeSet<String> = pairs.queues.values().cloned().collect();
    ensure!(
        tables == want_tables,
        "local tables {tables:?}, template's {want_tables:?}"
    );
    ensure!(
        buckets == want_buckets,
        "local buckets {buckets:?}, template's {want_buckets:?}"
    );
    ensure!(
        queues == want_queues,
        "local queues {queues:?}, template's {want_queues:?}"
    );

    // The comparison itself notices a change on the template's side: each of these edits to
    // the description must show up as a difference.
    let mutations: &[Mutation] = &[
        ("a key type", |d| d.tables[0].partition_key.ty = "S".into()),
        ("an index's projection", |d| {
            for t in &mut d.tables {
                for i in &mut t.global_secondary_indexes {
                    i.projection = "ALL".into();
                }
            }
        }),
        ("the stream view type", |d| {
            for t in &mut d.tables {
                if t.stream_view_type.is_some() {
                    t.stream_view_type = Some("NEW_AND_OLD_IMAGES".into());
                }
            }
        }),
        ("a TTL attribute", |d| {
            d.tables[0].ttl_attribute = Some("expires".into())
        }),
        ("the auto-delete days", |d| {
            for r in &mut d.buckets[0].lifecycle_rules {
                r.expiration_days = r.expiration_days.map(|x| x + 1);
            }
        }),
        ("the CORS origins", |d| {
            d.buckets[0].cors[0].allowed_origins = vec!["https://x.example".into()]
        }),
        ("a visibility timeout", |d| {
            d.queues[0].visibility_timeout_secs += 1
        }),
        ("a max receive count", |d| {
            for q in &mut d.queues {
                if let Some(dl) = &mut q.dead_letter {
                    dl.max_receive_count += 1;
                }
            }
        }),
        ("the stream filter", |d| {
            d.stream_consumers[0].filter_patterns.pop();
        }),
        ("the worker's timeout", |d| {
            for f in &mut d.functions {
                if f.binary == "sheetlog-snapshot-worker" {
                    f.timeout_secs += 1;
                }
            }
        }),
        ("the worker's pending timeout", |d| {
            for f in &mut d.functions {
                f.environment
                    .insert("SHEETLOG_PENDING_TIMEOUT_SECS".into(), "7".into());
            }
        }),
    ];
    for (what, mutate) in mutations {
        let mut changed = template.clone();
        mutate(&mut changed);
        ensure!(
            !differences(&changed, &local).is_empty(),
            "changing {what} in the template's description went unnoticed"
        );
    }
    Ok(())
}

/// The local API Gateway stand-in that `sheetlog dev` puts in front of the API reads the stage's
/// throttle and the API function's timeout from the template's description, as this test reads
/// the description: what it would enforce is what the template deploys.
#[tokio::test]
async fn the_local_gateway_takes_its_settings_from_the_template() -> anyhow::Result<()> {
    let template = template_description(&workspace_root(), &[]).await?;
    let gateway = sheetlog_tests::api::template_gateway().await?;
    let api = template
        .http_api
        .as_ref()
        .context("the template has no HTTP API")?;
    let function = template
        .functions
        .iter()
        .find(|f| api.routes.iter().all(|r| r.function == f.binary))
        .context("no one function serves every route")?;
    println!(
        "compared: stage throttle {:?}; {} timeout {} s; {} routes",
        api.throttle,
        function.binary,
        function.timeout_secs,
        api.routes.len()
    );
    ensure!(gateway.function == function.binary);
    // The local pipeline cuts its functions off at the template's timeouts.
    let timeouts =
        sheetlog_local::dev::function_timeouts(sheetlog_tests::api::template_description().await?)?;
    let of = |binary: &str| {
        template
            .functions
            .iter()
            .find(|f| f.binary == binary)
            .map(|f| Duration::from_secs(f.timeout_secs))
    };
    println!("compared: the pipeline's function timeouts {timeouts:?}");
    ensure!(
        timeouts.stream_router == of("sheetlog-stream-router") && timeouts.stream_router.is_some()
    );
    ensure!(
        timeouts.snapshot_worker == of("sheetlog-snapshot-worker")
            && timeouts.snapshot_worker.is_some()
    );
    ensure!(timeouts.sync_writer == of("sheetlog-sync-writer") && timeouts.sync_writer.is_some());
    ensure!(gateway.function_timeout == Duration::from_secs(function.timeout_secs));
    ensure!(
        gateway
            .throttle
            .map(|t| (t.rate_limit, f64::from(t.burst_limit)))
            == api.throttle.as_ref().map(|t| (t.rate_limit, t.burst_limit)),
        "gateway throttle {:?}, template's {:?}",
        gateway.throttle,
        api.throttle
    );
    Ok(())
}

/// `sheetlog dev --auth cognito` creates the local user pool from the template's (MFA, the
/// password policy, who creates accounts, case-insensitive names): described with
/// `cognitoMfa=required`, the pool made on the emulator has each setting as the template has it.
#[tokio::test]
async fn the_local_user_pool_takes_its_settings_from_the_template() -> anyhow::Result<()> {
    let template = template_description(
        &workspace_root(),
        &["authMode=cognito", "cognitoMfa=required"],
    )
    .await?;
    let settings = template
        .user_pool
        .clone()
        .context("a cognito template without a user pool")?;
    let emulator = Emulator::start()?;
    let sdk = emulator.sdk_config().await;
    let pool = sheetlog_local::local_cognito::create_pool_with(
        &sdk,
        emulator.endpoint(),
        &unique_prefix("pool-parity"),
        &[],
        "",
        &settings,
    )
    .await?;
    let idp = aws_sdk_cognitoidentityprovider::Client::from_conf(
        aws_sdk_cognitoidentityprovider::config::Builder::from(&sdk)
            .endpoint_url(emulator.endpoint())
            .build(),
    );
    let described = idp
        .describe_user_pool()
        .user_pool_id(&pool.pool_id)
        .send()
        .await?;
    let p = described.user_pool().context("no pool described")?;
    let mfa = idp
        .get_user_pool_mfa_config()
        .user_pool_id(&pool.pool_id)
        .send()
        .await?;
    let policy = p
        .policies()
        .and_then(|x| x.password_policy())
        .context("no password policy")?;
    let mut enabled = Vec::new();
    if mfa
        .software_token_mfa_configuration()
        .is_some_and(|c| c.enabled())
    {
        enabled.push("SOFTWARE_TOKEN_MFA".to_owned());
    }
    let local = sheetlog_local::local_cognito::PoolSettings {
        mfa_configuration: p
            .mfa_configuration()
            .map(|m| m.as_str().to_owned())
            .unwrap_or_default(),
        enabled_mfas: enabled,
        // The local pool names users by their email (local_cognito.rs says why).
        username_attributes: settings.username_attributes.clone(),
        case_sensitive: p
            .username_configuration()
            .is_none_or(|u| u.case_sensitive()),
        allow_admin_create_user_only: p
            .admin_create_user_config()
            .is_some_and(|c| c.allow_admin_create_user_only()),
        password_policy: sheetlog_local::local_cognito::PasswordPolicy {
            minimum_length: policy.minimum_length().unwrap_or(0),
            require_lowercase: policy.require_lowercase(),
            require_uppercase: policy.require_uppercase(),
            require_numbers: policy.require_numbers(),
            require_symbols: policy.require_symbols(),
        },
    };
    println!("compared: user pool {settings:?}");
    ensure!(
        local == settings,
        "the local pool differs from the template's:\n local    {local:?}\n template {settings:?}"
    );
    ensure!(settings.mfa_configuration == "ON" && settings.totp());
    Ok(())
}

/// Whether API Gateway would send `method path` to the route `key` (`GET /sheets/{logId}`): the
/// method exactly, a literal segment exactly, `{name}` one non-empty segment, `{name+}` (last)
/// the rest, at least one segment. Written here, apart from the stand-in's own matcher, so a
/// mistake in that one shows.
fn route_key_matches(key: &str, method: &str, path: &str) -> bool {
    let Some((m, route)) = key.split_once(' ') else {
        return false;
    };
    if m != method {
        return false;
    }
    let want: Vec<&str> = route.split('/').skip(1).collect();
    let got: Vec<&str> = path.split('/').skip(1).collect();
    if route == "/" {
        return path == "/";
    }
    for (i, w) in want.iter().enumerate() {
        if w.starts_with('{') && w.ends_with("+}") {
            return got.len() > i && got[i..].iter().any(|s| !s.is_empty());
        }
        match got.get(i) {
            Some(g) if w.starts_with('{') && w.ends_with('}') && !g.is_empty() => {}
            Some(g) if g == w => {}
            _ => return false,
        }
    }
    got.len() == want.len()
}

/// A request path for a route path: each `{name}` a log id, `{name+}` two segments.
fn instantiate(route: &str) -> String {
    route
        .split('/')
        .map(|s| {
            if s.starts_with('{') && s.ends_with("+}") {
                "a/main.js"
            } else if s.starts_with('{') && s.ends_with('}') {
                "0b5c4a6e-41b5-4f4e-9c57-8a40f9a1c001"
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The template's routes without an authorizer (read from the synthesized template through
/// `cdk/bin/local-resources.ts`) are the requests the local stand-ins for API Gateway's
/// authorizers (JWT and IAM) let through without a token or a signature, and no others: every
/// route of the API (its OpenAPI document), every open route, and near misses of them (another
/// method, a deeper path), each sent over HTTP to the stand-in in front of a handler that
/// answers 200. A 401 (JWT) or 403 (IAM) means the stand-in wanted a token or a signature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_authorizer_opens_exactly_the_templates_open_routes() -> anyhow::Result<()> {
    use sheetlog_local::local_auth::{JwtAuthorizer, authorize};

    let template = template_description(&workspace_root(), &[]).await?;
    // No token is ever sent, so the issuer is never asked for its keys.
    let jwt = std::sync::Arc::new(JwtAuthorizer::new(
        "http://127.0.0.1:9/unused",
        vec!["unused".into()],
    ));
    let iam = std::sync::Arc::new(sheetlog_local::local_iam::IamAuthorizer::local("us-east-1"));
    let passed = axum::Router::new().fallback(|| async { "passed the authorizer" });
    only_the_open_routes_pass(
        &template,
        passed
            .clone()
            .layer(axum::middleware::from_fn_with_state(jwt, authorize)),
        reqwest::StatusCode::UNAUTHORIZED,
    )
    .await?;
    only_the_open_routes_pass(
        &template,
        passed.layer(axum::middleware::from_fn_with_state(
            iam,
            sheetlog_local::local_iam::authorize,
        )),
        reqwest::StatusCode::FORBIDDEN,
    )
    .await
}

/// Every route and near miss sent to `app` without credentials: open exactly when the template
/// has it open, else answered `refused`.
async fn only_the_open_routes_pass(
    template: &Description,
    app: axum::Router,
    refused: reqwest::StatusCode,
) -> anyhow::Result<()> {
    ensure!(
        template.open_routes.iter().any(|k| k == "GET /config.json"),
        "the template serves GET /config.json behind an authorizer: the page cannot read how to \
         sign in (open routes: {:?})",
        template.open_routes
    );

    let (base, server) = sheetlog_tests::api::serve(app).await?;

    let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
    let mut paths = BTreeSet::new();
    let doc = serde_json::to_value(sheetlog_api::openapi())?;
    for path in doc["paths"]
        .as_object()
        .context("the OpenAPI document has no paths")?
        .keys()
    {
        paths.insert(instantiate(path));
    }
    for key in &template.open_routes {
        let (_, route) = key.split_once(' ').context("a route key is METHOD PATH")?;
        let path = instantiate(route);
        paths.insert(format!("{}/x", path.trim_end_matches('/')));
        paths.insert(path);
    }
    for extra in ["/sheets/", "/app/", "/app", "/sheets/a/b", "/nowhere"] {
        paths.insert(extra.to_owned());
    }

    let http = reqwest::Client::new();
    let mut wrong = Vec::new();
    let mut opened = 0;
    for path in &paths {
        for method in methods {
            let expected = template
                .open_routes
                .iter()
                .any(|k| route_key_matches(k, method, path));
            let status = http
                .request(method.parse()?, format!("{base}{path}"))
                .send()
                .await
                .with_context(|| format!("{method} {path}"))?
                .status();
            let open = status != refused;
            opened += usize::from(open);
            if open != expected {
                wrong.push(format!(
                    "{method} {path}: the template has it {}, the local stand-in {} ({status})",
                    if expected {
                        "open"
                    } else {
                        "behind the authorizer"
                    },
                    if open {
                        "lets it through".to_owned()
                    } else {
                        format!("answers {refused}")
                    },
                ));
            }
        }
    }
    server.abort();
    ensure!(
        wrong.is_empty(),
        "the local authorizer stand-in and the template disagree (template's open routes: \
         {:?}):\n  {}",
        template.open_routes,
        wrong.join("\n  ")
    );
    ensure!(
        opened >= template.open_routes.len(),
        "too few requests were open"
    );
    Ok(())
}
