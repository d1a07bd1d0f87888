//! Each function's binary (the dev profile) under a Lambda runtime (`cargo lambda watch`'s Runtime API
//! emulator, `sheetlog_tests::lambda_watch`), driven with the events AWS sends it: API Gateway
//! HTTP API v2 requests (with and without JWT claims), a DynamoDB stream batch of real Entry
//! records, an SQS batch in which one record fails (partial batch response), an SQS FIFO batch of
//! queued pushes for the sync writer, and the scheduled event of the retention run. The effects are checked on the emulator.

use serde_json::{Value, json};
use sheetlog_core::domain::LogId;
use sheetlog_core::domain::SnapshotJob;
use sheetlog_core::log::{AppendOptions, SegmentHint};
use sheetlog_tests::fixtures::{set_body, set_entry, snapshot_entry};
use sheetlog_tests::lambda_watch::{
    FunctionProfile, LambdaProcess, build_functions, entry_stream_event, function_env,
    http_api_event, http_body, scheduled_event,
};
use sheetlog_tests::pipeline::{PipelineStack, drive, test_worker_config};
use sheetlog_tests::stack::TestStack;

#[tokio::test]
async fn the_api_binary_answers_http_api_v2_events() -> anyhow::Result<()> {
    let bin = build_functions(FunctionProfile::Dev)?;
    let stack = TestStack::new("lambda-api").await?;
    let env = function_env(&stack.resources, stack.emulator.endpoint());
    let mut api = LambdaProcess::start(&bin.join("sheetlog-api"), 512, 25, &env).await?;

    let created = api
        .invoke(&http_api_event("POST", "/logs", None, None))
        .await?;
    assert_eq!(created["statusCode"], 201, "{created}");
    let log = http_body(&created)?["logId"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no logId in {created}"))?;

    let append = set_body(&[("B2", json!("from Lambda"))]);
    let appended = api
        .invoke(&http_api_event(
            "POST",
            &format!("/logs/{log}/entries"),
            Some(&append),
            None,
        ))
        .await?;
    assert_eq!(appended["statusCode"], 201, "{appended}");
    assert_eq!(http_body(&appended)?["seq"], 1);

    let cells = api
        .invoke(&http_api_event(
            "GET",
            &format!("/logs/{log}/cells?range=B2"),
            None,
            None,
        ))
        .await?;
    assert_eq!(cells["statusCode"], 200, "{cells}");
    assert_eq!(http_body(&cells)?["values"], json!([["from Lambda"]]));

    // Errors keep their JSON body through the runtime.
    let missing = api
        .invoke(&http_api_event("GET", "/nowhere", None, None))
        .await?;
    assert_eq!(missing["statusCode"], 404);
    assert_eq!(http_body(&missing)?["error"]["code"], "not-found");

    // The log really is in the emulator's tables.
    let id = LogId::from_uuid(uuid::Uuid::parse_str(&log)?);
    let page = stack.log()?.read_since(id, 0, 10).await?;
    assert_eq!(page.entries.len(), 2);
    Ok(())
}

#[tokio::test]
async fn the_api_binary_reads_jwt_claims_from_the_request_context() -> anyhow::Result<()> {
    let bin = build_functions(FunctionProfile::Dev)?;
    let stack = TestStack::new("lambda-jwt").await?;
    let mut env = function_env(&stack.resources, stack.emulator.endpoint());
    env.push(("SHEETLOG_ACCESS_CLAIM".into(), "sheetlog_logs".into()));
    let mut api = LambdaProcess::start(&bin.join("sheetlog-api"), 512, 25, &env).await?;

    let creator = json!({"sub": "u1", "sheetlog_logs": "create"});
    let created = api
        .invoke(&http_api_event("POST", "/logs", None, Some(&creator)))
        .await?;
    assert_eq!(created["statusCode"], 201, "{created}");
    let log = http_body(&created)?["logId"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no logId"))?;

    // API Gateway hands an array claim over as "[a b]".
    let owner = json!({"sub": "u1", "sheetlog_logs": format!("[create {log}]")});
    let loaded = api
        .invoke(&http_api_event(
            "GET",
            &format!("/logs/{log}"),
            None,
            Some(&owner),
        ))
        .await?;
    assert_eq!(loaded["statusCode"], 200, "{loaded}");
    let stranger = api
        .invoke(&http_api_event(
            "GET",
            &format!("/logs/{log}"),
            None,
            Some(&creator),
        ))
        .await?;
    assert_eq!(stranger["statusCode"], 403, "{stranger}");
    assert_eq!(http_body(&stranger)?["error"]["code"], "forbidden");
    Ok(())
}

#[tokio::test]
async fn the_router_and_worker_binaries_handle_stream_and_queue_batches() -> anyhow::Result<()> {
    let bin = build_functions(FunctionProfile::Dev)?;
    let px = PipelineStack::new("lambda-pipe").await?;
    let mut env = function_env(&px.stack.resources, px.stack.emulator.endpoint());
    env.push((
        "SHEETLOG_SNAPSHOT_QUEUE_URL".into(),
        px.queues.snapshot_queue.clone(),
    ));

    // A log with edits and a Snapshot entry, appended as the API appends them.
    let created = px.log.create().await?;
    for v in 0..2 {
        let set = set_entry(&[("A1", json!(v))]);
        px.log
            .append(created.log, set, AppendOptions::default())
            .await?;
    }
    let marker = px
        .log
        .append(created.log, snapshot_entry(), AppendOptions::default())
        .await?;

    // The stream router: a real batch read from the Entry stream.
    let stream_event = entry_stream_event(&px.sdk, &px.stack.resources.entry_table).await?;
    let records = stream_event["Records"].as_array().map_or(0, Vec::len);
    assert_eq!(
        records, 4,
        "entry 0, two edits, the Snapshot entry: {stream_event}"
    );
    let mut router =
        LambdaProcess::start(&bin.join("sheetlog-stream-router"), 256, 30, &env).await?;
    let answer = router.invoke(&stream_event).await?;
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    let received = px
        .sqs
        .receive_message()
        .queue_url(&px.queues.snapshot_queue)
        .max_number_of_messages(10)
        .send()
        .await?;
    let jobs: Vec<Value> = received
        .messages()
        .iter()
        .filter_map(|m| m.body().and_then(|b| serde_json::from_str(b).ok()))
        .collect();
    assert_eq!(jobs.len(), 1, "one Snapshot entry, one job: {jobs:?}");
    let job = jobs[0].clone();

    // The snapshot worker: an SQS batch of that job and one malformed message. The malformed
    // one, and only it, is reported back for redelivery.
    let message = |id: &str, body: String| {
        json!({"messageId": id, "receiptHandle": format!("rh-{id}"), "body": body,
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1795428000000"},
            "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:jobs", "awsRegion": "us-east-1"})
    };
    let sqs_event = json!({"Records": [
        message("good", job.to_string()),
        message("bad", "not a snapshot job".into()),
    ]});
    let mut worker =
        LambdaProcess::start(&bin.join("sheetlog-snapshot-worker"), 1024, 300, &env).await?;
    let answer = worker.invoke(&sqs_event).await?;
    assert_eq!(
        answer["batchItemFailures"],
        json!([{"itemIdentifier": "bad"}]),
        "{answer}"
    );
    let loaded = px.log.load(created.log).await?;
    assert_eq!(
        loaded.snapshot.seq, marker.seq,
        "the worker completed the snapshot of the Snapshot entry"
    );
    assert!(loaded.snapshot.snapshot_root.is_some());
    Ok(())
}

#[tokio::test]
async fn the_sync_writer_binary_applies_a_fifo_batch_of_queued_pushes() -> anyhow::Result<()> {
    let bin = build_functions(FunctionProfile::Dev)?;
    let stack = TestStack::new("lambda-sync").await?;
    let env = function_env(&stack.resources, stack.emulator.endpoint());
    let log = stack.log()?;
    let id = log.create().await?.log;
    let sample = |name: &str| -> anyhow::Result<Value> {
        let path = format!(
            "{}/../functions/sync-writer/events/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path)?;
        // The sample's log id, replaced by the one created here.
        Ok(serde_json::from_str(&text.replace(
            "6f1c2a9e-3b7d-4c1e-9a55-0d2f4e8b7c11",
            &id.to_string(),
        ))?)
    };
    let mut writer = LambdaProcess::start(&bin.join("sheetlog-sync-writer"), 512, 30, &env).await?;
    // Three pushes of two clients in one FIFO batch: one group commit.
    let batch = sample("push-batch.json")?;
    let answer = writer.invoke(&batch).await?;
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    assert_eq!(
        log.last_mutation(id, "client-1").await?.map(|r| r.last),
        Some(2)
    );
    let two = log.last_mutation(id, "client-2").await?;
    assert_eq!(two.as_ref().map(|r| r.last), Some(2));
    let next = log.next_seq(id).await?.0;
    assert_eq!(next, 2, "entry 0 and one batch entry");
    // The same batch again (the event source redelivers after a crash): nothing more.
    let answer = writer.invoke(&batch).await?;
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    assert_eq!(log.next_seq(id).await?.0, next);
    // A poison message is dropped, not redelivered; the push after it applies.
    let answer = writer.invoke(&sample("poison.json")?).await?;
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    assert_eq!(
        log.last_mutation(id, "client-3").await?.map(|r| r.last),
        Some(1)
    );
    Ok(())
}

#[tokio::test]
async fn the_archiver_binary_runs_on_the_scheduled_event() -> anyhow::Result<()> {
    let bin = build_functions(FunctionProfile::Dev)?;
    let px = PipelineStack::new("lambda-archiver").await?;
    let worker = px.worker(test_worker_config())?;
    // A log of four segments, each ended by a built snapshot.
    let log = px.log.create().await?.log;
    for s in 0..4 {
        for v in 0..3 {
            let set = set_entry(&[("A1", json!(v))]);
            px.log.append(log, set, AppendOptions::default()).await?;
        }
        let a = px
            .log
            .append(log, snapshot_entry(), AppendOptions::default())
            .await?;
        drive(&worker, SnapshotJob::new(log, a.segment, a.entry)).await?;
        if s < 3 {
            let started = px.log.start_segment(log).await?;
            drive(&worker, SnapshotJob::new(log, started.segment, 0)).await?;
        }
    }
    let from_zero = SegmentHint {
        segment: 0,
        base_seq: 0,
    };
    let before = px.log.read_from(log, from_zero, 0, 1000).await?.entries;

    let mut env = function_env(&px.stack.resources, px.stack.emulator.endpoint());
    env.push(("SHEETLOG_RETENTION_MODE".into(), "archive".into()));
    env.push(("SHEETLOG_RETENTION_KEEP_SEGMENTS".into(), "2".into()));
    let mut archiver = LambdaProcess::start(&bin.join("sheetlog-archiver"), 512, 900, &env).await?;
    let report = archiver.invoke(&scheduled_event()).await?;
    assert_eq!(report["logs"], 1, "{report}");
    assert_eq!(report["segmentsArchived"], 2, "segments 0 and 1: {report}");
    assert_eq!(report["stoppedEarly"], false, "{report}");
    // Archived, the history still reads the same.
    let after = px.log.read_from(log, from_zero, 0, 1000).await?.entries;
    assert_eq!(before, after);
    Ok(())
}
