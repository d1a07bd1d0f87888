//! The local stand-in for AWS AppSync Events (the emulator has none): the subset of its protocol
//! sheetlog uses, so the functions, the web page and the CLI run the same code locally and
//! deployed. `docs/operations.md`, "Pokes on the local stack", lists the subset:
//!
//! - HTTP publish, `POST /event`: body `{"channel": "/ns/seg…", "events": ["<JSON>", …]}` (one to
//!   five events, each a string holding a JSON document), an `Authorization` header (a SigV4
//!   signature from the functions; its form is checked, not its signature). Answers
//!   `{"successful": [{"identifier", "index"}], "failed": []}`; a bad request answers 400, a
//!   missing authorization 401, both with `{"errors": [{"errorType", "message"}]}`.
//! - Real-time, `GET /event/realtime` upgraded to a WebSocket with the subprotocols
//!   `aws-appsync-event-ws` and `header-<base64url JSON>` (the authorization headers). Client
//!   messages `connection_init`, `subscribe` `{id, channel, authorization?}` and `unsubscribe`
//!   `{id}`; server messages `connection_ack` `{connectionTimeoutMs}`, `ka`,
//!   `subscribe_success`/`subscribe_error` `{id, errors?}`, `unsubscribe_success`/
//!   `unsubscribe_error`, `data` `{id, event}` (the event as published, a JSON string) and
//!   `error`. Channels are exact paths (no `/*` wildcards); publishing over the WebSocket is
//!   refused with `publish_error`.
//!
//! Who may subscribe to which channel is a [`SubscribeAuth`]: everyone ([`AllowAll`]) on a stack
//! without authorization; `sheetlog dev --auth jwt` checks the token's access claim, as the
//! deployed namespace's onSubscribe handler does.
//! What a publish broadcasts is decided by a [`PublishHandler`] when one is given (`sheetlog dev`
//! runs the template's onPublish code); without one the events go out as published, AppSync's
//! default.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

/// The WebSocket subprotocol of AppSync Events.
pub const SUBPROTOCOL: &str = "aws-appsync-event-ws";
/// What `connection_ack` tells clients: the longest silence before they should reconnect.
pub const CONNECTION_TIMEOUT_MS: u64 = 300_000;
/// Most events in one publish (AppSync's limit).
pub const MAX_EVENTS: usize = 5;
/// Largest event, in bytes (AppSync's limit is 240 KB).
pub const MAX_EVENT_BYTES: usize = 240 * 1024;

/// Decides whether a connection's authorization may subscribe to a channel.
pub trait SubscribeAuth: Send + Sync + fmt::Debug {
    /// `auth` is the connection's `header-…` JSON, with the subscribe message's `authorization`
    /// fields laid over it. `Err` is the message of the `subscribe_error`.
    fn authorize(
        &self,
        auth: &Map<String, Value>,
        channel: &str,
    ) -> futures::future::BoxFuture<'static, Result<(), String>>;
}

/// The namespace's onPublish handler: what it does with the events published to a channel.
/// Without one, AppSync broadcasts the events as they came (its default handler).
pub trait PublishHandler: Send + Sync + fmt::Debug {
    /// `events` are `{"id", "payload"}` objects (the payload parsed), as AppSync hands them to
    /// onPublish; the answer is the events to broadcast, in the same shape. `Err` fails every
    /// event of the publish.
    fn on_publish(
        &self,
        channel: &str,
        events: Vec<Value>,
    ) -> futures::future::BoxFuture<'static, Result<Vec<Value>, String>>;
}

/// Everyone may subscribe to every channel (a stack without authorization).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl SubscribeAuth for AllowAll {
    fn authorize(
        &self,
        _: &Map<String, Value>,
        _: &str,
    ) -> futures::future::BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

/// The local Event API: a publish endpoint and a real-time endpoint sharing one fan-out.
#[derive(Clone)]
pub struct LocalEvents {
    hub: broadcast::Sender<(String, String)>,
    auth: Arc<dyn SubscribeAuth>,
    on_publish: Option<Arc<dyn PublishHandler>>,
    keep_alive: Duration,
}

impl fmt::Debug for LocalEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEvents")
            .field("auth", &self.auth)
            .field("keep_alive", &self.keep_alive)
            .finish_non_exhaustive()
    }
}

impl Default for LocalEvents {
    fn default() -> Self {
        Self::new(Arc::new(AllowAll))
    }
}

impl LocalEvents {
    pub fn new(auth: Arc<dyn SubscribeAuth>) -> Self {
        let (hub, _) = broadcast::channel(4096);
        Self {
            hub,
            auth,
            on_publish: None,
            keep_alive: Duration::from_secs(60),
        }
    }

    /// Runs `handler` on every publish, broadcasting what it answers (the template's onPublish).
    pub fn with_publish_handler(mut self, handler: Arc<dyn PublishHandler>) -> Self {
        self.on_publish = Some(handler);
        self
    }

    /// How often connections get a `ka` (AppSync sends one about every minute).
    pub fn with_keep_alive(mut self, every: Duration) -> Self {
        self.keep_alive = every;
        self
    }

    /// `POST /event` and `GET /event/realtime`.
    pub fn router(self) -> Router {
        Router::new()
            .route("/event", post(publish))
            .route("/event/realtime", get(realtime))
            .with_state(self)
    }
}

fn errors(status: StatusCode, kind: &str, message: impl Into<String>) -> Response {
    let body = json!({"errors": [{"errorType": kind, "message": message.into()}]});
    (status, axum::Json(body)).into_response()
}

/// A channel path as AppSync accepts it: `/`-separated segments (1 to 5) of letters, digits and
/// dashes, the first being the namespace; a leading `/` is optional. Returned with one.
pub fn normalize_channel(raw: &str) -> Option<String> {
    let path = raw.strip_prefix('/').unwrap_or(raw);
    let segments: Vec<&str> = path.split('/').collect();
    let ok = |s: &&str| {
        !s.is_empty() && s.len() <= 50 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    ((1..=5).contains(&segments.len()) && segments.iter().all(ok)).then(|| format!("/{path}"))
}

/// `POST /event`: a SigV4-signed publish of 1 to [`MAX_EVENTS`] JSON strings to a channel,
/// broadcast to its subscribers (through the onPublish handler, if there is one).
async fn publish(
    State(ev): State<LocalEvents>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    match ev.publish(&headers, &body).await {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(refused) => refused.into_response(),
    }
}

/// Why a publish has no event through: the answer AppSync gives then.
#[derive(Debug)]
enum Refused {
    /// The request is not one AppSync takes: its status, error type and message.
    Invalid(StatusCode, &'static str, String),
    /// The onPublish handler failed: every event fails, each with this entry.
    HandlerFailed(Vec<Value>),
}

impl Refused {
    fn bad_request(message: impl Into<String>) -> Self {
        Self::Invalid(
            StatusCode::BAD_REQUEST,
            "BadRequestException",
            message.into(),
        )
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Self::Invalid(status, kind, message) => errors(status, kind, message),
            Self::HandlerFailed(failed) => {
                axum::Json(json!({"successful": [], "failed": failed})).into_response()
            }
        }
    }
}

impl LocalEvents {
    /// A publish's answer (`successful`, `failed`), its events sent to the channel's
    /// subscribers.
    async fn publish(&self, headers: &HeaderMap, body: &[u8]) -> Result<Value, Refused> {
        let authorization = publish_authorization(headers)?;
        let (req, channel) = publish_request(body)?;
        crate::roles::record_event_publish(authorization, &channel);
        let out = publish_events(&req)?;
        let ids: Vec<String> = out
            .iter()
            .map(|_| uuid::Uuid::new_v4().to_string())
            .collect();
        let broadcast = match &self.on_publish {
            None => out,
            Some(handler) => run_publish_handler(handler.as_ref(), &channel, &ids, &out).await?,
        };
        for event in broadcast {
            // No subscriber is not an error: the event just reaches nobody.
            let _ = self.hub.send((channel.clone(), event));
        }
        let successful: Vec<Value> = ids
            .iter()
            .enumerate()
            .map(|(index, id)| json!({"identifier": id, "index": index}))
            .collect();
        Ok(json!({"successful": successful, "failed": []}))
    }
}

/// The publish's SigV4 `Authorization` header; unsigned publishes are refused.
fn publish_authorization(headers: &HeaderMap) -> Result<&str, Refused> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.starts_with("AWS4-HMAC-SHA256 "))
        .ok_or_else(|| {
            Refused::Invalid(
                StatusCode::UNAUTHORIZED,
                "UnauthorizedException",
                "publishing needs a SigV4-signed request".into(),
            )
        })
}

/// The publish's body as JSON, and the channel it names (normalized).
fn publish_request(body: &[u8]) -> Result<(Value, String), Refused> {
    let Ok(req) = serde_json::from_slice::<Value>(body) else {
        return Err(Refused::bad_request("the body is not JSON"));
    };
    let Some(channel) = req
        .get("channel")
        .and_then(Value::as_str)
        .and_then(normalize_channel)
    else {
        return Err(Refused::bad_request(
            "`channel` must be a channel path such as /namespace/channel",
        ));
    };
    Ok((req, channel))
}

/// The publish's events: 1 to [`MAX_EVENTS`] strings, each a JSON document of at most
/// [`MAX_EVENT_BYTES`].
fn publish_events(req: &Value) -> Result<Vec<String>, Refused> {
    let events = match req.get("events").and_then(Value::as_array) {
        Some(e) if (1..=MAX_EVENTS).contains(&e.len()) => e,
        _ => {
            return Err(Refused::bad_request(format!(
                "`events` must be a list of 1 to {MAX_EVENTS} strings"
            )));
        }
    };
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        let valid = e
            .as_str()
            .filter(|s| s.len() <= MAX_EVENT_BYTES && serde_json::from_str::<Value>(s).is_ok());
        match valid {
            Some(s) => out.push(s.to_owned()),
            None => {
                return Err(Refused::bad_request(
                    "each event must be a string holding a JSON document",
                ));
            }
        }
    }
    Ok(out)
}

/// The events the onPublish `handler` lets through to the subscribers.
async fn run_publish_handler(
    handler: &dyn PublishHandler,
    channel: &str,
    ids: &[String],
    out: &[String],
) -> Result<Vec<String>, Refused> {
    let incoming = ids
        .iter()
        .zip(out)
        .map(|(id, e)| {
            let payload = serde_json::from_str::<Value>(e).unwrap_or(Value::Null);
            json!({"id": id, "payload": payload})
        })
        .collect();
    match handler.on_publish(channel, incoming).await {
        // What the handler answers goes out; an entry without a payload is dropped.
        Ok(kept) => Ok(kept
            .iter()
            .filter_map(|e| e.get("payload").map(Value::to_string))
            .collect()),
        Err(message) => {
            tracing::warn!(%channel, %message, "the onPublish handler failed");
            let failed: Vec<Value> = ids
                .iter()
                .enumerate()
                .map(|(index, id)| {
                    json!({"identifier": id, "index": index, "code": 500, "message": message})
                })
                .collect();
            Err(Refused::HandlerFailed(failed))
        }
    }
}

/// The authorization headers a `header-<base64url JSON>` subprotocol carries.
pub fn decode_auth_protocol(protocol: &str) -> Option<Map<String, Value>> {
    let encoded = protocol.strip_prefix("header-")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded.trim_end_matches('='))
        .ok()?;
    match serde_json::from_slice::<Value>(&bytes).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

async fn realtime(State(ev): State<LocalEvents>, request: axum::extract::Request) -> Response {
    let (mut parts, _) = request.into_parts();
    let offered: Vec<String> = parts
        .headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_owned()))
        .collect();
    if !offered.iter().any(|p| p == SUBPROTOCOL) {
        return errors(
            StatusCode::BAD_REQUEST,
            "BadRequestException",
            format!("offer the WebSocket subprotocol {SUBPROTOCOL}"),
        );
    }
    let auth = offered.iter().find_map(|p| decode_auth_protocol(p));
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    upgrade
        .protocols([SUBPROTOCOL])
        .on_upgrade(move |socket| connection(ev, socket, auth))
}

fn text(v: Value) -> Message {
    Message::Text(v.to_string().into())
}

fn error_list(kind: &str, message: &str) -> Value {
    json!([{"errorType": kind, "message": message}])
}

/// One WebSocket connection: its subscriptions (id → channel), fed from the hub.
async fn connection(ev: LocalEvents, mut socket: WebSocket, auth: Option<Map<String, Value>>) {
    let Some(auth) = auth else {
        let _ = socket
            .send(text(json!({
                "type": "connection_error",
                "errors": error_list("UnauthorizedException", "no header-… authorization subprotocol"),
            })))
            .await;
        let _ = socket.send(Message::Close(None)).await;
        return;
    };
    let mut feed = ev.hub.subscribe();
    let mut subs: HashMap<String, String> = HashMap::new();
    let mut ka = tokio::time::interval(ev.keep_alive);
    ka.tick().await;
    let mut acked = false;
    loop {
        let out = tokio::select! {
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(t))) => handle(&ev, &auth, &mut subs, &mut acked, t.as_str()).await,
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => Vec::new(),
            },
            got = feed.recv() => match got {
                Ok((channel, event)) => subs
                    .iter()
                    .filter(|(_, c)| **c == channel)
                    .map(|(id, _)| json!({"type": "data", "id": id, "event": event}))
                    .collect(),
                Err(broadcast::error::RecvError::Lagged(_)) => Vec::new(),
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = ka.tick(), if acked => vec![json!({"type": "ka"})],
        };
        for m in out {
            if socket.send(text(m)).await.is_err() {
                return;
            }
        }
    }
}

/// One client message → the server's answers.
async fn handle(
    ev: &LocalEvents,
    conn_auth: &Map<String, Value>,
    subs: &mut HashMap<String, String>,
    acked: &mut bool,
    raw: &str,
) -> Vec<Value> {
    let Ok(msg) = serde_json::from_str::<Value>(raw) else {
        return vec![
            json!({"type": "error", "errors": error_list("BadRequestException", "not a JSON message")}),
        ];
    };
    let id = msg.get("id").and_then(Value::as_str).map(str::to_owned);
    match msg.get("type").and_then(Value::as_str) {
        Some("connection_init") => {
            *acked = true;
            vec![json!({"type": "connection_ack", "connectionTimeoutMs": CONNECTION_TIMEOUT_MS})]
        }
        Some("subscribe") => {
            let Some(id) = id.filter(|i| !i.is_empty() && i.len() <= 128) else {
                return vec![
                    json!({"type": "error", "errors": error_list("BadRequestException", "subscribe needs an id")}),
                ];
            };
            let fail = |kind: &str, message: &str| {
                vec![
                    json!({"type": "subscribe_error", "id": id, "errors": error_list(kind, message)}),
                ]
            };
            if subs.contains_key(&id) {
                return fail("BadRequestException", "a subscription with this id exists");
            }
            let Some(channel) = msg
                .get("channel")
                .and_then(Value::as_str)
                .and_then(normalize_channel)
            else {
                return fail("BadRequestException", "not a channel path");
            };
            let mut auth = conn_auth.clone();
            if let Some(Value::Object(extra)) = msg.get("authorization") {
                auth.extend(extra.clone());
            }
            match ev.auth.authorize(&auth, &channel).await {
                Ok(()) => {
                    subs.insert(id.clone(), channel);
                    vec![json!({"type": "subscribe_success", "id": id})]
                }
                Err(reason) => fail("UnauthorizedException", &reason),
            }
        }
        Some("unsubscribe") => match id {
            Some(id) if subs.remove(&id).is_some() => {
                vec![json!({"type": "unsubscribe_success", "id": id})]
            }
            other => vec![json!({
                "type": "unsubscribe_error",
                "id": other,
                "errors": error_list("UnknownOperationError", "no subscription with this id"),
            })],
        },
        Some("publish") => vec![json!({
            "type": "publish_error",
            "id": id,
            "errors": error_list("UnsupportedOperation", "the local Event API publishes over HTTP only"),
        })],
        other => vec![json!({
            "type": "error",
            "errors": error_list("UnsupportedOperation", &format!("unknown message type {other:?}")),
        })],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_and_auth_protocols() {
        assert_eq!(
            normalize_channel("sheets/abc").as_deref(),
            Some("/sheets/abc")
        );
        assert_eq!(
            normalize_channel("/sheets/abc-1").as_deref(),
            Some("/sheets/abc-1")
        );
        assert_eq!(normalize_channel("/sheets/*"), None);
        assert_eq!(normalize_channel("/a/b/c/d/e/f"), None);
        assert_eq!(normalize_channel("//x"), None);
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"host":"h","Authorization":"t"}"#);
        let m = decode_auth_protocol(&format!("header-{header}")).unwrap();
        assert_eq!(m["Authorization"], "t");
        assert!(decode_auth_protocol("header-!!").is_none());
        assert!(decode_auth_protocol(SUBPROTOCOL).is_none());
    }
}
