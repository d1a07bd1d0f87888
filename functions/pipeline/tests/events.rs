//! The local Event API against the message shapes of AppSync Events' documentation: a real
//! WebSocket client (subprotocols, connection_init/ack, ka, subscribe, data, unsubscribe) and the
//! functions' own signed HTTP publisher.

// The helpers below are test code too (clippy's allowance covers only `#[test]` functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use sheetlog_core::domain::LogId;
use sheetlog_core::poke::{PokeConfig, Poked, Poker};
use sheetlog_pipeline::events::{LocalEvents, PublishHandler, SUBPROTOCOL, SubscribeAuth};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn serve(events: LocalEvents) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, events.router()).await });
    format!("127.0.0.1:{}", addr.port())
}

async fn connect(host: &str, auth: Value) -> Ws {
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(auth.to_string());
    let mut req = format!("ws://{host}/event/realtime")
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "sec-websocket-protocol",
        format!("{SUBPROTOCOL}, header-{header}").parse().unwrap(),
    );
    let (ws, resp) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(resp.headers()["sec-websocket-protocol"], SUBPROTOCOL);
    ws
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(tungstenite::Message::Text(v.to_string().into()))
        .await
        .unwrap();
}

async fn next(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a message within 5 s")
            .unwrap()
            .unwrap();
        if let tungstenite::Message::Text(t) = m {
            return serde_json::from_str(t.as_str()).unwrap();
        }
    }
}

/// Signed like the functions sign it (credentials that mean nothing locally).
fn publisher(host: &str) -> Poker {
    let sdk = aws_config::SdkConfig::builder()
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(
                aws_credential_types::Credentials::new("local", "local", None, None, "local"),
            ),
        )
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    let mut cfg = PokeConfig::new(format!("http://{host}/event"));
    cfg.window = Duration::from_millis(0);
    Poker::from_sdk(&sdk, &cfg).unwrap()
}

#[tokio::test]
async fn a_subscriber_gets_the_pokes_of_its_channel_only() {
    let host = serve(LocalEvents::default().with_keep_alive(Duration::from_millis(200))).await;
    let mut ws = connect(&host, json!({"host": host})).await;
    send(&mut ws, json!({"type": "connection_init"})).await;
    let ack = next(&mut ws).await;
    assert_eq!(
        ack,
        json!({"type": "connection_ack", "connectionTimeoutMs": 300000})
    );
    assert_eq!(next(&mut ws).await, json!({"type": "ka"}));

    let (log, other) = (LogId::new_random(), LogId::new_random());
    send(
        &mut ws,
        json!({"type": "subscribe", "id": "s1", "channel": format!("/sheets/{log}"),
        "authorization": {"host": host}}),
    )
    .await;
    assert_eq!(
        next(&mut ws).await,
        json!({"type": "subscribe_success", "id": "s1"})
    );

    let poker = publisher(&host);
    assert_eq!(poker.poke(other, 3).await, Poked::Sent { seq: 3, ok: true });
    assert_eq!(poker.poke(log, 7).await, Poked::Sent { seq: 7, ok: true });
    let data = loop {
        let m = next(&mut ws).await;
        if m["type"] != "ka" {
            break m;
        }
    };
    assert_eq!(
        data,
        json!({"type": "data", "id": "s1", "event": "{\"seq\":7}"})
    );

    send(&mut ws, json!({"type": "unsubscribe", "id": "s1"})).await;
    assert_eq!(
        next(&mut ws).await,
        json!({"type": "unsubscribe_success", "id": "s1"})
    );
    assert_eq!(poker.poke(log, 8).await, Poked::Sent { seq: 8, ok: true });
    // Only keep-alives from now on.
    for _ in 0..2 {
        assert_eq!(next(&mut ws).await, json!({"type": "ka"}));
    }
    send(&mut ws, json!({"type": "unsubscribe", "id": "s1"})).await;
    assert_eq!(next(&mut ws).await["type"], "unsubscribe_error");
}

#[tokio::test]
async fn publishing_answers_as_appsync_does() {
    let host = serve(LocalEvents::default()).await;
    let http = reqwest::Client::new();
    let url = format!("http://{host}/event");
    // Unsigned: refused.
    let r = http
        .post(&url)
        .json(&json!({"channel": "/sheets/a", "events": ["{}"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["errors"][0]["errorType"], "UnauthorizedException");
    let signed = |body: Value| {
        http.post(&url)
            .header("authorization", "AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/appsync/aws4_request, SignedHeaders=host, Signature=00")
            .json(&body)
    };
    let r = signed(json!({"channel": "sheets/a", "events": ["{\"seq\":1}", "2"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["failed"], json!([]));
    assert_eq!(body["successful"].as_array().unwrap().len(), 2);
    assert_eq!(body["successful"][1]["index"], 1);
    assert!(body["successful"][0]["identifier"].is_string());
    for bad in [
        json!({"channel": "/sheets/*", "events": ["{}"]}),
        json!({"channel": "/sheets/a", "events": []}),
        json!({"channel": "/sheets/a", "events": ["{}", "{}", "{}", "{}", "{}", "{}"]}),
        json!({"channel": "/sheets/a", "events": ["not json"]}),
        json!({"channel": "/sheets/a", "events": [{"seq": 1}]}),
    ] {
        let r = signed(bad.clone()).send().await.unwrap();
        assert_eq!(r.status(), 400, "{bad}");
    }
}

/// Allows the channels listed in the `Authorization` header, comma-separated.
#[derive(Debug)]
struct Listed;

impl SubscribeAuth for Listed {
    fn authorize(
        &self,
        auth: &Map<String, Value>,
        channel: &str,
    ) -> futures::future::BoxFuture<'static, Result<(), String>> {
        let ok = auth
            .get("Authorization")
            .and_then(Value::as_str)
            .is_some_and(|a| a.split(',').any(|c| c == channel));
        Box::pin(async move {
            if ok {
                Ok(())
            } else {
                Err("not yours".to_owned())
            }
        })
    }
}

#[tokio::test]
async fn subscriptions_go_through_the_authorizer() {
    let host = serve(LocalEvents::new(Arc::new(Listed))).await;
    let mut ws = connect(&host, json!({"host": host, "Authorization": "/sheets/x"})).await;
    send(&mut ws, json!({"type": "connection_init"})).await;
    assert_eq!(next(&mut ws).await["type"], "connection_ack");
    send(
        &mut ws,
        json!({"type": "subscribe", "id": "y", "channel": "/sheets/y"}),
    )
    .await;
    let refused = next(&mut ws).await;
    assert_eq!(refused["type"], "subscribe_error");
    assert_eq!(refused["id"], "y");
    assert_eq!(refused["errors"][0]["errorType"], "UnauthorizedException");
    send(
        &mut ws,
        json!({"type": "subscribe", "id": "x", "channel": "/sheets/x"}),
    )
    .await;
    assert_eq!(
        next(&mut ws).await,
        json!({"type": "subscribe_success", "id": "x"})
    );
}

#[tokio::test]
async fn a_connection_without_the_auth_subprotocol_is_refused() {
    let host = serve(LocalEvents::default()).await;
    let mut req = format!("ws://{host}/event/realtime")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", SUBPROTOCOL.parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(next(&mut ws).await["type"], "connection_error");
    // Without the protocol at all: no upgrade.
    let req = format!("ws://{host}/event/realtime")
        .into_client_request()
        .unwrap();
    assert!(tokio_tungstenite::connect_async(req).await.is_err());
}

/// An onPublish that keeps the events whose `seq` is even, marked, and fails on `seq` 13.
#[derive(Debug)]
struct EvenOnly;

impl PublishHandler for EvenOnly {
    fn on_publish(
        &self,
        _channel: &str,
        events: Vec<Value>,
    ) -> futures::future::BoxFuture<'static, Result<Vec<Value>, String>> {
        Box::pin(async move {
            if events.iter().any(|e| e["payload"]["seq"] == 13) {
                return Err("unlucky".to_owned());
            }
            Ok(events
                .into_iter()
                .filter(|e| e["payload"]["seq"].as_u64().is_some_and(|s| s % 2 == 0))
                .map(|e| json!({"id": e["id"], "payload": {"seq": e["payload"]["seq"], "kept": true}}))
                .collect())
        })
    }
}

/// With an onPublish handler, subscribers get what it answers, not what was published; a
/// handler that fails fails the publish's events.
#[tokio::test]
async fn the_publish_handler_decides_what_is_broadcast() {
    let host = serve(LocalEvents::default().with_publish_handler(Arc::new(EvenOnly))).await;
    let mut ws = connect(&host, json!({"host": host})).await;
    send(&mut ws, json!({"type": "connection_init"})).await;
    assert_eq!(next(&mut ws).await["type"], "connection_ack");
    send(
        &mut ws,
        json!({"type": "subscribe", "id": "s1", "channel": "/sheets/a",
        "authorization": {"host": host}}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "subscribe_success");
    let http = reqwest::Client::new();
    let publish = |events: Value| {
        http.post(format!("http://{host}/event"))
            .header("authorization", "AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/appsync/aws4_request, SignedHeaders=host, Signature=00")
            .json(&json!({"channel": "/sheets/a", "events": events}))
            .send()
    };
    let r = publish(json!(["{\"seq\":1}", "{\"seq\":2}"]))
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["successful"].as_array().map(Vec::len),
        Some(2),
        "{body}"
    );
    let data = next(&mut ws).await;
    assert_eq!(data["type"], "data");
    let event: Value = serde_json::from_str(data["event"].as_str().unwrap()).unwrap();
    assert_eq!(event, json!({"seq": 2, "kept": true}));

    let r = publish(json!(["{\"seq\":13}"])).await.unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["successful"], json!([]), "{body}");
    assert_eq!(body["failed"][0]["message"], "unlucky", "{body}");
}
