//! `lambda`: each function's release binary as Lambda runs it, under `cargo lambda watch`'s
//! Runtime API emulator (`sheetlog_tests::lambda_watch`), on the emulator stack.
//!
//! - Size: the binary, and the zip Lambda is given (one `bootstrap` entry, deflated). Built for
//!   this machine (x86_64); the deployed arm64 binaries are of the same order.
//! - Init to ready: a fresh process is invoked at once with a cheap event (`GET /health`, an empty
//!   batch, a retention run over no logs); the first answer waits for the process to start, load
//!   its settings and SDK clients and poll the Runtime API, the second does not. Init is the
//!   difference, the median of `--runs` fresh processes.
//! - The API's peak resident memory (`VmHWM` of the function process) after the largest requests
//!   it allows: a Replicache push just under Lambda's 6 MB request limit, an entries page cut just
//!   under the 6 MB response limit, and the commit of an upload of `--upload-mib` (the default
//!   upload limit, 256 MiB). The API's memory setting is chosen from this figure (`docs/measured.md`).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde_json::{Value, json};
use sheetlog_tests::lambda_watch::{
    FUNCTION_BINARIES, FunctionProfile, LambdaProcess, build_functions, function_env,
    http_api_event, http_body, scheduled_event,
};
use sheetlog_tests::pipeline::PipelineStack;

use crate::pipeline::round1;
use crate::snapshot::write_csv_of_size;

#[derive(Debug, clap::Args)]
pub struct LambdaArgs {
    /// Print one JSON object of the figures instead of a table.
    #[arg(long)]
    json: bool,
    /// Fresh processes per function for the init time (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Size of the CSV upload committed through the API, in MiB.
    #[arg(long, default_value_t = 256)]
    upload_mib: u64,
}

/// The memory (MB) and timeout (s) each function is configured with (cdk/lib/stack/functions.ts).
fn settings(binary: &str) -> (u32, u32) {
    match binary {
        "sheetlog-api" => (1024, 25),
        "sheetlog-archiver" => (512, 900),
        "sheetlog-stream-router" => (256, 30),
        "sheetlog-sync-writer" => (512, 30),
        _ => (1024, 300),
    }
}

pub fn run(args: LambdaArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(measure(args))
}

fn zip_bytes(binary: &Path) -> anyhow::Result<u64> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bootstrap.zip");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path)?);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o755);
    zip.start_file("bootstrap", options)?;
    zip.write_all(&std::fs::read(binary)?)?;
    zip.finish()?;
    Ok(std::fs::metadata(&path)?.len())
}

fn cheap_event(binary: &str) -> Value {
    match binary {
        "sheetlog-api" => http_api_event("GET", "/health", None, None),
        "sheetlog-archiver" => scheduled_event(),
        _ => json!({"Records": []}),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

async fn measure(args: LambdaArgs) -> anyhow::Result<()> {
    eprintln!("lambda: building the release binaries (minutes when cold) ...");
    let bin = build_functions(FunctionProfile::Release)?;
    let px = PipelineStack::new("bench-lambda").await?;
    let mut env = function_env(&px.stack.resources, px.stack.emulator.endpoint());
    env.push((
        "SHEETLOG_SNAPSHOT_QUEUE_URL".into(),
        px.queues.snapshot_queue.clone(),
    ));
    env.push(("SHEETLOG_RETENTION_MODE".into(), "archive".into()));

    let mut out = serde_json::Map::new();
    let mut rows = Vec::new();
    for name in FUNCTION_BINARIES {
        let path = bin.join(name);
        let binary = std::fs::metadata(&path)?.len();
        let zipped = zip_bytes(&path)?;
        let mut inits = Vec::new();
        for run in 0..args.runs {
            eprintln!(
                "lambda: {name}, fresh process {} of {} ...",
                run + 1,
                args.runs
            );
            let (memory, timeout) = settings(name);
            let mut f = LambdaProcess::start(&path, memory, timeout, &env).await?;
            let event = cheap_event(name);
            let t = Instant::now();
            f.invoke(&event).await?;
            let first = t.elapsed().as_secs_f64() * 1000.0;
            let t = Instant::now();
            f.invoke(&event).await?;
            let warm = t.elapsed().as_secs_f64() * 1000.0;
            inits.push((first - warm).max(0.0));
        }
        let init = median(inits);
        let key = name.replace('-', "_");
        out.insert(format!("binary_bytes_{key}"), json!(binary));
        out.insert(format!("zip_bytes_{key}"), json!(zipped));
        out.insert(format!("init_to_ready_ms_{key}"), json!(round1(init)));
        rows.push((name, binary, zipped, init));
    }

    let api = api_memory(&bin, &env, &px, args.upload_mib).await?;
    for (k, v) in api.as_object().into_iter().flatten() {
        out.insert(k.clone(), v.clone());
    }

    if args.json {
        println!("{}", serde_json::to_string_pretty(&Value::Object(out))?);
        return Ok(());
    }
    println!("Function binaries under a Lambda runtime (x86_64 release, cargo lambda watch)");
    println!(
        "  {:<26} {:>12} {:>12} {:>14}",
        "function", "binary", "zip", "init to ready"
    );
    for (name, binary, zipped, init) in rows {
        println!(
            "  {name:<26} {:>9.1} MB {:>9.1} MB {:>11.1} ms",
            binary as f64 / 1e6,
            zipped as f64 / 1e6,
            init
        );
    }
    println!("API peak resident memory (VmHWM) after the largest requests it allows");
    for (k, v) in api.as_object().into_iter().flatten() {
        println!("  {k:<44} {v}");
    }
    Ok(())
}

/// The API's peak memory after each of its largest allowed requests, in one process.
async fn api_memory(
    bin: &Path,
    env: &[(String, String)],
    px: &PipelineStack,
    upload_mib: u64,
) -> anyhow::Result<Value> {
    let (memory, timeout) = settings("sheetlog-api");
    let mut api = LambdaProcess::start(&bin.join("sheetlog-api"), memory, timeout, env).await?;
    let answer = api.invoke(&call("POST", "/logs".into(), None)).await?;
    let log = http_body(&answer)?["logId"]
        .as_str()
        .map(str::to_owned)
        .context("no logId")?;
    let after_start = peak_mb(&api);
    let push_bytes = largest_push(&mut api, &log).await?;
    let after_push = peak_mb(&api);
    let (page_bytes, page_entries) = largest_page(&mut api, &log).await?;
    let after_page = peak_mb(&api);
    let commit = largest_commit(&mut api, &log, upload_mib).await?;
    let after_commit = peak_mb(&api);
    let _ = px;

    Ok(json!({
        "api_rss_mb_after_start": after_start,
        "api_push_request_bytes": push_bytes,
        "api_peak_rss_mb_after_6mb_push": after_push,
        "api_entries_page_response_bytes": page_bytes,
        "api_entries_page_entries": page_entries,
        "api_peak_rss_mb_after_6mb_page": after_page,
        "api_upload_bytes": commit.size,
        "api_commit_ms": commit.ms.round(),
        // The API process's own CPU time for the commit (the emulator's is not in it): what
        // Lambda's memory setting buys, at 1,769 MB per vCPU.
        "api_commit_cpu_s": round1(commit.cpu_s),
        "api_peak_rss_mb": after_commit,
        "api_memory_mb_configured": memory,
    }))
}

/// The process's peak resident memory so far, in MB (NaN when unknown).
fn peak_mb(api: &LambdaProcess) -> f64 {
    api.peak_rss_kib()
        .map_or(f64::NAN, |k| round1(k as f64 / 1024.0))
}

/// An API Gateway event of one request.
fn call(method: &'static str, path: String, body: Option<Value>) -> Value {
    http_api_event(method, &path, body.as_ref(), None)
}

/// A push just under Lambda's 6 MB request limit: 60 mutations of 24 cells of 4 KB strings.
/// Returns the request's bytes.
async fn largest_push(api: &mut LambdaProcess, log: &str) -> anyhow::Result<usize> {
    eprintln!("lambda: API, a 6 MB push ...");
    let text = "x".repeat(4000);
    let mutations: Vec<Value> = (1..=60)
        .map(|id| {
            let cells: Vec<Value> = (0..24)
                .map(|c| json!({"ref": format!("{}{}", (b'A' + c as u8) as char, id), "value": text}))
                .collect();
            json!({"id": id, "clientID": "bench-client", "name": "set",
                "args": {"cells": cells}, "timestamp": 1.0})
        })
        .collect();
    let push = json!({"pushVersion": 1, "clientGroupID": "bench-group", "mutations": mutations,
        "profileID": "bench", "schemaVersion": ""});
    let push_bytes = push.to_string().len();
    let answer = api
        .invoke(&call(
            "POST",
            format!("/logs/{log}/replicache/push"),
            Some(push),
        ))
        .await?;
    anyhow::ensure!(answer["statusCode"] == 200, "push: {answer}");
    Ok(push_bytes)
}

/// An entries page cut just under the 6 MB response limit: 420 entries of about 15 KB (inline).
/// Returns the response's bytes and entries.
async fn largest_page(api: &mut LambdaProcess, log: &str) -> anyhow::Result<(usize, usize)> {
    eprintln!("lambda: API, 420 appends of 15 KB, then a 6 MB entries page ...");
    let cell = "y".repeat(15_000);
    for _ in 0..420 {
        let body = json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": cell}]}});
        let answer = api
            .invoke(&call("POST", format!("/logs/{log}/entries"), Some(body)))
            .await?;
        anyhow::ensure!(answer["statusCode"] == 201, "append: {answer}");
    }
    let answer = api
        .invoke(&call(
            "GET",
            format!("/logs/{log}/entries?from=0&limit=1000"),
            None,
        ))
        .await?;
    let page_bytes = answer["body"].as_str().map_or(0, str::len);
    let page_entries = http_body(&answer)?["entries"]
        .as_array()
        .map_or(0, Vec::len);
    Ok((page_bytes, page_entries))
}

/// The commit of the largest upload: its size, and the commit's time and the API's CPU time.
struct Commit {
    size: u64,
    ms: f64,
    cpu_s: f64,
}

/// The commit of the largest upload: the API copies it, streams the copy to /tmp, validates it.
async fn largest_commit(
    api: &mut LambdaProcess,
    log: &str,
    upload_mib: u64,
) -> anyhow::Result<Commit> {
    eprintln!("lambda: API, committing a {upload_mib} MiB CSV upload ...");
    let dir = tempfile::tempdir()?;
    let csv = dir.path().join("upload.csv");
    let (_, size) = write_csv_of_size(&csv, upload_mib * 1024 * 1024 - 4096, 3)?;
    let up = api
        .invoke(&call(
            "POST",
            format!("/logs/{log}/uploads"),
            Some(json!({"type": "import", "contentType": "text/csv", "size": size})),
        ))
        .await?;
    let up = http_body(&up)?;
    crate::import::curl_put(&up, &csv)?;
    let upload_id = up["uploadId"].as_str().context("no uploadId")?.to_owned();
    let cpu_before = api.cpu_seconds().unwrap_or(f64::NAN);
    let t = Instant::now();
    let answer = api
        .invoke(&call(
            "POST",
            format!("/logs/{log}/uploads/{upload_id}/commit"),
            None,
        ))
        .await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let cpu_s = api.cpu_seconds().unwrap_or(f64::NAN) - cpu_before;
    anyhow::ensure!(answer["statusCode"] == 201, "commit: {answer}");
    Ok(Commit { size, ms, cpu_s })
}
