//! `hot`: many editors on one sheet. C simulated Replicache clients (one client group each) push
//! one new mutation every 1/R seconds for T seconds to one log, through the local stack's HTTP API
//! (the real router served on a loopback port, over a fresh emulator stack with the stream
//! router and snapshot worker running, as `sheetlog dev` runs them), in each write mode
//! (`syncWrites`: `queued` through the FIFO sync queue and its writer, `direct` in the request).
//!
//! The API is served behind the local stand-in for API Gateway
//! (`sheetlog_local::local_gateway`): the stage's throttle (`--throttle`: by default the rate and
//! burst of the template's stage, as a deployed stack has them), joined duplicate headers,
//! Lambda's request limit and the function's timeout. A throttled request is answered `429` as
//! API Gateway answers it.
//!
//! Each client behaves as Replicache does: it keeps its pending mutations (those no pull has shown
//! applied) and pushes all of them, serially, whenever it has a new one; an answer other than 200
//! (or no answer within 30 s, API Gateway's limit) is retried with a growing backoff, and so is a
//! pull that fails; it pulls
//! (`view=none`) when the sheet's poke announces a sequence past its cookie and once a minute
//! besides (`--pull-on poke`, the default; `--pull-on timer` pulls every `--pull-ms` while it
//! has pending mutations instead) and drops those that `lastMutationIDChanges` says were
//! applied. After T seconds no new mutation is made, and the
//! clients carry on until every mutation is confirmed or `--drain-secs` pass.
//!
//! `--pace` runs the design for hot sheets (docs/sync.md, "A sheet of 1,000 editors") as far as
//! it runs locally: each client pushes at most once per push interval (its mutations made
//! meanwhile join that push) and the stack's poker coalesces pokes over a window, both chosen
//! from the editor count and the local stack's measured budgets by the same rule `hot --model`
//! applies to AWS's limits (`hot_model::pace`). The bench hands the clients the interval, where
//! the design has the sheet announce it.
//!
//! Figures (per mode; the queued mode's keys start `hot_`, the direct mode's `direct_`):
//! - `mutations_applied`: distinct mutations found in the log, read back entry by entry;
//! - `push_refusals`: answers other than 200 (and timeouts) that a client had to retry;
//! - `push_throttled` / `pull_throttled`: of the pushes and pulls, those the stage's throttle
//!   answered `429`; `requests_per_s`: pushes and pulls per second over the run;
//!   `throttle_rate_limit` / `throttle_burst_limit`: the throttle in front (null when off);
//!   `gateway`: whether the stand-in was in front at all (`--no-gateway` serves the router bare);
//! - `duplicates`, `out_of_order`, `payload_mismatches`: CHECKED on the read-back log. Every
//!   mutation carries a unique payload (cell `<client column><id>` = `"c<client>-m<id>"`): each
//!   must appear once, with its own payload, and each client's ids must appear in increasing
//!   order;
//! - `wru_per_mutation`: DynamoDB write units of every write the API (and the writer) sent,
//!   counted on the wire by a proxy in front of the emulator (`sheetlog_tests::wire`), per applied mutation;
//! - `appends_per_mutation`: log entries holding mutations, per applied mutation;
//! - `push_to_visible_ms_p50` / `_p99`: from the first push that carried a mutation to the first
//!   pull that shows it applied; `made_to_visible_ms_…` from when it was made (a mutation made
//!   while the client's previous push is still out waits for that push to be answered, as in
//!   Replicache, so under load this is the figure a person feels).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Map, Value, json};
use sheetlog_api::{ApiConfig, AppState};
use sheetlog_core::config::LogConfig;
use sheetlog_pipeline::{LocalPipeline, LocalPipelineConfig, create_local_stack};
use sheetlog_tests::Emulator;
use sheetlog_tests::emulator::unique_prefix;
use tokio::task::JoinHandle;

use crate::pipeline::round1;
use sheetlog_local::local_gateway::{self, GatewaySettings, Throttle};
use sheetlog_tests::wire::WireCounter;

pub use crate::hot_client::PullOn;
use crate::hot_client::{
    ClientReport, POKE_FALLBACK_PULL, REQUEST_TIMEOUT, RETRY_MIN, Run, column, payload, run_client,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    Queued,
    Direct,
    Both,
}

/// The sheet's pokes, delivered in-process: the newest sequence announced.
#[derive(Debug)]
struct PokeHub(tokio::sync::watch::Sender<u64>);

#[async_trait::async_trait]
impl sheetlog_core::poke::PokePublisher for PokeHub {
    async fn publish(
        &self,
        _channel: &str,
        events: Vec<String>,
    ) -> Result<(), sheetlog_core::poke::PokeError> {
        for e in events {
            if let Some(seq) = serde_json::from_str::<Value>(&e)
                .ok()
                .and_then(|v| v.get("seq").and_then(Value::as_u64))
            {
                self.0.send_if_modified(|s| {
                    let newer = seq > *s;
                    *s = (*s).max(seq);
                    newer
                });
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Queued,
    Direct,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Queued => "queued",
            Mode::Direct => "direct",
        }
    }
    /// The prefix of this mode's keys.
    fn prefix(self) -> &'static str {
        match self {
            Mode::Queued => "hot",
            Mode::Direct => "direct",
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct HotArgs {
    /// Print one JSON object of the figures instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Clients (editors) on the one sheet, each its own client group. A comma-separated list
    /// (`8,32,64,100`) runs each count in turn, on a fresh stack each.
    #[arg(long, value_delimiter = ',', default_value = "64")]
    pub clients: Vec<u32>,
    /// Pushes per second per client (one new mutation each).
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
    /// Seconds during which the clients make new mutations.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// Which write mode(s) to measure.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    pub mode: ModeArg,
    /// After the T seconds, how long the clients may keep pushing and pulling until every
    /// mutation is confirmed.
    #[arg(long, default_value_t = 60)]
    pub drain_secs: u64,
    /// What makes a client pull: `poke` (as Replicache with pokes: every client pulls when the
    /// sheet's poke arrives, the pokes the writer and the API send through the stack's
    /// coalescing `Poker`, delivered in-process instead of over AppSync's WebSocket, and once a
    /// minute besides, Replicache's default pull interval) or `timer` (a client with pending
    /// mutations pulls every `--pull-ms`, the way pages without pokes poll).
    #[arg(long, value_enum, default_value_t = PullOn::Poke)]
    pub pull_on: PullOn,
    /// With `--pull-on timer`: how often a client with pending mutations pulls (milliseconds).
    #[arg(long, default_value_t = 250)]
    pub pull_ms: u64,
    /// The stage's throttle in front of the API: `template` (the rate and burst of the template's
    /// `$default` stage, described with the stack's default settings), `off`, or `RATE:BURST`
    /// (requests per second and bucket size, as the stack's `throttlingRateLimit` and
    /// `throttlingBurstLimit` take them).
    #[arg(long, default_value = "template")]
    pub throttle: String,
    /// Serve the router bare, without the API Gateway stand-in (no throttle, no request limit,
    /// no timeout), to see what the stand-in itself costs.
    #[arg(long)]
    pub no_gateway: bool,
    /// Draw push -> visible (p50, p99) against the client counts of the run, per mode, into
    /// this SVG file.
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
    /// With `--svg`: draw the chart from this file, the `--json` output of earlier runs (one
    /// run's object or `{"runs": [...]}`; several files' runs are joined), instead of measuring.
    #[arg(long, value_delimiter = ',')]
    pub from_json: Vec<std::path::PathBuf>,
    /// Instead of measuring: predict one sheet on AWS at each of `--editors` (`--rate` mutations
    /// a second each), today's design and the paced one, from the measured local costs and
    /// AWS's documented limits (`hot_model.rs`; no network, no emulator).
    #[arg(long)]
    pub model: bool,
    /// With `--model`: the editor counts predicted.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
    pub editors: Vec<u32>,
    /// With `--model`: simulated seconds of typing (the first 10 are not counted).
    #[arg(long, default_value_t = 60.0)]
    pub model_seconds: f64,
    /// With `--model`: the API's request budget a second (the stage's `throttlingRateLimit`;
    /// the template's is 1,000).
    #[arg(long, default_value_t = 1000.0)]
    pub model_api_rps: f64,
    /// The design's pacing on the local stack (docs/sync.md, "A sheet of 1,000 editors"): each
    /// client pushes at most once per push interval and the sheet is poked at most once per
    /// window, both from the editor count and 80 % of the local stack's measured capacities
    /// ([`LOCAL_WRITER_CAPACITY`], [`LOCAL_REQUEST_CAPACITY`]), as `hot --model` paces AWS's.
    #[arg(long)]
    pub pace: bool,
}

/// Pushes a second the local writer drains when it cannot keep up: in `./scripts/bench hot --pace`
/// at 200 editors offered 81 pushes a second, it made 177 group commits in 21.6 s (8.2 a second)
/// of about ten pushes each (on this 2-core machine, shared with other work at load 2 to 3).
pub const LOCAL_WRITER_CAPACITY: f64 = 82.0;
/// Requests (pushes and pulls) a second the local stack served while keeping up at 100 editors
/// (`queued_100` in docs/bench/hot.json: 1,902 pushes and 6,798 pulls in 20 s).
pub const LOCAL_REQUEST_CAPACITY: f64 = 435.0;
/// Today's poke window (`SHEETLOG_POKE_COALESCE_MS`).
const POKE_WINDOW: Duration = Duration::from_millis(100);

/// The push interval (zero: a push per mutation) and poke window of a run.
fn pacing(args: &HotArgs, clients: u32) -> (Duration, Duration) {
    if !args.pace {
        return (Duration::ZERO, POKE_WINDOW);
    }
    // The same headroom as the model plans on AWS's limits.
    let headroom = crate::hot_model::Model::default().headroom;
    let plan = crate::hot_model::pace(
        clients,
        args.rate,
        headroom * LOCAL_WRITER_CAPACITY,
        headroom * LOCAL_REQUEST_CAPACITY,
        POKE_WINDOW.as_secs_f64(),
    );
    (
        Duration::from_secs_f64(plan.push_interval_s),
        Duration::from_secs_f64(plan.poke_window_s),
    )
}

/// One mode's figures, by key without the mode prefix.
pub type Figures = BTreeMap<String, Value>;

pub fn run(args: HotArgs) -> anyhow::Result<()> {
    ensure!(
        !args.clients.is_empty() && args.clients.iter().all(|c| *c >= 1),
        "--clients must be at least 1"
    );
    ensure!(
        args.rate > 0.0 && args.rate <= 50.0,
        "--rate must be above 0 and at most 50 pushes/s"
    );
    ensure!(args.seconds >= 1, "--seconds must be at least 1");
    if args.model {
        ensure!(
            !args.editors.is_empty() && args.editors.iter().all(|e| *e >= 1),
            "--editors must be at least 1"
        );
        return crate::hot_model::run(
            &args.editors,
            args.rate,
            args.model_seconds,
            args.model_api_rps,
            args.json,
        );
    }
    if !args.from_json.is_empty() {
        let path = args
            .svg
            .as_deref()
            .context("--from-json draws a chart: give --svg FILE")?;
        let mut runs = Vec::new();
        for file in &args.from_json {
            let v: Value = serde_json::from_slice(&std::fs::read(file)?)
                .with_context(|| format!("{}", file.display()))?;
            match v.get("runs").and_then(Value::as_array) {
                Some(rs) => runs.extend(rs.iter().filter_map(|r| r.as_object().cloned())),
                None => runs.extend(v.as_object().cloned()),
            }
        }
        return draw(path, &[Mode::Queued, Mode::Direct], &runs);
    }
    let modes: &[Mode] = match args.mode {
        ModeArg::Queued => &[Mode::Queued],
        ModeArg::Direct => &[Mode::Direct],
        ModeArg::Both => &[Mode::Queued, Mode::Direct],
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let gateway = match args.no_gateway {
        true => None,
        false => Some(rt.block_on(gateway_settings(&args.throttle))?),
    };
    let mut runs = Vec::new();
    for &clients in &args.clients {
        let mut out = Map::new();
        for &mode in modes {
            let f = rt.block_on(measure(mode, clients, &args, gateway.as_ref()))?;
            for (k, v) in f {
                out.insert(format!("{}_{k}", mode.prefix()), v);
            }
        }
        runs.push(out);
    }
    if let Some(path) = &args.svg {
        draw(path, modes, &runs)?;
    }
    if args.json {
        match <[Map<String, Value>; 1]>::try_from(runs) {
            Ok([one]) => println!("{}", Value::Object(one)),
            Err(runs) => println!("{}", json!({ "runs": runs })),
        }
    } else {
        for out in &runs {
            for (k, v) in out {
                println!("{k:<42} {v}");
            }
            println!();
        }
    }
    Ok(())
}

/// Push -> visible p50 and p99 against clients, one pair of lines per mode.
fn draw(path: &std::path::Path, modes: &[Mode], runs: &[Map<String, Value>]) -> anyhow::Result<()> {
    use crate::chart::{COLORS, LegendAt, Line, log_log_svg};
    let mut lines = Vec::new();
    for (i, mode) in modes.iter().enumerate() {
        for (j, q) in ["p50", "p99"].into_iter().enumerate() {
            let key = |k: &str| format!("{}_{k}", mode.prefix());
            let mut points: Vec<(f64, f64)> = runs
                .iter()
                .filter_map(|r| {
                    Some((
                        r.get(&key("clients"))?.as_f64()?,
                        r.get(&key(&format!("push_to_visible_ms_{q}")))?.as_f64()?,
                    ))
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            lines.push(Line {
                name: format!("{} {q}", mode.name()),
                color: COLORS[(i * 2 + j) % COLORS.len()],
                points,
            });
        }
    }
    log_log_svg(
        path,
        "Push -> visible in a pull, editors on one sheet (1 push/s each)",
        ("editors (clients) on the sheet", "push -> visible (ms)"),
        LegendAt::UpperLeft,
        &lines,
    )
}

/// The local stack one mode runs against: the emulator, the API over HTTP (its DynamoDB traffic
/// through the wire counter), the pipeline's drivers.
struct HotStack {
    base: String,
    wire: WireCounter,
    /// The sheet's pokes, as the clients receive them.
    pokes: tokio::sync::watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
    /// Kept last: dropped after the tasks that talk to it are aborted.
    _emulator: Emulator,
}

impl Drop for HotStack {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The gateway stand-in's settings: the template's (its stage's throttle, the API function's
/// timeout), with the throttle `--throttle` asks for.
async fn gateway_settings(throttle: &str) -> anyhow::Result<GatewaySettings> {
    eprintln!("[bench hot] describing the template for the gateway's settings ...");
    let description = sheetlog_local::dev::describe_template(&[]).await?;
    let mut settings = GatewaySettings::from_description(&description)?;
    match throttle {
        "template" => {}
        "off" => settings.throttle = None,
        given => {
            let (rate, burst) = given
                .split_once(':')
                .context("--throttle takes template, off or RATE:BURST")?;
            let rate_limit: f64 = rate
                .parse()
                .with_context(|| format!("--throttle rate {rate:?}"))?;
            let burst_limit: u32 = burst
                .parse()
                .with_context(|| format!("--throttle burst {burst:?}"))?;
            ensure!(
                rate_limit.is_finite() && rate_limit > 0.0 && burst_limit >= 1,
                "--throttle needs a positive rate and a burst of at least 1"
            );
            settings.throttle = Some(Throttle {
                rate_limit,
                burst_limit,
            });
        }
    }
    Ok(settings)
}

async fn start_stack(
    mode: Mode,
    gateway: Option<&GatewaySettings>,
    poke_window: Duration,
) -> anyhow::Result<HotStack> {
    let emulator = Emulator::start()?;
    let sdk = emulator.sdk_config().await;
    let local = create_local_stack(&sdk, &unique_prefix(&format!("hot-{}", mode.name()))).await?;
    let wire = WireCounter::start(emulator.endpoint(), &local.resources.entry_table).await?;
    let counted = wire.sdk_config(&sdk);
    let cfg = api_config(mode, &local);
    let (poke_tx, pokes) = tokio::sync::watch::channel(0u64);
    let mut poke_config = sheetlog_core::poke::PokeConfig::new("http://127.0.0.1/event");
    poke_config.window = poke_window;
    let poker = Arc::new(sheetlog_core::poke::Poker::new(
        Arc::new(PokeHub(poke_tx)),
        &poke_config,
    ));
    let state = AppState::from_sdk(&counted, &local.resources, LogConfig::default(), cfg)?
        .with_poker(poker.clone());
    let app = sheetlog_api::router(Arc::new(state));
    let app = match gateway {
        Some(g) => local_gateway::front(local_gateway::invocation(app, g), g),
        None => app,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let mut pipeline = LocalPipeline::new(
        &sheetlog_pipeline::Roles::shared(&sdk),
        &local.resources,
        &local.queues,
        LocalPipelineConfig {
            poll_interval: Duration::from_millis(50),
            stream_failure_queue: Some(local.stream_failure_queue.clone()),
            ..Default::default()
        },
    )?;
    if mode == Mode::Queued {
        // The writer's DynamoDB traffic is counted like the API's; its queue traffic is not.
        let defaults = ApiConfig::default();
        let writer = sheetlog_sync_writer::Handler::from_sdk(
            &counted,
            &local.resources,
            LogConfig::default(),
            sheetlog_sync_writer::WriterConfig {
                trigger: sheetlog_core::log::SnapshotTrigger {
                    interval: defaults.snapshot_interval,
                    segment_max_entries: defaults.segment_max_entries,
                },
                ..Default::default()
            },
        )?
        .with_poker(poker);
        pipeline = pipeline.with_sync_writer(&sdk, &local.sync_queues.queue, writer);
    }
    let pipeline = tokio::spawn(pipeline.run(std::future::pending::<()>()));
    Ok(HotStack {
        base,
        wire,
        pokes,
        tasks: vec![server, pipeline],
        _emulator: emulator,
    })
}

fn api_config(mode: Mode, local: &sheetlog_pipeline::LocalStack) -> ApiConfig {
    match mode {
        Mode::Direct => ApiConfig {
            sync_writes: sheetlog_api::SyncWrites::Direct,
            ..ApiConfig::default()
        },
        Mode::Queued => ApiConfig {
            sync_writes: sheetlog_api::SyncWrites::Queued,
            sync_queue_url: Some(local.sync_queues.queue.clone()),
            ..ApiConfig::default()
        },
    }
}

/// One mode, measured on its own fresh stack.
pub async fn measure(
    mode: Mode,
    clients: u32,
    args: &HotArgs,
    gateway: Option<&GatewaySettings>,
) -> anyhow::Result<Figures> {
    eprintln!(
        "[bench hot] {}: {} clients x {} pushes/s for {} s ...",
        mode.name(),
        clients,
        args.rate,
        args.seconds
    );
    let (_, poke_window) = pacing(args, clients);
    let stack = start_stack(mode, gateway, poke_window).await?;
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(1024)
        .build()?;
    let log = sheetlog_tests::api::create_log(&http, &stack.base).await?;
    let tag = unique_prefix("h");
    let driven = drive_clients(&stack, &http, &log, &tag, clients, args).await?;
    eprintln!(
        "[bench hot] {}: requests through the API and writer: {}",
        mode.name(),
        stack.wire.counts.ops_summary()
    );
    let read = read_back(&http, &stack.base, &log, &tag, clients).await?;
    let mut figures = settings_figures(clients, args, gateway);
    figures.extend(request_figures(&driven));
    figures.extend(mutation_figures(&driven, &read));
    figures.extend(latency_figures(&driven));
    eprintln!(
        "[bench hot] {}: {} of {} applied, {} refusals, {} duplicates, {} out of order",
        mode.name(),
        read.applied,
        driven.total(|r| r.made),
        figures["push_refusals"],
        read.duplicates,
        read.out_of_order
    );
    Ok(figures)
}

/// What the clients of one mode saw, and what the API and writer wrote meanwhile.
struct Driven {
    reports: Vec<ClientReport>,
    /// Seconds from the start of the making until the last client stopped.
    elapsed: f64,
    write_units: u64,
    entry_puts: u64,
}

impl Driven {
    /// The sum of one count over every client.
    fn total(&self, count: impl Fn(&ClientReport) -> u64) -> u64 {
        self.reports.iter().map(count).sum()
    }
}

/// Runs `clients` clients against the stack until each is done, counting the writes on the wire.
async fn drive_clients(
    stack: &HotStack,
    http: &reqwest::Client,
    log: &str,
    tag: &str,
    clients: u32,
    args: &HotArgs,
) -> anyhow::Result<Driven> {
    let writes_before = stack.wire.counts.write_units();
    let entry_puts_before = stack.wire.counts.entry_puts();
    let start = Instant::now();
    let make_until = start + Duration::from_secs(args.seconds);
    let run = Arc::new(Run {
        push_interval: pacing(args, clients).0,
        client: http.clone(),
        base: stack.base.clone(),
        log: log.to_owned(),
        period: Duration::from_secs_f64(1.0 / args.rate),
        start,
        make_until,
        give_up_at: make_until + Duration::from_secs(args.drain_secs),
        pull_every: Duration::from_millis(args.pull_ms.max(1)),
        pull_on: args.pull_on,
        pokes: stack.pokes.clone(),
    });
    let mut tasks = Vec::new();
    for c in 0..clients {
        tasks.push(tokio::spawn(run_client(run.clone(), c, tag.to_owned())));
    }
    let mut reports = Vec::new();
    for t in tasks {
        reports.push(t.await??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let write_units = stack.wire.counts.write_units() - writes_before;
    let entry_puts = stack.wire.counts.entry_puts() - entry_puts_before;
    Ok(Driven {
        reports,
        elapsed,
        write_units,
        entry_puts,
    })
}

/// Figures from (key, value) pairs.
fn table<const N: usize>(pairs: [(&str, Value); N]) -> Figures {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The run's settings: clients, rate, pulls and the gateway in front.
fn settings_figures(clients: u32, args: &HotArgs, gateway: Option<&GatewaySettings>) -> Figures {
    let throttle = gateway.and_then(|g| g.throttle);
    let (push_interval, poke_window) = pacing(args, clients);
    table([
        ("clients", json!(clients)),
        ("paced", json!(args.pace)),
        ("push_interval_ms", json!(push_interval.as_millis() as u64)),
        ("poke_window_ms", json!(poke_window.as_millis() as u64)),
        ("rate_per_client", json!(args.rate)),
        ("seconds", json!(args.seconds)),
        (
            "pull_on",
            json!(match args.pull_on {
                PullOn::Poke => "poke",
                PullOn::Timer => "timer",
            }),
        ),
        (
            "pull_interval_ms",
            json!(match args.pull_on {
                PullOn::Poke => POKE_FALLBACK_PULL.as_millis() as u64,
                PullOn::Timer => args.pull_ms,
            }),
        ),
        ("throttle_rate_limit", json!(throttle.map(|t| t.rate_limit))),
        (
            "throttle_burst_limit",
            json!(throttle.map(|t| t.burst_limit)),
        ),
        ("gateway", json!(gateway.is_some())),
    ])
}

/// The clients' pushes and pulls: how many, how many refused or throttled, how many a second.
fn request_figures(d: &Driven) -> Figures {
    table([
        ("pulls", json!(d.total(|r| r.pulls))),
        ("push_throttled", json!(d.total(|r| r.push_throttled))),
        ("pull_throttled", json!(d.total(|r| r.pull_throttled))),
        (
            "requests_per_s",
            json!(round1(d.total(|r| r.pushes + r.pulls) as f64 / d.elapsed)),
        ),
        ("pushes", json!(d.total(|r| r.pushes))),
        ("push_refusals", json!(d.total(|r| r.refusals))),
    ])
}

/// The mutations made, applied and confirmed, the checks on the log, and the writes per mutation.
fn mutation_figures(d: &Driven, read: &ReadBack) -> Figures {
    let made = d.total(|r| r.made);
    let per = |x: f64| {
        if read.applied == 0 {
            0.0
        } else {
            x / read.applied as f64
        }
    };
    table([
        ("mutations_made", json!(made)),
        ("mutations_applied", json!(read.applied)),
        (
            "mutations_confirmed_by_pull",
            json!(d.total(|r| r.confirmed)),
        ),
        (
            "mutations_not_applied",
            json!(made.saturating_sub(read.applied)),
        ),
        ("duplicates", json!(read.duplicates)),
        ("out_of_order", json!(read.out_of_order)),
        ("payload_mismatches", json!(read.mismatches)),
        (
            "confirmed_but_missing",
            json!(confirmed_missing(&d.reports, read)),
        ),
        ("wru_per_mutation", json!(round2(per(d.write_units as f64)))),
        (
            "appends_per_mutation",
            json!(round2(per(read.appends as f64))),
        ),
        (
            "entry_put_attempts_per_mutation",
            json!(round2(per(d.entry_puts as f64))),
        ),
        (
            "mutations_applied_per_s",
            json!(round1(read.applied as f64 / d.elapsed)),
        ),
    ])
}

/// Push -> visible and made -> visible (p50, p99), and the run's length.
fn latency_figures(d: &Driven) -> Figures {
    let sorted = |ms: fn(&ClientReport) -> &Vec<f64>| {
        let mut all: Vec<f64> = d.reports.iter().flat_map(|r| ms(r).clone()).collect();
        all.sort_by(f64::total_cmp);
        all
    };
    let visible = sorted(|r| &r.visible_ms);
    let made_visible = sorted(|r| &r.made_visible_ms);
    table([
        (
            "push_to_visible_ms_p50",
            json!(round1(percentile(&visible, 0.5))),
        ),
        (
            "push_to_visible_ms_p99",
            json!(round1(percentile(&visible, 0.99))),
        ),
        (
            "made_to_visible_ms_p50",
            json!(round1(percentile(&made_visible, 0.5))),
        ),
        (
            "made_to_visible_ms_p99",
            json!(round1(percentile(&made_visible, 0.99))),
        ),
        ("elapsed_s", json!(round1(d.elapsed))),
    ])
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Mutations a pull said were applied that the log does not hold: lost writes.
fn confirmed_missing(reports: &[ClientReport], read: &ReadBack) -> u64 {
    reports
        .iter()
        .enumerate()
        .map(|(c, r)| {
            let seen = read.highest.get(&(c as u32)).copied().unwrap_or(0);
            r.confirmed.saturating_sub(seen)
        })
        .sum()
}

/// What the log holds, read back through the API.
#[derive(Debug, Default)]
pub struct ReadBack {
    /// Distinct (client, id) found.
    pub applied: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub mismatches: u64,
    /// Entries holding at least one mutation.
    pub appends: u64,
    /// Per client, the highest id found.
    pub highest: HashMap<u32, u64>,
}

/// Reads every entry of the log and checks each client's mutations: once each, in order, with
/// the payload the client made.
async fn read_back(
    http: &reqwest::Client,
    base: &str,
    log: &str,
    tag: &str,
    clients: u32,
) -> anyhow::Result<ReadBack> {
    let prefix = format!("c-{tag}-");
    let mut out = ReadBack::default();
    let mut seen: HashMap<(u32, u64), u32> = HashMap::new();
    let mut last_id: HashMap<u32, u64> = HashMap::new();
    let mut from = 0u64;
    loop {
        let url = format!("{base}/logs/{log}/entries?from={from}&limit=1000");
        // The stage's throttle applies to the read-back too: wait for its bucket to refill.
        let mut tries = 0;
        let page: Value = loop {
            let r = http.get(&url).send().await?;
            if r.status() == reqwest::StatusCode::TOO_MANY_REQUESTS && tries < 40 {
                tries += 1;
                tokio::time::sleep(RETRY_MIN).await;
                continue;
            }
            break r.error_for_status()?.json().await?;
        };
        let entries = page
            .get("entries")
            .and_then(Value::as_array)
            .context("entries page without entries")?;
        for e in entries {
            let mut runs = Vec::new();
            collect_runs(e.get("body").unwrap_or(&Value::Null), &mut runs);
            if runs.iter().any(|r| !r.1.is_empty()) {
                out.appends += 1;
            }
            for (client_id, mutations) in runs {
                let Some(c) = client_id
                    .strip_prefix(&prefix)
                    .and_then(|n| n.parse::<u32>().ok())
                    .filter(|c| *c < clients)
                else {
                    continue;
                };
                for m in mutations {
                    let Some(id) = m.get("id").and_then(Value::as_u64) else {
                        continue;
                    };
                    let n = seen.entry((c, id)).or_default();
                    *n += 1;
                    if *n > 1 {
                        out.duplicates += 1;
                    }
                    let prev = last_id.entry(c).or_default();
                    if id <= *prev {
                        out.out_of_order += 1;
                    }
                    *prev = (*prev).max(id);
                    let value = m.pointer("/args/cells/0/value").and_then(Value::as_str);
                    let cell = m.pointer("/args/cells/0/ref").and_then(Value::as_str);
                    if value != Some(payload(c, id).as_str())
                        || cell != Some(format!("{}{id}", column(c + 1)).as_str())
                    {
                        out.mismatches += 1;
                    }
                }
            }
        }
        if page.get("complete").and_then(Value::as_bool) != Some(false) {
            break;
        }
        let next = page
            .get("nextSeq")
            .and_then(Value::as_u64)
            .context("incomplete page without nextSeq")?;
        if next <= from {
            bail!("the entries read did not advance past {from}");
        }
        from = next;
    }
    out.applied = seen.len() as u64;
    out.highest = last_id;
    Ok(out)
}

/// Every run of one client's mutations in an entry body: an object with `clientID` and a
/// `mutations` array (the `mutations` entry type), wherever it sits in the body, so an entry
/// that holds the runs of several clients is read the same way.
fn collect_runs<'a>(v: &'a Value, out: &mut Vec<(&'a str, Vec<&'a Value>)>) {
    match v {
        Value::Object(o) => {
            if let (Some(client), Some(Value::Array(ms))) = (
                o.get("clientID").and_then(Value::as_str),
                o.get("mutations"),
            ) {
                out.push((client, ms.iter().collect()));
                return;
            }
            for x in o.values() {
                collect_runs(x, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                collect_runs(x, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[path = "hot_tests.rs"]
mod tests;
