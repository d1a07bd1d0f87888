//! `sheetlog dev`: the whole stack on one machine. The resources on the emulator (tables,
//! bucket, queues; `sheetlog_pipeline::create_local_stack`), the API function behind the local
//! API Gateway stand-in (`local_gateway.rs`: throttle, Lambda's limits, the function's timeout,
//! all read from the synthesized template), the authorizer stand-ins (`local_auth.rs`), the
//! local AppSync Events API for pokes, and the stream router, snapshot worker and sync writer
//! driven as Lambda's event sources would drive them.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use sheetlog_api::config::AuthMode;
use sheetlog_api::{ApiConfig, AppState, SyncWrites};
use sheetlog_core::config::LogConfig;
use sheetlog_core::faults::{FaultProfile, Faults, FaultyLogStore, FaultyPayloadStore};
use sheetlog_core::poke::{PokeConfig, Poker};
use sheetlog_core::ports::{LogStore, PayloadStore};
use sheetlog_pipeline::events::LocalEvents;
use sheetlog_pipeline::{
    Counterparts, LocalPipeline, LocalPipelineConfig, LocalStack, Roles, create_local_stack,
};
use tracing::info;

use crate::local_appsync;
use crate::local_cognito::{self, LocalPool};
use crate::local_gateway::{self, GatewaySettings};

#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// Port to serve the API on (loopback only).
    #[arg(long, env = "SHEETLOG_PORT", default_value_t = 8080)]
    pub port: u16,
    /// Prefix of the local table, bucket and queue names.
    #[arg(long, env = "SHEETLOG_LOCAL_PREFIX", default_value = "sheetlog-local")]
    pub prefix: String,
    /// Entries between Snapshot entries.
    #[arg(long, env = "SHEETLOG_SNAPSHOT_INTERVAL", default_value_t = 100)]
    pub snapshot_interval: u64,
    /// Entries after which a new segment starts (once its snapshot is complete).
    #[arg(long, env = "SHEETLOG_SEGMENT_MAX_ENTRIES", default_value_t = 10_000)]
    pub segment_max_entries: u64,
    /// Seconds each snapshot-worker invocation may run before it checkpoints and hands off
    /// (Lambda's is its timeout less a reserve); small values exercise hand-off locally.
    #[arg(
        long,
        env = "SHEETLOG_WORKER_TIME_BUDGET_SECS",
        default_value_t = 240.0
    )]
    pub worker_time_budget: f64,
    /// Serve the API over a hostile backend: `PROFILE` or `PROFILE:SEED`, one of none, stale,
    /// lossy, throttle, conflict, hostile (stale reads, lost responses, throttling, transaction
    /// conflicts, latency spikes, as AWS has them and the emulator does not).
    #[arg(long, env = "SHEETLOG_FAULTS")]
    pub faults: Option<String>,
    /// How Replicache pushes are written: `queued` (enqueued on the sync FIFO queue and applied
    /// by the sync writer, one writer per sheet; the default) or `direct` (applied by the API
    /// before it answers).
    #[arg(long, env = "SHEETLOG_SYNC_WRITES", default_value = "queued")]
    pub sync_writes: String,
    /// How requests are authorized: `none` (every request may use every log), `iam` (API
    /// Gateway's IAM authorization, as a stack deploys by default: every request SigV4-signed by
    /// a local user; `sheetlog --iam` signs), `jwt` (a local token issuer and API Gateway's JWT
    /// authorizer in front of the API, with per-log access from the token's access claim; mint
    /// tokens with `sheetlog dev-token`) or `cognito` (a user pool on the emulator with demo
    /// users, access from the catalog of sheets; sign in with `sheetlog login`).
    #[arg(long, env = "SHEETLOG_AUTH", default_value = "none", value_parser = ["none", "iam", "jwt", "cognito"])]
    pub auth: String,
    /// With `--auth cognito`: seconds the API trusts a role it read from the catalog (how long
    /// a removed member may keep access).
    #[arg(long, env = "SHEETLOG_CATALOG_CACHE_SECS", default_value_t = 30)]
    pub catalog_cache_secs: u64,
    /// With `--auth jwt`: the claim that lists a token's grants (`jwtAccessClaim`).
    #[arg(long, default_value = sheetlog_api::access::DEFAULT_ACCESS_CLAIM)]
    pub access_claim: String,
    /// The template's description (the JSON `npx tsx cdk/bin/local-resources.ts` prints), which
    /// the local API Gateway stand-in takes its throttle and the function's timeout from. Without
    /// it, `sheetlog dev` runs that script itself in the repository it is started in.
    #[arg(long, env = "SHEETLOG_LOCAL_RESOURCES")]
    pub resources: Option<PathBuf>,
    /// Context for the template the local stack is described from, as `cdk synth -c` takes it
    /// (repeatable): `-c cognitoMfa=required` gives the local user pool the deployed one's MFA.
    /// `--auth cognito` adds `authMode=cognito`. Ignored with `--resources`.
    #[arg(short = 'c', long = "context", value_name = "KEY=VALUE")]
    pub context: Vec<String>,
}

/// Runs the local stack until Ctrl-C or SIGTERM: the emulator's resources provisioned, the
/// functions built and the pipeline started, the API served behind the chosen authorizer, and,
/// once stopped, the pipeline shut down and the injected faults reported.
pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    require_emulator()?;
    let (sync_writes, mut cfg) = api_settings(&args)?;
    let context = template_context(&args.auth, &args.access_claim, &args.context);
    let description = read_description(args.resources.as_deref(), &context).await?;
    let gateway = GatewaySettings::from_description(&description)?;
    let local = provision(&args, &context, &description, &mut cfg).await?;
    let faults = parse_faults(args.faults.as_deref())?;
    cfg.sync_writes = sync_writes;
    cfg.sync_queue_url = Some(local.stack.sync_queues.queue.clone());
    // Pokes go to the local Event API this process serves on the same port (`events.rs` of
    // sheetlog-pipeline): the functions publish to it as they do to AppSync Events.
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let pokes = PokeConfig {
        realtime_url: Some(format!("ws://{addr}/event/realtime")),
        ..PokeConfig::new(format!("http://{addr}/event"))
    };
    cfg.pokes = Some(pokes.clone());
    let functions = Functions::build(&local, cfg, &pokes, faults.as_ref())?;
    // Lambda's limits around the function: the event's size and the function's timeout.
    let app = local_gateway::invocation(functions.api, &gateway);
    let pipeline = start_pipeline(&args, &description, &local, sync_writes, functions.writer)?;

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (choose another with --port or SHEETLOG_PORT)"))?;
    let front = Front {
        args: &args,
        addr,
        description: &description,
        gateway: &gateway,
        sdk: &local.sdk,
        pokes: &pokes,
    };
    let app = match (&local.pool, args.auth.as_str()) {
        (Some(pool), _) => front.cognito(app, pool).await?,
        (None, "jwt") => front.jwt(app).await?,
        (None, "iam") => front.iam(app),
        (None, _) => local_gateway::front(app, &gateway).merge(LocalEvents::default().router()),
    };
    print_listening(&gateway, addr, &args.sync_writes);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    pipeline.stop().await;
    if let Some(f) = faults {
        report_faults(&f);
    }
    Ok(())
}

/// Refuses to run against anything but an explicitly given endpoint (the local emulator).
fn require_emulator() -> anyhow::Result<()> {
    if std::env::var("AWS_ENDPOINT_URL")
        .map(|v| v.is_empty())
        .unwrap_or(true)
    {
        bail!(
            "AWS_ENDPOINT_URL is not set. `sheetlog dev` creates resources on that endpoint and is meant \
             for the local emulator: run ./scripts/dev, which starts one and sets it."
        );
    }
    Ok(())
}

/// The API's configuration from the arguments, as far as it is known before the resources
/// exist, and how pushes are written; checks the arguments it does not use itself.
fn api_settings(args: &DevArgs) -> anyhow::Result<(SyncWrites, ApiConfig)> {
    let sync_writes: SyncWrites = args.sync_writes.parse()?;
    let jwt = args.auth == "jwt";
    let cognito = args.auth == "cognito";
    let cfg = ApiConfig {
        snapshot_interval: args.snapshot_interval,
        segment_max_entries: args.segment_max_entries,
        access_claim: jwt.then(|| args.access_claim.clone()),
        // Cognito's settings exist once the pool does (`create_user_pool`).
        auth_mode: if jwt { AuthMode::Jwt } else { AuthMode::None },
        catalog_cache: Duration::from_secs(args.catalog_cache_secs),
        ..ApiConfig::default()
    };
    // Cognito's settings (catalog table, user pool) exist only once the pool is made
    // (`create_user_pool`), which validates the whole configuration again.
    if !cognito {
        cfg.validate()?;
    }
    if !(args.worker_time_budget.is_finite() && args.worker_time_budget >= 0.0) {
        bail!("--worker-time-budget must be a non-negative number of seconds");
    }
    Ok((sync_writes, cfg))
}

/// The template's description: the file given with `--resources`, else described afresh.
async fn read_description(resources: Option<&Path>, context: &[String]) -> anyhow::Result<Vec<u8>> {
    match resources {
        Some(path) => tokio::fs::read(path)
            .await
            .with_context(|| format!("reading the template's description {}", path.display())),
        None => describe_template(context).await,
    }
}

/// What the local stack made on the emulator, and the identities its functions use there.
struct Provisioned {
    sdk: aws_config::SdkConfig,
    roles: Roles,
    stack: LocalStack,
    /// With `--auth cognito`: the user pool with the demo users.
    pool: Option<LocalPool>,
}

/// Creates the stack's resources on the emulator (with `--auth cognito` also the catalog table
/// and the user pool, completing `cfg`) and records the stack for the emulator's IAM check.
async fn provision(
    args: &DevArgs,
    context: &[String],
    description: &[u8],
    cfg: &mut ApiConfig,
) -> anyhow::Result<Provisioned> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    // Each function calls the emulator as itself (`role:<binary>:<prefix>`), so the IAM check can
    // hold each call against that function's role in the template (sheetlog_pipeline::roles).
    // The stack's name in those keys: unique, since several stacks may record to one file.
    let stack_name = format!(
        "{}-{}",
        args.prefix,
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let roles = Roles::per_function(&sdk, &stack_name);
    info!(prefix = %args.prefix, "creating tables, bucket and queues");
    let stack = create_local_stack(&sdk, &args.prefix)
        .await
        .context("creating the local resources (is the emulator fresh?)")?;
    let pool = if args.auth == "cognito" {
        Some(create_user_pool(&sdk, &args.prefix, description, cfg).await?)
    } else {
        None
    };
    let mut counterparts = Counterparts::pair(description, &stack, cfg.catalog_table.as_deref())?;
    counterparts.user_pool = pool.as_ref().map(|p| p.pool_id.clone());
    sheetlog_pipeline::roles::record_stack(&stack_name, context, &counterparts)?;
    Ok(Provisioned {
        sdk,
        roles,
        stack,
        pool,
    })
}

/// `--auth cognito`: the catalog table and a user pool as the template describes it, with the
/// demo users; completes and validates the API's configuration with them.
async fn create_user_pool(
    sdk: &aws_config::SdkConfig,
    prefix: &str,
    description: &[u8],
    cfg: &mut ApiConfig,
) -> anyhow::Result<LocalPool> {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    let table = format!("{prefix}-catalog");
    sheetlog_core::aws::DynamoCatalog::create_table(&aws_sdk_dynamodb::Client::new(sdk), &table)
        .await
        .context("creating the catalog table")?;
    let settings = local_cognito::PoolSettings::from_description(description)?.context(
        "the template's description has no user pool: describe the stack with \
         `npx tsx cdk/bin/local-resources.ts -c authMode=cognito` for --resources",
    )?;
    let pool = local_cognito::create_pool_with(
        sdk,
        &endpoint,
        &format!("{prefix}-users"),
        &local_cognito::DEMO_USERS,
        local_cognito::DEMO_PASSWORD,
        &settings,
    )
    .await?;
    cfg.auth_mode = AuthMode::Cognito;
    cfg.catalog_table = Some(table);
    cfg.cognito = Some(pool.api_config());
    cfg.validate()?;
    Ok(pool)
}

/// `--faults PROFILE[:SEED]`: the faults to inject into the API's stores, if any.
fn parse_faults(spec: Option<&str>) -> anyhow::Result<Option<Arc<Faults>>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let (profile, seed) = FaultProfile::parse(spec).map_err(anyhow::Error::msg)?;
    info!(profile = %profile.name, seed, "injecting faults into the API's stores");
    Ok(Some(Faults::new(profile, seed)))
}

/// A function's stores: its log store and its payload store.
type Stores = (Arc<dyn LogStore>, Arc<dyn PayloadStore>);

/// Wraps a function's stores in the faults given, or leaves them as they are.
fn wrap_stores(
    faults: Option<Arc<Faults>>,
) -> impl FnOnce(Arc<dyn LogStore>, Arc<dyn PayloadStore>) -> Stores {
    move |store, payloads| match faults {
        Some(f) => (
            Arc::new(FaultyLogStore::new(store, f.clone())),
            Arc::new(FaultyPayloadStore::new(payloads, f)),
        ),
        None => (store, payloads),
    }
}

/// The API function (its router) and the sync writer, each on its own role and signing its own
/// pokes, over the faults given.
struct Functions {
    api: axum::Router,
    writer: sheetlog_sync_writer::Handler,
}

impl Functions {
    fn build(
        local: &Provisioned,
        cfg: ApiConfig,
        pokes: &PokeConfig,
        faults: Option<&Arc<Faults>>,
    ) -> anyhow::Result<Self> {
        // Each function signs its pokes with its own role.
        let api_poker = Arc::new(Poker::from_sdk(&local.roles.api, pokes)?);
        let writer_poker = Arc::new(Poker::from_sdk(&local.roles.sync_writer, pokes)?);
        let writer = sheetlog_sync_writer::Handler::from_sdk_wrapped(
            &local.roles.sync_writer,
            &local.stack.resources,
            LogConfig::from_env()?,
            sheetlog_sync_writer::WriterConfig {
                trigger: sheetlog_core::log::SnapshotTrigger {
                    interval: cfg.snapshot_interval,
                    segment_max_entries: cfg.segment_max_entries,
                },
                ..Default::default()
            },
            wrap_stores(faults.cloned()),
        )?
        .with_poker(writer_poker);
        let state = AppState::from_sdk_wrapped(
            &local.roles.api,
            &local.stack.resources,
            LogConfig::from_env()?,
            cfg,
            wrap_stores(faults.cloned()),
        )?
        .with_poker(api_poker);
        Ok(Self {
            api: sheetlog_api::router(Arc::new(state)),
            writer,
        })
    }
}

/// The stream router, snapshot worker and (with queued sync writes) sync writer, running until
/// stopped.
struct RunningPipeline {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningPipeline {
    /// Stops the pipeline and waits for it.
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Starts the local pipeline, each function cut off at the template's timeout.
fn start_pipeline(
    args: &DevArgs,
    description: &[u8],
    local: &Provisioned,
    sync_writes: SyncWrites,
    writer: sheetlog_sync_writer::Handler,
) -> anyhow::Result<RunningPipeline> {
    let timeouts = function_timeouts(description)?;
    info!(?timeouts, "functions cut off at the template's timeouts");
    let pipeline_cfg = LocalPipelineConfig {
        worker_time_budget: Duration::from_secs_f64(args.worker_time_budget),
        stream_failure_queue: Some(local.stack.stream_failure_queue.clone()),
        timeouts,
        ..LocalPipelineConfig::default()
    };
    let stack = &local.stack;
    let mut pipeline =
        LocalPipeline::new(&local.roles, &stack.resources, &stack.queues, pipeline_cfg)?;
    if sync_writes == SyncWrites::Queued {
        pipeline =
            pipeline.with_sync_writer(&local.roles.sync_writer, &stack.sync_queues.queue, writer);
    }
    let (stop, mut stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(pipeline.run(async move {
        let _ = stop_rx.changed().await;
    }));
    Ok(RunningPipeline { stop, task })
}

/// What puts the API in front of its callers: the API Gateway stand-in with the authorizer of
/// `--auth`, and the local Event API for pokes.
struct Front<'a> {
    args: &'a DevArgs,
    addr: SocketAddr,
    description: &'a [u8],
    gateway: &'a GatewaySettings,
    sdk: &'a aws_config::SdkConfig,
    pokes: &'a PokeConfig,
}

impl Front<'_> {
    /// `--auth cognito`: the user pool's tokens, and the template's onSubscribe handler (under
    /// Node, its GetItem on the local catalog table) deciding who may subscribe.
    async fn cognito(&self, app: axum::Router, pool: &LocalPool) -> anyhow::Result<axum::Router> {
        let (addr, args) = (self.addr, self.args);
        let authorizer = Arc::new(pool.authorizer());
        println!(
            "Cognito authorization: user pool {} (client {}) on the emulator; roles cached {} s\n\
             demo users: {} / password {}\n\
             sign in:     sheetlog --api http://{addr} login --email {}  (password on stdin or SHEETLOG_PASSWORD)\n\
             in a browser: http://{addr}/",
            pool.pool_id,
            pool.client_id,
            args.catalog_cache_secs,
            local_cognito::DEMO_USERS.join(", "),
            local_cognito::DEMO_PASSWORD,
            local_cognito::DEMO_USERS[0],
        );
        let namespace = self.poke_namespace()?;
        let table = match namespace
            .subscribe_table
            .as_ref()
            .and_then(|t| t.env.as_deref())
        {
            None => None,
            Some(sheetlog_api::config::CATALOG_TABLE_VAR) => {
                Some(format!("{}-catalog", args.prefix))
            }
            Some(other) => bail!(
                "the poke namespace's handler reads the table named by {other}, which the local stack does not make"
            ),
        };
        let events = self
            .handler_events(&namespace, authorizer.clone(), table)
            .await?;
        Ok(self.jwt_authorized(app, authorizer).merge(events.router()))
    }

    /// `--auth jwt`: a local token issuer (its key saved for `sheetlog dev-token`), API
    /// Gateway's JWT authorizer, and the template's onSubscribe handler (the access claim's
    /// grants) deciding, under Node, who may subscribe.
    async fn jwt(&self, app: axum::Router) -> anyhow::Result<axum::Router> {
        use crate::local_auth::{ISSUER_PATH, IssuerKey, JwtAuthorizer, key_path};
        let (addr, args) = (self.addr, self.args);
        let issuer = format!("http://{addr}{ISSUER_PATH}");
        let key = IssuerKey::generate(&issuer, &args.access_claim)?;
        let path = key_path(args.port);
        key.save(&path)?;
        let authorizer = Arc::new(JwtAuthorizer::new(&issuer, vec![key.audience.clone()]));
        println!(
            "JWT authorization: issuer {issuer}, audience {}, access claim {}; key in {}\n\
             mint a token:  sheetlog --api http://{addr} dev-token --grant '*' --sub me\n\
             then use it:   SHEETLOG_TOKEN=<token> sheetlog --api http://{addr} logs create\n\
             in a browser:  http://{addr}/#token=<token>",
            key.audience,
            args.access_claim,
            path.display()
        );
        let namespace = self.poke_namespace()?;
        let events = self
            .handler_events(&namespace, authorizer.clone(), None)
            .await?;
        Ok(self
            .jwt_authorized(app, authorizer)
            .merge(crate::local_auth::issuer_routes(Arc::new(key)))
            .merge(events.router()))
    }

    /// `--auth iam`: every request but the open routes SigV4-signed by a local user.
    fn iam(&self, app: axum::Router) -> axum::Router {
        let addr = self.addr;
        let region = self
            .sdk
            .region()
            .map_or_else(|| "us-east-1".to_owned(), ToString::to_string);
        let authorizer = Arc::new(crate::local_iam::IamAuthorizer::local(&region));
        let (name, key, secret) = crate::local_iam::DEMO_USERS[0];
        println!(
            "IAM authorization: every request but the open routes SigV4-signed for execute-api in {region}\n\
             users:       your AWS_ACCESS_KEY_ID (\"local\" under ./scripts/dev) and {}\n\
             sign in:     AWS_ACCESS_KEY_ID={key} AWS_SECRET_ACCESS_KEY={secret} AWS_REGION={region} \\\n\
             {:13}sheetlog --api http://{addr} --iam logs create   (as {name})",
            crate::local_iam::DEMO_USERS
                .iter()
                .map(|(n, k, s)| format!("{n} ({k} / {s})"))
                .collect::<Vec<_>>()
                .join(", "),
            "",
        );
        // Pokes: the page cannot sign a subscription here, so anyone may subscribe (as
        // `--auth none`); publishing is SigV4-signed by the functions either way.
        local_gateway::front(
            app.layer(axum::middleware::from_fn_with_state(
                authorizer,
                crate::local_iam::authorize,
            )),
            self.gateway,
        )
        .merge(LocalEvents::default().router())
    }

    /// The template's namespace for pokes.
    fn poke_namespace(&self) -> anyhow::Result<local_appsync::ChannelNamespace> {
        let name = &self.pokes.namespace;
        local_appsync::ChannelNamespace::from_description(self.description, name)?
            .with_context(|| format!("the template has no channel namespace {name}"))
    }

    /// The local Event API with the namespace's handlers deciding who may subscribe and
    /// publish (their data source reading `table`).
    async fn handler_events(
        &self,
        namespace: &local_appsync::ChannelNamespace,
        authorizer: Arc<crate::local_auth::JwtAuthorizer>,
        table: Option<String>,
    ) -> anyhow::Result<LocalEvents> {
        let access = local_appsync::HandlerAccess::start(
            &repository_root()?,
            namespace,
            authorizer,
            aws_sdk_dynamodb::Client::new(self.sdk),
            table,
        )
        .await?;
        Ok(LocalEvents::new(Arc::new(access.clone())).with_publish_handler(Arc::new(access)))
    }

    /// The API behind the gateway stand-in and a JWT authorizer.
    fn jwt_authorized(
        &self,
        app: axum::Router,
        authorizer: Arc<crate::local_auth::JwtAuthorizer>,
    ) -> axum::Router {
        local_gateway::front(
            app.layer(axum::middleware::from_fn_with_state(
                authorizer,
                crate::local_auth::authorize,
            )),
            self.gateway,
        )
    }
}

/// Tells what the gateway stand-in enforces and where the API and the Event API listen.
fn print_listening(gateway: &GatewaySettings, addr: SocketAddr, sync_writes: &str) {
    println!(
        "API Gateway stand-in (from the template): {}; {} cut off after {} s; requests over \
         Lambda's {} bytes refused",
        match gateway.throttle {
            Some(t) => format!(
                "throttle {} requests/s, burst {}",
                t.rate_limit, t.burst_limit
            ),
            None => "no throttle".to_owned(),
        },
        gateway.function,
        gateway.function_timeout.as_secs_f64(),
        local_gateway::LAMBDA_REQUEST_LIMIT,
    );
    println!(
        "sheetlog API listening on http://{addr}  (stream router, snapshot worker and sync writer running; pushes {sync_writes}; Ctrl-C stops)\n\
         pokes: publish http://{addr}/event, subscribe ws://{addr}/event/realtime (the AppSync Events subset in docs/operations.md)\n\
         open http://{addr}/ in a browser for the spreadsheet"
    );
}

/// Tells how many faults of each kind were injected.
fn report_faults(faults: &Faults) {
    let kinds: Vec<String> = faults
        .counts
        .by_kind()
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    println!(
        "faults injected: {} ({})",
        faults.counts.total(),
        kinds.join(", ")
    );
}

/// The context the template is described with for `sheetlog dev --auth AUTH` (and its access
/// claim), after the `-c` given: the stack a deployment in that mode would have, whose poke
/// namespace's handler the local Event API runs. Under `jwt` the issuer and audience are
/// placeholders (the local issuer's address is known only once the port is bound); nothing the
/// local stack takes from the description depends on them.
pub fn template_context(auth: &str, access_claim: &str, given: &[String]) -> Vec<String> {
    let mut context = given.to_vec();
    match auth {
        "iam" => context.push("authMode=iam".into()),
        "cognito" => context.push("authMode=cognito".into()),
        "jwt" => context.extend([
            "authMode=jwt".into(),
            "jwtIssuer=https://local-issuer.invalid".into(),
            "jwtAudience=sheetlog-local".into(),
            format!("jwtAccessClaim={access_claim}"),
        ]),
        _ => {}
    }
    context
}

/// The template's timeout of each function the local pipeline runs (`functions` in the
/// description); a function the template does not have gets none.
pub fn function_timeouts(
    description: &[u8],
) -> anyhow::Result<sheetlog_pipeline::FunctionTimeouts> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Function {
        binary: String,
        timeout_secs: u64,
    }
    #[derive(serde::Deserialize)]
    struct Description {
        functions: Vec<Function>,
    }
    let d: Description = serde_json::from_slice(description)
        .context("reading the functions of the template's description")?;
    let of = |binary: &str| {
        d.functions
            .iter()
            .find(|f| f.binary == binary)
            .map(|f| Duration::from_secs(f.timeout_secs))
    };
    Ok(sheetlog_pipeline::FunctionTimeouts {
        stream_router: of(sheetlog_pipeline::roles::STREAM_ROUTER),
        snapshot_worker: of(sheetlog_pipeline::roles::SNAPSHOT_WORKER),
        sync_writer: of(sheetlog_pipeline::roles::SYNC_WRITER),
    })
}

/// Runs `npx --no tsx cdk/bin/local-resources.ts [-c KEY=VALUE ...]` in the repository
/// (`SHEETLOG_ROOT`, or the nearest directory above the working directory that has the script).
pub async fn describe_template(context: &[String]) -> anyhow::Result<Vec<u8>> {
    const SCRIPT: &str = "cdk/bin/local-resources.ts";
    let root = repository_root()?;
    info!("reading the template's description ({SCRIPT}; about 15 s)");
    let out = tokio::process::Command::new("npx")
        .args(["--no", "tsx", SCRIPT])
        .args(context.iter().flat_map(|c| ["-c", c.as_str()]))
        .current_dir(&root)
        .output()
        .await
        .context("running `npx tsx cdk/bin/local-resources.ts` (is Node.js installed, and `npm ci` run?)")?;
    if !out.status.success() {
        bail!(
            "`npx tsx {SCRIPT}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

/// The repository `sheetlog dev` runs in: `SHEETLOG_ROOT`, or the nearest directory above the
/// working directory that has the CDK app's description script.
pub fn repository_root() -> anyhow::Result<PathBuf> {
    const SCRIPT: &str = "cdk/bin/local-resources.ts";
    if let Some(root) = std::env::var_os("SHEETLOG_ROOT") {
        return Ok(PathBuf::from(root));
    }
    let cwd = std::env::current_dir().context("reading the working directory")?;
    cwd.ancestors()
        .find(|d| d.join(SCRIPT).is_file())
        .map(Path::to_path_buf)
        .with_context(|| {
            format!(
                "no {SCRIPT} above {}: run `sheetlog dev` in the repository (./scripts/dev), \
                 or give --resources FILE",
                cwd.display()
            )
        })
}

/// Resolves on Ctrl-C or SIGTERM (what `scripts/dev` forwards).
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    info!("shutting down");
}
