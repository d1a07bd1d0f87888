//! `./scripts/bench peers`: the same workload through sheetlog's event log and through the two
//! Rust event stores on DynamoDB, `dynamo-es` (cqrs-es) and `event-store-adapter-rs`, on one
//! emulator. Each system's tables are created as its documentation describes; each is driven
//! through its public API as documented (the peers are dev-dependencies of this crate, so this is
//! an example target).
//!
//! For each payload size: `--events` single-event appends to one stream, then one read of the
//! whole stream. Request units are computed with AWS's published rules from the requests each
//! system really sent, seen by an interceptor on its SDK client (items written, items a read
//! returned), never from the emulator's ConsumedCapacity. UpdateItem and a transaction's Update
//! are charged by the key and values they carry (a lower bound: AWS charges the larger of the old
//! and new item).

#[path = "../src/chart.rs"]
mod chart;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use aws_sdk_dynamodb::operation::batch_get_item::{BatchGetItemInput, BatchGetItemOutput};
use aws_sdk_dynamodb::operation::batch_write_item::BatchWriteItemInput;
use aws_sdk_dynamodb::operation::get_item::{GetItemInput, GetItemOutput};
use aws_sdk_dynamodb::operation::put_item::PutItemInput;
use aws_sdk_dynamodb::operation::query::{QueryInput, QueryOutput};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
use aws_sdk_dynamodb::operation::update_item::UpdateItemInput;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, ScalarAttributeType,
};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use bytes::Bytes;
use clap::Parser;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sheetlog_core::aws::items::item_size;
use sheetlog_core::domain::cost::{ReadConsistency, read_units, write_units};
use sheetlog_core::domain::{EntryType, NewEntry};
use sheetlog_core::log::AppendOptions;
use sheetlog_tests::emulator::unique_prefix;
use sheetlog_tests::stack::TestStack;

#[derive(Debug, Parser)]
#[command(
    name = "peers",
    about = "sheetlog side by side with dynamo-es and event-store-adapter-rs"
)]
struct Args {
    /// Print one JSON object of the figures instead of a table.
    #[arg(long)]
    json: bool,
    /// Appends per system and payload size.
    #[arg(long, default_value_t = 1000)]
    events: usize,
    /// Payload sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "50,500,5000,100000")]
    sizes: Vec<usize>,
    /// Also write a chart of write units per append by payload size (SVG) to this file.
    #[arg(long)]
    svg: Option<std::path::PathBuf>,
}

// ---- Metering ---------------------------------------------------------------------------------

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    requests: u64,
    wru: f64,
    rru: f64,
}

#[derive(Debug, Default)]
struct MeterState {
    tally: Tally,
    /// The consistency of the read in flight (requests are sent one at a time here).
    consistent: bool,
}

#[derive(Debug, Clone, Default)]
struct Meter(Arc<Mutex<MeterState>>);

impl Meter {
    fn take(&self) -> Tally {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut s.tally)
    }
}

fn values_size(values: Option<&HashMap<String, AttributeValue>>) -> u64 {
    values.map_or(0, item_size)
}

impl Intercept for Meter {
    fn name(&self) -> &'static str {
        "Meter"
    }

    fn read_before_serialization(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        s.tally.requests += 1;
        let input = ctx.input();
        let mut wru = 0.0;
        if let Some(i) = input.downcast_ref::<PutItemInput>() {
            wru += write_units(values_size(i.item()), false);
        } else if let Some(i) = input.downcast_ref::<UpdateItemInput>() {
            wru += write_units(
                values_size(i.key()) + values_size(i.expression_attribute_values()),
                false,
            );
        } else if let Some(i) = input.downcast_ref::<TransactWriteItemsInput>() {
            for it in i.transact_items() {
                let size = if let Some(p) = it.put() {
                    item_size(p.item())
                } else if let Some(u) = it.update() {
                    item_size(u.key()) + values_size(u.expression_attribute_values())
                } else {
                    1
                };
                wru += write_units(size, true);
            }
        } else if let Some(i) = input.downcast_ref::<BatchWriteItemInput>() {
            for reqs in i.request_items().into_iter().flat_map(|m| m.values()) {
                for r in reqs {
                    let size = r.put_request().map_or(1, |p| item_size(p.item()));
                    wru += write_units(size, false);
                }
            }
        } else if let Some(i) = input.downcast_ref::<QueryInput>() {
            s.consistent = i.consistent_read() == Some(true);
        } else if let Some(i) = input.downcast_ref::<GetItemInput>() {
            s.consistent = i.consistent_read() == Some(true);
        } else if input.downcast_ref::<BatchGetItemInput>().is_some() {
            s.consistent = false;
        }
        s.tally.wru += wru;
        Ok(())
    }

    fn read_after_execution(
        &self,
        ctx: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let consistency = if s.consistent {
            ReadConsistency::Strong
        } else {
            ReadConsistency::Eventual
        };
        let Some(Ok(out)) = ctx.output_or_error() else {
            return Ok(());
        };
        let rru = if let Some(o) = out.downcast_ref::<QueryOutput>() {
            read_units(o.items().iter().map(item_size).sum(), consistency)
        } else if let Some(o) = out.downcast_ref::<GetItemOutput>() {
            read_units(o.item().map_or(0, item_size), consistency)
        } else if let Some(o) = out.downcast_ref::<BatchGetItemOutput>() {
            // Each item of a BatchGetItem is charged on its own, rounded up to 4 KB.
            o.responses()
                .into_iter()
                .flat_map(|m| m.values())
                .flatten()
                .map(|item| read_units(item_size(item), consistency))
                .sum()
        } else {
            0.0
        };
        s.tally.rru += rru;
        Ok(())
    }
}

// ---- The systems ------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Sheetlog,
    DynamoEs,
    EventStoreAdapter,
}

impl System {
    fn key(self) -> &'static str {
        match self {
            System::Sheetlog => "sheetlog",
            System::DynamoEs => "dynamo_es",
            System::EventStoreAdapter => "event_store_adapter",
        }
    }
}

/// Counts S3 requests (sheetlog keeps bodies over 16 KB in S3; the peers use none).
#[derive(Debug, Clone, Default)]
struct S3Count(Arc<std::sync::atomic::AtomicU64>);

impl S3Count {
    fn take(&self) -> u64 {
        self.0.swap(0, std::sync::atomic::Ordering::Relaxed)
    }
}

impl Intercept for S3Count {
    fn name(&self) -> &'static str {
        "S3Count"
    }
    fn read_before_serialization(
        &self,
        _: &BeforeSerializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

async fn metered_s3(stack: &TestStack, count: &S3Count) -> aws_sdk_s3::Client {
    let sdk = stack.emulator.sdk_config().await;
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .interceptor(count.clone())
            .build(),
    )
}

/// A client on the emulator whose requests the meter sees.
async fn metered_client(stack: &TestStack, meter: &Meter) -> aws_sdk_dynamodb::Client {
    let sdk = stack.emulator.sdk_config().await;
    let conf = aws_sdk_dynamodb::config::Builder::from(&sdk)
        .interceptor(meter.clone())
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

fn key(name: &str, kind: KeyType) -> anyhow::Result<KeySchemaElement> {
    Ok(KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()?)
}

fn attr(name: &str, t: ScalarAttributeType) -> anyhow::Result<AttributeDefinition> {
    Ok(AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(t)
        .build()?)
}

/// dynamo-es: the Events and Snapshots tables of its `db/create_tables.sh`.
async fn create_dynamo_es_tables(
    c: &aws_sdk_dynamodb::Client,
    prefix: &str,
) -> anyhow::Result<(String, String)> {
    let events = format!("{prefix}-Events");
    let snapshots = format!("{prefix}-Snapshots");
    c.create_table()
        .table_name(&events)
        .key_schema(key("AggregateTypeAndId", KeyType::Hash)?)
        .key_schema(key("AggregateIdSequence", KeyType::Range)?)
        .attribute_definitions(attr("AggregateTypeAndId", ScalarAttributeType::S)?)
        .attribute_definitions(attr("AggregateIdSequence", ScalarAttributeType::N)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await?;
    c.create_table()
        .table_name(&snapshots)
        .key_schema(key("AggregateTypeAndId", KeyType::Hash)?)
        .attribute_definitions(attr("AggregateTypeAndId", ScalarAttributeType::S)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await?;
    Ok((events, snapshots))
}

/// event-store-adapter-rs 5: a journal (aid, seq_nr), a snapshot table (aid, skey) with the
/// snapshot history index (aid, active_history_seq_nr) and a head table (aid).
async fn create_esa_tables(
    c: &aws_sdk_dynamodb::Client,
    prefix: &str,
) -> anyhow::Result<event_store_adapter_rs::DynamoDbTables> {
    let tables = event_store_adapter_rs::DynamoDbTables {
        journal_table_name: format!("{prefix}-journal"),
        snapshot_table_name: format!("{prefix}-snapshot"),
        head_table_name: format!("{prefix}-head"),
        snapshot_history_index_name: "snapshot-history".into(),
    };
    c.create_table()
        .table_name(&tables.journal_table_name)
        .key_schema(key("aid", KeyType::Hash)?)
        .key_schema(key("seq_nr", KeyType::Range)?)
        .attribute_definitions(attr("aid", ScalarAttributeType::S)?)
        .attribute_definitions(attr("seq_nr", ScalarAttributeType::N)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await?;
    c.create_table()
        .table_name(&tables.snapshot_table_name)
        .key_schema(key("aid", KeyType::Hash)?)
        .key_schema(key("skey", KeyType::Range)?)
        .attribute_definitions(attr("aid", ScalarAttributeType::S)?)
        .attribute_definitions(attr("skey", ScalarAttributeType::N)?)
        .attribute_definitions(attr("active_history_seq_nr", ScalarAttributeType::N)?)
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(&tables.snapshot_history_index_name)
                .key_schema(key("aid", KeyType::Hash)?)
                .key_schema(key("active_history_seq_nr", KeyType::Range)?)
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::KeysOnly)
                        .build(),
                )
                .build()?,
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await?;
    c.create_table()
        .table_name(&tables.head_table_name)
        .key_schema(key("aid", KeyType::Hash)?)
        .attribute_definitions(attr("aid", ScalarAttributeType::S)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await?;
    Ok(tables)
}

/// The smallest cqrs-es aggregate: dynamo-es needs one for the aggregate type of its keys.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Sheet;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Edited {
    payload: String,
}

impl cqrs_es::DomainEvent for Edited {
    fn event_type(&self) -> String {
        "Edited".into()
    }
    fn event_version(&self) -> String {
        "1".into()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

#[async_trait::async_trait]
impl cqrs_es::Aggregate for Sheet {
    type Command = ();
    type Event = Edited;
    type Error = Never;
    type Services = ();
    fn aggregate_type() -> String {
        "Sheet".into()
    }
    async fn handle(&self, _: (), _: &()) -> Result<Vec<Edited>, Never> {
        Ok(Vec::new())
    }
    fn apply(&mut self, _: Edited) {}
}

#[derive(Debug, Clone)]
struct StreamId(String);

impl event_store_adapter_rs::AggregateId for StreamId {
    fn type_name(&self) -> String {
        "Sheet".into()
    }
    fn value(&self) -> String {
        self.0.clone()
    }
}

/// What one system did with one payload size.
#[derive(Debug, Serialize)]
struct Run {
    wru_per_append: f64,
    rru_per_append: f64,
    requests_per_append: f64,
    s3_requests_per_append: f64,
    append_ms_p50: f64,
    append_ms_p99: f64,
    read_events: usize,
    read_complete: bool,
    read_rru: f64,
    read_requests: u64,
    read_s3_requests: u64,
    read_ms: f64,
    /// Why the system could not do this, when it could not.
    error: Option<String>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

async fn run(system: System, size: usize, events: usize) -> anyhow::Result<Run> {
    let stack = TestStack::new(&format!("peers-{}", system.key())).await?;
    let meter = Meter::default();
    let client = metered_client(&stack, &meter).await;
    let prefix = unique_prefix(system.key());
    let payload = "p".repeat(size);
    let s3_requests = S3Count::default();
    let mut times = Vec::with_capacity(events);
    let mut failure = None;

    // Each system's append and read, behind two closures' worth of code.
    let read: Box<dyn FnOnce() -> futures::future::BoxFuture<'static, anyhow::Result<usize>>>;
    match system {
        System::Sheetlog => {
            let log = sheetlog_core::log::EventLog::new(
                sheetlog_core::aws::DynamoLogStore::new(
                    client.clone(),
                    &stack.resources.entry_table,
                    &stack.resources.segment_table,
                ),
                sheetlog_core::aws::S3Bucket::new(
                    metered_s3(&stack, &s3_requests).await,
                    &stack.resources.bucket,
                ),
                sheetlog_core::config::LogConfig::default(),
            )?;
            let id = log.create().await?.log;
            meter.take();
            s3_requests.take();
            // A `set` event in its stored encoding carrying the payload as text (cells of at most
            // 30,000 characters, under the sheet's text limit).
            let cells: Vec<Value> = payload
                .as_bytes()
                .chunks(30_000)
                .enumerate()
                .map(|(i, c)| json!({"ref": format!("A{}", i + 1), "value": String::from_utf8_lossy(c)}))
                .collect();
            let (code, version, body) =
                sheetlog_core::sheet::Event::from_parts("set", json!({ "cells": cells }))
                    .map_err(|e| anyhow::anyhow!("payload event: {e}"))?
                    .encode();
            let kind = EntryType(code);
            let body = Bytes::from(body);
            // As the API appends: with the segment hint the previous append returned.
            let mut hint = None;
            for _ in 0..events {
                let t = Instant::now();
                let a = log
                    .append(
                        id,
                        NewEntry::new(kind, version, body.clone()),
                        AppendOptions {
                            expected_seq: None,
                            segment_hint: hint,
                        },
                    )
                    .await?;
                hint = Some(a.hint);
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            read = Box::new(move || {
                Box::pin(async move {
                    let mut from = 1;
                    let mut n = 0;
                    loop {
                        let page = log.read_since(id, from, 1000).await?;
                        n += page.entries.len();
                        from = page.next_seq;
                        if page.complete || page.entries.is_empty() {
                            return Ok(n);
                        }
                    }
                })
            });
        }
        System::DynamoEs => {
            use cqrs_es::persist::{PersistedEventRepository, SerializedEvent};
            let (events_table, snapshots) = create_dynamo_es_tables(&client, &prefix).await?;
            let repo = dynamo_es::DynamoEventRepository::new(client.clone())
                .with_tables(&events_table, &snapshots);
            meter.take();
            for seq in 1..=events {
                let event = SerializedEvent::new(
                    "stream-1".into(),
                    seq,
                    "Sheet".into(),
                    "Edited".into(),
                    "1".into(),
                    json!({"payload": payload}),
                    json!({}),
                );
                let t = Instant::now();
                if let Err(e) = repo.persist::<Sheet>(&[event], None).await {
                    failure = Some(format!("append {seq}: {e}"));
                    break;
                }
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            read = Box::new(move || {
                Box::pin(async move {
                    let got = repo.get_events::<Sheet>("stream-1").await?;
                    Ok(got.len())
                })
            });
        }
        System::EventStoreAdapter => {
            use event_store_adapter_rs::{EventEnvelope, SnapshotEnvelope};
            let tables = create_esa_tables(&client, &prefix).await?;
            let store: event_store_adapter_rs::EventStoreForDynamoDB<StreamId, Value, Value> =
                event_store_adapter_rs::EventStoreForDynamoDB::open(
                    client.clone(),
                    tables,
                    event_store_adapter_rs::DynamoDbOptions::default(),
                )
                .await?;
            meter.take();
            let id = StreamId("stream-1".into());
            for seq in 1..=events as u64 {
                let event = EventEnvelope::new(
                    id.clone(),
                    seq,
                    chrono::Utc::now(),
                    json!({"payload": payload}),
                );
                let t = Instant::now();
                // As its README: the creation event with a snapshot, later events alone.
                let r = if seq == 1 {
                    store
                        .persist_event_and_snapshot(event, SnapshotEnvelope::new(json!({}), 1))
                        .await
                } else {
                    store.persist_event(event).await
                };
                if let Err(e) = r {
                    failure = Some(format!("append {seq}: {e}"));
                    break;
                }
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            read = Box::new(move || {
                Box::pin(async move {
                    let got = store.get_events_by_id_since_seq_nr(&id, 0).await?;
                    Ok(got.len())
                })
            });
        }
    }
    let appends = meter.take();
    let append_s3 = s3_requests.take();
    let appended = times.len().max(1) as f64;
    times.sort_by(f64::total_cmp);
    let t = Instant::now();
    let (read_events, read_error) = match read().await {
        Ok(n) => (n, None),
        Err(e) => (0, Some(format!("read: {e}"))),
    };
    let read_ms = t.elapsed().as_secs_f64() * 1000.0;
    let reads = meter.take();
    let read_s3 = s3_requests.take();
    Ok(Run {
        wru_per_append: round2(appends.wru / appended),
        rru_per_append: round2(appends.rru / appended),
        requests_per_append: round2(appends.requests as f64 / appended),
        s3_requests_per_append: round2(append_s3 as f64 / appended),
        append_ms_p50: round2(percentile(&times, 50.0)),
        append_ms_p99: round2(percentile(&times, 99.0)),
        read_events,
        read_complete: read_events == events && failure.is_none(),
        read_rru: round2(reads.rru),
        read_requests: reads.requests,
        read_s3_requests: read_s3,
        read_ms: read_ms.round(),
        error: failure.or(read_error),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let systems = [
        System::Sheetlog,
        System::DynamoEs,
        System::EventStoreAdapter,
    ];
    let mut runs: Vec<(System, usize, Run)> = Vec::new();
    for &size in &args.sizes {
        for system in systems {
            eprintln!(
                "peers: {}, {} appends of {size} B ...",
                system.key(),
                args.events
            );
            let r = run(system, size, args.events).await?;
            runs.push((system, size, r));
        }
    }
    let find = |s: System, size: usize| {
        runs.iter()
            .find(|(x, z, _)| *x == s && *z == size)
            .map(|(_, _, r)| r)
    };
    let mut out = serde_json::Map::new();
    for (system, size, r) in &runs {
        out.insert(
            format!("{}_{size}b", system.key()),
            serde_json::to_value(r)?,
        );
    }
    if let (Some(ours), Some(es), Some(esa)) = (
        find(System::Sheetlog, 500),
        find(System::DynamoEs, 500),
        find(System::EventStoreAdapter, 500),
    ) {
        out.insert(
            "wru_per_append_ratio_vs_dynamo_es".into(),
            json!(round2(ours.wru_per_append / es.wru_per_append)),
        );
        out.insert(
            "wru_per_append_ratio_vs_event_store_adapter".into(),
            json!(round2(ours.wru_per_append / esa.wru_per_append)),
        );
    }
    // Complete past 1 MB: the largest size's stream is far over DynamoDB's 1 MB page.
    let largest = args.sizes.iter().copied().max().unwrap_or(0);
    let past_1mb = largest * args.events > 1024 * 1024;
    for system in systems {
        out.insert(
            format!("reads_complete_past_1mb_{}", system.key()),
            if past_1mb {
                json!(find(system, largest).is_some_and(|r| r.read_complete))
            } else {
                Value::Null
            },
        );
    }
    if let Some(path) = &args.svg {
        let lines: Vec<chart::Line> = systems
            .iter()
            .zip(chart::COLORS)
            .map(|(&system, color)| chart::Line {
                name: system.key().replace('_', "-"),
                color,
                points: args
                    .sizes
                    .iter()
                    .filter_map(|&size| find(system, size).map(|r| (size as f64, r.wru_per_append)))
                    .collect(),
            })
            .collect();
        chart::log_log_svg(
            path,
            "DynamoDB write units per append, by payload size",
            ("payload bytes per event", "write units per append"),
            chart::LegendAt::UpperLeft,
            &lines,
        )?;
        eprintln!("peers: chart written to {}", path.display());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&Value::Object(out))?);
        return Ok(());
    }
    println!(
        "{:<22} {:>8} {:>8} {:>8} {:>9} {:>9} {:>10} {:>9}",
        "system", "payload", "WRU/app", "RRU/app", "req/app", "p50 ms", "read all", "read RRU"
    );
    for (system, size, r) in &runs {
        println!(
            "{:<22} {:>7}B {:>8} {:>8} {:>9} {:>9} {:>10} {:>9}{}",
            system.key(),
            size,
            r.wru_per_append,
            r.rru_per_append,
            r.requests_per_append,
            r.append_ms_p50,
            format!("{}/{}", r.read_events, args.events),
            r.read_rru,
            r.error
                .as_deref()
                .map(|e| format!("  ({e})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}
