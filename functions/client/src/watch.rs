//! `sheetlog watch LOG`: prints a log's entries as they land.
//!
//! The command subscribes to the sheet's poke channel on the Event API the stack announces (AWS
//! AppSync Events deployed, the local stand-in under `sheetlog dev`), with the same real-time
//! protocol the web page speaks (`web/src/pokes.ts`), and reads the new entries with
//! `GET /logs/{id}/entries?from=…` on every poke. Without an Event API, or while the channel is
//! down, it polls every few seconds instead and says so on standard error; the channel is
//! reconnected with jittered exponential backoff.
//!
//! The Event API is found where the web page finds it: the `<meta name="sheetlog-events">` of
//! the page the API serves at `/` (`functions/api/src/web.rs`).

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

use crate::api::{Api, Auth, CliError};
use crate::commands;

/// The WebSocket subprotocol of AppSync Events.
const SUBPROTOCOL: &str = "aws-appsync-event-ws";
/// How long the server may take to acknowledge a connection or a subscription.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The reconnection delays: as the web page's, from half a second up to 30 s, with jitter.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Where the sheet's pokes are: what the API's web page announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsConfig {
    /// `wss://<realtime domain>/event/realtime`
    pub realtime_url: String,
    /// The Event API's HTTP domain, which the authorization names as `host`.
    pub http_host: String,
    pub namespace: String,
}

/// The Event API in the `sheetlog-events` meta tag of `page`, if the page has one.
pub fn events_from_page(page: &str) -> Option<EventsConfig> {
    let at = page.find("name=\"sheetlog-events\"")?;
    let rest = &page[at..];
    let start = rest.find("content=\"")? + "content=\"".len();
    let end = start + rest[start..].find('"')?;
    let content = rest[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let v: Value = serde_json::from_str(&content).ok()?;
    Some(EventsConfig {
        realtime_url: v["realtimeUrl"].as_str()?.to_owned(),
        http_host: v["httpHost"].as_str()?.to_owned(),
        namespace: v["namespace"].as_str()?.to_owned(),
    })
}

/// Asks the API's web page for its Event API; `None` when the stack has none (or the page
/// cannot be read: the caller then polls).
pub async fn discover(api: &Api) -> Option<EventsConfig> {
    let url = api.url("").ok()?;
    let page = api.plain().get(url).send().await.ok()?.text().await.ok()?;
    events_from_page(&page)
}

/// What `watch` does.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub log: String,
    /// The first sequence to print; `None`: from the log's head now (only new entries).
    pub from: Option<u64>,
    /// How often to read the log while no poke channel is up.
    pub poll: Duration,
    /// Ignore the Event API and poll.
    pub poll_only: bool,
}

/// What the link to the Event API tells the watch loop.
#[derive(Debug)]
enum Link {
    /// Subscribed: pokes will come.
    Up,
    /// The connection or the subscription failed or dropped; reconnecting.
    Down(String),
    /// A poke: the log's next sequence, if the event carried one.
    Poke(Option<u64>),
}

/// Runs until Ctrl-C (then `Ok`) or an error the API will keep answering (the log is gone, the
/// token is refused). `each` prints one entry.
pub async fn watch(
    api: &Api,
    auth: &Auth,
    opts: WatchOptions,
    mut each: impl FnMut(&Value) -> Result<(), CliError>,
) -> Result<(), CliError> {
    // wss:// needs a process-wide rustls provider; the tree enables two, so none is implied.
    // An error only means one is installed already.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut next = match opts.from {
        Some(seq) => seq,
        None => head(api, &opts.log).await?,
    };
    let events = if opts.poll_only {
        None
    } else {
        discover(api).await
    };
    let secs = opts.poll.as_secs_f64();
    // `tx` lives as long as the loop, so `rx` never reports a closed channel.
    let (tx, mut rx) = mpsc::channel(64);
    let _link = match (events, auth) {
        (None, _) => {
            eprintln!("sheetlog: the API announces no Event API; polling every {secs} s");
            None
        }
        (Some(_), Auth::Iam { .. }) => {
            // Subscribing with IAM needs a SigV4-signed connection, which `watch` does not make.
            eprintln!(
                "sheetlog: pokes need a token (--token) on an IAM stack; polling every {secs} s"
            );
            None
        }
        (Some(cfg), auth) => {
            let authorization = match auth {
                // AppSync Events takes the bare token (no `Bearer ` scheme) for Cognito and
                // OIDC authorization.
                Auth::Bearer(t) => Some(t.clone()),
                _ => None,
            };
            let channel = format!("/{}/{}", cfg.namespace, opts.log);
            Some(AbortOnDrop(tokio::spawn(link(
                cfg,
                authorization,
                channel,
                tx.clone(),
            ))))
        }
    };
    let mut live = false;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    // Read what landed since `from` before waiting for anything.
    next = catch_up(api, &opts.log, next, &mut each).await?;
    loop {
        tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            Some(msg) = rx.recv() => match msg {
                Link::Up => {
                    eprintln!("sheetlog: live (pokes on the sheet's channel)");
                    live = true;
                    // Entries may have landed while the channel was down.
                    next = catch_up(api, &opts.log, next, &mut each).await?;
                }
                Link::Down(why) => {
                    if live {
                        eprintln!("sheetlog: the poke channel dropped ({why}); polling every {secs} s while reconnecting");
                    } else {
                        eprintln!("sheetlog: no poke channel ({why}); polling every {secs} s while reconnecting");
                    }
                    live = false;
                }
                Link::Poke(seq) => {
                    if seq.is_none_or(|s| s > next) {
                        next = catch_up(api, &opts.log, next, &mut each).await?;
                    }
                }
            },
            _ = tokio::time::sleep(opts.poll), if !live => {
                next = catch_up(api, &opts.log, next, &mut each).await?;
            }
        }
    }
}

/// Aborts the link task when the watch ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The log's next sequence now.
async fn head(api: &Api, log: &str) -> Result<u64, CliError> {
    let v = api.get(&format!("logs/{log}")).await?;
    let next = v["nextSeq"].as_u64().unwrap_or(0);
    if v["complete"].as_bool().unwrap_or(true) {
        return Ok(next);
    }
    // More entries than one page past the snapshot: read on to the end, printing nothing.
    commands::read_log(api, log, next, |_| Ok(())).await
}

/// Prints the entries from `from` on; returns the next sequence to read. An error the API may
/// stop giving (unreachable, busy) is reported and the same sequence is read next time.
async fn catch_up(
    api: &Api,
    log: &str,
    from: u64,
    each: &mut impl FnMut(&Value) -> Result<(), CliError>,
) -> Result<u64, CliError> {
    let mut next = from;
    let read = commands::read_log(api, log, from, |e| {
        each(e)?;
        if let Some(seq) = e["seq"].as_u64() {
            next = seq + 1;
        }
        Ok(())
    })
    .await;
    match read {
        Ok(n) => Ok(n.max(next)),
        Err(e @ (CliError::Unreachable { .. } | CliError::Api { status: 500.., .. })) => {
            eprintln!("sheetlog: {e}; trying again");
            Ok(next)
        }
        Err(e) => Err(e),
    }
}

/// Keeps one subscription to `channel` up, reconnecting with backoff, and reports to `tx`.
/// Ends when the watch loop is gone.
async fn link(
    cfg: EventsConfig,
    authorization: Option<String>,
    channel: String,
    tx: mpsc::Sender<Link>,
) {
    let backoff = || {
        ExponentialBuilder::default()
            .with_min_delay(FIRST_RETRY)
            .with_max_delay(MAX_RETRY)
            .with_jitter()
            .without_max_times()
            .build()
    };
    let mut delays = backoff();
    loop {
        let mut subscribed = false;
        let why = match subscription(
            &cfg,
            authorization.as_deref(),
            &channel,
            &tx,
            &mut subscribed,
        )
        .await
        {
            Ok(()) => "the server closed the connection".to_owned(),
            Err(e) => e,
        };
        if tx.send(Link::Down(why)).await.is_err() {
            return;
        }
        if subscribed {
            delays = backoff();
        }
        tokio::time::sleep(delays.next().unwrap_or(MAX_RETRY)).await;
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One connection: handshake, subscribe, then pokes until it drops. `Err` says why it failed.
async fn subscription(
    cfg: &EventsConfig,
    authorization: Option<&str>,
    channel: &str,
    tx: &mpsc::Sender<Link>,
    subscribed: &mut bool,
) -> Result<(), String> {
    let mut auth = json!({ "host": cfg.http_host });
    if let Some(a) = authorization {
        auth["Authorization"] = json!(a);
    }
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(auth.to_string());
    let mut req = cfg
        .realtime_url
        .as_str()
        .into_client_request()
        .map_err(|e| format!("{}: {e}", cfg.realtime_url))?;
    let protocols = format!("{SUBPROTOCOL}, header-{header}")
        .parse()
        .map_err(|e| format!("the authorization header: {e}"))?;
    req.headers_mut()
        .insert("sec-websocket-protocol", protocols);
    let (mut ws, _) =
        tokio::time::timeout(HANDSHAKE_TIMEOUT, tokio_tungstenite::connect_async(req))
            .await
            .map_err(|_| "connecting timed out".to_owned())?
            .map_err(|e| format!("connecting to {}: {e}", cfg.realtime_url))?;
    send(&mut ws, json!({"type": "connection_init"})).await?;
    let ack = receive(&mut ws, HANDSHAKE_TIMEOUT).await?;
    if ack["type"] != "connection_ack" {
        return Err(format!("the server refused the connection: {ack}"));
    }
    // No message (a `ka` at least) within this long means the link is dead.
    let silence = Duration::from_millis(ack["connectionTimeoutMs"].as_u64().unwrap_or(300_000));
    let id = uuid::Uuid::new_v4().to_string();
    send(
        &mut ws,
        json!({"type": "subscribe", "id": id, "channel": channel, "authorization": auth}),
    )
    .await?;
    loop {
        let m = receive(&mut ws, silence).await?;
        match m["type"].as_str() {
            Some("ka") => {}
            Some("subscribe_success") if m["id"] == id.as_str() => {
                *subscribed = true;
                tx.send(Link::Up).await.map_err(|_| "stopped".to_owned())?;
            }
            Some("subscribe_error") => return Err(format!("subscribing refused: {m}")),
            Some("data") if m["id"] == id.as_str() => {
                let seq = m["event"]
                    .as_str()
                    .and_then(|e| serde_json::from_str::<Value>(e).ok())
                    .and_then(|e| e["seq"].as_u64());
                tx.send(Link::Poke(seq))
                    .await
                    .map_err(|_| "stopped".to_owned())?;
            }
            Some("error" | "connection_error") => return Err(format!("the server said {m}")),
            _ => {}
        }
    }
}

async fn send(ws: &mut Ws, v: Value) -> Result<(), String> {
    ws.send(tungstenite::Message::Text(v.to_string().into()))
        .await
        .map_err(|e| format!("sending: {e}"))
}

/// The next JSON message, within `within`.
async fn receive(ws: &mut Ws, within: Duration) -> Result<Value, String> {
    loop {
        let m = tokio::time::timeout(within, ws.next())
            .await
            .map_err(|_| format!("no message for {within:?}"))?
            .ok_or_else(|| "the connection closed".to_owned())?
            .map_err(|e| format!("receiving: {e}"))?;
        match m {
            tungstenite::Message::Text(t) => {
                return serde_json::from_str(t.as_str())
                    .map_err(|e| format!("an unreadable message: {e}"));
            }
            tungstenite::Message::Close(_) => return Err("the connection closed".to_owned()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_api_is_read_from_the_pages_meta_tag() {
        let page = "<head><meta charset=\"utf-8\">\n<meta name=\"sheetlog-events\" content=\"{&quot;realtimeUrl&quot;:&quot;ws://127.0.0.1:8080/event/realtime&quot;,&quot;httpHost&quot;:&quot;127.0.0.1:8080&quot;,&quot;namespace&quot;:&quot;sheets&quot;}\">\n</head>";
        assert_eq!(
            events_from_page(page),
            Some(EventsConfig {
                realtime_url: "ws://127.0.0.1:8080/event/realtime".into(),
                http_host: "127.0.0.1:8080".into(),
                namespace: "sheets".into(),
            })
        );
        assert_eq!(events_from_page("<head></head>"), None);
        assert_eq!(
            events_from_page("<meta name=\"sheetlog-events\" content=\"{}\">"),
            None
        );
    }
}
