//! The functions' built binaries under a Lambda runtime. `cargo lambda watch
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
pub const FUNCTION_BINARIES: [&str; 5] = [
    "sheetlog-api",
    "sheetlog-stream-router",
    "sheetlog-snapshot-worker",
    "sheetlog-archiver",
    "sheetlog-sync-writer",
];

/// One build at a time (tests run in parallel; Cargo would serialise them anyway).
static BUILD: Mutex<()> = Mutex::new(());

/// The Cargo profile [`build_functions`] builds with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionProfile {
    /// What is deployed: the benchmark measures sizes and start-up of these.
    Release,
    /// The dev profile, built as `cargo build --workspace --bins` (the build the local-stack
    /// scripts make anyway, so a cold `./scripts/test` compiles the dependencies once for it
    /// rather than again for a profile of their own): for tests of behaviour rather than speed.
    Dev,
}

impl FunctionProfile {
    /// The profile's name for `cargo build --profile`.
    fn name(self) -> &'static str {
        match self {
            Self::Release => "release",
            Self::Dev => "dev",
        }
    }

    /// The folder of `target/` its binaries land in.
    fn dir(self) -> &'static str {
        match self {
            Self::Release => "release",
            Self::Dev => "debug",
        }
    }
}

/// Builds every function's binary with `profile` (quick when they are up to date) and returns
/// the folder holding them. Progress goes to the terminal: a cold build takes minutes.
pub fn build_functions(profile: FunctionProfile) -> anyhow::Result<PathBuf> {
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let root = workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    // The variables Cargo sets for the process running this (a test, the bench) would reach the
    // build scripts of the nested build, and some rebuild on any change to them: the same build
    // from a test and from the bench would then keep invalidating each other. Build as from a
    // shell.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let keep = matches!(
            key.as_ref(),
            "CARGO_HOME" | "CARGO_TARGET_DIR" | "CARGO_NET_OFFLINE"
        );
        if (key.starts_with("CARGO_") || key.starts_with("__CARGO") || key == "OUT_DIR") && !keep {
            cmd.env_remove(key.as_ref());
        }
    }
    cmd.current_dir(&root)
        .args(["build", "--profile", profile.name(), "--locked", "--quiet"]);
    match profile {
        // Every binary of the workspace, so features resolve as for the scripts' own build and
        // the two share one set of artefacts.
        FunctionProfile::Dev => {
            cmd.args(["--workspace", "--bins"]);
        }
        FunctionProfile::Release => {
            for b in FUNCTION_BINARIES {
                cmd.args(["-p", b]);
            }
        }
    }
    let status = cmd.status().with_context(|| {
        format!(
            "running cargo build --profile {} for the function binaries",
            profile.name()
        )
    })?;
    ensure!(
        status.success(),
        "cargo build --profile {} of the functions failed",
        profile.name()
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let dir = target.join(profile.dir());
    for b in FUNCTION_BINARIES {
        ensure!(
            dir.join(b).is_file(),
            "{} was not built",
            dir.join(b).display()
        );
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
    /// Forwards the function's Runtime API calls to the emulator (see [`deadline_proxy`]).
    proxy: tokio::task::JoinHandle<()>,
    port: u16,
    http: reqwest::Client,
    /// When the binary was started.
    pub started: Instant,
}

impl LambdaProcess {
    /// Starts the Runtime API emulator on a free port, then `binary` against it with `env`
    /// (on top of a cleared environment: only PATH and HOME are inherited, as in Lambda).
    /// `timeout_secs` is the function's timeout: each invocation's deadline is that far off.
    pub async fn start(
        binary: &Path,
        memory_mb: u32,
        timeout_secs: u32,
        env: &[(String, String)],
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let mut watch = tokio::process::Command::new(cargo_lambda()?)
            .current_dir(workspace_root())
            .args(["lambda", "watch", "--only-lambda-apis", "--ignore-changes"])
            .args(["--invoke-address", "127.0.0.1", "--invoke-port"])
            .arg(port.to_string())
            .arg("--timeout")
            .arg(timeout_secs.to_string())
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
        let proxy_port = deadline_proxy(port, Duration::from_secs(u64::from(timeout_secs))).await?;
        let mut cmd = tokio::process::Command::new(binary);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            .env(
                "RUST_LOG",
                std::env::var("SHEETLOG_LAMBDA_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .env("AWS_LAMBDA_FUNCTION_NAME", "_")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory_mb.to_string())
            .env(
                "AWS_LAMBDA_RUNTIME_API",
                format!("http://127.0.0.1:{}/.rt", proxy_port.0),
            )
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let started = Instant::now();
        let function = cmd
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Self {
            watch,
            function,
            proxy: proxy_port.1,
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

    /// CPU time the function process has used so far (user + system), in seconds (Linux).
    pub fn cpu_seconds(&self) -> Option<f64> {
        let pid = self.function.id()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name (which may hold spaces) start at field 3; utime and
        // stime are fields 14 and 15, in clock ticks.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        // /proc reports in USER_HZ, which Linux fixes at 100 for user space.
        Some(ticks as f64 / 100.0)
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
        self.proxy.abort();
    }
}

/// cargo lambda watch hands every invocation the deadline `600000` (ten minutes after 1970), so a
/// function that plans its work by its deadline (the retention run, the snapshot worker's
/// hand-off) believes it has none left. This proxy sits between the function and the emulator
/// and sets `Lambda-Runtime-Deadline-Ms` to what Lambda sends: now plus the function's timeout.
/// Returns its port and task.
async fn deadline_proxy(
    upstream: u16,
    timeout: Duration,
) -> anyhow::Result<(u16, tokio::task::JoinHandle<()>)> {
    use axum::body::Body;
    use axum::extract::Request;
    use axum::response::Response;

    let client = reqwest::Client::new();
    let app = axum::Router::new().fallback(move |req: Request| {
        let client = client.clone();
        async move {
            let (parts, body) = req.into_parts();
            let url = format!(
                "http://127.0.0.1:{upstream}{}",
                parts.uri.path_and_query().map_or("/", |p| p.as_str())
            );
            let bytes = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            let upstream = client
                .request(parts.method, url)
                .headers(parts.headers)
                .body(bytes)
                .send()
                .await;
            let mut out = Response::builder();
            match upstream {
                Ok(r) => {
                    out = out.status(r.status());
                    for (k, v) in r.headers() {
                        if k.as_str()
                            .eq_ignore_ascii_case("lambda-runtime-deadline-ms")
                        {
                            let deadline = std::time::SystemTime::now()
                                .duration_since(std::time::UNIX_EPOCH)
                                .unwrap_or_default()
                                + timeout;
                            out = out.header(k, deadline.as_millis().to_string());
                        } else {
                            out = out.header(k, v);
                        }
                    }
                    let body = r.bytes().await.unwrap_or_default();
                    out.body(Body::from(body))
                }
                Err(e) => out.status(502).body(Body::from(e.to_string())),
            }
            .unwrap_or_else(|_| Response::new(Body::empty()))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((port, task))
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

/// The event an EventBridge schedule (the retention run's daily rule) invokes a function with.
pub fn scheduled_event() -> Value {
    serde_json::json!({
        "version": "0", "id": uuid::Uuid::new_v4().to_string(),
        "detail-type": "Scheduled Event", "source": "aws.events",
        "account": "123456789012", "time": "2026-11-23T03:00:00Z", "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/RetentionSchedule"], "detail": {}
    })
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
