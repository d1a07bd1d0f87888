//! Black-box test of Cognito sign-in on the local stack: the real `sheetlog dev --auth cognito`
//! process (a user pool with demo users on the emulator, the local JWT authorizer verifying the
//! pool's tokens, access from the catalog), driven with the CLI itself: `login`, `logs create`,
//! `share`, `sheets`, `set`, `logout`. `login` signs in with Cognito's SRP flow, which the
//! emulator checks (scripts/lib/moto_server.py): a wrong password is refused.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use anyhow::Context;
use reqwest::StatusCode;
use serde_json::Value;
use sheetlog_local::local_cognito::{DEMO_PASSWORD, DEMO_USERS};

mod common;
use common::DevProcess;

struct DevStack(DevProcess);

impl DevStack {
    async fn start() -> anyhow::Result<Self> {
        let args = ["--auth", "cognito", "--catalog-cache-secs", "1"];
        let ready = ("/config.json", StatusCode::OK);
        Ok(Self(DevProcess::start("cognito", &args, &[], ready).await?))
    }

    /// Runs the CLI against the stack with `config` as its config directory.
    async fn cli(&self, config: &Path, args: &[&str]) -> anyhow::Result<Output> {
        self.cli_with_password(config, args, DEMO_PASSWORD).await
    }

    async fn cli_with_password(
        &self,
        config: &Path,
        args: &[&str],
        password: &str,
    ) -> anyhow::Result<Output> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sheetlog"));
        cmd.args(["--api", &self.0.base])
            .args(args)
            .env("XDG_CONFIG_HOME", config)
            .env("SHEETLOG_PASSWORD", password)
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
    let config: Value = reqwest::get(format!("{}/config.json", stack.0.base))
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
        saved["apis"][&stack.0.base]["refreshToken"].is_string(),
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

#[tokio::test]
async fn a_wrong_password_signs_no_one_in() -> anyhow::Result<()> {
    let stack = DevStack::start().await?;
    let config = tempfile::tempdir()?;
    for wrong in ["Sheetlog-demo-2", "sheetlog-demo-1", ""] {
        let out = stack
            .cli_with_password(config.path(), &["login", "--email", DEMO_USERS[0]], wrong)
            .await?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{wrong:?} signed in");
        assert!(
            stderr.contains("NotAuthorizedException") || wrong.is_empty(),
            "{wrong:?}: {stderr}"
        );
        assert!(
            !config
                .path()
                .join("sheetlog")
                .join("credentials.json")
                .exists(),
            "a refused sign-in stores nothing"
        );
    }
    // The right one still signs in afterwards (the refusals locked nothing).
    stack
        .ok(config.path(), &["login", "--email", DEMO_USERS[0]])
        .await?;
    assert!(
        config
            .path()
            .join("sheetlog")
            .join("credentials.json")
            .exists()
    );
    Ok(())
}

/// The code an authenticator app shows for `key` (base32, as Cognito hands it out): RFC 6238,
/// SHA-1, six digits, 30-second steps. Waits for the next step when this one ends within two
/// seconds, so the code is still current when the pool checks it.
fn totp(key: &str) -> anyhow::Result<String> {
    let secret = totp_rs::Secret::try_from_base32(key.trim().to_uppercase())
        .map_err(|e| anyhow::anyhow!("the key {key:?} is not base32: {e:?}"))?;
    let app = totp_rs::Builder::new()
        .with_algorithm(totp_rs::Algorithm::SHA1)
        .with_digits(6)
        .with_step_duration(30)
        .with_secret(secret)
        .build_noncompliant();
    if app.ttl() <= 2 {
        std::thread::sleep(std::time::Duration::from_secs(app.ttl() + 1));
    }
    Ok(app.generate_current().to_string())
}

/// With the template's `cognitoMfa=required` (issue 42: every sign-in then asked for MFA, which
/// the page refused and the CLI sent to the page, so nobody could sign in), the local pool asks
/// each person to set up an authenticator app at their first sign-in, as the deployed pool
/// does. `sheetlog login` shows the key, takes the app's code on stdin and signs in; a wrong code
/// is refused; the next sign-in asks for the app's code.
#[tokio::test]
async fn login_sets_up_and_answers_an_authenticator_app_when_mfa_is_required() -> anyhow::Result<()>
{
    use std::io::{BufRead, Read, Write};
    let args = [
        "--auth",
        "cognito",
        "-c",
        "cognitoMfa=required",
        "--catalog-cache-secs",
        "1",
    ];
    let ready = ("/config.json", StatusCode::OK);
    let stack = DevStack(DevProcess::start("cognito-mfa", &args, &[], ready).await?);
    let alice = tempfile::tempdir()?;
    let login = |code: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sheetlog"));
        cmd.args(["--api", &stack.0.base, "login", "--email", DEMO_USERS[0]])
            .env("XDG_CONFIG_HOME", alice.path())
            .env("SHEETLOG_PASSWORD", DEMO_PASSWORD)
            .env_remove("SHEETLOG_TOKEN")
            .env_remove("SHEETLOG_MFA_CODE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(code) = code {
            cmd.env("SHEETLOG_MFA_CODE", code);
        }
        cmd
    };

    // A wrong code at the set-up is refused, and nothing is kept.
    let wrong = login(Some("000000")).output()?;
    assert!(!wrong.status.success(), "a wrong code signs in");
    assert!(
        !alice.path().join("sheetlog/credentials.json").exists(),
        "a refused sign-in keeps nothing"
    );

    // The first sign-in: the key is shown, the app's code is typed on stdin.
    let mut child = login(None).spawn()?;
    let mut stderr = std::io::BufReader::new(child.stderr.take().context("stderr")?);
    let mut shown = String::new();
    let key = loop {
        let mut line = String::new();
        anyhow::ensure!(
            stderr.read_line(&mut line)? > 0,
            "login ended without showing a key: {shown}"
        );
        shown.push_str(&line);
        if let Some(rest) = line.split_once("(time-based, 6 digits): ") {
            break rest.1.trim().to_owned();
        }
    };
    let code = totp(&key)?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(format!("{code}\n").as_bytes())?;
    let mut rest = String::new();
    stderr.read_to_string(&mut rest)?;
    let status = child.wait()?;
    assert!(status.success(), "the first sign-in: {shown}{rest}");
    stack.ok(alice.path(), &["logs", "create"]).await?;

    // The next sign-in asks for the app's code (here from SHEETLOG_MFA_CODE).
    let out = login(Some(&totp(&key)?)).output()?;
    assert!(
        out.status.success(),
        "the second sign-in: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = login(None).stdin(Stdio::null()).output()?;
    assert!(!out.status.success(), "a sign-in without the code");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("authenticator"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
