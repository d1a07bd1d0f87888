//! The functions' built release binaries under a Lambda runtime. `cargo lambda watch
//! --only-lambda-apis` serves the Lambda Runtime API a function polls for work, and the Invoke
//! API that hands it events; the binary runs as its own process, exactly as Lambda starts a
//! `provided.al2023` bootstrap, with `AWS_LAMBDA_RUNTIME_API` and the function's environment.
//! Used by the `lambda_runtime` integration tests and `./scripts/bench lambda`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::Value;
use sheetlog_core::config::Resources;

use crate::emulator::workspace_root;

/// Every function binary the stack deploys.
pub const FUNCTION_BINARIES: [&str; 4] = [
    "sheetlog-api",
    "sheetlog-stream-router",
    "sheetlog-snapshot-worker",
    "sheetlog-archiver",
];

/// One build at a time (tests run in parallel; Cargo would serialise them anyway).
static BUILD: Mutex<()> = Mutex::new(());

/// Builds the release binaries of every function (quick when they are up to date) and returns
/// the folder holding them. Progress goes to the terminal: a cold build takes minutes.
pub fn build_release() -> anyhow::Result<PathBuf> {
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let root = workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--release", "--locked", "--quiet"]);
    for b in FUNCTION_BINARIES {
        cmd.args(["-p", b]);
    }
    let status = cmd
        .status()
        .context("running cargo build --release for the function binaries")?;
    ensure!(
        status.success(),
        "cargo build --release of the functions failed"
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let dir = target.join("release");
    for b in FUNCTION_BINARIES {
        ensure!(dir.join(b).is_file(), "{} was not built", dir.join(b).display());
    }
    Ok(dir)
}

/// `cargo-lambda`: the project venv's (what the scripts install), else the one on PATH.
fn cargo_lambda() -> anyhow::Result<PathBuf> {
    let venv = workspace_root().join(".venv/bin/cargo-lambda");
    if venv.is_file() {
        return Ok(venv);
    }
    let found = std::process::Command::new("cargo-lambda")
        .arg("--version")
        .output();
    match found {
        Ok(out) if out.status.success() => Ok(PathBuf::from("cargo-lambda")),
        _ => bail!(
            "cargo-lambda is not installed: run ./scripts/test (it installs it into .venv), or \
             `python3 -m venv .venv && .venv/bin/pip install cargo-lambda==<version in scripts/lib/common.sh>`"
        ),
    }
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The environment a function gets from the stack for these resources (`bind*` in the CDK
/// stack), plus the AWS settings that point the SDK at the emulator.
pub fn function_env(resources: &Resources, emulator_endpoint: &str) -> Vec<(String, String)> {
    let mut env = vec![
        ("SHEETLOG_ENTRY_TABLE".into(), resources.entry_table.clone()),
        (
            "SHEETLOG_SEGMENT_TABLE".into(),
            resources.segment_table.clone(),
        ),
        ("SHEETLOG_BUCKET".into(), resources.bucket.clone()),
        ("AWS_ENDPOINT_URL".into(), emulator_endpoint.to_owned()),
        ("AWS_REGION".into(), "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID".into(), "test".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "test".into()),
    ];
    for (name, value) in [
        ("SHEETLOG_PENDING_TABLE", &resources.pending_table),
        ("SHEETLOG_DEDUPE_TABLE", &resources.dedupe_table),
        ("SHEETLOG_CLIENTS_TABLE", &resources.clients_table),
    ] {
        if let Some(v) = value {
            env.push((name.into(), v.clone()));
        }
    }
    env
}

/// One function: the Runtime API emulator and the binary polling it.
#[derive(Debug)]
pub struct LambdaProcess {
    watch: tokio::process::Child,
    function: tokio::process::Child,
    port: u16,
    http: reqwest::Client,
    /// When the binary was started.
    pub started: Instant,
}

impl LambdaProcess {
    /// Starts the Runtime API emulator on a free port, then `binary` against it with `env`
    /// (on top of a cleared environment: only PATH and HOME are inherited, as in Lambda).
    pub async fn start(
        binary: &Path,
        memory_mb: u32,
        env: &[(String, String)],
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let mut watch = tokio::process::Command::new(cargo_lambda()?)
            .current_dir(workspace_root())
            .args(["lambda", "watch", "--only-lambda-apis", "--ignore-changes"])
            .args(["--invoke-address", "127.0.0.1", "--invoke-port"])
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting cargo lambda watch")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if let Some(status) = watch.try_wait()? {
                bail!("cargo lambda watch exited ({status}) before listening");
            }
            ensure!(
                Instant::now() < deadline,
                "cargo lambda watch did not listen on {port} within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut cmd = tokio::process::Command::new(binary);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            .env("RUST_LOG", "warn")
            .env("AWS_LAMBDA_FUNCTION_NAME", "_")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory_mb.to_string())
            .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}/.rt"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let started = Instant::now();
        let function = cmd
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Self {
            watch,
            function,
            port,
            http: reqwest::Client::new(),
            started,
        })
    }

    /// Invokes the function synchronously (the Invoke API) with `event`; returns its answer.
    pub async fn invoke(&mut self, event: &Value) -> anyhow::Result<Value> {
        if let Some(status) = self.function.try_wait()? {
            bail!("the function process has exited ({status})");
        }
        let url = format!(
            "http://127.0.0.1:{}/2015-03-31/functions/_/invocations",
            self.port
        );
        let resp = self
            .http
            .post(url)
            .json(event)
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .context("invoking through cargo lambda watch")?;
        let status = resp.status();
        let text = resp.text().await?;
        ensure!(
            status.is_success(),
            "invocation failed with {status}: {text}"
        );
        serde_json::from_str(&text).with_context(|| format!("the answer is not JSON: {text}"))
    }

    /// The function process's peak resident set so far (`VmHWM`), in KiB (Linux).
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let pid = self.function.id()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }
}

impl Drop for LambdaProcess {
    fn drop(&mut self) {
        let _ = self.function.start_kill();
        let _ = self.watch.start_kill();
    }
}

/// An API Gateway HTTP API (payload format 2.0) event for `method path?query`, with an optional
/// JSON body and, under JWT authorization, the verified token's claims.
pub fn http_api_event(
    method: &str,
    path_and_query: &str,
    body: Option<&Value>,
    jwt_claims: Option<&Value>,
) -> Value {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let mut context = serde_json::json!({
        "accountId": "123456789012",
        "apiId": "api",
        "domainName": "api.example.com",
        "domainPrefix": "api",
        "requestId": uuid::Uuid::new_v4().to_string(),
        "routeKey": "$default",
        "stage": "$default",
        "time": "23/Nov/2026:10:00:00 +0000",
        "timeEpoch": 1_795_428_000_000_i64,
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
            "sourceIp": "192.0.2.1", "userAgent": "sheetlog-tests"},
    });
    if let Some(claims) = jwt_claims {
        context["authorizer"] = serde_json::json!({"jwt": {"claims": claims, "scopes": null}});
    }
    let mut event = serde_json::json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"content-type": "application/json", "host": "api.example.com"},
        "requestContext": context,
        "isBase64Encoded": false,
    });
    if let Some(body) = body {
        event["body"] = Value::String(body.to_string());
    }
    event
}

/// The JSON body of an HTTP API answer (`{"statusCode", "headers", "body", ...}`).
pub fn http_body(answer: &Value) -> anyhow::Result<Value> {
    let body = answer["body"]
        .as_str()
        .with_context(|| format!("no body in {answer}"))?;
    let text = if answer["isBase64Encoded"] == Value::Bool(true) {
        use base64::Engine as _;
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(body)?)?
    } else {
        body.to_owned()
    };
    Ok(serde_json::from_str(&text)?)
}

/// Every record in the Entry table's stream so far, as the DynamoDB stream event Lambda would
/// deliver (the same conversion the local stream driver applies).
pub async fn entry_stream_event(
    sdk: &aws_config::SdkConfig,
    entry_table: &str,
) -> anyhow::Result<Value> {
    let dynamo = aws_sdk_dynamodb::Client::new(sdk);
    let streams = aws_sdk_dynamodbstreams::Client::new(sdk);
    let arn = dynamo
        .describe_table()
        .table_name(entry_table)
        .send()
        .await?
        .table
        .and_then(|t| t.latest_stream_arn)
        .context("the Entry table has no stream")?;
    let desc = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await?
        .stream_description
        .context("no stream description")?;
    let mut records = Vec::new();
    for shard in desc.shards() {
        let Some(id) = shard.shard_id() else {
            continue;
        };
        let mut iterator = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(id)
            .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
            .send()
            .await?
            .shard_iterator;
        while let Some(it) = iterator {
            let out = streams.get_records().shard_iterator(it).send().await?;
            if out.records().is_empty() {
                break;
            }
            records.extend(
                out.records()
                    .iter()
                    .filter_map(|r| sheetlog_pipeline::stream::convert_record(r, &arn)),
            );
            iterator = out.next_shard_iterator;
        }
    }
    Ok(serde_json::json!({ "Records": records }))
}
