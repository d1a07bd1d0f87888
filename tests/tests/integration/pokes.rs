//! The API pokes the sheet's channel after each way it commits entries: a direct append
//! (`POST /entries`), an upload commit and a Replicache push. The API publishes with its real
//! signed publisher to the local Event API (`sheetlog_pipeline::events`), and a WebSocket
//! subscriber, speaking AppSync Events' real-time protocol, sees the poke carry the log's next
//! sequence.

use std::time::Duration;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_core::poke::PokeConfig;
use sheetlog_pipeline::events::{LocalEvents, SUBPROTOCOL};
use sheetlog_tests::api::{ApiClient, TestApi, json_str, post_entry, upload_file};
use sheetlog_tests::fixtures::{push_body, set_body, set_mutation};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The local Event API on a loopback port: its `host:port`.
async fn serve_events() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let host = format!("127.0.0.1:{}", listener.local_addr()?.port());
    tokio::spawn(async move { axum::serve(listener, LocalEvents::default().router()).await });
    Ok(host)
}

/// A connection acknowledged by the server, subscribed to `channel`.
async fn subscribe(host: &str, channel: &str) -> anyhow::Result<Ws> {
    let auth = json!({ "host": host }).to_string();
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(auth);
    let mut req = format!("ws://{host}/event/realtime").into_client_request()?;
    req.headers_mut().insert(
        "sec-websocket-protocol",
        format!("{SUBPROTOCOL}, header-{header}").parse()?,
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    send(&mut ws, json!({"type": "connection_init"})).await?;
    anyhow::ensure!(next(&mut ws).await?["type"] == "connection_ack");
    send(
        &mut ws,
        json!({"type": "subscribe", "id": "s1", "channel": channel,
               "authorization": {"host": host}}),
    )
    .await?;
    let ok = next(&mut ws).await?;
    anyhow::ensure!(ok["type"] == "subscribe_success", "{ok}");
    Ok(ws)
}

async fn send(ws: &mut Ws, v: Value) -> anyhow::Result<()> {
    ws.send(tungstenite::Message::Text(v.to_string().into()))
        .await?;
    Ok(())
}

/// The next message that is not a keep-alive, within 5 s.
async fn next(ws: &mut Ws) -> anyhow::Result<Value> {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .map_err(|_| anyhow::anyhow!("no message within 5 s"))?
            .ok_or_else(|| anyhow::anyhow!("the connection closed"))??;
        if let tungstenite::Message::Text(t) = m {
            let v: Value = serde_json::from_str(t.as_str())?;
            if v["type"] != "ka" {
                return Ok(v);
            }
        }
    }
}

/// The sequence the next poke carries.
async fn poked_seq(ws: &mut Ws) -> anyhow::Result<u64> {
    let data = next(ws).await?;
    anyhow::ensure!(data["type"] == "data" && data["id"] == "s1", "{data}");
    let event: Value = serde_json::from_str(json_str(&data, "/event"))?;
    event["seq"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("a poke without seq: {event}"))
}

/// The log's next sequence, as the API reports it.
async fn head(c: &ApiClient, api: &TestApi, log: &str) -> anyhow::Result<u64> {
    let r = c.get(api.url(&format!("/logs/{log}"))).send().await?;
    anyhow::ensure!(r.status() == StatusCode::OK);
    let v: Value = r.json().await?;
    v["nextSeq"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no nextSeq in {v}"))
}

#[tokio::test]
async fn the_api_pokes_after_an_append_an_upload_commit_and_a_push() -> anyhow::Result<()> {
    let host = serve_events().await?;
    let mut pokes = PokeConfig::new(format!("http://{host}/event"));
    // No coalescing: each commit below gets its own poke.
    pokes.window = Duration::ZERO;
    let cfg = ApiConfig {
        pokes: Some(pokes),
        ..ApiConfig::default()
    };
    let api = TestApi::start_with("pokes", cfg).await?;
    if api.stack.is_none() {
        // An external deployment has its own Event API; this test needs the local one.
        return Ok(());
    }
    let c = api.client().await?;
    let r = c.post(api.url("/logs")).send().await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    let log = json_str(&r.json::<Value>().await?, "/logId").to_owned();
    let mut ws = subscribe(&host, &format!("/sheets/{log}")).await?;

    // A direct append.
    let (s, v) = post_entry(&c, &api, &log, set_body(&[("A1", json!(1))])).await?;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(poked_seq(&mut ws).await?, head(&c, &api, &log).await?);

    // An upload commit.
    let csv = b"name,qty\nNails,80\n";
    let u = upload_file(
        &c,
        &api,
        &log,
        json!({"type": "import", "contentType": "text/csv"}),
        csv,
    )
    .await?;
    let id = json_str(&u, "/uploadId");
    let r = c
        .post(api.url(&format!("/logs/{log}/uploads/{id}/commit")))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED, "{}", r.text().await?);
    assert_eq!(poked_seq(&mut ws).await?, head(&c, &api, &log).await?);

    // A Replicache push.
    let push = push_body("g1", json!([set_mutation("c1", 1, "A1", json!(1))]));
    let r = c
        .post(api.url(&format!("/logs/{log}/replicache/push")))
        .json(&push)
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await?);
    assert_eq!(poked_seq(&mut ws).await?, head(&c, &api, &log).await?);
    Ok(())
}
