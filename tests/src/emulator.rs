//! A moto server for tests. Each [`Emulator`] starts its own process on a free loopback port and
//! stops it when dropped, unless `SHEETLOG_EMULATOR_URL` names one to share (then tests rely on
//! unique resource names to stay apart). The code under test only ever sees an endpoint URL and
//! dummy credentials, exactly as it would see AWS.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// Environment variable naming an already running emulator to reuse.
pub const EMULATOR_URL_VAR: &str = "SHEETLOG_EMULATOR_URL";

/// Serialises the one-time install so parallel tests don't race to create the venv.
static INSTALL: Mutex<()> = Mutex::new(());

#[derive(Debug)]
pub struct Emulator {
    endpoint: String,
    child: Option<Child>,
}

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

impl Emulator {
    /// Starts a fresh emulator, or connects to the one in `SHEETLOG_EMULATOR_URL`.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(&[])
    }

    /// An emulator of its own (never a shared one) whose Python switches threads every
    /// microsecond, so any race inside moto shows up at once rather than once in a thousand runs.
    pub fn start_racy() -> anyhow::Result<Self> {
        Self::spawn(&[("SHEETLOG_MOTO_SWITCH_INTERVAL", "1e-6")])
    }

    fn start_with(env: &[(&str, &str)]) -> anyhow::Result<Self> {
        if let Ok(url) = std::env::var(EMULATOR_URL_VAR)
            && !url.is_empty()
        {
            return Ok(Self {
                endpoint: url.trim_end_matches('/').to_owned(),
                child: None,
            });
        }
        Self::spawn(env)
    }

    fn spawn(env: &[(&str, &str)]) -> anyhow::Result<Self> {
        let root = workspace_root();
        let server = root.join(".venv/bin/moto_server");
        let python = root.join(".venv/bin/python");
        // moto with each DynamoDB request applied atomically, as DynamoDB applies a conditional
        // write (plain moto can let two racing conditional puts both succeed).
        let launcher = root.join("scripts/lib/moto_server.py");
        {
            let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
            if !server.exists() {
                let status = Command::new(root.join("scripts/emulator"))
                    .arg("--install-only")
                    .status()
                    .context("running scripts/emulator --install-only")?;
                if !status.success() {
                    bail!("scripts/emulator --install-only failed: {status}");
                }
            }
        }
        // Ask the OS for a free port. Another process could take it before moto binds; starting
        // fails loudly in that case rather than talking to someone else's server.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(&python)
            .arg(&launcher)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", launcher.display()))?;
        let emulator = Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            child: Some(child),
        };
        emulator.wait_ready(SocketAddr::from(([127, 0, 0, 1], port)))?;
        Ok(emulator)
    }

    fn wait_ready(&self, addr: SocketAddr) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("emulator did not listen on {addr} within 30 s")
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// SDK configuration pointed at the emulator with dummy credentials.
    pub async fn sdk_config(&self) -> SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(&self.endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "emulator"))
            .load()
            .await
    }

    pub async fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk_config().await)
    }

    /// An S3 client using path-style addressing (the emulator has no per-bucket host names).
    pub async fn s3(&self) -> aws_sdk_s3::Client {
        sheetlog_core::aws::s3_client(&self.sdk_config().await)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A resource-name prefix unique to one test: lowercase letters, digits and dashes, valid for
/// both DynamoDB tables and S3 buckets.
pub fn unique_prefix(label: &str) -> String {
    let clean: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(24)
        .collect();
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("t-{clean}-{}", &id[..10])
}

/// An SDK client interceptor that counts every request sent (each retry too): what a test or a
/// benchmark reads on the wire rather than computes.
#[derive(Debug, Clone, Default)]
pub struct RequestCount(Arc<AtomicU64>);

impl RequestCount {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Intercept for RequestCount {
    fn name(&self) -> &'static str {
        "RequestCount"
    }
    fn read_before_transmit(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
