//! Finding every log of a stack: nothing indexes logs, so the tools scan the Segment table (key
//! attribute only, paged) and read each log's segments with a Query afterwards.

use std::collections::{HashMap, HashSet};

use aws_sdk_dynamodb::types::AttributeValue;
use sheetlog_core::aws::items::segment_attr;
use sheetlog_core::domain::LogId;
use tracing::warn;

/// The log ids of a Segment table, each once, a scan page at a time.
#[derive(Debug)]
pub struct LogIds {
    dynamo: aws_sdk_dynamodb::Client,
    table: String,
    start: Option<HashMap<String, AttributeValue>>,
    done: bool,
    seen: HashSet<LogId>,
}

impl LogIds {
    pub fn new(dynamo: aws_sdk_dynamodb::Client, segment_table: &str) -> Self {
        Self {
            dynamo,
            table: segment_table.to_owned(),
            start: None,
            done: false,
            seen: HashSet::new(),
        }
    }

    /// The logs first met on the next scan page (possibly none); `None` once the scan is done.
    pub async fn next_page(&mut self) -> Result<Option<Vec<LogId>>, String> {
        if self.done {
            return Ok(None);
        }
        let page = self
            .dynamo
            .scan()
            .table_name(&self.table)
            .projection_expression("#l")
            .expression_attribute_names("#l", segment_attr::LOG_ID)
            .set_exclusive_start_key(self.start.take())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let mut logs = Vec::new();
        for item in page.items() {
            let Some(AttributeValue::B(b)) = item.get(segment_attr::LOG_ID) else {
                continue;
            };
            let Some(log) = LogId::from_slice(b.as_ref()) else {
                warn!("Segment item with a malformed log id; skipped");
                continue;
            };
            if self.seen.insert(log) {
                logs.push(log);
            }
        }
        self.start = page.last_evaluated_key;
        self.done = self.start.is_none();
        Ok(Some(logs))
    }
}

/// Every entry item of a segment from entry `from` on, in order (all of its query pages).
pub async fn segment_entries(
    store: &sheetlog_core::aws::DynamoLogStore,
    log: LogId,
    segment: u64,
    from: u64,
    consistency: sheetlog_core::ports::Consistency,
) -> Result<Vec<sheetlog_core::domain::EntryRecord>, sheetlog_core::error::StoreError> {
    use sheetlog_core::ports::LogEntries;
    let mut units = sheetlog_core::domain::RequestUnits::default();
    let mut out = Vec::new();
    let mut from = from;
    loop {
        let page = store
            .read_entries(log, segment, from, PAGE, consistency, &mut units)
            .await?;
        let last = page.entries.last().map(|e| e.num);
        out.extend(page.entries);
        match last {
            Some(n) if page.more => from = n + 1,
            _ => return Ok(out),
        }
    }
}

/// Entries read per query page.
const PAGE: usize = 1000;
