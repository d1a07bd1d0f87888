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
    /// With pacing: a client pushes at most once per this long (zero: whenever it has a new
    /// mutation, as Replicache does).
    pub(crate) push_interval: Duration,
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

/// One client's state, carried from one step of its loop to the next.
struct Client {
    run: Arc<Run>,
    c: u32,
    group: String,
    client_id: String,
    push_url: String,
    pull_url: String,
    report: ClientReport,
    pending: Vec<Made>,
    next_id: u64,
    next_make: Instant,
    unpushed: bool,
    retry_at: Option<Instant>,
    backoff: Duration,
    /// With pacing: the client's next push slot.
    next_push: Instant,
    next_pull: Instant,
    // A failed pull is tried again after a growing wait, as Replicache does.
    pull_backoff: Duration,
    cookie: Value,
    pokes: tokio::sync::watch::Receiver<u64>,
    // With pokes: a poke newer than what this client has seen asks for a pull.
    poked: bool,
}

pub(crate) async fn run_client(run: Arc<Run>, c: u32, tag: String) -> anyhow::Result<ClientReport> {
    let mut client = Client::new(run, c, &tag);
    loop {
        let now = Instant::now();
        if now >= client.run.give_up_at || client.done() {
            break;
        }
        client.make_due(now);
        if client.unpushed && client.retry_at.is_none_or(|t| t <= now) && client.next_push <= now {
            client.push().await;
            // Paced: the next push waits for the next slot; what is made meanwhile joins it.
            let interval = client.run.push_interval;
            while client.next_push <= now && !interval.is_zero() {
                client.next_push += interval;
            }
        }
        let now = Instant::now();
        if client.pull_due(now) {
            client.pull(now).await;
        }
        if client.done() {
            break;
        }
        client.sleep().await;
    }
    Ok(client.report)
}

impl Client {
    fn new(run: Arc<Run>, c: u32, tag: &str) -> Self {
        // Clients start spread over one period, as people do not type in step.
        let offset = run.period.mul_f64(f64::from(c) / 997.0 % 1.0);
        Client {
            c,
            group: format!("g-{tag}-{c}"),
            client_id: format!("c-{tag}-{c}"),
            push_url: format!("{}/logs/{}/replicache/push", run.base, run.log),
            pull_url: format!("{}/logs/{}/replicache/pull?view=none", run.base, run.log),
            report: ClientReport::default(),
            pending: Vec::new(),
            next_id: 1,
            next_make: run.start + offset,
            unpushed: false,
            retry_at: None,
            backoff: RETRY_MIN,
            // Paced clients' slots start spread over one interval, as their typing does.
            next_push: run.start + run.push_interval.mul_f64(f64::from(c) / 997.0 % 1.0),
            next_pull: run.start,
            pull_backoff: RETRY_MIN,
            cookie: Value::Null,
            pokes: run.pokes.clone(),
            poked: false,
            run,
        }
    }

    /// Nothing more to make and nothing pending: the client is done.
    fn done(&self) -> bool {
        Instant::now() >= self.run.make_until
            && self.next_make >= self.run.make_until
            && self.pending.is_empty()
    }

    /// Makes the mutations whose slots have come, up to the end of the making.
    fn make_due(&mut self, now: Instant) {
        while self.next_make <= now && self.next_make < self.run.make_until {
            self.pending.push(Made {
                id: self.next_id,
                made_at: self.next_make,
                first_sent: None,
            });
            self.report.made += 1;
            self.next_id += 1;
            self.unpushed = true;
            self.next_make += self.run.period;
        }
    }

    /// Pushes the pending mutations (at most [`MAX_PUSH_MUTATIONS`]); a refusal backs off.
    async fn push(&mut self) {
        let batch: Vec<Value> = self
            .pending
            .iter()
            .take(MAX_PUSH_MUTATIONS)
            .map(|m| mutation_json(self.c, &self.client_id, m.id))
            .collect();
        let sent_at = Instant::now();
        for m in self.pending.iter_mut().take(MAX_PUSH_MUTATIONS) {
            m.first_sent.get_or_insert(sent_at);
        }
        let body = json!({"pushVersion": 1, "clientGroupID": self.group, "mutations": batch,
            "profileID": "bench-hot", "schemaVersion": ""});
        self.report.pushes += 1;
        let ok = match self
            .run
            .client
            .post(&self.push_url)
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status() == reqwest::StatusCode::TOO_MANY_REQUESTS => {
                self.report.push_throttled += 1;
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
            self.unpushed = self.pending.len() > MAX_PUSH_MUTATIONS;
            self.retry_at = None;
            self.backoff = RETRY_MIN;
        } else {
            self.report.refusals += 1;
            self.retry_at = Some(Instant::now() + self.backoff);
            self.backoff = (self.backoff * 2).min(RETRY_MAX);
        }
    }

    fn pull_due(&self, now: Instant) -> bool {
        match self.run.pull_on {
            PullOn::Timer => {
                self.pending.iter().any(|m| m.first_sent.is_some()) && self.next_pull <= now
            }
            PullOn::Poke => self.poked || self.next_pull <= now,
        }
    }

    /// Pulls (`view=none`); a failed pull backs off, an answer confirms mutations.
    async fn pull(&mut self, now: Instant) {
        self.poked = false;
        self.next_pull = now
            + match self.run.pull_on {
                PullOn::Timer => self.run.pull_every,
                PullOn::Poke => POKE_FALLBACK_PULL,
            };
        self.report.pulls += 1;
        let body = json!({"pullVersion": 1, "clientGroupID": self.group, "cookie": self.cookie,
            "profileID": "bench-hot", "schemaVersion": ""});
        let answer = self
            .run
            .client
            .post(&self.pull_url)
            .json(&body)
            .send()
            .await;
        if let Ok(r) = &answer
            && r.status() == reqwest::StatusCode::TOO_MANY_REQUESTS
        {
            self.report.pull_throttled += 1;
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
            Some(_) => self.pull_backoff = RETRY_MIN,
            None => {
                self.next_pull = Instant::now() + self.pull_backoff;
                self.pull_backoff = (self.pull_backoff * 2).min(RETRY_MAX);
            }
        }
        if let Some(v) = pulled {
            self.confirm(&v);
        }
    }

    /// Takes a pull's cookie, and drops the pending mutations it says were applied, timing each.
    fn confirm(&mut self, v: &Value) {
        let seen = Instant::now();
        if let Some(c) = v.get("cookie") {
            self.cookie = c.clone();
        }
        let Some(last) = v
            .pointer(&format!("/lastMutationIDChanges/{}", self.client_id))
            .and_then(Value::as_u64)
        else {
            return;
        };
        let report = &mut self.report;
        report.confirmed = report.confirmed.max(last);
        self.pending.retain(|m| {
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

    /// Sleeps until the next thing to do (with pokes, or until a poke arrives).
    async fn sleep(&mut self) {
        let run = &self.run;
        let mut wake = run.give_up_at;
        if self.next_make < run.make_until {
            wake = wake.min(self.next_make.max(Instant::now()));
        } else if Instant::now() < run.make_until {
            // Nothing more to make: wake at the end of the making, when an empty pending list
            // means this client is done.
            wake = wake.min(run.make_until);
        }
        if self.unpushed {
            wake = wake.min(
                self.retry_at
                    .unwrap_or_else(Instant::now)
                    .max(self.next_push),
            );
        }
        if run.pull_on == PullOn::Poke || self.pending.iter().any(|m| m.first_sent.is_some()) {
            wake = wake.min(self.next_pull);
        }
        if run.pull_on == PullOn::Poke {
            tokio::select! {
                _ = tokio::time::sleep_until(wake.max(Instant::now()).into()) => {}
                changed = self.pokes.changed() => {
                    let seen = self.cookie.as_u64().unwrap_or(0);
                    self.poked = changed.is_ok() && *self.pokes.borrow_and_update() > seen;
                }
            }
        } else {
            tokio::time::sleep_until(wake.max(Instant::now()).into()).await;
        }
    }
}
