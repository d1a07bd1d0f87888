//! What an archived segment costs: S3 bytes per archived one-cell entry, and the requests a
//! reader makes per 1,000 entries read from an archive (counted on the wire, by an interceptor
//! on the SDK clients, not computed).

use bytes::Bytes;
use sheetlog_core::aws::{DynamoLogStore, S3Bucket};
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::{EntryType, LogId, NewEntry};
use sheetlog_core::log::{AppendOptions, EventLog, SegmentHint};
use sheetlog_maintenance::{Mode, Policy, Retention, RetentionReport};

use crate::emulator::RequestCount;
use crate::stack::TestStack;

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct ArchiveBench {
    pub archived_entries: u64,
    pub archive_bytes: u64,
    pub archive_bytes_per_entry: f64,
    /// One read of `archived_entries` entries, as a reader pages (1,000 per call).
    pub archived_read_requests_per_1000_entries: f64,
    pub archived_read_dynamodb_requests_per_1000_entries: f64,
    pub archived_read_s3_requests_per_1000_entries: f64,
    pub archived_read_rru_per_1000_entries: f64,
}

/// Archives a segment of `entries` one-cell `set` entries and reads it back in pages of 1,000.
pub async fn run(
    stack: &TestStack,
    kind: EntryType,
    body: Bytes,
    entries: u64,
) -> anyhow::Result<ArchiveBench> {
    let (id, report) = archive_segment(stack, kind, body, entries).await?;
    let archived = report.entries_removed;
    let read = read_back(stack, id, archived).await?;
    let per_1000 = |n: f64| n * 1000.0 / read.entries as f64;
    let (d, s) = (read.dynamo_requests, read.s3_requests);
    Ok(ArchiveBench {
        archived_entries: archived,
        archive_bytes: report.archive_bytes,
        archive_bytes_per_entry: report.archive_bytes as f64 / archived as f64,
        archived_read_requests_per_1000_entries: per_1000(d + s),
        archived_read_dynamodb_requests_per_1000_entries: per_1000(d),
        archived_read_s3_requests_per_1000_entries: per_1000(s),
        archived_read_rru_per_1000_entries: per_1000(read.rru),
    })
}

/// Fills segment 0 of a new log with `entries` entries, makes it history (two more segments,
/// the middle one's snapshot complete) and archives it. Returns the log and the archive's report.
async fn archive_segment(
    stack: &TestStack,
    kind: EntryType,
    body: Bytes,
    entries: u64,
) -> anyhow::Result<(LogId, RetentionReport)> {
    let log = stack.log()?;
    let id = log.create().await?.log;
    let mut hint = None;
    for _ in 1..entries {
        let a = log
            .append(
                id,
                NewEntry::new(kind, 1, body.clone()),
                AppendOptions {
                    expected_seq: None,
                    segment_hint: hint,
                },
            )
            .await?;
        hint = Some(a.hint);
    }
    // Two more segments, the middle one's snapshot complete, so segment 0 is history.
    let s1 = log.start_segment(id).await?;
    log.complete_snapshot(id, s1.segment, 0, "bench-root")
        .await?;
    log.start_segment(id).await?;
    let tool = Retention::new(
        stack.dynamo.clone(),
        &stack.resources.entry_table,
        &stack.resources.segment_table,
        stack.bucket(),
        Policy {
            mode: Mode::Archive,
            keep_segments: 2,
            after_days: None,
        },
    );
    let seg0 = log.segments(id).await?.0[0].clone();
    let mut report = RetentionReport::default();
    tool.segment(id, &seg0, None, &mut report).await?;
    Ok((id, report))
}

/// What reading the archive back took: entries, read units, and requests per service.
struct ArchiveRead {
    entries: u64,
    rru: f64,
    dynamo_requests: f64,
    s3_requests: f64,
}

/// Reads `archived` entries from sequence 0 in pages of 1,000, over clients that count what
/// they send.
async fn read_back(stack: &TestStack, id: LogId, archived: u64) -> anyhow::Result<ArchiveRead> {
    let (dynamo_count, s3_count) = (RequestCount::default(), RequestCount::default());
    let sdk = stack.emulator.sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .interceptor(dynamo_count.clone())
            .build(),
    );
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .interceptor(s3_count.clone())
            .build(),
    );
    let reader = EventLog::new(
        DynamoLogStore::new(
            dynamo,
            &stack.resources.entry_table,
            &stack.resources.segment_table,
        ),
        S3Bucket::new(s3, &stack.resources.bucket),
        LogConfig::default(),
    )?;
    let mut read = 0u64;
    let mut rru = 0.0;
    while read < archived {
        let page = reader
            .read_from(
                id,
                SegmentHint {
                    segment: 0,
                    base_seq: 0,
                },
                read,
                1000,
            )
            .await?;
        anyhow::ensure!(
            !page.entries.is_empty(),
            "the archive read stopped at {read}"
        );
        read += page.entries.len() as u64;
        rru += page.units.read;
    }
    Ok(ArchiveRead {
        entries: read,
        rru,
        dynamo_requests: dynamo_count.get() as f64,
        s3_requests: s3_count.get() as f64,
    })
}
