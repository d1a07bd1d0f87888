//! `hot`'s simulated editor: one Replicache client of one client group, pushing and pulling as
//! Replicache does (see `hot.rs` for the run and its figures).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// API Gateway's integration limit: a push still unanswered then is a 503/504 to the client.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Replicache's push retry: starts small and doubles, up to this.
pub(crate) const RETRY_MIN: Duration = Duration::from_millis(250);
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(5);
/// Replicache pushes at most this many pending mutations at once.
pub(crate) const MAX_PUSH_MUTATIONS: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PullOn {
    Poke,
    Timer,
}

/// Replicache's default pull interval: with pokes, a client still pulls this often.
pub(crate) const POKE_FALLBACK_PULL: Duration = Duration::from_secs(60);

/// One mutation a client made.
#[derive(Debug, Clone)]
pub(crate) struct Made {
    pub(crate) id: u64,
    /// When the person made it (its slot in the schedule; a client busy in a slow push makes the
    /// mutations of the slots it missed as soon as it is back, as a person keeps typing).
    pub(crate) made_at: Instant,
    /// When the first push carrying it was sent.
    pub(crate) first_sent: Option<Instant>,
}

/// What one client saw.
#[derive(Debug, Default)]
pub(crate) struct ClientReport {
    pub(crate) made: u64,
    pub(crate) refusals: u64,
    pub(crate) pushes: u64,
    pub(crate) pulls: u64,
    pub(crate) push_throttled: u64,
    pub(crate) pull_throttled: u64,
    /// Push -> visible, per confirmed mutation (ms).
    pub(crate) visible_ms: Vec<f64>,
    /// Made -> visible, per confirmed mutation (ms).
    pub(crate) made_visible_ms: Vec<f64>,
    /// The highest id a pull confirmed.
    pub(crate) confirmed: u64,
}

/// Column letters of a 1-based column number (1 -> A, 27 -> AA).
pub(crate) fn column(mut n: u32) -> String {
    let mut s = Vec::new();
    while n > 0 {
        let r = (n - 1) % 26;
        s.push(b'A' + r as u8);
        n = (n - 1) / 26;
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_default()
}

pub(crate) fn payload(client: u32, id: u64) -> String {
    format!("c{client}-m{id}")
}

pub(crate) fn mutation_json(client: u32, client_id: &str, id: u64) -> Value {
    json!({
        "id": id,
        "clientID": client_id,
        "name": "set",
        "args": {"cells": [{"ref": format!("{}{id}", column(client + 1)), "value": payload(client, id)}]},
        "timestamp": id as f64,
    })
}

pub(crate) struct Run {
    pub(crate) client: reqwest::Client,
    pub(crate) base: String,
    pub(crate) log: String,
    pub(crate) period: Duration,
    pub(crate) start: Instant,
    pub(crate) make_until: Instant,
    pub(crate) give_up_at: Instant,
    pub(crate) pull_every: Duration,
    pub(crate) pull_on: PullOn,
    pub(crate) pokes: tokio::sync::watch::Receiver<u64>,
}

pub(crate) async fn run_client(run: Arc<Run>, c: u32, tag: String) -> anyhow::Result<ClientReport> {
    let group = format!("g-{tag}-{c}");
    let client_id = format!("c-{tag}-{c}");
    let push_url = format!("{}/logs/{}/replicache/push", run.base, run.log);
    let pull_url = format!("{}/logs/{}/replicache/pull?view=none", run.base, run.log);
    let mut report = ClientReport::default();
    let mut pending: Vec<Made> = Vec::new();
    let mut next_id = 1u64;
    // Clients start spread over one period, as people do not type in step.
    let offset = run.period.mul_f64(f64::from(c) / 997.0 % 1.0);
    let mut next_make = run.start + offset;
    let mut unpushed = false;
    let mut retry_at: Option<Instant> = None;
    let mut backoff = RETRY_MIN;
    let mut next_pull = run.start;
    // A failed pull is tried again after a growing wait, as Replicache does.
    let mut pull_backoff = RETRY_MIN;
    let mut cookie = Value::Null;
    let mut pokes = run.pokes.clone();
    // With pokes: a poke newer than what this client has seen asks for a pull.
    let mut poked = false;
    loop {
        let now = Instant::now();
        let done = |pending: &Vec<Made>, next_make: Instant| {
            Instant::now() >= run.make_until && next_make >= run.make_until && pending.is_empty()
        };
        if now >= run.give_up_at || done(&pending, next_make) {
            break;
        }
        while next_make <= now && next_make < run.make_until {
            pending.push(Made {
                id: next_id,
                made_at: next_make,
                first_sent: None,
            });
            report.made += 1;
            next_id += 1;
            unpushed = true;
            next_make += run.period;
        }
        if unpushed && retry_at.is_none_or(|t| t <= now) {
            let batch: Vec<Value> = pending
                .iter()
                .take(MAX_PUSH_MUTATIONS)
                .map(|m| mutation_json(c, &client_id, m.id))
                .collect();
            let sent_at = Instant::now();
            for m in pending.iter_mut().take(MAX_PUSH_MUTATIONS) {
                m.first_sent.get_or_insert(sent_at);
            }
            let body = json!({"pushVersion": 1, "clientGroupID": group, "mutations": batch,
                "profileID": "bench-hot", "schemaVersion": ""});
            report.pushes += 1;
            let ok = match run.client.post(&push_url).json(&body).send().await {
                Ok(r) if r.status() == reqwest::StatusCode::TOO_MANY_REQUESTS => {
                    report.push_throttled += 1;
                    false
                }
                Ok(r) if r.status() == reqwest::StatusCode::OK => {
                    // A Replicache error (`{"error": ...}` with 200) is a refusal too.
                    let v: Value = r.json().await.unwrap_or(Value::Null);
                    v.get("error").is_none()
                }
                Ok(_) | Err(_) => false,
            };
            if ok {
                unpushed = pending.len() > MAX_PUSH_MUTATIONS;
                retry_at = None;
                backoff = RETRY_MIN;
            } else {
                report.refusals += 1;
                retry_at = Some(Instant::now() + backoff);
                backoff = (backoff * 2).min(RETRY_MAX);
            }
        }
        let now = Instant::now();
        let pull_due = match run.pull_on {
            PullOn::Timer => pending.iter().any(|m| m.first_sent.is_some()) && next_pull <= now,
            PullOn::Poke => poked || next_pull <= now,
        };
        if pull_due {
            poked = false;
            next_pull = now
                + match run.pull_on {
                    PullOn::Timer => run.pull_every,
                    PullOn::Poke => POKE_FALLBACK_PULL,
                };
            report.pulls += 1;
            let body = json!({"pullVersion": 1, "clientGroupID": group, "cookie": cookie,
                "profileID": "bench-hot", "schemaVersion": ""});
            let answer = run.client.post(&pull_url).json(&body).send().await;
            if let Ok(r) = &answer
                && r.status() == reqwest::StatusCode::TOO_MANY_REQUESTS
            {
                report.pull_throttled += 1;
            }
            let pulled = match answer {
                Ok(r) if r.status() == reqwest::StatusCode::OK => r
                    .json::<Value>()
                    .await
                    .ok()
                    .filter(|v| v.get("error").is_none()),
                _ => None,
            };
            match &pulled {
                Some(_) => pull_backoff = RETRY_MIN,
                None => {
                    next_pull = Instant::now() + pull_backoff;
                    pull_backoff = (pull_backoff * 2).min(RETRY_MAX);
                }
            }
            if let Some(v) = pulled {
                let seen = Instant::now();
                if let Some(c) = v.get("cookie") {
                    cookie = c.clone();
                }
                if let Some(last) = v
                    .pointer(&format!("/lastMutationIDChanges/{client_id}"))
                    .and_then(Value::as_u64)
                {
                    report.confirmed = report.confirmed.max(last);
                    pending.retain(|m| {
                        if m.id > last {
                            return true;
                        }
                        if let Some(t) = m.first_sent {
                            report
                                .visible_ms
                                .push(seen.duration_since(t).as_secs_f64() * 1000.0);
                        }
                        report
                            .made_visible_ms
                            .push(seen.duration_since(m.made_at).as_secs_f64() * 1000.0);
                        false
                    });
                }
            }
        }
        if done(&pending, next_make) {
            break;
        }
        // Sleep until the next thing to do.
        let mut wake = run.give_up_at;
        if next_make < run.make_until {
            wake = wake.min(next_make.max(Instant::now()));
        } else if Instant::now() < run.make_until {
            // Nothing more to make: wake at the end of the making, when an empty pending list
            // means this client is done.
            wake = wake.min(run.make_until);
        }
        if unpushed {
            wake = wake.min(retry_at.unwrap_or_else(Instant::now));
        }
        if run.pull_on == PullOn::Poke || pending.iter().any(|m| m.first_sent.is_some()) {
            wake = wake.min(next_pull);
        }
        if run.pull_on == PullOn::Poke {
            tokio::select! {
                _ = tokio::time::sleep_until(wake.max(Instant::now()).into()) => {}
                changed = pokes.changed() => {
                    let seen = cookie.as_u64().unwrap_or(0);
                    poked = changed.is_ok() && *pokes.borrow_and_update() > seen;
                }
            }
        } else {
            tokio::time::sleep_until(wake.max(Instant::now()).into()).await;
        }
    }
    Ok(report)
}
