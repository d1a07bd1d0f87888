//! `hot --model`: one sheet of many editors, predicted for AWS by replaying the costs measured
//! on the local stack against AWS's documented limits (docs/sync.md, "A sheet of 1,000
//! editors"). No network and no emulator: a discrete-event simulation with a seeded generator,
//! so the same arguments print the same figures.
//!
//! What is simulated, per editor count N (each editor making `rate` mutations a second):
//! - the editors' mutations, each editor at its own phase, and their pushes: today one push per
//!   mutation; with the design, a hot sheet's pages push at most once per *push interval* P (all
//!   their pending mutations in one push), P chosen so the sheet's pushes stay within the budget
//!   of its one FIFO message group (the lower of SQS's per-group send rate and what one writer
//!   drains at ten messages a batch), with headroom;
//! - the sheet's one writer: batches of up to ten messages in arrival order, each taking a
//!   receive, a group commit (median and tail as measured locally) and a delete, one batch at a
//!   time, as FIFO delivery holds a group while its batch is in flight;
//! - the pokes: at most one per *poke window* W (the first commit after a quiet spell at once),
//!   W chosen so the pulls the pokes cause (one per open page per poke) stay within the API's
//!   request budget; a mutation is visible to its editor when the pull after the poke that
//!   announced it returns.
//!
//! Figures: made → visible p50/p99, SQS sends a second on the group against its limit, write and
//! read units a second on the log's partition against 1,000 and 3,000, the writer's and the
//! API's mean Lambda concurrency, AppSync publishes and deliveries a second, and the cost of one
//! mutation at list prices. The calibration (bytes of an entry, the writer's round trip) is in
//! [`Costs`], each constant with where it was measured.

use serde_json::{Map, Value, json};

/// The committed `./scripts/bench hot` figures, read for the measured 100-editor costs.
const HOT_JSON: &str = include_str!("../../../docs/bench/hot.json");

/// AWS's documented limits the design relies on (addresses in docs/sync.md).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// SQS FIFO: 300 transactions a second per API action (SendMessage) on a partition; a
    /// message group lives in one partition, and the API sends one message per push.
    pub sqs_group_sends_per_s: f64,
    /// SQS FIFO: a batch (and a Lambda FIFO event source's batch) holds at most 10 messages.
    pub sqs_batch_max: usize,
    /// DynamoDB: a partition serves at most 1,000 write units and 3,000 read units a second.
    pub partition_wcu: f64,
    pub partition_rcu: f64,
    /// Lambda: the account's default concurrency quota (1,000).
    pub lambda_concurrency: f64,
    /// The API's request budget: the template's stage throttle (`throttlingRateLimit`, 1,000/s).
    pub api_rps: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            sqs_group_sends_per_s: 300.0,
            sqs_batch_max: 10,
            partition_wcu: 1000.0,
            partition_rcu: 3000.0,
            lambda_concurrency: 1000.0,
            api_rps: 1000.0,
        }
    }
}

/// The costs measured on the local stack (or stated where nothing measures them).
#[derive(Debug, Clone, Copy)]
pub struct Costs {
    /// Writer round trip at 64 editors (docs/sync.md, "One sheet's writer"): receive about
    /// 10 ms, commit 10 to 30 ms at the median with a tail, delete about 1 ms.
    pub receive_ms: f64,
    pub commit_median_ms: f64,
    /// Log-normal spread of the commit: 0.8 puts its p99 at 6.4 × the median (about 130 ms).
    pub commit_sigma: f64,
    pub delete_ms: f64,
    /// API push (request, checks, SendMessage), poke delivery, pull: stated, not measured hop by
    /// hop; together with the writer they make about the 152 ms edit → visible p50 that
    /// `bench realtime` measured between two pages (docs/bench/realtime.json).
    pub push_ms: f64,
    pub poke_delivery_ms: f64,
    pub pull_ms: f64,
    /// The poke window today (`SHEETLOG_POKE_COALESCE_MS`).
    pub poke_window_ms: f64,
    /// A `mutations` entry's bytes: 48 + 41 per client run + 9 per one-cell mutation (98 bytes
    /// for one mutation with 20-character ids, `mutations_entry_item_bytes`; about 9 more per
    /// `set`: docs/sync.md, "Cost").
    pub entry_base_bytes: f64,
    pub entry_run_bytes: f64,
    pub entry_mutation_bytes: f64,
    /// Range items: one write unit per client per window of 64 sequences.
    pub range_window: u64,
    /// Read units: a pull's one eventually consistent Query (`idle_pull_rru` = 0.5), the
    /// writer's strong head read and tombstone read per batch (1 + 1).
    pub pull_rru: f64,
    pub batch_rru: f64,
    /// Lambda memory (GB) and the request durations billed.
    pub api_gb: f64,
    pub writer_gb: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            receive_ms: 10.0,
            commit_median_ms: 20.0,
            commit_sigma: 0.8,
            delete_ms: 1.0,
            push_ms: 30.0,
            poke_delivery_ms: 20.0,
            pull_ms: 40.0,
            poke_window_ms: 100.0,
            entry_base_bytes: 48.0,
            entry_run_bytes: 41.0,
            entry_mutation_bytes: 9.0,
            range_window: 64,
            pull_rru: 0.5,
            batch_rru: 2.0,
            api_gb: 1.0,
            writer_gb: 0.5,
        }
    }
}

/// us-east-1 list prices (USD), as docs/deploy.md lists them.
#[derive(Debug, Clone, Copy)]
pub struct Prices {
    pub sqs_fifo_request: f64,
    pub wru: f64,
    pub rru: f64,
    pub lambda_request: f64,
    pub lambda_gb_s: f64,
    pub http_api_request: f64,
    pub appsync_operation: f64,
    pub appsync_connection_minute: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            sqs_fifo_request: 0.50e-6,
            wru: 0.625e-6,
            rru: 0.125e-6,
            lambda_request: 0.20e-6,
            lambda_gb_s: 0.000_013_333_4,
            http_api_request: 1.00e-6,
            appsync_operation: 1.00e-6,
            appsync_connection_minute: 0.08e-6,
        }
    }
}

/// Which design is simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    /// Today: one push (one SQS message) per mutation, pokes every 100 ms.
    Today,
    /// Adaptive push interval and poke window on a hot sheet.
    Paced,
}

/// Everything one prediction needs.
#[derive(Debug, Clone, Copy)]
pub struct Model {
    pub limits: Limits,
    pub costs: Costs,
    pub prices: Prices,
    /// The share of a limit the design plans to use (the rest absorbs bursts).
    pub headroom: f64,
    /// Simulated seconds, of which the first `warmup_s` are not counted.
    pub seconds: f64,
    pub warmup_s: f64,
    pub seed: u64,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            limits: Limits::default(),
            costs: Costs::default(),
            prices: Prices::default(),
            headroom: 0.8,
            seconds: 60.0,
            warmup_s: 10.0,
            seed: 1,
        }
    }
}

/// The push interval and poke window a design uses at one load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Seconds between one page's pushes (0: a push per mutation).
    pub push_interval_s: f64,
    pub poke_window_s: f64,
}

impl Model {
    /// Messages a second one writer drains from one group: ten per mean round trip (the
    /// log-normal commit's mean is its median times e^(σ²/2)).
    pub fn writer_capacity(&self) -> f64 {
        let c = &self.costs;
        let commit = c.commit_median_ms * (c.commit_sigma * c.commit_sigma / 2.0).exp();
        let round_trip = (c.receive_ms + commit + c.delete_ms) / 1000.0;
        self.limits.sqs_batch_max as f64 / round_trip
    }

    /// Pushes a second the sheet's one group may take, with headroom.
    pub fn group_budget(&self) -> f64 {
        self.headroom
            * self
                .limits
                .sqs_group_sends_per_s
                .min(self.writer_capacity())
    }

    /// The push interval and poke window for `editors` at `rate` mutations a second each.
    pub fn plan(&self, design: Design, editors: u32, rate: f64) -> Plan {
        let window = self.costs.poke_window_ms / 1000.0;
        match design {
            Design::Today => Plan {
                push_interval_s: 0.0,
                poke_window_s: window,
            },
            Design::Paced => pace(
                editors,
                rate,
                self.group_budget(),
                self.headroom * self.limits.api_rps,
                window,
            ),
        }
    }
}

/// The design's pacing: a page pushes at most once per interval, long enough that the sheet's
/// pushes stay within `push_budget` a second, and the sheet is poked at most once per window,
/// long enough that the pulls the pokes cause (one per page per poke) stay within what
/// `request_budget` leaves after the pushes. Below both budgets nothing changes: a push per
/// mutation, the usual `min_window`.
pub fn pace(
    editors: u32,
    rate: f64,
    push_budget: f64,
    request_budget: f64,
    min_window: f64,
) -> Plan {
    let n = f64::from(editors);
    let push_interval_s = (1.0 / rate).max(n / push_budget);
    let pushes = n / push_interval_s;
    let pull_budget = (request_budget - pushes).max(1.0);
    Plan {
        push_interval_s,
        poke_window_s: min_window.max(n / pull_budget),
    }
}

/// A deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Log-normal with this median and spread (Box-Muller).
    fn log_normal(&mut self, median: f64, sigma: f64) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        median * (sigma * z).exp()
    }
}

/// One push: its editor, when its message reaches the queue, and when its mutations were made.
#[derive(Debug, Clone)]
struct Message {
    editor: u32,
    arrives: f64,
    made: Vec<f64>,
}

/// The pushes of `editors` over the simulated time, in arrival order.
fn pushes(model: &Model, plan: Plan, editors: u32, rate: f64, rng: &mut Rng) -> Vec<Message> {
    let period = 1.0 / rate;
    let push_ms = model.costs.push_ms / 1000.0;
    let mut out = Vec::new();
    for editor in 0..editors {
        let phase = rng.unit() * period;
        let mut made: Vec<f64> = Vec::new();
        let mut t = phase;
        while t < model.seconds {
            made.push(t);
            t += period;
        }
        if plan.push_interval_s <= period {
            out.extend(made.into_iter().map(|m| Message {
                editor,
                arrives: m + push_ms,
                made: vec![m],
            }));
            continue;
        }
        // Paced: a mutation waits for the page's next push slot; one push carries all of them.
        let p = plan.push_interval_s;
        let slot_phase = rng.unit() * p;
        let mut current: Option<Message> = None;
        for m in made {
            let slot = slot_phase + ((m - slot_phase) / p).ceil().max(0.0) * p;
            match &mut current {
                Some(msg) if (msg.arrives - push_ms - slot).abs() < 1e-9 => msg.made.push(m),
                _ => {
                    out.extend(current.take());
                    current = Some(Message {
                        editor,
                        arrives: slot + push_ms,
                        made: vec![m],
                    });
                }
            }
        }
        out.extend(current);
    }
    out.sort_by(|a, b| a.arrives.total_cmp(&b.arrives));
    out
}

/// What the writer and the pokes did.
#[derive(Debug, Default)]
struct Run {
    /// Made → visible (s), for mutations made after the warm-up.
    latencies: Vec<f64>,
    batches: u64,
    writer_busy_s: f64,
    entry_wru: f64,
    range_wru: f64,
    pokes: u64,
    mutations: u64,
    /// When the writer finished the last message (every push is applied, however late).
    end_s: f64,
}

/// The sheet's pokes: at most one per window; the first commit after a quiet window at once,
/// the commits inside a window together when it ends.
#[derive(Debug)]
struct Pokes {
    window: f64,
    last: f64,
    pending: Option<f64>,
    count: u64,
}

impl Pokes {
    /// When the poke announcing a commit at `at` is published.
    fn announce(&mut self, at: f64) -> f64 {
        if let Some(s) = self.pending {
            if at <= s {
                return s;
            }
            self.count += 1;
            self.last = s;
            self.pending = None;
        }
        if at >= self.last + self.window {
            self.count += 1;
            self.last = at;
            at
        } else {
            let s = self.last + self.window;
            self.pending = Some(s);
            s
        }
    }
}

/// Range items: one write unit per client per window of `range_window` commits.
#[derive(Debug, Default)]
struct RangeWindow {
    clients: std::collections::HashSet<u32>,
    commits: u64,
    wru: f64,
}

impl RangeWindow {
    fn commit(&mut self, batch: &[Message], window: u64) {
        self.clients.extend(batch.iter().map(|m| m.editor));
        self.commits += 1;
        if self.commits == window {
            self.close();
        }
    }
    fn close(&mut self) {
        self.wru += self.clients.len() as f64;
        self.clients.clear();
        self.commits = 0;
    }
}

/// The writer, one batch at a time until every message is applied, and the pokes after its
/// commits.
fn simulate(model: &Model, plan: Plan, msgs: &[Message], rng: &mut Rng) -> Run {
    let c = &model.costs;
    let mut run = Run::default();
    let mut pokes = Pokes {
        window: plan.poke_window_s,
        last: f64::NEG_INFINITY,
        pending: None,
        count: 0,
    };
    let mut range = RangeWindow::default();
    let (mut free_at, mut i) = (0.0f64, 0usize);
    while i < msgs.len() {
        let start = free_at.max(msgs[i].arrives);
        let mut j = i + 1;
        while j < msgs.len() && j - i < model.limits.sqs_batch_max && msgs[j].arrives <= start {
            j += 1;
        }
        let batch = &msgs[i..j];
        let commit = rng.log_normal(c.commit_median_ms, c.commit_sigma);
        let committed = start + (c.receive_ms + commit) / 1000.0;
        free_at = committed + c.delete_ms / 1000.0;
        run.batches += 1;
        run.writer_busy_s += free_at - start;
        run.entry_wru += entry_wru(c, batch);
        range.commit(batch, c.range_window);
        let visible = pokes.announce(committed) + (c.poke_delivery_ms + c.pull_ms) / 1000.0;
        for made in batch.iter().flat_map(|m| &m.made) {
            run.mutations += 1;
            if *made >= model.warmup_s {
                run.latencies.push(visible - made);
            }
        }
        i = j;
    }
    range.close();
    run.range_wru = range.wru;
    run.pokes = pokes.count + u64::from(pokes.pending.is_some());
    run.end_s = free_at;
    run
}

/// Write units of one batch's entry: its bytes, rounded up to whole KB.
fn entry_wru(c: &Costs, batch: &[Message]) -> f64 {
    let mut runs = std::collections::HashSet::new();
    let mut mutations = 0usize;
    for m in batch {
        runs.insert(m.editor);
        mutations += m.made.len();
    }
    let bytes = c.entry_base_bytes
        + c.entry_run_bytes * runs.len() as f64
        + c.entry_mutation_bytes * mutations as f64;
    (bytes / 1024.0).ceil()
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One prediction: one design at one editor count.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub editors: u32,
    pub rate: f64,
    pub plan: Plan,
    /// False when the sheet's pushes exceed what its group or its writer can take: the queue
    /// grows for as long as the load lasts, and the percentiles are only the simulated window's.
    pub stable: bool,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub sqs_sends_per_s: f64,
    pub mutations_per_batch: f64,
    pub log_wcu_per_s: f64,
    pub range_wcu_per_s: f64,
    pub log_rcu_per_s: f64,
    pub writer_concurrency: f64,
    pub api_requests_per_s: f64,
    pub api_concurrency: f64,
    pub pokes_per_s: f64,
    pub appsync_outbound_per_s: f64,
    pub cost_per_mutation_usd: f64,
}

impl Model {
    /// Simulates `design` for `editors` editors making `rate` mutations a second each.
    pub fn predict(&self, design: Design, editors: u32, rate: f64) -> Prediction {
        let plan = self.plan(design, editors, rate);
        let mut rng = Rng::new(self.seed ^ u64::from(editors));
        let msgs = pushes(self, plan, editors, rate, &mut rng);
        let mut run = simulate(self, plan, &msgs, &mut rng);
        run.latencies.sort_by(f64::total_cmp);
        let n = f64::from(editors);
        // Sends a second while the editors type; the writer's rates over as long as it worked.
        let sent = msgs.iter().filter(|m| m.arrives < self.seconds).count();
        let sends = sent as f64 / self.seconds;
        let span = run.end_s.max(self.seconds);
        let pokes = run.pokes as f64 / span;
        let pulls = n * pokes;
        let mut p = Prediction {
            editors,
            rate,
            plan,
            stable: sends <= self.limits.sqs_group_sends_per_s && sends <= self.writer_capacity(),
            p50_ms: percentile(&run.latencies, 0.5) * 1000.0,
            p99_ms: percentile(&run.latencies, 0.99) * 1000.0,
            sqs_sends_per_s: sends,
            mutations_per_batch: run.mutations as f64 / (run.batches.max(1)) as f64,
            log_wcu_per_s: run.entry_wru / span,
            range_wcu_per_s: run.range_wru / span,
            log_rcu_per_s: pulls * self.costs.pull_rru + run.batches as f64 / span,
            writer_concurrency: run.writer_busy_s / span,
            api_requests_per_s: sends + pulls,
            api_concurrency: (sends * self.costs.push_ms + pulls * self.costs.pull_ms) / 1000.0,
            pokes_per_s: pokes,
            appsync_outbound_per_s: pulls,
            cost_per_mutation_usd: 0.0,
        };
        p.cost_per_mutation_usd =
            self.cost(&run, msgs.len() as f64, n) / run.mutations.max(1) as f64;
        p
    }

    /// Dollars the whole run cost, at list prices.
    fn cost(&self, run: &Run, pushes: f64, editors: f64) -> f64 {
        let (c, x) = (&self.costs, &self.prices);
        let batches = run.batches as f64;
        let pokes = run.pokes as f64;
        let pulls = editors * pokes;
        // SQS: a send per push; a receive, the handler's delete and the event source's per batch.
        let sqs = (pushes + 3.0 * batches) * x.sqs_fifo_request;
        let dynamo = (run.entry_wru + run.range_wru) * x.wru
            + (pulls * c.pull_rru + batches * c.batch_rru) * x.rru;
        let api_s = (pushes * c.push_ms + pulls * c.pull_ms) / 1000.0;
        let api = (pushes + pulls) * (x.http_api_request + x.lambda_request)
            + api_s * c.api_gb * x.lambda_gb_s;
        let writer = batches * x.lambda_request + run.writer_busy_s * c.writer_gb * x.lambda_gb_s;
        // A publish and each delivery are operations; every editor holds a connection throughout.
        let minutes = run.end_s.max(self.seconds) / 60.0;
        let appsync =
            (pokes + pulls) * x.appsync_operation + editors * minutes * x.appsync_connection_minute;
        sqs + dynamo + api + writer + appsync
    }
}

impl Prediction {
    /// Each limit's use (rate over limit), highest first: the first is what breaks first.
    pub fn limits_used(&self, limits: &Limits) -> Vec<(&'static str, f64)> {
        let mut used = vec![
            (
                "sqs_group_sends",
                self.sqs_sends_per_s / limits.sqs_group_sends_per_s,
            ),
            (
                "log_partition_wcu",
                self.log_wcu_per_s / limits.partition_wcu,
            ),
            (
                "log_partition_rcu",
                self.log_rcu_per_s / limits.partition_rcu,
            ),
            (
                "lambda_concurrency",
                (self.api_concurrency + self.writer_concurrency) / limits.lambda_concurrency,
            ),
            ("api_requests", self.api_requests_per_s / limits.api_rps),
        ];
        used.sort_by(|a, b| b.1.total_cmp(&a.1));
        used
    }
}

/// `x` to `digits` significant digits.
fn significant(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(digits - 1 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The measured 100-editor figures the model is checked against (`queued_100` of hot.json).
pub fn measured_100() -> anyhow::Result<(f64, f64)> {
    let v: Value = serde_json::from_str(HOT_JSON)?;
    let get = |k: &str| {
        v.pointer(&format!("/queued_100/{k}"))
            .and_then(Value::as_f64)
            .ok_or_else(|| anyhow::anyhow!("docs/bench/hot.json has no queued_100.{k}"))
    };
    Ok((
        get("hot_wru_per_mutation")?,
        get("hot_appends_per_mutation")?,
    ))
}

/// One prediction's keys, suffixed with its editor count (and `_today` for today's design).
fn keys(out: &mut Map<String, Value>, p: &Prediction, limits: &Limits, suffix: &str) {
    let n = p.editors;
    let mut put = |k: &str, v: Value| {
        out.insert(format!("model_{k}{suffix}_{n}"), v);
    };
    put("p50_ms", json!(r1(p.p50_ms)));
    put("p99_ms", json!(r1(p.p99_ms)));
    put("stable", json!(p.stable));
    put(
        "push_interval_ms",
        json!(r1(p.plan.push_interval_s * 1000.0)),
    );
    put("poke_window_ms", json!(r1(p.plan.poke_window_s * 1000.0)));
    put("sqs_sends_per_s", json!(r1(p.sqs_sends_per_s)));
    put(
        "sqs_over_limit",
        json!(p.sqs_sends_per_s > limits.sqs_group_sends_per_s),
    );
    put("mutations_per_batch", json!(r1(p.mutations_per_batch)));
    put("log_partition_wcu_per_s", json!(r1(p.log_wcu_per_s)));
    put("range_items_wcu_per_s", json!(r1(p.range_wcu_per_s)));
    put("log_partition_rcu_per_s", json!(r1(p.log_rcu_per_s)));
    put("writer_concurrency", json!(r1(p.writer_concurrency)));
    put("api_requests_per_s", json!(r1(p.api_requests_per_s)));
    put("api_concurrency", json!(r1(p.api_concurrency)));
    put("appsync_publishes_per_s", json!(r1(p.pokes_per_s)));
    put(
        "appsync_outbound_per_s",
        json!(r1(p.appsync_outbound_per_s)),
    );
    put(
        "cost_per_mutation_usd",
        json!(significant(p.cost_per_mutation_usd, 3)),
    );
    let used = p.limits_used(limits);
    put("first_limit", json!(used[0].0));
    put(
        "first_limit_use",
        json!((used[0].1 * 100.0).round() / 100.0),
    );
}

/// The assumptions printed with the figures.
pub fn assumptions(model: &Model) -> Value {
    let (l, c) = (&model.limits, &model.costs);
    json!({
        "simulation": format!("discrete-event, one sheet, one FIFO message group, one writer; \
            {} simulated s (first {} s not counted), seed {}", model.seconds, model.warmup_s, model.seed),
        "sqs_group_sends_per_s_limit": l.sqs_group_sends_per_s,
        "sqs_batch_max": l.sqs_batch_max,
        "partition_wcu_limit": l.partition_wcu,
        "partition_rcu_limit": l.partition_rcu,
        "lambda_concurrency_limit": l.lambda_concurrency,
        "api_rps_budget": l.api_rps,
        "headroom": model.headroom,
        "writer_round_trip_ms": format!("receive {} + commit log-normal median {} sigma {} + delete {} \
            (local stack, 64 editors)", c.receive_ms, c.commit_median_ms, c.commit_sigma, c.delete_ms),
        "writer_capacity_msgs_per_s": r1(model.writer_capacity()),
        "group_budget_pushes_per_s": r1(model.group_budget()),
        "push_ms": c.push_ms, "poke_delivery_ms": c.poke_delivery_ms, "pull_ms": c.pull_ms,
        "pulls": "every open page pulls once per poke; each pull one eventually consistent Query (0.5 RRU)",
        "entry_bytes": format!("{} + {} per client run + {} per one-cell mutation",
            c.entry_base_bytes, c.entry_run_bytes, c.entry_mutation_bytes),
        "prices_usd": "us-east-1: SQS FIFO 0.50/M requests; DynamoDB on demand 0.625/M WRU, 0.125/M RRU; \
            Lambda arm64 0.20/M requests, 0.0000133334/GB-s; HTTP API 1.00/M; AppSync Events 1.00/M \
            operations (a publish and each delivery), 0.08/M connection-minutes",
    })
}

/// `hot --model`: today's design and the paced one at each editor count.
pub fn run(
    editors: &[u32],
    rate: f64,
    seconds: f64,
    api_rps: f64,
    json_out: bool,
) -> anyhow::Result<()> {
    anyhow::ensure!(seconds > 15.0, "--model-seconds must be above 15");
    anyhow::ensure!(api_rps >= 1.0, "--model-api-rps must be at least 1");
    let model = Model {
        seconds,
        limits: Limits {
            api_rps,
            ..Limits::default()
        },
        ..Model::default()
    };
    let mut out = Map::new();
    let (wru, appends) = measured_100()?;
    out.insert("measured_wru_per_mutation_100".into(), json!(wru));
    out.insert("measured_appends_per_mutation_100".into(), json!(appends));
    for &n in editors {
        keys(
            &mut out,
            &model.predict(Design::Paced, n, rate),
            &model.limits,
            "",
        );
        keys(
            &mut out,
            &model.predict(Design::Today, n, rate),
            &model.limits,
            "_today",
        );
    }
    out.insert("model_rate_per_editor".into(), json!(rate));
    out.insert("assumptions".into(), assumptions(&model));
    if json_out {
        println!("{}", Value::Object(out));
    } else {
        for (k, v) in &out {
            if k != "assumptions" {
                println!("{k:<48} {v}");
            }
        }
        println!("\nassumptions:");
        for (k, v) in out["assumptions"].as_object().into_iter().flatten() {
            println!("  {k:<30} {v}");
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "hot_model_tests.rs"]
mod tests;
