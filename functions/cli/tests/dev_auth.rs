//! Black-box tests of access control with real tokens: the `sheetlog dev --auth jwt` process
//! (the local issuer and API Gateway's JWT authorizer in front of the API) on the emulator,
//! tokens minted by `sheetlog dev-token`, requests over HTTP with `Authorization: Bearer`.

use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_local::local_auth::IssuerKey;

mod common;
use common::DevProcess;

/// A `sheetlog dev --auth jwt` process and the directory of its issuer's key.
struct DevStack {
    process: DevProcess,
    key_dir: tempfile::TempDir,
}

impl DevStack {
    async fn start(label: &str) -> anyhow::Result<Self> {
        let key_dir = tempfile::tempdir()?;
        // Up once the authorizer answers: 401 for a data route without a token (`/health` is
        // open, as on the deployed stack: functions/api/src/open_routes.json).
        let ready = ("/sheets", StatusCode::UNAUTHORIZED);
        let envs = [("SHEETLOG_DEV_AUTH_DIR", key_dir.path())];
        // Direct pushes: the sweep checks a push's own answer (its rejected mutations and their
        // reasons), which only a direct push carries; queued pushes through `sheetlog dev` are
        // the default everywhere else (dev_cognito.rs, the web tests).
        let process = DevProcess::start(
            label,
            &["--auth", "jwt", "--sync-writes", "direct"],
            &envs,
            ready,
        )
        .await?;
        Ok(Self { process, key_dir })
    }

    /// A token from `sheetlog dev-token` for `sub` with these grants.
    async fn token(&self, sub: &str, grants: &[&str]) -> anyhow::Result<String> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sheetlog"));
        cmd.args(["--api", &self.process.base, "dev-token", "--sub", sub])
            .env("SHEETLOG_DEV_AUTH_DIR", self.key_dir.path());
        for g in grants {
            cmd.args(["--grant", g]);
        }
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        anyhow::ensure!(
            out.status.success(),
            "dev-token: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?.trim().to_owned())
    }

    async fn send(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let method = reqwest::Method::from_bytes(method.as_bytes())?;
        let mut req =
            reqwest::Client::new().request(method, format!("{}{path}", self.process.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        sheetlog_tests::api::send_json(req, body).await
    }

    async fn create_log(&self, token: &str) -> anyhow::Result<String> {
        let (status, v) = self.send(Some(token), "POST", "/logs", None).await?;
        anyhow::ensure!(status == StatusCode::CREATED, "{status}: {v}");
        v["logId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("no logId in {v}"))
    }
}

fn assert_forbidden(status: StatusCode, v: &Value, what: &str) {
    assert_eq!(status, StatusCode::FORBIDDEN, "{what}: {v}");
    assert_eq!(v["error"]["code"], "forbidden", "{what}: {v}");
}

fn push_body(group: &str, client: &str, id: u64, cells: Value) -> Value {
    json!({"pushVersion": 1, "clientGroupID": group, "profileID": "p", "schemaVersion": "",
           "mutations": [{"clientID": client, "id": id, "name": "set", "timestamp": 1,
                          "args": {"cells": cells}}]})
}

/// What API Gateway's JWT authorizer refuses, the local one refuses: no token, a tampered
/// token, a token from another key, the wrong audience. The web page needs none.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_authorizer_refuses_what_api_gateway_refuses() -> anyhow::Result<()> {
    let dev = DevStack::start("auth-refuse").await?;
    let good = dev.token("alice", &["*"]).await?;
    assert_eq!(
        dev.send(Some(&good), "GET", "/health", None).await?.0,
        StatusCode::OK
    );
    let (status, v) = dev.send(None, "GET", "/logs/x", None).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(v, json!({"message": "Unauthorized"}));
    // A changed payload no longer matches the signature.
    let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
    parts[1] = parts[1].replacen('e', "f", 1);
    let tampered = parts.join(".");
    assert_eq!(
        dev.send(Some(&tampered), "POST", "/logs", None).await?.0,
        StatusCode::UNAUTHORIZED
    );
    // The same issuer URL and claims, signed with a key the issuer's JWKS does not list.
    let real = IssuerKey::load(&dev.key_dir.path().join("issuer-key.json"))?;
    let forged = IssuerKey::generate(&real.issuer, &real.access_claim)?;
    let forged = forged.mint("alice", "*", 600)?;
    assert_eq!(
        dev.send(Some(&forged), "POST", "/logs", None).await?.0,
        StatusCode::UNAUTHORIZED
    );
    // Another audience.
    let mut other = real.clone();
    other.audience = "another-app".into();
    let other = other.mint("alice", "*", 600)?;
    assert_eq!(
        dev.send(Some(&other), "POST", "/logs", None).await?.0,
        StatusCode::UNAUTHORIZED
    );
    // The web page's routes carry no authorizer.
    assert_eq!(dev.send(None, "GET", "/", None).await?.0, StatusCode::OK);
    Ok(())
}

/// A token for sheet A alone: every route of sheet B (from the OpenAPI document), a replay of B
/// into A whether or not B exists, and a fork of B all answer 403; a push as another user's
/// client group is 403; a 4.8 MB mutation is rejected and leaves the sheet as it was.
#[tokio::test(flavor = "multi_thread")]
async fn a_token_for_one_sheet_reaches_no_other() -> anyhow::Result<()> {
    let dev = DevStack::start("auth-sweep").await?;
    let admin = dev.token("admin", &["*"]).await?;
    let a = dev.create_log(&admin).await?;
    let b = dev.create_log(&admin).await?;
    let (status, _) = dev
        .send(
            Some(&admin),
            "POST",
            &format!("/logs/{b}/entries"),
            Some(json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": "secret"}]}})),
        )
        .await?;
    assert_eq!(status, StatusCode::CREATED);
    let alice = dev.token("alice", &[&a, "create"]).await?;

    // Every route of B in the OpenAPI document.
    let (_, doc) = dev.send(Some(&admin), "GET", "/openapi.json", None).await?;
    let paths = doc["paths"]
        .as_object()
        .ok_or_else(|| anyhow::anyhow!("no paths in {doc}"))?;
    let mut checked = 0;
    for (path, item) in paths {
        if !path.starts_with("/logs/{logId}") {
            continue;
        }
        let concrete = path
            .replace("{logId}", &b)
            .replace("{uploadId}", "1")
            .replace("{clientId}", "c1")
            .replace("{id}", "1");
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let (status, v) = dev
                .send(
                    Some(&alice),
                    &method.to_uppercase(),
                    &concrete,
                    Some(json!({})),
                )
                .await?;
            assert_forbidden(status, &v, &format!("{method} {path}"));
            checked += 1;
        }
    }
    assert!(
        checked >= 12,
        "only {checked} routes of a log in the document"
    );

    // Replay of B (and of a log that does not exist) into A, and a fork of B.
    for source in [b.clone(), uuid::Uuid::new_v4().to_string()] {
        let (status, v) = dev
            .send(
                Some(&alice),
                "POST",
                &format!("/logs/{a}/replay"),
                Some(json!({"source": source, "from": 0, "to": 10})),
            )
            .await?;
        assert_forbidden(status, &v, "replay");
    }
    let (status, v) = dev
        .send(
            Some(&alice),
            "POST",
            "/logs",
            Some(json!({"from": {"logId": b, "seq": 1}})),
        )
        .await?;
    assert_forbidden(status, &v, "fork");

    // Another user with write access to A cannot push as Alice's client group.
    let push = format!("/logs/{a}/replicache/push");
    let cells = json!([{"ref": "B1", "value": 1}]);
    let (status, v) = dev
        .send(
            Some(&alice),
            "POST",
            &push,
            Some(push_body("g-alice", "c-alice", 1, cells)),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    let bob = dev.token("bob", &[&a]).await?;
    let cells = json!([{"ref": "B1", "value": 2}]);
    let (status, v) = dev
        .send(
            Some(&bob),
            "POST",
            &push,
            Some(push_body("g-alice", "c-alice", 2, cells)),
        )
        .await?;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "client-group-forbidden", "{v}");

    // A 4.8 MB mutation: rejected with the entry-size reason, and no cell of it lands.
    let (_, before) = dev
        .send(
            Some(&alice),
            "GET",
            &format!("/logs/{a}/cells?range=A1:A1000"),
            None,
        )
        .await?;
    let big: Vec<Value> = (1..=1000)
        .map(|r| json!({"ref": format!("A{r}"), "value": "x".repeat(4_800)}))
        .collect();
    let (status, v) = dev
        .send(
            Some(&alice),
            "POST",
            &push,
            Some(push_body("g-alice", "c-alice", 2, Value::Array(big))),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["applied"], 0, "{v}");
    let reason = v["rejected"][0]["error"].as_str().unwrap_or_default();
    assert!(reason.starts_with("entry-too-large"), "{v}");
    let (_, after) = dev
        .send(
            Some(&alice),
            "GET",
            &format!("/logs/{a}/cells?range=A1:A1000"),
            None,
        )
        .await?;
    assert_eq!(before["values"], after["values"], "the sheet changed");

    // Deleting: a writer who did not create the sheet may not; the creator (here a `*` token)
    // may, and the sheet then answers 410 on every route.
    let (status, v) = dev
        .send(Some(&bob), "DELETE", &format!("/logs/{a}"), None)
        .await?;
    assert_forbidden(status, &v, "delete by a plain writer");
    let (status, v) = dev
        .send(Some(&admin), "DELETE", &format!("/logs/{b}"), None)
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["done"], true, "{v}");
    let (status, v) = dev
        .send(Some(&admin), "GET", &format!("/logs/{b}/entries"), None)
        .await?;
    assert_eq!(status, StatusCode::GONE, "{v}");
    assert_eq!(v["error"]["code"], "log-deleted", "{v}");
    Ok(())
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next message of the local Event API that is not a keep-alive, within 5 s.
async fn next_event_message(ws: &mut Ws) -> anyhow::Result<Value> {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .map_err(|_| anyhow::anyhow!("no message within 5 s"))?
            .ok_or_else(|| anyhow::anyhow!("the connection closed"))??;
        if let Message::Text(t) = m {
            let v: Value = serde_json::from_str(t.as_str())?;
            if v["type"] != "ka" {
                return Ok(v);
            }
        }
    }
}

/// A subscription to the dev stack's Event API as the web page makes it: the bare token in the
/// connection's `header-…` subprotocol and in the subscribe message's authorization. The
/// answer: `subscribe_success` or `subscribe_error`.
async fn subscribe_as(dev: &DevStack, token: &str, channel: &str) -> anyhow::Result<Value> {
    subscribe_with(dev, token, channel)
        .await
        .map(|(_, answer)| answer)
}

/// A subscription whose `Authorization` field is `authorization`, as written.
async fn subscribe_with(
    dev: &DevStack,
    authorization: &str,
    channel: &str,
) -> anyhow::Result<(Ws, Value)> {
    use base64::Engine;
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};
    let host = dev.process.base.trim_start_matches("http://").to_owned();
    let auth = json!({"host": host, "Authorization": authorization});
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(auth.to_string());
    let mut req = format!("ws://{host}/event/realtime").into_client_request()?;
    req.headers_mut().insert(
        "sec-websocket-protocol",
        format!("aws-appsync-event-ws, header-{header}").parse()?,
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    ws.send(Message::Text(
        json!({"type": "connection_init"}).to_string().into(),
    ))
    .await?;
    let ack = next_event_message(&mut ws).await?;
    anyhow::ensure!(ack["type"] == "connection_ack", "{ack}");
    let subscribe = json!({"type": "subscribe", "id": "s1", "channel": channel,
                           "authorization": auth});
    ws.send(Message::Text(subscribe.to_string().into())).await?;
    let answer = next_event_message(&mut ws).await?;
    Ok((ws, answer))
}

/// The local Event API runs the template's onSubscribe handler (`sheetlog_local::local_appsync`): a
/// token that
/// grants sheet X joins X's poke channel and is refused Y's.
#[tokio::test(flavor = "multi_thread")]
async fn a_token_for_one_sheet_cannot_subscribe_to_another_sheets_pokes() -> anyhow::Result<()> {
    let dev = DevStack::start("auth-pokes").await?;
    let admin = dev.token("admin", &["*"]).await?;
    let x = dev.create_log(&admin).await?;
    let y = dev.create_log(&admin).await?;
    let reader = dev.token("reader", &[&format!("{x}:read")]).await?;

    let (mut ws, ok) = subscribe_with(&dev, &reader, &format!("/sheets/{x}")).await?;
    assert_eq!(ok, json!({"type": "subscribe_success", "id": "s1"}));
    // An edit's poke reaches the subscriber through the template's onPublish handler, which
    // the local Event API runs on every publish (under Node, as the onSubscribe handler).
    let (status, v) = dev
        .send(
            Some(&admin),
            "POST",
            &format!("/logs/{x}/replicache/push"),
            Some(push_body("g-poke", "c-poke", 1, json!({"A1": "1"}))),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    let data = next_event_message(&mut ws).await?;
    assert_eq!(data["type"], "data", "{data}");
    let poke: Value = serde_json::from_str(data["event"].as_str().unwrap_or_default())?;
    assert!(poke["seq"].as_u64().is_some_and(|s| s >= 1), "{data}");
    let refused = subscribe_as(&dev, &reader, &format!("/sheets/{y}")).await?;
    assert_eq!(refused["type"], "subscribe_error", "{refused}");
    assert_eq!(refused["id"], "s1", "{refused}");
    // A token that is not the issuer's is refused even the channel it names.
    let real = IssuerKey::load(&dev.key_dir.path().join("issuer-key.json"))?;
    let forged = IssuerKey::generate(&real.issuer, &real.access_claim)?.mint("eve", &x, 600)?;
    let refused = subscribe_as(&dev, &forged, &format!("/sheets/{x}")).await?;
    assert_eq!(refused["type"], "subscribe_error", "{refused}");
    Ok(())
}

/// AppSync Events takes the bare JWT for OIDC and Cognito authorization; with API Gateway's
/// `Bearer ` scheme in front it cannot parse the token and refuses the subscription. The local
/// stand-in does the same, so a client that sends the prefix fails here as it would deployed.
#[tokio::test(flavor = "multi_thread")]
async fn a_bearer_prefixed_poke_subscription_is_refused_as_appsync_refuses_it() -> anyhow::Result<()>
{
    let dev = DevStack::start("auth-bearer").await?;
    let admin = dev.token("admin", &["*"]).await?;
    let x = dev.create_log(&admin).await?;
    let channel = format!("/sheets/{x}");
    let (_, refused) = subscribe_with(&dev, &format!("Bearer {admin}"), &channel).await?;
    assert_eq!(refused["type"], "subscribe_error", "{refused}");
    let (_, ok) = subscribe_with(&dev, &admin, &channel).await?;
    assert_eq!(ok, json!({"type": "subscribe_success", "id": "s1"}));
    Ok(())
}
