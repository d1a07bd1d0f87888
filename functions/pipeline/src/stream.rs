//! The Entry table's stream, polled the way Lambda's DynamoDB event source does it: every shard
//! from its oldest record, the stack's filter applied, records converted to the Lambda event
//! types and handed to the stream router in batches; a batch in which the router reports failed
//! records is retried from the first of them, later successes included (as Lambda does), with backoff, up to the stack's retry limit, and then described on the failure queue
//! (the stack's on-failure destination) when one is set.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use aws_lambda_events::event::dynamodb::{Event, EventRecord, StreamViewType};
use aws_sdk_dynamodbstreams::primitives::{DateTime, DateTimeFormat};
use aws_sdk_dynamodbstreams::types::{
    AttributeValue as StreamValue, Record, ShardIteratorType, StreamViewType as SdkViewType,
};
use backon::{BackoffBuilder, ExponentialBuilder};
use serde_dynamo::AttributeValue;
use sheetlog_stream_router::{Effects, RouteReport, route};
use tracing::{debug, error, warn};

use crate::filter::FilterPatterns;

/// Records read per GetRecords call and handed to the router at once (Lambda's batch size for
/// this source in the stack).
pub const BATCH_SIZE: i32 = 100;

/// Where reading a shard stands.
#[derive(Debug, Clone, Default)]
struct ShardState {
    /// Where the next GetRecords reads (None: get an iterator first).
    iterator: Option<String>,
    /// The last record delivered, to resume after it when the iterator expired.
    last_sequence: Option<String>,
}

/// Polls one table's stream and feeds the stream router.
pub struct StreamDriver {
    streams: aws_sdk_dynamodbstreams::Client,
    table: String,
    effects: Arc<dyn Effects>,
    filter: FilterPatterns,
    retry_attempts: u32,
    /// The function's timeout: an invocation still running then is cut off and its batch fails.
    timeout: Option<Duration>,
    /// Where records given up on are described (SQS client and queue URL), as Lambda's
    /// on-failure destination does; without one they are only logged.
    on_failure: Option<(aws_sdk_sqs::Client, String)>,
    stream_arn: Option<String>,
    /// Open shards and where to read next.
    shards: BTreeMap<String, ShardState>,
    /// Shards that have been read to their end.
    closed: Vec<String>,
}

impl std::fmt::Debug for StreamDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamDriver")
            .field("table", &self.table)
            .field("stream_arn", &self.stream_arn)
            .field("shards", &self.shards.len())
            .finish()
    }
}

impl StreamDriver {
    pub fn new(
        sdk: &aws_config::SdkConfig,
        table: impl Into<String>,
        effects: Arc<dyn Effects>,
        filter: FilterPatterns,
        retry_attempts: u32,
    ) -> Self {
        Self {
            streams: aws_sdk_dynamodbstreams::Client::new(sdk),
            table: table.into(),
            effects,
            filter,
            retry_attempts,
            timeout: None,
            on_failure: None,
            stream_arn: None,
            shards: BTreeMap::new(),
            closed: Vec::new(),
        }
    }

    /// Cuts each invocation off at `timeout` (the function's), as Lambda does.
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Describes records given up on to this queue, as the stack's on-failure destination (the
    /// stream router's failure queue) does.
    pub fn with_failure_queue(mut self, sqs: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        self.on_failure = Some((sqs, url.into()));
        self
    }

    async fn stream_arn(&mut self) -> anyhow::Result<String> {
        if let Some(arn) = &self.stream_arn {
            return Ok(arn.clone());
        }
        // ListStreams, as Lambda's event-source mapping may with the function's role (the role
        // holds dynamodb:ListStreams for it); the newest stream if the table has had several.
        let arn = self
            .streams
            .list_streams()
            .table_name(&self.table)
            .send()
            .await
            .with_context(|| format!("listing the streams of table {}", self.table))?
            .streams
            .unwrap_or_default()
            .into_iter()
            .max_by(|a, b| a.stream_label.cmp(&b.stream_label))
            .and_then(|s| s.stream_arn)
            .with_context(|| format!("table {} has no stream", self.table))?;
        self.stream_arn = Some(arn.clone());
        Ok(arn)
    }

    /// Picks up shards that appeared since the last look (DescribeStream, paged).
    async fn refresh_shards(&mut self, arn: &str) -> anyhow::Result<()> {
        let mut start: Option<String> = None;
        loop {
            let out = self
                .streams
                .describe_stream()
                .stream_arn(arn)
                .set_exclusive_start_shard_id(start.clone())
                .send()
                .await
                .context("DescribeStream")?;
            let Some(desc) = out.stream_description else {
                return Ok(());
            };
            for shard in desc.shards() {
                if let Some(id) = shard.shard_id()
                    && !self.closed.iter().any(|c| c == id)
                {
                    self.shards.entry(id.to_owned()).or_default();
                }
            }
            match desc.last_evaluated_shard_id {
                Some(last) => start = Some(last),
                None => return Ok(()),
            }
        }
    }

    /// Reads every shard once (as many GetRecords pages as it takes to catch up) and routes what
    /// passes the filter. Returns the combined report.
    pub async fn poll_once(&mut self) -> anyhow::Result<RouteReport> {
        let arn = self.stream_arn().await?;
        self.refresh_shards(&arn).await?;
        let mut total = RouteReport::default();
        let ids: Vec<String> = self.shards.keys().cloned().collect();
        for id in ids {
            loop {
                let state = self.shards.get(&id).cloned().unwrap_or_default();
                let iterator = match state.iterator {
                    Some(it) => it,
                    None => {
                        let req = self
                            .streams
                            .get_shard_iterator()
                            .stream_arn(&arn)
                            .shard_id(&id);
                        // From the oldest record, as the stack's event source starts; after an
                        // expired iterator, from just after the last record delivered.
                        let req = match &state.last_sequence {
                            Some(seq) => req
                                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                                .sequence_number(seq),
                            None => req.shard_iterator_type(ShardIteratorType::TrimHorizon),
                        };
                        req.send()
                            .await
                            .context("GetShardIterator")?
                            .shard_iterator
                            .context("GetShardIterator returned no iterator")?
                    }
                };
                let out = match self
                    .streams
                    .get_records()
                    .shard_iterator(&iterator)
                    .limit(BATCH_SIZE)
                    .send()
                    .await
                {
                    Ok(out) => out,
                    Err(e) => {
                        // Iterators expire (15 minutes, or an emulator restart): get a new one
                        // next time rather than failing on this one forever.
                        if let Some(s) = self.shards.get_mut(&id) {
                            s.iterator = None;
                        }
                        return Err(anyhow::Error::new(e).context("GetRecords"));
                    }
                };
                let records = out.records.unwrap_or_default();
                let got = records.len();
                let last_sequence = records
                    .last()
                    .and_then(|r| r.dynamodb())
                    .and_then(|d| d.sequence_number.clone())
                    .or(state.last_sequence);
                match out.next_shard_iterator {
                    Some(next) => {
                        self.shards.insert(
                            id.clone(),
                            ShardState {
                                iterator: Some(next),
                                last_sequence,
                            },
                        );
                    }
                    None => {
                        // The shard is closed and fully read.
                        self.shards.remove(&id);
                        self.closed.push(id.clone());
                    }
                }
                if got > 0 {
                    let report = self.deliver(&arn, &id, &records).await;
                    total.jobs_sent += report.jobs_sent;
                    total.payloads_committed += report.payloads_committed;
                    total.payloads_missing += report.payloads_missing;
                    total.ignored += report.ignored;
                    total.failed.extend(report.failed);
                }
                if got == 0 || !self.shards.contains_key(&id) {
                    break;
                }
            }
        }
        Ok(total)
    }

    /// Filters, converts and routes one GetRecords page, retrying failed records.
    async fn deliver(&self, arn: &str, shard: &str, records: &[Record]) -> RouteReport {
        let mut batch = Vec::new();
        for r in records {
            match convert_record(r, arn) {
                Some(rec) => {
                    let json = serde_json::to_value(&rec).unwrap_or_default();
                    if self.filter.matches(&json) {
                        batch.push(rec);
                    }
                }
                None => warn!(event = ?r.event_id(), "stream record could not be converted"),
            }
        }
        let mut total = RouteReport::default();
        let mut attempt = 0u32;
        // Lambda's stream source retries a failing batch at once; the local driver waits 100 ms,
        // doubling to at most 5 s, so a failing store is not hammered.
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(5))
            .with_factor(2.0)
            .without_max_times()
            .build();
        while !batch.is_empty() {
            let mut event = Event::default();
            event.records = std::mem::take(&mut batch);
            let report =
                match crate::within(self.timeout, route(self.effects.as_ref(), &event)).await {
                    Some(report) => report,
                    // Cut off, as Lambda cuts it off: the invocation failed, so the whole batch is
                    // retried from its first record.
                    None => {
                        warn!(
                            records = event.records.len(),
                            "a stream router invocation ran past the function's timeout; cut off"
                        );
                        let first = event
                            .records
                            .first()
                            .and_then(|r| r.change.sequence_number.clone());
                        RouteReport {
                            // An id naming no record fails the whole batch too (below).
                            failed: vec![first.unwrap_or_default()],
                            ..RouteReport::default()
                        }
                    }
                };
            total.jobs_sent += report.jobs_sent;
            total.payloads_committed += report.payloads_committed;
            total.payloads_missing += report.payloads_missing;
            total.ignored += report.ignored;
            if report.failed.is_empty() {
                break;
            }
            attempt += 1;
            // As Lambda retries a stream batch whose function reported item failures: from the
            // first failed record (its checkpoint) to the end, so records after it that
            // succeeded go round again too. An id that names no record of the batch fails the
            // whole batch, as Lambda treats it.
            let first = event
                .records
                .iter()
                .position(|r| {
                    report
                        .failed
                        .iter()
                        .any(|f| Some(f) == r.change.sequence_number.as_ref())
                })
                .unwrap_or(0);
            batch = event.records.split_off(first);
            if attempt > self.retry_attempts {
                error!(
                    records = batch.len(),
                    "stream records still failing after every retry; dropping them"
                );
                self.describe_failure(arn, shard, records, &report.failed)
                    .await;
                total.failed.extend(report.failed);
                break;
            }
            debug!(
                records = batch.len(),
                attempt, "retrying failed stream records"
            );
            let delay = backoff.next().unwrap_or(Duration::from_secs(5));
            tokio::time::sleep(delay).await;
        }
        total
    }

    /// Sends the failure queue what Lambda's on-failure destination receives for a DynamoDB
    /// stream: a description of the batch (shard, first and last sequence number, arrival times),
    /// not the records. The operations runbook reads `approximateArrivalOfFirstRecord` from it.
    async fn describe_failure(
        &self,
        arn: &str,
        shard: &str,
        records: &[Record],
        failed: &[String],
    ) {
        let Some((sqs, url)) = &self.on_failure else {
            return;
        };
        // `records` is in stream order, so the first and last failed ones bound the batch.
        let given_up: Vec<&Record> = records
            .iter()
            .filter(|r| {
                r.dynamodb()
                    .and_then(|d| d.sequence_number())
                    .is_some_and(|seq| failed.iter().any(|f| f == seq))
            })
            .collect();
        let seq = |r: Option<&&Record>| {
            r.and_then(|r| r.dynamodb())
                .and_then(|d| d.sequence_number.clone())
        };
        let arrival = |r: Option<&&Record>| {
            r.and_then(|r| r.dynamodb())
                .and_then(|d| d.approximate_creation_date_time())
                .and_then(|t| t.fmt(DateTimeFormat::DateTime).ok())
        };
        let body = serde_json::json!({
            "requestContext": {
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": self.retry_attempts + 1,
            },
            "version": "1.0",
            "timestamp": DateTime::from(std::time::SystemTime::now())
                .fmt(DateTimeFormat::DateTime)
                .ok(),
            "DDBStreamBatchInfo": {
                "shardId": shard,
                "startSequenceNumber": seq(given_up.first()),
                "endSequenceNumber": seq(given_up.last()),
                "approximateArrivalOfFirstRecord": arrival(given_up.first()),
                "approximateArrivalOfLastRecord": arrival(given_up.last()),
                "batchSize": given_up.len(),
                "streamArn": arn,
            },
        });
        if let Err(e) = sqs
            .send_message()
            .queue_url(url)
            .message_body(body.to_string())
            .send()
            .await
        {
            // As in AWS, a failed destination delivery loses only the description; the
            // reprocess tool finds the records' unfinished side effects without it.
            error!(error = %e, "describing dropped stream records on the failure queue failed");
        }
    }
}

/// A stream record in the shape Lambda delivers it.
pub fn convert_record(r: &Record, stream_arn: &str) -> Option<EventRecord> {
    let d = r.dynamodb()?;
    let mut change = aws_lambda_events::event::dynamodb::StreamRecord::default();
    change.keys = convert_image(d.keys.as_ref())?;
    change.new_image = convert_image(d.new_image.as_ref())?;
    change.old_image = convert_image(d.old_image.as_ref())?;
    change.sequence_number = d.sequence_number.clone();
    change.size_bytes = d.size_bytes.unwrap_or(0);
    change.stream_view_type = d.stream_view_type.as_ref().and_then(|v| match v {
        SdkViewType::NewImage => Some(StreamViewType::NewImage),
        SdkViewType::OldImage => Some(StreamViewType::OldImage),
        SdkViewType::NewAndOldImages => Some(StreamViewType::NewAndOldImages),
        SdkViewType::KeysOnly => Some(StreamViewType::KeysOnly),
        _ => None,
    });
    let mut rec = EventRecord::default();
    rec.aws_region = r.aws_region.clone().unwrap_or_default();
    rec.change = change;
    rec.event_id = r.event_id.clone().unwrap_or_default();
    rec.event_name = r
        .event_name
        .as_ref()
        .map(|n| n.as_str().to_owned())
        .unwrap_or_default();
    rec.event_source = r.event_source.clone();
    rec.event_version = r.event_version.clone();
    rec.event_source_arn = Some(stream_arn.to_owned());
    Some(rec)
}

fn convert_image(image: Option<&HashMap<String, StreamValue>>) -> Option<serde_dynamo::Item> {
    let mut out = HashMap::new();
    for (k, v) in image.into_iter().flatten() {
        out.insert(k.clone(), convert_value(v)?);
    }
    Some(serde_dynamo::Item::from(out))
}

/// SDK attribute value → Lambda event attribute value. Written out rather than taken from
/// serde_dynamo's `aws-sdk-dynamodbstreams+1` feature because that conversion panics on a
/// variant it does not know; this one reports it (`None`).
fn convert_value(v: &StreamValue) -> Option<AttributeValue> {
    Some(match v {
        StreamValue::B(b) => AttributeValue::B(b.as_ref().to_vec()),
        StreamValue::Bool(b) => AttributeValue::Bool(*b),
        StreamValue::Bs(bs) => AttributeValue::Bs(bs.iter().map(|b| b.as_ref().to_vec()).collect()),
        StreamValue::L(l) => AttributeValue::L(l.iter().map(convert_value).collect::<Option<_>>()?),
        StreamValue::M(m) => AttributeValue::M(
            m.iter()
                .map(|(k, v)| Some((k.clone(), convert_value(v)?)))
                .collect::<Option<_>>()?,
        ),
        StreamValue::N(n) => AttributeValue::N(n.clone()),
        StreamValue::Ns(ns) => AttributeValue::Ns(ns.clone()),
        StreamValue::Null(b) => AttributeValue::Null(*b),
        StreamValue::S(s) => AttributeValue::S(s.clone()),
        StreamValue::Ss(ss) => AttributeValue::Ss(ss.clone()),
        _ => return None,
    })
}
