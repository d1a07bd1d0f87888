//! The API for black-box tests: by default the real router served over HTTP on a loopback port in
//! this process, on a fresh emulator stack; with `SHEETLOG_API_URL` set, an already running
//! deployment (the local stack, or a sandbox stack from `scripts/integ`).

use std::sync::Arc;

/// The API's settings, for [`TestApi::start_with`].
pub use sheetlog_api::ApiConfig;
use sheetlog_api::AppState;
use sheetlog_core::config::LogConfig;
use tokio::task::JoinHandle;

use crate::stack::TestStack;

pub const API_URL_VAR: &str = "SHEETLOG_API_URL";
/// `sigv4` to sign every request (a deployment with IAM authorization).
pub const API_AUTH_VAR: &str = "SHEETLOG_API_AUTH";

/// The HTTP client tests use: plain, or signing with SigV4 when `SHEETLOG_API_AUTH=sigv4`.
pub type ApiClient = reqwest_middleware::ClientWithMiddleware;

#[derive(Debug)]
pub struct TestApi {
    /// Base URL without a trailing slash.
    pub base: String,
    /// The stack behind the API when it runs in this process (lets tests reach past the API,
    /// e.g. to complete a snapshot); `None` against an external deployment.
    pub stack: Option<TestStack>,
    /// The server (and pipeline) tasks, aborted on drop.
    tasks: Vec<JoinHandle<()>>,
}

impl TestApi {
    /// The API under test with default settings.
    pub async fn start(label: &str) -> anyhow::Result<Self> {
        Self::start_with(label, ApiConfig::default()).await
    }

    /// In-process API with the given settings (ignored for an external deployment).
    pub async fn start_with(label: &str, cfg: ApiConfig) -> anyhow::Result<Self> {
        Self::start_with_log(label, LogConfig::default(), cfg).await
    }

    /// In-process API with the given event-log and API settings (ignored for an external
    /// deployment).
    pub async fn start_with_log(
        label: &str,
        log_cfg: LogConfig,
        cfg: ApiConfig,
    ) -> anyhow::Result<Self> {
        if let Ok(url) = std::env::var(API_URL_VAR)
            && !url.is_empty()
        {
            return Ok(Self {
                base: url.trim_end_matches('/').to_owned(),
                stack: None,
                tasks: Vec::new(),
            });
        }
        let stack = TestStack::new(label).await?;
        let sdk = stack.roles(&[], None, None).await?.api;
        let state = AppState::from_sdk(&sdk, &stack.resources, log_cfg, cfg)?;
        let (base, server) = serve(sheetlog_api::router(Arc::new(state))).await?;
        Ok(Self {
            base,
            stack: Some(stack),
            tasks: vec![server],
        })
    }

    /// In-process API behind the local API Gateway stand-in (`sheetlog_local::local_gateway`) with
    /// `gateway`'s settings: the stage's throttle and joined headers in front, Lambda's event
    /// size limit and the function's timeout around the router. `None` against an external
    /// deployment (which has the real gateway).
    pub async fn start_behind_gateway(
        label: &str,
        cfg: ApiConfig,
        gateway: &sheetlog_local::local_gateway::GatewaySettings,
    ) -> anyhow::Result<Option<Self>> {
        Self::start_wrapped(label, cfg, |app| {
            let app = sheetlog_local::local_gateway::invocation(app, gateway);
            sheetlog_local::local_gateway::front(app, gateway)
        })
        .await
    }

    /// In-process API behind a stand-in for API Gateway's IAM authorization: a request's
    /// [`IAM_CALLER_HEADER`] (the caller's ARN, as API Gateway would have verified it from the
    /// SigV4 signature) becomes the request context `lambda_http` gives the router in AWS
    /// (`requestContext.authorizer.iam.userArn`). `None` against an external deployment.
    pub async fn start_with_iam_callers(
        label: &str,
        cfg: ApiConfig,
    ) -> anyhow::Result<Option<Self>> {
        Self::start_wrapped(label, cfg, |app| {
            app.layer(axum::middleware::map_request(iam_authorizer_context))
        })
        .await
    }

    /// In-process API behind a stand-in for API Gateway's JWT authorizer: a request's
    /// [`JWT_CLAIMS_HEADER`] (a JSON object of claims, as a verified token would carry) becomes
    /// the request context `lambda_http` gives the router in AWS, with those claims. A request
    /// without the header has no authorizer context. `None` against an external deployment.
    pub async fn start_with_jwt_claims(
        label: &str,
        cfg: ApiConfig,
    ) -> anyhow::Result<Option<Self>> {
        Self::start_wrapped(label, cfg, |app| {
            app.layer(axum::middleware::map_request(jwt_authorizer_context))
        })
        .await
    }

    /// In-process API on a fresh stack with `wrap` around its router (a stand-in for what API
    /// Gateway does in front of the function). `None` against an external deployment.
    async fn start_wrapped(
        label: &str,
        cfg: ApiConfig,
        wrap: impl FnOnce(axum::Router) -> axum::Router,
    ) -> anyhow::Result<Option<Self>> {
        if std::env::var(API_URL_VAR).is_ok_and(|u| !u.is_empty()) {
            return Ok(None);
        }
        let stack = TestStack::new(label).await?;
        let sdk = stack.roles(&[], None, None).await?.api;
        let state = AppState::from_sdk(&sdk, &stack.resources, LogConfig::default(), cfg)?;
        let (base, server) = serve(wrap(sheetlog_api::router(Arc::new(state)))).await?;
        Ok(Some(Self {
            base,
            stack: Some(stack),
            tasks: vec![server],
        }))
    }

    /// [`start_with_jwt_claims`](Self::start_with_jwt_claims), with every AWS request the API
    /// makes sent through a [`WireCounter`](crate::wire::WireCounter) (returned) that counts
    /// requests and request units. `None` against an external deployment.
    pub async fn start_counted(
        label: &str,
        cfg: ApiConfig,
    ) -> anyhow::Result<Option<(Self, crate::wire::WireCounter)>> {
        if std::env::var(API_URL_VAR).is_ok_and(|u| !u.is_empty()) {
            return Ok(None);
        }
        let stack = TestStack::new(label).await?;
        let sdk = stack.emulator.sdk_config().await;
        let wire = crate::wire::WireCounter::start(
            stack.emulator.endpoint(),
            &stack.resources.entry_table,
        )
        .await?;
        let counted = wire.sdk_config(&sdk);
        let state = AppState::from_sdk(&counted, &stack.resources, LogConfig::default(), cfg)?;
        let app = sheetlog_api::router(Arc::new(state))
            .layer(axum::middleware::map_request(jwt_authorizer_context));
        let (base, server) = serve(app).await?;
        Ok(Some((
            Self {
                base,
                stack: Some(stack),
                tasks: vec![server],
            },
            wire,
        )))
    }

    /// In-process API whose log stores are wrapped in the fault-injecting adapter (stale reads,
    /// lost responses, throttling…, as AWS has them; or failures a test scripts, with
    /// [`Faults::scripted`](sheetlog_core::faults::Faults::scripted)). `None` against an external
    /// deployment.
    pub async fn start_with_faults(
        label: &str,
        cfg: ApiConfig,
        faults: std::sync::Arc<sheetlog_core::faults::Faults>,
    ) -> anyhow::Result<Option<Self>> {
        use sheetlog_core::faults::{FaultyLogStore, FaultyPayloadStore};
        if std::env::var(API_URL_VAR).is_ok_and(|u| !u.is_empty()) {
            return Ok(None);
        }
        let stack = TestStack::new(label).await?;
        let sdk = stack.roles(&[], None, None).await?.api;
        let state = AppState::from_sdk_wrapped(
            &sdk,
            &stack.resources,
            LogConfig::default(),
            cfg,
            move |store, payloads| {
                (
                    Arc::new(FaultyLogStore::new(store, faults.clone())),
                    Arc::new(FaultyPayloadStore::new(payloads, faults)),
                )
            },
        )?;
        let (base, server) = serve(sheetlog_api::router(Arc::new(state))).await?;
        Ok(Some(Self {
            base,
            stack: Some(stack),
            tasks: vec![server],
        }))
    }

    /// The emulator stack behind an in-process API (`None` against an external deployment).
    pub fn stack(&self) -> Option<&TestStack> {
        self.stack.as_ref()
    }

    /// A client for this API (signing requests when the deployment needs it).
    pub async fn client(&self) -> anyhow::Result<ApiClient> {
        let builder = reqwest_middleware::ClientBuilder::new(reqwest::Client::new());
        if std::env::var(API_AUTH_VAR).as_deref() == Ok("sigv4") {
            return Ok(builder.with(crate::sigv4::SigV4::from_env().await?).build());
        }
        Ok(builder.build())
    }

    /// In-process API on a full local stack (queues included) with the stream router, snapshot
    /// worker and sync writer running, as `sheetlog dev` runs them: pushes are queued (whatever
    /// `cfg.sync_writes` says). Not available against a deployment (`None`).
    pub async fn start_with_pipeline(label: &str, cfg: ApiConfig) -> anyhow::Result<Option<Self>> {
        if std::env::var(API_URL_VAR).is_ok_and(|u| !u.is_empty()) {
            return Ok(None);
        }
        let emulator = crate::Emulator::start()?;
        let sdk = emulator.sdk_config().await;
        let local =
            sheetlog_pipeline::create_local_stack(&sdk, &crate::emulator::unique_prefix(label))
                .await?;
        let roles = crate::stack::recorded_roles(&sdk, &[], |description| {
            sheetlog_pipeline::Counterparts::pair(description, &local, None)
        })
        .await?;
        let cfg = ApiConfig {
            sync_writes: sheetlog_api::SyncWrites::Queued,
            sync_queue_url: Some(local.sync_queues.queue.clone()),
            ..cfg
        };
        let writer = sheetlog_sync_writer::Handler::from_sdk(
            &roles.sync_writer,
            &local.resources,
            LogConfig::default(),
            sheetlog_sync_writer::WriterConfig {
                trigger: sheetlog_core::log::SnapshotTrigger {
                    interval: cfg.snapshot_interval,
                    segment_max_entries: cfg.segment_max_entries,
                },
                ..Default::default()
            },
        )?;
        let state = AppState::from_sdk(&roles.api, &local.resources, LogConfig::default(), cfg)?;
        let app = sheetlog_api::router(Arc::new(state));
        let pipeline_cfg = sheetlog_pipeline::LocalPipelineConfig {
            poll_interval: std::time::Duration::from_millis(50),
            stream_failure_queue: Some(local.stream_failure_queue.clone()),
            ..Default::default()
        };
        let pipeline = sheetlog_pipeline::LocalPipeline::new(
            &roles,
            &local.resources,
            &local.queues,
            pipeline_cfg,
        )?
        .with_sync_writer(&roles.sync_writer, &local.sync_queues.queue, writer);
        let pipeline = tokio::spawn(pipeline.run(std::future::pending::<()>()));
        let (base, server) = serve(app).await?;
        let stack = TestStack {
            resources: local.resources,
            dynamo: aws_sdk_dynamodb::Client::new(&sdk),
            s3: emulator.s3().await,
            emulator,
        };
        Ok(Some(Self {
            base,
            stack: Some(stack),
            tasks: vec![server, pipeline],
        }))
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
}

/// Serves `app` on a loopback port; returns its base URL and the server task.
pub async fn serve(app: axum::Router) -> anyhow::Result<(String, JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((base, server))
}

/// The header [`TestApi::start_with_jwt_claims`] reads a request's token claims from.
pub const JWT_CLAIMS_HEADER: &str = "x-test-jwt-claims";

/// Moves the claims of [`JWT_CLAIMS_HEADER`] into an API Gateway v2 request context, built from
/// the JSON API Gateway sends (`requestContext.authorizer.jwt.claims`, every value a string).
async fn jwt_authorizer_context(
    mut req: axum::extract::Request,
) -> Result<axum::extract::Request, (http::StatusCode, String)> {
    let Some(raw) = req.headers_mut().remove(JWT_CLAIMS_HEADER) else {
        return Ok(req);
    };
    let bad = |e: String| (http::StatusCode::BAD_REQUEST, e);
    let claims: std::collections::HashMap<String, String> =
        serde_json::from_slice(raw.as_bytes()).map_err(|e| bad(e.to_string()))?;
    let context = sheetlog_pipeline::authorizer::jwt_request_context(
        req.method().as_str(),
        req.uri().path(),
        &claims,
    )
    .map_err(|e| bad(e.to_string()))?;
    req.extensions_mut().insert(context);
    Ok(req)
}

/// The header [`TestApi::start_with_iam_callers`] reads a request's IAM caller ARN from.
pub const IAM_CALLER_HEADER: &str = "x-test-iam-user-arn";

/// Moves the ARN of [`IAM_CALLER_HEADER`] into an API Gateway v2 request context with the IAM
/// authorizer's part, as API Gateway writes it for a SigV4-signed request.
async fn iam_authorizer_context(
    mut req: axum::extract::Request,
) -> Result<axum::extract::Request, (http::StatusCode, String)> {
    let Some(raw) = req.headers_mut().remove(IAM_CALLER_HEADER) else {
        return Ok(req);
    };
    let bad = |e: String| (http::StatusCode::BAD_REQUEST, e);
    let arn = raw.to_str().map_err(|e| bad(e.to_string()))?.to_owned();
    let account = arn.split(':').nth(4).unwrap_or("123456789012").to_owned();
    let context = sheetlog_pipeline::authorizer::iam_request_context(
        req.method().as_str(),
        req.uri().path(),
        &account,
        &arn,
    )
    .map_err(|e| bad(e.to_string()))?;
    req.extensions_mut().insert(context);
    Ok(req)
}

impl Drop for TestApi {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// `POST /logs` on the API at `base` (no trailing slash): the new log's id.
pub async fn create_log(http: &reqwest::Client, base: &str) -> anyhow::Result<String> {
    let created: serde_json::Value = http
        .post(format!("{base}/logs"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    created
        .get("logId")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("POST /logs answered no logId: {created}"))
}

/// `POST /logs` through a test client: the new log's id, after checking the answer is `201` at
/// sequence 0. The preamble of most API tests.
pub async fn new_log(c: &ApiClient, api: &TestApi) -> anyhow::Result<String> {
    let r = c.post(api.url("/logs")).send().await?;
    anyhow::ensure!(
        r.status() == reqwest::StatusCode::CREATED,
        "POST /logs: {}",
        r.status()
    );
    let v: serde_json::Value = r.json().await?;
    anyhow::ensure!(v["seq"] == 0, "a new log at sequence 0: {v}");
    Ok(json_str(&v, "/logId").to_owned())
}

/// Every entry of a log through `GET /logs/{log}/entries`, page after page until `complete`.
pub async fn all_entries(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let v: serde_json::Value = c
            .get(api.url(&format!("/logs/{log}/entries?from={from}&limit=1000")))
            .send()
            .await?
            .json()
            .await?;
        out.extend(json_array(&v, "/entries").iter().cloned());
        from = v["nextSeq"].as_u64().unwrap_or(from);
        if v["complete"] == serde_json::json!(true) {
            return Ok(out);
        }
    }
}

/// The import benches' preamble: a new log, and an upload URL for `size` bytes of CSV to import
/// into it ([`begin_upload`]). Returns the log id and the upload answer.
pub async fn begin_import(
    c: &ApiClient,
    api: &TestApi,
    size: u64,
) -> anyhow::Result<(String, serde_json::Value)> {
    let log = new_log(c, api).await?;
    let upload = begin_upload(c, api, &log, size).await?;
    Ok((log, upload))
}

/// `POST /logs/{log}/uploads` for an import of `size` bytes of CSV: the upload answer (`url`,
/// `headers`, `uploadId`).
pub async fn begin_upload(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    size: u64,
) -> anyhow::Result<serde_json::Value> {
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads")))
        .json(&serde_json::json!({"type": "import", "contentType": "text/csv", "size": size}))
        .send()
        .await?;
    anyhow::ensure!(
        r.status() == reqwest::StatusCode::CREATED,
        "POST /logs/{log}/uploads: {}",
        r.status()
    );
    Ok(r.json().await?)
}

/// Commits an upload (`POST /logs/{log}/uploads/{uploadId}/commit`) from its upload answer.
pub async fn commit_upload(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    upload: &serde_json::Value,
) -> anyhow::Result<reqwest::Response> {
    let id = json_str(upload, "/uploadId");
    Ok(c.post(api.url(&format!("/logs/{log}/uploads/{id}/commit")))
        .send()
        .await?)
}

/// `POST /logs/{log}/entries` with a JSON body: the status and the JSON answer.
pub async fn post_entry(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    entry: serde_json::Value,
) -> anyhow::Result<(reqwest::StatusCode, serde_json::Value)> {
    let r = c
        .post(api.url(&format!("/logs/{log}/entries")))
        .json(&entry)
        .send()
        .await?;
    let status = r.status();
    Ok((status, r.json().await?))
}

/// Appends `entry` and expects `201`: its sequence.
pub async fn append_ok(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    entry: serde_json::Value,
) -> anyhow::Result<u64> {
    let (status, v) = post_entry(c, api, log, entry).await?;
    anyhow::ensure!(
        status == reqwest::StatusCode::CREATED,
        "append: {status} {v}"
    );
    v["seq"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no seq in {v}"))
}

/// Sends `req` with `body` as JSON, if any: the status and the JSON answer (`null` when the
/// answer is not JSON). The access tests' one way to call the API as a given caller.
pub async fn send_json(
    req: reqwest::RequestBuilder,
    body: Option<serde_json::Value>,
) -> anyhow::Result<(reqwest::StatusCode, serde_json::Value)> {
    let req = match body {
        Some(body) => req.json(&body),
        None => req,
    };
    let resp = req.send().await?;
    let status = resp.status();
    let text = resp.text().await?;
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    ))
}

/// As [`send_json`], for a request from the [`ApiClient`] (with its retry middleware).
pub async fn send_json_with(
    req: reqwest_middleware::RequestBuilder,
    body: Option<serde_json::Value>,
) -> anyhow::Result<(reqwest::StatusCode, serde_json::Value)> {
    let req = match body {
        Some(body) => req.json(&body),
        None => req,
    };
    let resp = req.send().await?;
    let status = resp.status();
    let text = resp.text().await?;
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    ))
}

/// The string at a JSON pointer (`/logId`, `/error/message`). A missing or mistyped field fails
/// the test with the pointer and the whole response, rather than becoming `""`.
pub fn json_str<'a>(v: &'a serde_json::Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {v}"))
}

/// The array at a JSON pointer; fails the test like [`json_str`].
pub fn json_array<'a>(v: &'a serde_json::Value, pointer: &str) -> &'a Vec<serde_json::Value> {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_array)
        .unwrap_or_else(|| panic!("no array at {pointer} in {v}"))
}

/// The object at a JSON pointer; fails the test like [`json_str`].
pub fn json_object<'a>(
    v: &'a serde_json::Value,
    pointer: &str,
) -> &'a serde_json::Map<String, serde_json::Value> {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_object)
        .unwrap_or_else(|| panic!("no object at {pointer} in {v}"))
}

/// The upload flow's first two steps: asks for an upload URL for `file` (adding its `size` to
/// `request`), then PUTs the file to it with the headers the answer lists. Returns the answer.
pub async fn upload_file(
    c: &ApiClient,
    api: &TestApi,
    log: &str,
    mut request: serde_json::Value,
    file: &[u8],
) -> anyhow::Result<serde_json::Value> {
    request["size"] = serde_json::json!(file.len());
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads")))
        .json(&request)
        .send()
        .await?;
    anyhow::ensure!(
        r.status() == reqwest::StatusCode::CREATED,
        "{}",
        r.text().await?
    );
    let u: serde_json::Value = r.json().await?;
    let status = put_upload(&u, file).await?;
    anyhow::ensure!(status.is_success(), "PUT to the upload URL: {status}");
    Ok(u)
}

/// PUTs `file` to the URL of an upload answer, with its signed headers.
pub async fn put_upload(
    upload: &serde_json::Value,
    file: &[u8],
) -> anyhow::Result<reqwest::StatusCode> {
    let mut put = reqwest::Client::new()
        .put(json_str(upload, "/url"))
        .body(file.to_vec());
    for (k, v) in json_object(upload, "/headers") {
        let v = v.as_str().unwrap_or_else(|| panic!("header {k} is {v}"));
        put = put.header(k, v);
    }
    Ok(put.send().await?.status())
}

/// The local gateway's settings from the synthesized template (`cdk/bin/local-resources.ts`,
/// run once per test process: it takes about 15 s).
pub async fn template_gateway() -> anyhow::Result<sheetlog_local::local_gateway::GatewaySettings> {
    sheetlog_local::local_gateway::GatewaySettings::from_description(template_description().await?)
}

/// The synthesized template's description with the default settings
/// ([`crate::stack::described`]: once per test process).
pub async fn template_description() -> anyhow::Result<&'static [u8]> {
    crate::stack::described(&[]).await
}
