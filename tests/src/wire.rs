//! Counting DynamoDB request units on the wire: a loopback HTTP proxy in front of the emulator
//! that forwards every request unchanged and, for each DynamoDB write it sees pass (PutItem,
//! UpdateItem, DeleteItem, TransactWriteItems, BatchWriteItem), adds the write units AWS bills for
//! it, from the item bytes actually sent (`sheetlog_core::aws::items::item_size`, AWS's sizing
//! rules). Every request is counted, whatever its answer: a conditional write that fails is billed
//! on AWS too, and so is every retry. Reads (GetItem, Query, Scan, BatchGetItem,
//! TransactGetItems) are counted from the items in the answer and the request's consistency; a
//! projected read is counted at the bytes returned, which AWS bills at the whole item (every
//! projected read in the API is of an item far under 4 KB, so the minimum unit applies either way).
//! With `SHEETLOG_WIRE_TRACE` set, each read is printed to stderr with its table and units.
//!
//! Give the proxy's SDK configuration ([`WireCounter::sdk_config`]) to the code under measurement
//! only; everything else talks to the emulator directly and is not counted.
//!
//! What the request alone cannot say is the size of an item an update or delete touches, which
//! AWS bills at the larger of the old and new item: an UpdateItem is counted at the size of the
//! values it sets (at least one unit), a DeleteItem at one unit. Both are small in the push path
//! (the Clients table's group item), so the figure is a close lower bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::Response;
use base64::Engine;
use serde_json::Value;
use sheetlog_core::aws::items::item_size;
use sheetlog_core::domain::cost::write_units;
use std::collections::HashMap;
use tokio::task::JoinHandle;

/// What passed the proxy.
#[derive(Debug, Default)]
pub struct WireCounts {
    /// Every request forwarded (any service).
    pub requests: AtomicU64,
    /// DynamoDB write requests (each retry too).
    pub dynamo_writes: AtomicU64,
    /// Write units, counted as the requests went by.
    pub write_units: AtomicU64,
    /// Items put into the Entry table (each attempt, won or lost).
    pub entry_puts: AtomicU64,
    /// Read units, in half units (an eventually consistent read of up to 4 KB is one).
    pub read_half_units: AtomicU64,
    /// Requests by operation (`DynamoDB Query <table>`, `SQS SendMessage`, `S3 GET`, ...).
    pub by_op: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// Read units by table name, in half units.
    pub read_half_units_by_table: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// How many more conditional S3 PUTs (`If-None-Match`) to answer
    /// `409 ConditionalRequestConflict` instead of forwarding, as S3 answers a conditional write
    /// that races another ([`WireCounter::conflict_conditional_puts`]).
    pub s3_conflicts_left: AtomicU64,
    /// Conditional PUTs answered 409 so far.
    pub s3_conflicts_sent: AtomicU64,
}

impl WireCounts {
    /// The requests by operation, most frequent first, as `op=count` words.
    pub fn ops_summary(&self) -> String {
        let ops = self.by_op.lock().map(|m| m.clone()).unwrap_or_default();
        let mut ops: Vec<(String, u64)> = ops.into_iter().collect();
        ops.sort_by_key(|op| std::cmp::Reverse(op.1));
        ops.iter()
            .map(|(op, n)| format!("{op}={n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
    pub fn write_units(&self) -> u64 {
        self.write_units.load(Ordering::Relaxed)
    }
    pub fn entry_puts(&self) -> u64 {
        self.entry_puts.load(Ordering::Relaxed)
    }
    pub fn read_units(&self) -> f64 {
        self.read_half_units.load(Ordering::Relaxed) as f64 / 2.0
    }
    /// Read units spent on one table (its full name), indexes included.
    pub fn read_units_of(&self, table: &str) -> f64 {
        let half = self
            .read_half_units_by_table
            .lock()
            .map_or(0, |m| m.get(table).copied().unwrap_or(0));
        half as f64 / 2.0
    }
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Clone)]
struct Proxy {
    upstream: String,
    client: reqwest::Client,
    counts: Arc<WireCounts>,
    entry_table: Arc<str>,
}

/// The running proxy; stops when dropped.
#[derive(Debug)]
pub struct WireCounter {
    pub url: String,
    pub counts: Arc<WireCounts>,
    task: JoinHandle<()>,
}

impl Drop for WireCounter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WireCounter {
    /// Starts a proxy to `upstream` (the emulator's URL) on a loopback port. `entry_table` names
    /// the table whose puts are counted as appends.
    pub async fn start(upstream: &str, entry_table: &str) -> anyhow::Result<Self> {
        let counts = Arc::new(WireCounts::default());
        let proxy = Proxy {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(512)
                .build()?,
            counts: counts.clone(),
            entry_table: entry_table.into(),
        };
        let app = axum::Router::new().fallback(forward).with_state(proxy);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, counts, task })
    }

    /// Answers the next `n` conditional S3 PUTs with `409 ConditionalRequestConflict` (S3's
    /// answer to a conditional write racing another on the same key), forwarding nothing.
    pub fn conflict_conditional_puts(&self, n: u64) {
        self.counts.s3_conflicts_left.store(n, Ordering::SeqCst);
    }

    /// `sdk` pointed at this proxy instead of the emulator.
    pub fn sdk_config(&self, sdk: &aws_config::SdkConfig) -> aws_config::SdkConfig {
        sdk.to_builder().endpoint_url(&self.url).build()
    }
}

/// Hop-by-hop headers, and those the client recomputes.
fn skip_header(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host" | "content-length" | "transfer-encoding" | "connection" | "keep-alive"
    )
}

async fn forward(State(p): State<Proxy>, req: Request) -> Response {
    match forward_inner(&p, req).await {
        Ok(r) => r,
        Err(e) => {
            let mut r = Response::new(Body::from(format!("wire proxy: {e:#}")));
            *r.status_mut() = StatusCode::BAD_GATEWAY;
            r
        }
    }
}

async fn forward_inner(p: &Proxy, req: Request) -> anyhow::Result<Response> {
    p.counts.requests.fetch_add(1, Ordering::Relaxed);
    if let Some(conflict) = s3_conflict(p, &req) {
        return Ok(conflict);
    }
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 256 * 1024 * 1024)
        .await
        .context("request body")?;
    let op = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.strip_prefix("DynamoDB_20120810."))
        .map(str::to_owned);
    if let Some(op) = &op {
        count_dynamo(p, op, &body);
    }
    let name = op_name(op.as_deref(), &parts, &body);
    if let Ok(mut m) = p.counts.by_op.lock() {
        *m.entry(name).or_default() += 1;
    }
    let request = body.clone();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_owned();
    let mut out = p
        .client
        .request(parts.method.clone(), format!("{}{path}", p.upstream));
    for (name, value) in &parts.headers {
        if !skip_header(name) {
            out = out.header(name, value);
        }
    }
    let resp = out.body(body).send().await.context("upstream")?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.bytes().await.context("upstream body")?;
    if let Some(op) = &op
        && status.is_success()
    {
        count_read(p, op, &request, &bytes);
    }
    let mut r = Response::new(Body::from(bytes));
    *r.status_mut() = status;
    for (name, value) in &headers {
        if !skip_header(name) {
            r.headers_mut().append(name, value.clone());
        }
    }
    Ok(r)
}

/// S3's `409 ConditionalRequestConflict` for a conditional PUT, while
/// [`WireCounter::conflict_conditional_puts`] has some left to send.
fn s3_conflict(p: &Proxy, req: &Request) -> Option<Response> {
    if !(req.method() == axum::http::Method::PUT
        && req.headers().contains_key("if-none-match")
        && p.counts
            .s3_conflicts_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok())
    {
        return None;
    }
    p.counts.s3_conflicts_sent.fetch_add(1, Ordering::SeqCst);
    let mut r = Response::new(Body::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>ConditionalRequestConflict</Code>\
         <Message>A conflicting conditional operation is currently in progress against this \
         resource. Please try again.</Message><RequestId>0000000000000000</RequestId></Error>",
    ));
    *r.status_mut() = StatusCode::CONFLICT;
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/xml"),
    );
    Some(r)
}

/// The name a request is counted under in [`WireCounts::by_op`]: `ddb:<op>:<table suffix>`,
/// `sqs:<action>`, or `<method>:<bucket>`.
fn op_name(op: Option<&str>, parts: &axum::http::request::Parts, body: &[u8]) -> String {
    match (
        op,
        parts
            .headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok()),
    ) {
        (Some(op), _) => {
            let table = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| {
                    v.get("TableName")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            format!("ddb:{op}:{}", table.rsplit('-').next().unwrap_or(""))
        }
        (None, Some(t)) => t.replace("AmazonSQS.", "sqs:"),
        (None, None) => format!(
            "{}:{}",
            parts.method,
            parts.uri.path().split('/').nth(2).unwrap_or("")
        ),
    }
}

/// Adds the read units of a DynamoDB read that succeeded (by table too), from its request and
/// answer; traced to stderr with `SHEETLOG_WIRE_TRACE`.
fn count_read(p: &Proxy, op: &str, request: &[u8], answer: &[u8]) {
    let (Ok(req), Ok(answer)) = (
        serde_json::from_slice::<Value>(request),
        serde_json::from_slice::<Value>(answer),
    ) else {
        return;
    };
    let Some(half) = read_request_half_units(op, &req, &answer) else {
        return;
    };
    p.counts.read_half_units.fetch_add(half, Ordering::Relaxed);
    if let (Some(table), Ok(mut m)) = (
        req.get("TableName").and_then(Value::as_str),
        p.counts.read_half_units_by_table.lock(),
    ) {
        *m.entry(table.to_owned()).or_default() += half;
    }
    if std::env::var_os("SHEETLOG_WIRE_TRACE").is_some() {
        eprintln!(
            "wire: {op} {} consistent={} {} RRU",
            req.get("TableName").and_then(Value::as_str).unwrap_or("-"),
            req.get("ConsistentRead")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            half as f64 / 2.0
        );
    }
}

fn count_dynamo(p: &Proxy, op: &str, body: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let units = match write_request_units(op, &v, &p.entry_table) {
        Some((units, entry_puts)) => {
            p.counts.entry_puts.fetch_add(entry_puts, Ordering::Relaxed);
            units
        }
        None => return,
    };
    p.counts.dynamo_writes.fetch_add(1, Ordering::Relaxed);
    p.counts.write_units.fetch_add(units, Ordering::Relaxed);
}

/// The write units of one DynamoDB request and the Entry-table items it puts, or `None` when
/// `op` is not a write.
pub fn write_request_units(op: &str, v: &Value, entry_table: &str) -> Option<(u64, u64)> {
    let table_is_entry =
        |t: &Value| t.get("TableName").and_then(Value::as_str) == Some(entry_table);
    let units = |item_bytes: u64, tx: bool| write_units(item_bytes, tx) as u64;
    match op {
        "PutItem" => {
            let size = v.get("Item").map_or(0, json_item_size);
            Some((units(size, false), u64::from(table_is_entry(v))))
        }
        "UpdateItem" => Some((units(update_size(v), false), 0)),
        "DeleteItem" => Some((1, 0)),
        "TransactWriteItems" => {
            let mut total = 0;
            let mut puts = 0;
            for item in v.get("TransactItems")?.as_array()? {
                if let Some(put) = item.get("Put") {
                    total += units(put.get("Item").map_or(0, json_item_size), true);
                    puts += u64::from(table_is_entry(put));
                } else if let Some(update) = item.get("Update") {
                    total += units(update_size(update), true);
                } else {
                    // Delete and ConditionCheck: one item, at least one unit, doubled.
                    total += units(0, true);
                }
            }
            Some((total, puts))
        }
        "BatchWriteItem" => {
            let mut total = 0;
            let mut puts = 0;
            for (table, requests) in v.get("RequestItems")?.as_object()? {
                for r in requests.as_array()? {
                    if let Some(put) = r.get("PutRequest") {
                        total += units(put.get("Item").map_or(0, json_item_size), false);
                        puts += u64::from(table == entry_table);
                    } else {
                        total += 1;
                    }
                }
            }
            Some((total, puts))
        }
        _ => None,
    }
}

/// The read units of one DynamoDB read request from its answer, in half units, or `None` when
/// `op` is not a read. A read unit covers 4 KB: a Query or Scan adds its items' sizes before
/// rounding up, a batch or transactional get rounds each item; eventual consistency halves,
/// a transaction doubles; a read that finds nothing still costs the minimum.
pub fn read_request_half_units(op: &str, req: &Value, answer: &Value) -> Option<u64> {
    const UNIT: u64 = 4096;
    let strong = |v: &Value| v.get("ConsistentRead").and_then(Value::as_bool) == Some(true);
    let half = |bytes: u64, strong: bool| bytes.div_ceil(UNIT).max(1) * if strong { 2 } else { 1 };
    let sum = |items: Option<&Value>| -> u64 {
        items
            .and_then(Value::as_array)
            .map_or(0, |a| a.iter().map(json_item_size).sum())
    };
    match op {
        "GetItem" => Some(half(
            answer.get("Item").map_or(0, json_item_size),
            strong(req),
        )),
        "Query" | "Scan" => Some(half(sum(answer.get("Items")), strong(req))),
        "BatchGetItem" => {
            let mut total = 0;
            for (table, items) in answer.get("Responses")?.as_object()? {
                let consistent = req
                    .pointer(&format!("/RequestItems/{table}"))
                    .is_some_and(strong);
                for item in items.as_array()? {
                    total += half(json_item_size(item), consistent);
                }
            }
            Some(total)
        }
        "TransactGetItems" => {
            let responses = answer.get("Responses").and_then(Value::as_array);
            let n = req.get("TransactItems").and_then(Value::as_array)?.len();
            Some(
                (0..n)
                    .map(|i| {
                        let item = responses
                            .and_then(|r| r.get(i))
                            .and_then(|r| r.get("Item"))
                            .map_or(0, json_item_size);
                        half(item, true) * 2
                    })
                    .sum(),
            )
        }
        _ => None,
    }
}

/// An update's key plus the values it sets.
fn update_size(v: &Value) -> u64 {
    v.get("Key").map_or(0, json_item_size)
        + v.get("ExpressionAttributeValues").map_or(0, json_item_size)
}

fn json_item_size(item: &Value) -> u64 {
    let Some(map) = item.as_object() else {
        return 0;
    };
    let converted: HashMap<String, AttributeValue> = map
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), json_attr(v)?)))
        .collect();
    item_size(&converted)
}

/// A DynamoDB JSON attribute value (`{"S": "x"}`, `{"B": "<base64>"}`, …) as the SDK's type.
fn json_attr(v: &Value) -> Option<AttributeValue> {
    let (kind, x) = v.as_object()?.iter().next()?;
    let strings = |x: &Value| -> Option<Vec<String>> {
        x.as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let blob = |s: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .ok()
            .map(Blob::new)
    };
    Some(match kind.as_str() {
        "S" => AttributeValue::S(x.as_str()?.to_owned()),
        "N" => AttributeValue::N(x.as_str()?.to_owned()),
        "B" => AttributeValue::B(blob(x.as_str()?)?),
        "BOOL" => AttributeValue::Bool(x.as_bool()?),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(strings(x)?),
        "NS" => AttributeValue::Ns(strings(x)?),
        "BS" => AttributeValue::Bs(
            x.as_array()?
                .iter()
                .map(|s| blob(s.as_str()?))
                .collect::<Option<_>>()?,
        ),
        "L" => AttributeValue::L(x.as_array()?.iter().map(json_attr).collect::<Option<_>>()?),
        "M" => AttributeValue::M(
            x.as_object()?
                .iter()
                .map(|(k, v)| Some((k.clone(), json_attr(v)?)))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_put_is_billed_per_kilobyte_and_a_transaction_double() {
        let small = json!({"TableName": "t-entry", "Item": {"s": {"B": "AAAA"}, "n": {"N": "7"}}});
        assert_eq!(
            write_request_units("PutItem", &small, "t-entry"),
            Some((1, 1))
        );
        let big = "x".repeat(1500);
        let tx = json!({"TransactItems": [
            {"Put": {"TableName": "t-entry", "Item": {"s": {"B": "AAAA"}, "body": {"S": big}}}},
            {"Put": {"TableName": "t-clients", "Item": {"k": {"B": "AAAA"}}}},
            {"Update": {"TableName": "t-clients", "Key": {"k": {"B": "AAAA"}},
                "ExpressionAttributeValues": {":c": {"SS": ["a", "b"]}}}},
        ]});
        // 2 KB put (2 units), a small put and a small update (1 each), all doubled.
        assert_eq!(
            write_request_units("TransactWriteItems", &tx, "t-entry"),
            Some((8, 1))
        );
        assert_eq!(
            write_request_units("Query", &json!({"TableName": "t-entry"}), "t-entry"),
            None
        );
    }

    #[test]
    fn a_read_is_billed_per_4_kb_half_when_eventually_consistent() {
        let small = json!({"Items": [{"s": {"B": "AAAA"}}]});
        let eventual = json!({"TableName": "t-entry", "Limit": 1});
        let strong = json!({"TableName": "t-entry", "ConsistentRead": true});
        assert_eq!(read_request_half_units("Query", &eventual, &small), Some(1));
        assert_eq!(read_request_half_units("Query", &strong, &small), Some(2));
        // Nothing found still costs the minimum.
        assert_eq!(
            read_request_half_units("GetItem", &strong, &json!({})),
            Some(2)
        );
        // 5 KB over two items of a Query: two units, halved.
        let big = "x".repeat(2500);
        let two = json!({"Items": [{"b": {"S": big}}, {"b": {"S": big}}]});
        assert_eq!(read_request_half_units("Query", &eventual, &two), Some(2));
        assert_eq!(read_request_half_units("PutItem", &eventual, &small), None);
    }
}
