//! Black-box test of Cognito sign-in on the local stack: the real `sheetlog dev --auth cognito`
//! process (a user pool with demo users on the emulator, the local JWT authorizer verifying the
//! pool's tokens, access from the catalog), driven with the CLI itself: `login`, `logs create`,
//! `share`, `sheets`, `set`, `logout`.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;
use sheetlog::local_cognito::{DEMO_PASSWORD, DEMO_USERS};
use sheetlog_tests::Emulator;

struct DevStack {
    child: Child,
    base: String,
    _emulator: Emulator,
}

impl Drop for DevStack {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DevStack {
    async fn start() -> anyhow::Result<Self> {
        let emulator = Emulator::start()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let prefix = format!(
            "cognito-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let child = Command::new(env!("CARGO_BIN_EXE_sheetlog"))
            .args(["dev", "--auth", "cognito", "--catalog-cache-secs", "1"])
            .args(["--port", &port.to_string(), "--prefix", &prefix])
            .env("AWS_ENDPOINT_URL", emulator.endpoint())
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_PROFILE")
            .env_remove("SHEETLOG_SYNC_WRITES")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut stack = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _emulator: emulator,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = stack.child.try_wait()? {
                anyhow::bail!("sheetlog dev exited: {status}");
            }
            if let Ok(r) = reqwest::get(format!("{}/config.json", stack.base)).await
                && r.status() == StatusCode::OK
            {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "sheetlog dev did not start");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(stack)
    }

    /// Runs the CLI against the stack with `config` as its config directory.
    async fn cli(&self, config: &Path, args: &[&str]) -> anyhow::Result<Output> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sheetlog"));
        cmd.args(["--api", &self.base])
            .args(args)
            .env("XDG_CONFIG_HOME", config)
            .env("SHEETLOG_PASSWORD", DEMO_PASSWORD)
            .env_remove("SHEETLOG_TOKEN")
            .stdin(Stdio::null());
        Ok(tokio::task::spawn_blocking(move || cmd.output()).await??)
    }

    async fn ok(&self, config: &Path, args: &[&str]) -> anyhow::Result<String> {
        let out = self.cli(config, args).await?;
        anyhow::ensure!(
            out.status.success(),
            "sheetlog {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    }
}

#[tokio::test]
async fn people_sign_in_share_and_list_sheets_with_the_cli() -> anyhow::Result<()> {
    let stack = DevStack::start().await?;
    let alice = tempfile::tempdir()?;
    let bob = tempfile::tempdir()?;
    let config: Value = reqwest::get(format!("{}/config.json", stack.base))
        .await?
        .json()
        .await?;
    assert_eq!(config["auth"], "cognito", "{config}");

    // Not signed in: the authorizer's 401, whatever the command.
    assert!(
        !stack
            .cli(alice.path(), &["logs", "create"])
            .await?
            .status
            .success()
    );

    stack
        .ok(alice.path(), &["login", "--email", DEMO_USERS[0]])
        .await?;
    stack
        .ok(bob.path(), &["login", "--email", DEMO_USERS[1]])
        .await?;
    let file = alice.path().join("sheetlog").join("credentials.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file)?.permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o600,
            "the refresh token is readable by its owner only"
        );
    }
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
    assert!(
        saved["apis"][&stack.base]["refreshToken"].is_string(),
        "{saved}"
    );

    let log = stack.ok(alice.path(), &["logs", "create"]).await?;
    let log = log.trim();
    stack.ok(alice.path(), &["set", log, "A1=1"]).await?;
    // Bob is no member yet: neither listed nor allowed.
    assert_eq!(
        stack.ok(bob.path(), &["sheets", "--json"]).await?.trim(),
        ""
    );
    assert!(
        !stack
            .cli(bob.path(), &["set", log, "A1=2"])
            .await?
            .status
            .success()
    );

    stack
        .ok(
            alice.path(),
            &["share", log, DEMO_USERS[1], "--role", "viewer"],
        )
        .await?;
    let listed: Value =
        serde_json::from_str(stack.ok(bob.path(), &["sheets", "--json"]).await?.trim())?;
    assert_eq!(listed["logId"], log, "{listed}");
    assert_eq!(listed["role"], "viewer", "{listed}");
    assert_eq!(listed["name"], "Untitled", "{listed}");
    let refused = stack.cli(bob.path(), &["set", log, "A1=2"]).await?;
    assert!(!refused.status.success(), "a viewer cannot write");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    stack.ok(bob.path(), &["history", log]).await?;

    stack
        .ok(
            alice.path(),
            &["share", log, DEMO_USERS[1], "--role", "editor"],
        )
        .await?;
    stack.ok(bob.path(), &["set", log, "A1=2"]).await?;

    stack.ok(bob.path(), &["logout"]).await?;
    assert!(
        !stack
            .cli(bob.path(), &["history", log])
            .await?
            .status
            .success()
    );
    Ok(())
}
