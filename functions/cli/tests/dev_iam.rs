//! Black-box tests of IAM authorization, the mode a stack deploys with by default: the
//! `sheetlog dev --auth iam` process (API Gateway's SigV4 check in front of the API) on the
//! emulator, requests signed by the CLI's `--iam` and by the demo users' keys.

use std::process::Command;

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_core::sigv4::Signer;
use sheetlog_local::local_iam::DEMO_USERS;

mod common;
use common::DevProcess;

async fn start(label: &str) -> anyhow::Result<DevProcess> {
    // Up once the authorizer answers: 403 for a data route without a signature (`/health` is
    // open, as on the deployed stack).
    DevProcess::start(
        label,
        &["--auth", "iam", "--sync-writes", "direct"],
        &[],
        ("/logs", StatusCode::FORBIDDEN),
    )
    .await
}

/// A demo user's (access key, secret).
fn user(name: &str) -> (&'static str, &'static str) {
    DEMO_USERS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, k, s)| (*k, *s))
        .unwrap_or_default()
}

/// A request to the local API signed with `key`/`secret` for `execute-api` in us-east-1, as
/// the CLI and the AWS SDKs sign one.
async fn signed(
    base: &str,
    (key, secret): (&str, &str),
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(StatusCode, Value)> {
    let signer = Signer::new(
        SharedCredentialsProvider::new(Credentials::new(key, secret, None, None, "test")),
        "us-east-1",
        "execute-api",
    );
    let url = format!("{base}{path}");
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let host = reqwest::Url::parse(&url)?
        .host_str()
        .map(str::to_owned)
        .unwrap_or_default();
    let port = reqwest::Url::parse(&url)?.port().unwrap_or(80);
    let host = format!("{host}:{port}");
    let base_headers = [
        ("content-type", "application/json"),
        ("host", host.as_str()),
    ];
    let added = signer
        .headers(method, &url, base_headers.iter().copied(), bytes.as_bytes())
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let mut req = reqwest::Client::new()
        .request(reqwest::Method::from_bytes(method.as_bytes())?, &url)
        .header("content-type", "application/json")
        .body(bytes);
    for (k, v) in added {
        req = req.header(k, v);
    }
    let resp = req.send().await?;
    let status = resp.status();
    let text = resp.text().await?;
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

/// `sheetlog --iam ARGS` as `key`/`secret`: (success, stdout, stderr).
async fn cli(
    base: &str,
    (key, secret): (&str, &str),
    args: &[&str],
) -> anyhow::Result<(bool, String, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sheetlog"));
    cmd.args(["--api", base, "--iam"])
        .args(args)
        .env("AWS_ACCESS_KEY_ID", key)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE");
    let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[tokio::test]
async fn only_signed_requests_of_known_users_pass_and_each_is_its_own_caller() -> anyhow::Result<()>
{
    let dev = start("iam-callers").await?;
    let base = dev.base.as_str();

    // The CLI's --iam signs for the local stack as it does for a deployment.
    let alice = user("alice");
    let (ok, out, err) = cli(base, alice, &["logs", "create"]).await?;
    anyhow::ensure!(ok, "logs create: {err}");
    let log = out.trim().to_owned();
    let (ok, _, err) = cli(base, alice, &["set", &log, "A1=42", "B1=hello"]).await?;
    anyhow::ensure!(ok, "set: {err}");
    let (ok, csv, err) = cli(base, alice, &["export", &log]).await?;
    anyhow::ensure!(ok, "export: {err}");
    assert!(csv.starts_with("42,hello"), "{csv}");

    // Unsigned, signed with the wrong secret, by a key nobody has: API Gateway's 403.
    let (status, v) = sheetlog_tests::api::send_json(
        reqwest::Client::new().get(format!("{base}/logs/{log}/cells?range=A1:B1")),
        None,
    )
    .await?;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(v["message"], "Missing Authentication Token");
    let (status, v) = signed(
        base,
        (alice.0, "not-her-secret"),
        "GET",
        &format!("/logs/{log}/cells?range=A1:B1"),
        None,
    )
    .await?;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        v["message"]
            .as_str()
            .unwrap_or_default()
            .contains("signature we calculated"),
        "{v}"
    );
    let (status, _) = signed(base, ("AKIANOBODY0000000001", "x"), "GET", "/logs", None).await?;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (ok, _, err) = cli(base, (alice.0, "not-her-secret"), &["export", &log]).await?;
    assert!(!ok && err.contains("403"), "{err}");

    // The open routes need no signature, as deployed.
    let health = reqwest::get(format!("{base}/health")).await?;
    assert_eq!(health.status(), StatusCode::OK);

    // Each signer is its own caller: a sync client group belongs to whoever first used it.
    let push = |client: &str, id: u64| {
        json!({"pushVersion": 1, "clientGroupID": "g-alice", "profileID": "p", "schemaVersion": "",
               "mutations": [{"clientID": client, "id": id, "name": "set",
                              "args": {"cells": [{"ref": "C1", "value": id}]}}]})
    };
    let path = format!("/logs/{log}/replicache/push");
    let (status, v) = signed(base, alice, "POST", &path, Some(push("ca", 1))).await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, v) = signed(base, user("bob"), "POST", &path, Some(push("cb", 1))).await?;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "client-group-forbidden", "{v}");

    // Two sessions of one assumed role (the session name changes at every credential refresh
    // on EC2, ECS or Lambda) are one caller: the group the first session used stays the role's.
    let group = |client: &str, id: u64| {
        let mut p = push(client, id);
        p["clientGroupID"] = json!("g-editor");
        p
    };
    let (status, v) = signed(
        base,
        user("editor/session-1"),
        "POST",
        &path,
        Some(group("e1", 1)),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, v) = signed(
        base,
        user("editor/session-2"),
        "POST",
        &path,
        Some(group("e1", 2)),
    )
    .await?;
    assert_eq!(
        status,
        StatusCode::OK,
        "a new session of the same role: {v}"
    );
    let (status, v) = signed(base, alice, "POST", &path, Some(group("e9", 1))).await?;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    Ok(())
}
