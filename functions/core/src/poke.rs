//! Pokes: after entries are committed, one tiny message on the sheet's channel of AWS AppSync
//! Events tells every open page to pull now (`docs/sync.md`, "Pokes").
//!
//! - [`PokePublisher`] — the port: publish one event to one channel.
//! - [`AppSyncPublisher`] — the adapter: AppSync Events' HTTP publish (`POST /event`), signed
//!   with SigV4 for the service `appsync` (the stack authorizes publishers with IAM). The local
//!   stack serves the same endpoint (`sheetlog_pipeline::events`).
//! - [`Poker`] — what the API and the sync writer hold: coalesces (at most one poke per sheet
//!   per window from one process, the newest sequence winning) and never fails the caller: a
//!   publish that fails or times out is logged and counted in the `PokePublishErrors` metric,
//!   and pages still catch up through their slow fallback pull.
//!
//! A poke carries the log's next sequence number and nothing else: `{"seq": N}`. One other event
//! travels the same channel: `{"members": true}` when the sheet's members or roles changed.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::config::{ConfigError, Env, EnvVar};
use crate::domain::LogId;
use crate::sigv4::Signer;

/// The channel namespace the stack creates for sheets.
pub const DEFAULT_NAMESPACE: &str = "sheets";
/// The name of the metric counting failed publishes.
pub const PUBLISH_ERRORS_METRIC: &str = "PokePublishErrors";
/// Processes forget sheets past this many (a forgotten sheet only loses its coalescing window).
const MAX_SHEETS: usize = 10_000;

/// The channel of a sheet: `/<namespace>/<logId>`.
pub fn channel(namespace: &str, log: LogId) -> String {
    format!("/{namespace}/{log}")
}

/// The poke's one event: the log's next sequence, as AppSync wants it (a JSON document in a
/// string).
pub fn poke_event(next_seq: u64) -> String {
    serde_json::json!({ "seq": next_seq }).to_string()
}

/// The event that says the sheet's members or their roles changed: an open page checks its own
/// role again at once rather than at its next poll (`web/src/main.ts`). It carries no sequence,
/// so a reader that only knows pokes treats it as one and pulls.
pub fn members_event() -> String {
    serde_json::json!({ "members": true }).to_string()
}

#[derive(Debug, thiserror::Error)]
pub enum PokeError {
    #[error("publishing to {channel} failed: {message}")]
    Publish { channel: String, message: String },
    #[error("publishing to {channel} timed out after {after:?}")]
    Timeout { channel: String, after: Duration },
    #[error("signing the publish request failed: {0}")]
    Sign(String),
}

/// Publishes events to a channel.
#[async_trait]
pub trait PokePublisher: Send + Sync + fmt::Debug {
    async fn publish(&self, channel: &str, events: Vec<String>) -> Result<(), PokeError>;
}

/// The settings of pokes, from the environment the CDK stack sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PokeConfig {
    /// The Event API's HTTP publish URL, `https://<http domain>/event`
    /// (`SHEETLOG_EVENTS_HTTP_URL`).
    pub http_url: String,
    /// The real-time (WebSocket) URL pages subscribe on, `wss://<realtime domain>/event/realtime`
    /// (`SHEETLOG_EVENTS_REALTIME_URL`); the API gives it to the web page.
    pub realtime_url: Option<String>,
    /// The channel namespace (`SHEETLOG_EVENTS_NAMESPACE`, default `sheets`).
    pub namespace: String,
    /// At most one poke per sheet per this long from one process (`SHEETLOG_POKE_COALESCE_MS`,
    /// default 100).
    pub window: Duration,
    /// How long one publish may take before it is given up (and counted as failed).
    pub timeout: Duration,
}

impl PokeConfig {
    pub fn new(http_url: impl Into<String>) -> Self {
        Self {
            http_url: http_url.into(),
            realtime_url: None,
            namespace: DEFAULT_NAMESPACE.to_owned(),
            window: Duration::from_millis(100),
            timeout: Duration::from_secs(2),
        }
    }

    /// `None` when `SHEETLOG_EVENTS_HTTP_URL` is unset or empty: no pokes (pages poll).
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        Self::from_vars(&Env::process())
    }

    /// What [`PokeConfig::from_vars`] reads. The stack always has an Event API; a function that
    /// publishes declares its URL [`crate::config::Given::Stack`].
    pub const ENVIRONMENT: &[EnvVar] = &[
        EnvVar::optional("SHEETLOG_EVENTS_HTTP_URL"),
        EnvVar::optional("SHEETLOG_EVENTS_REALTIME_URL"),
        EnvVar::optional("SHEETLOG_EVENTS_NAMESPACE"),
        EnvVar::optional("SHEETLOG_POKE_COALESCE_MS"),
    ];

    /// [`PokeConfig::from_env`] from any [`Env`]. Reads every variable it knows even when there
    /// is no URL, so a function's declaration does not depend on the stack having pokes.
    pub fn from_vars(env: &Env) -> Result<Option<Self>, ConfigError> {
        let url = env.text("SHEETLOG_EVENTS_HTTP_URL")?;
        let realtime_url = env.text("SHEETLOG_EVENTS_REALTIME_URL")?;
        let namespace = env.text("SHEETLOG_EVENTS_NAMESPACE")?;
        let window = env.parse::<u64>("SHEETLOG_POKE_COALESCE_MS")?;
        let Some(url) = url else {
            return Ok(None);
        };
        let mut c = Self::new(url);
        c.realtime_url = realtime_url;
        if let Some(ns) = namespace {
            c.namespace = ns;
        }
        if let Some(ms) = window {
            c.window = Duration::from_millis(ms);
        }
        c.validate()?;
        Ok(Some(c))
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let scheme_ok = |u: &str, schemes: &[&str]| {
            schemes
                .iter()
                .any(|s| u.strip_prefix(s).is_some_and(|r| r.starts_with("://")))
        };
        if !scheme_ok(&self.http_url, &["https", "http"]) {
            return Err(ConfigError(format!(
                "SHEETLOG_EVENTS_HTTP_URL={:?}: expected an http(s) URL such as https://<domain>/event",
                self.http_url
            )));
        }
        if let Some(u) = &self.realtime_url
            && !scheme_ok(u, &["wss", "ws"])
        {
            return Err(ConfigError(format!(
                "SHEETLOG_EVENTS_REALTIME_URL={u:?}: expected a ws(s) URL such as wss://<domain>/event/realtime"
            )));
        }
        if self.namespace.is_empty()
            || !self
                .namespace
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(ConfigError(format!(
                "SHEETLOG_EVENTS_NAMESPACE={:?}: expected letters, digits and dashes",
                self.namespace
            )));
        }
        if self.window > Duration::from_secs(5) {
            return Err(ConfigError(
                "SHEETLOG_POKE_COALESCE_MS must be at most 5000".into(),
            ));
        }
        Ok(())
    }
}

/// AppSync Events' HTTP publish, signed with SigV4 (service `appsync`).
pub struct AppSyncPublisher {
    http: reqwest::Client,
    url: String,
    /// `None` without credentials (a local endpoint).
    signer: Option<Signer>,
}

impl fmt::Debug for AppSyncPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppSyncPublisher")
            .field("url", &self.url)
            .field("region", &self.signer.as_ref().map(Signer::region))
            .finish_non_exhaustive()
    }
}

impl AppSyncPublisher {
    /// Publishes to `url` with the SDK configuration's credentials and region.
    pub fn from_sdk(sdk: &aws_config::SdkConfig, cfg: &PokeConfig) -> Result<Self, ConfigError> {
        let http = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .build()
            .map_err(|e| ConfigError(format!("building the publish client: {e}")))?;
        Ok(Self {
            http,
            url: cfg.http_url.clone(),
            signer: Signer::from_sdk(sdk, "appsync"),
        })
    }

    async fn signed_headers(&self, body: &[u8]) -> Result<Vec<(String, String)>, PokeError> {
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        let Some(signer) = &self.signer else {
            return Ok(headers);
        };
        let added = signer
            .headers(
                "POST",
                &self.url,
                headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                body,
            )
            .await
            .map_err(|e| PokeError::Sign(e.to_string()))?;
        headers.extend(added);
        Ok(headers)
    }
}

#[async_trait]
impl PokePublisher for AppSyncPublisher {
    async fn publish(&self, channel: &str, events: Vec<String>) -> Result<(), PokeError> {
        let body = serde_json::to_vec(&serde_json::json!({ "channel": channel, "events": events }))
            .map_err(|e| PokeError::Sign(e.to_string()))?;
        let fail = |message: String| PokeError::Publish {
            channel: channel.to_owned(),
            message,
        };
        let mut req = self.http.post(&self.url);
        for (k, v) in self.signed_headers(&body).await? {
            req = req.header(k, v);
        }
        let resp = req
            .body(body)
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| fail(e.to_string()))?;
        if !status.is_success() {
            return Err(fail(format!("HTTP {status}: {text}")));
        }
        // `{"successful": [...], "failed": [{"identifier", "index", "code", "message"}]}`
        let answer: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| fail(format!("unreadable answer: {e}")))?;
        match answer.get("failed").and_then(|f| f.as_array()) {
            Some(failed) if !failed.is_empty() => Err(fail(format!("events refused: {text}"))),
            _ => Ok(()),
        }
    }
}

/// Per sheet: what this process last announced and when.
#[derive(Debug, Default)]
struct Slot {
    sent_at: Option<Instant>,
    sent_seq: u64,
    /// The newest sequence waiting for the window to end.
    pending: Option<u64>,
    /// Whether a caller is already waiting to send `pending`.
    waiting: bool,
}

/// Coalescing, never-failing pokes (see the module's documentation).
#[derive(Debug)]
pub struct Poker {
    publisher: Arc<dyn PokePublisher>,
    namespace: String,
    window: Duration,
    timeout: Duration,
    slots: Mutex<HashMap<LogId, Slot>>,
}

/// What one [`Poker::poke`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poked {
    /// Published this sequence (or tried to: a failure is logged and counted).
    Sent { seq: u64, ok: bool },
    /// Left to a caller already waiting for the window to end, or already announced.
    Coalesced,
}

impl Poker {
    pub fn new(publisher: Arc<dyn PokePublisher>, cfg: &PokeConfig) -> Self {
        Self {
            publisher,
            namespace: cfg.namespace.clone(),
            window: cfg.window,
            timeout: cfg.timeout,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The AppSync Events publisher for `cfg`.
    pub fn from_sdk(sdk: &aws_config::SdkConfig, cfg: &PokeConfig) -> Result<Self, ConfigError> {
        Ok(Self::new(
            Arc::new(AppSyncPublisher::from_sdk(sdk, cfg)?),
            cfg,
        ))
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Announces that `log`'s next sequence is now `next_seq`. Publishes at once unless this
    /// process published for the sheet less than a window ago; then the first such caller waits
    /// for the window to end and publishes the newest sequence any caller asked for meanwhile,
    /// and the others return at once. Never fails: see [`Poked`].
    pub async fn poke(&self, log: LogId, next_seq: u64) -> Poked {
        let wait = {
            let Ok(mut slots) = self.slots.lock() else {
                return Poked::Coalesced;
            };
            if slots.len() >= MAX_SHEETS {
                let window = self.window;
                slots.retain(|_, s| s.waiting || s.sent_at.is_some_and(|t| t.elapsed() < window));
            }
            let slot = slots.entry(log).or_default();
            if next_seq <= slot.sent_seq {
                return Poked::Coalesced;
            }
            match slot.sent_at {
                Some(t) if t.elapsed() < self.window => {
                    slot.pending = Some(slot.pending.map_or(next_seq, |p| p.max(next_seq)));
                    if slot.waiting {
                        return Poked::Coalesced;
                    }
                    slot.waiting = true;
                    Some(self.window.saturating_sub(t.elapsed()))
                }
                _ => {
                    slot.sent_at = Some(Instant::now());
                    slot.sent_seq = next_seq;
                    None
                }
            }
        };
        let seq = match wait {
            None => next_seq,
            Some(d) => {
                tokio::time::sleep(d).await;
                let Ok(mut slots) = self.slots.lock() else {
                    return Poked::Coalesced;
                };
                let slot = slots.entry(log).or_default();
                slot.waiting = false;
                let Some(seq) = slot.pending.take().filter(|p| *p > slot.sent_seq) else {
                    return Poked::Coalesced;
                };
                slot.sent_at = Some(Instant::now());
                slot.sent_seq = seq;
                seq
            }
        };
        let ok = self.send(log, seq).await;
        Poked::Sent { seq, ok }
    }

    /// Announces that `log`'s members or roles changed ([`members_event`]): published at once,
    /// never coalesced (a role change is rare, and the page it concerns should hear of it now).
    /// Never fails: a failure is logged and counted, and the page's poll still finds the change.
    pub async fn members_changed(&self, log: LogId) -> bool {
        self.publish(log, members_event(), None).await
    }

    async fn send(&self, log: LogId, seq: u64) -> bool {
        self.publish(log, poke_event(seq), Some(seq)).await
    }

    async fn publish(&self, log: LogId, event: String, seq: Option<u64>) -> bool {
        let channel = channel(&self.namespace, log);
        let publish = self.publisher.publish(&channel, vec![event]);
        let result = match tokio::time::timeout(self.timeout, publish).await {
            Ok(r) => r,
            Err(_) => Err(PokeError::Timeout {
                channel: channel.clone(),
                after: self.timeout,
            }),
        };
        match result {
            Ok(()) => true,
            Err(e) => {
                // The write stands; pages catch up through their fallback pull.
                tracing::warn!(log = %log, seq = ?seq, error = %e, "poke not published");
                crate::telemetry::metric(PUBLISH_ERRORS_METRIC, 1.0, "Count");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what it is asked to publish; fails while `fail` is set.
    #[derive(Debug, Default)]
    struct Recorder {
        sent: Mutex<Vec<(String, Vec<String>)>>,
        fail: std::sync::atomic::AtomicBool,
    }

    #[async_trait]
    impl PokePublisher for Recorder {
        async fn publish(&self, channel: &str, events: Vec<String>) -> Result<(), PokeError> {
            if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(PokeError::Publish {
                    channel: channel.into(),
                    message: "down".into(),
                });
            }
            if let Ok(mut s) = self.sent.lock() {
                s.push((channel.to_owned(), events));
            }
            Ok(())
        }
    }

    fn poker(window_ms: u64) -> (Arc<Recorder>, Poker) {
        let rec = Arc::new(Recorder::default());
        let mut cfg = PokeConfig::new("http://127.0.0.1:1/event");
        cfg.window = Duration::from_millis(window_ms);
        (rec.clone(), Poker::new(rec, &cfg))
    }

    fn sent(rec: &Recorder) -> Vec<(String, Vec<String>)> {
        rec.sent.lock().map(|s| s.clone()).unwrap_or_default()
    }

    #[tokio::test]
    async fn one_poke_carries_the_next_sequence_on_the_sheets_channel() {
        let (rec, poker) = poker(100);
        let log = LogId::new_random();
        assert_eq!(poker.poke(log, 7).await, Poked::Sent { seq: 7, ok: true });
        assert_eq!(
            sent(&rec),
            vec![(format!("/sheets/{log}"), vec![r#"{"seq":7}"#.to_owned()])]
        );
    }

    /// A members change is published at once, even inside a poke's window, and does not use up
    /// the window's trailing poke.
    #[tokio::test]
    async fn a_members_change_is_published_at_once_beside_the_pokes() {
        let (rec, poker) = poker(10_000);
        let log = LogId::new_random();
        poker.poke(log, 3).await;
        assert!(poker.members_changed(log).await);
        assert!(poker.members_changed(log).await, "never coalesced");
        let events: Vec<String> = sent(&rec).into_iter().flat_map(|(_, e)| e).collect();
        assert_eq!(
            events,
            vec![r#"{"seq":3}"#, r#"{"members":true}"#, r#"{"members":true}"#]
        );
        rec.fail.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(
            !poker.members_changed(log).await,
            "a failure is reported, not raised"
        );
    }

    #[tokio::test]
    async fn pokes_within_a_window_coalesce_into_one_with_the_newest_sequence() {
        let (rec, poker) = poker(100);
        let poker = Arc::new(poker);
        let log = LogId::new_random();
        poker.poke(log, 1).await;
        // Three commits inside the window: one trailing poke, carrying the newest sequence.
        let (a, b, c) = tokio::join!(poker.poke(log, 2), poker.poke(log, 4), poker.poke(log, 3));
        let outcomes = [a, b, c];
        assert_eq!(
            outcomes
                .iter()
                .filter(|o| matches!(o, Poked::Sent { .. }))
                .count(),
            1,
            "{outcomes:?}"
        );
        let events: Vec<String> = sent(&rec).into_iter().flat_map(|(_, e)| e).collect();
        assert_eq!(events, vec![r#"{"seq":1}"#, r#"{"seq":4}"#]);
        // Another sheet has its own window.
        let other = LogId::new_random();
        assert_eq!(poker.poke(other, 9).await, Poked::Sent { seq: 9, ok: true });
        // After the window, the next commit is published at once.
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(poker.poke(log, 5).await, Poked::Sent { seq: 5, ok: true });
        // A sequence already announced is not announced again.
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(poker.poke(log, 5).await, Poked::Coalesced);
    }

    /// Log lines written while capturing, shared with the test.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut b) = self.0.lock() {
                b.extend_from_slice(buf);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        /// The `metric` events logged so far, as `(name, value, unit)`. Outside Lambda,
        /// [`crate::telemetry::metric`] logs each value as a debug event with these fields
        /// (in Lambda the same call prints an EMF line, tested in `telemetry`).
        fn metrics(&self) -> Vec<(String, f64, String)> {
            let text = self
                .0
                .lock()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            text.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| v["fields"]["message"] == "metric")
                .map(|v| {
                    let f = &v["fields"];
                    (
                        f["metric"].as_str().unwrap_or_default().to_owned(),
                        f["value"].as_f64().unwrap_or_default(),
                        f["unit"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        }
    }

    /// Captures this thread's log events (a `#[tokio::test]` runs on one thread) until dropped.
    fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || writer.clone())
            .finish();
        (out, tracing::subscriber::set_default(subscriber))
    }

    #[tokio::test]
    async fn a_failed_publish_is_reported_not_raised_and_counted() {
        let (logs, _guard) = capture();
        let (rec, poker) = poker(100);
        let log = LogId::new_random();
        assert_eq!(poker.poke(log, 2).await, Poked::Sent { seq: 2, ok: true });
        assert_eq!(logs.metrics(), vec![], "a published poke counts no error");
        tokio::time::sleep(Duration::from_millis(150)).await;
        rec.fail.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(poker.poke(log, 3).await, Poked::Sent { seq: 3, ok: false });
        assert_eq!(
            logs.metrics(),
            vec![(PUBLISH_ERRORS_METRIC.to_owned(), 1.0, "Count".to_owned())]
        );
    }

    #[derive(Debug)]
    struct Hangs;

    #[async_trait]
    impl PokePublisher for Hangs {
        async fn publish(&self, _: &str, _: Vec<String>) -> Result<(), PokeError> {
            std::future::pending::<()>().await;
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_hanging_publish_is_given_up_after_the_timeout() {
        let mut cfg = PokeConfig::new("http://x/event");
        cfg.timeout = Duration::from_millis(20);
        let (logs, _guard) = capture();
        let poker = Poker::new(Arc::new(Hangs), &cfg);
        let log = LogId::new_random();
        assert_eq!(poker.poke(log, 1).await, Poked::Sent { seq: 1, ok: false });
        assert_eq!(
            logs.metrics(),
            vec![(PUBLISH_ERRORS_METRIC.to_owned(), 1.0, "Count".to_owned())]
        );
    }

    #[test]
    fn settings_are_checked() {
        let mut c = PokeConfig::new("https://abc.appsync-api.eu-west-1.amazonaws.com/event");
        assert!(c.validate().is_ok());
        c.realtime_url = Some("https://x/event/realtime".into());
        assert!(c.validate().is_err());
        c.realtime_url = Some("wss://x/event/realtime".into());
        assert!(c.validate().is_ok());
        c.namespace = "a/b".into();
        assert!(c.validate().is_err());
        assert!(PokeConfig::new("ftp://x").validate().is_err());
    }
}
