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
use sheetlog_pipeline::events::LocalEvents;
use sheetlog_pipeline::{
    Counterparts, LocalPipeline, LocalPipelineConfig, Roles, create_local_stack,
};
use tracing::info;

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

/// Runs the local stack until Ctrl-C or SIGTERM.
pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    if std::env::var("AWS_ENDPOINT_URL")
        .map(|v| v.is_empty())
        .unwrap_or(true)
    {
        bail!(
            "AWS_ENDPOINT_URL is not set. `sheetlog dev` creates resources on that endpoint and is meant \
             for the local emulator: run ./scripts/dev, which starts one and sets it."
        );
    }
    let sync_writes: SyncWrites = args.sync_writes.parse()?;
    let jwt = args.auth == "jwt";
    let cognito = args.auth == "cognito";
    let mut cfg = ApiConfig {
        snapshot_interval: args.snapshot_interval,
        segment_max_entries: args.segment_max_entries,
        access_claim: jwt.then(|| args.access_claim.clone()),
        // Cognito's settings exist once the pool does (below).
        auth_mode: if jwt { AuthMode::Jwt } else { AuthMode::None },
        catalog_cache: Duration::from_secs(args.catalog_cache_secs),
        ..ApiConfig::default()
    };
    // Cognito's settings (catalog table, user pool) exist only once the pool is made below,
    // which validates the whole configuration again.
    if !cognito {
        cfg.validate()?;
    }
    if !(args.worker_time_budget.is_finite() && args.worker_time_budget >= 0.0) {
        bail!("--worker-time-budget must be a non-negative number of seconds");
    }
    let context = template_context(&args.auth, &args.access_claim, &args.context);
    let description = match args.resources.as_deref() {
        Some(path) => tokio::fs::read(path)
            .await
            .with_context(|| format!("reading the template's description {}", path.display()))?,
        None => describe_template(&context).await?,
    };
    let gateway = GatewaySettings::from_description(&description)?;
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
    let pool = if cognito {
        let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
        let table = format!("{}-catalog", args.prefix);
        sheetlog_core::aws::DynamoCatalog::create_table(
            &aws_sdk_dynamodb::Client::new(&sdk),
            &table,
        )
        .await
        .context("creating the catalog table")?;
        let settings = crate::local_cognito::PoolSettings::from_description(&description)?
            .context(
                "the template's description has no user pool: describe the stack with \
                 `npx tsx cdk/bin/local-resources.ts -c authMode=cognito` for --resources",
            )?;
        let pool = crate::local_cognito::create_pool_with(
            &sdk,
            &endpoint,
            &format!("{}-users", args.prefix),
            &crate::local_cognito::DEMO_USERS,
            crate::local_cognito::DEMO_PASSWORD,
            &settings,
        )
        .await?;
        cfg.auth_mode = AuthMode::Cognito;
        cfg.catalog_table = Some(table);
        cfg.cognito = Some(pool.api_config());
        cfg.validate()?;
        Some(pool)
    } else {
        None
    };
    let mut counterparts = Counterparts::pair(&description, &stack, cfg.catalog_table.as_deref())?;
    counterparts.user_pool = pool.as_ref().map(|p| p.pool_id.clone());
    sheetlog_pipeline::roles::record_stack(&stack_name, &context, &counterparts)?;
    let faults = match &args.faults {
        Some(spec) => {
            let (profile, seed) = FaultProfile::parse(spec).map_err(anyhow::Error::msg)?;
            info!(profile = %profile.name, seed, "injecting faults into the API's stores");
            Some(Faults::new(profile, seed))
        }
        None => None,
    };
    cfg.sync_writes = sync_writes;
    cfg.sync_queue_url = Some(stack.sync_queues.queue.clone());
    // Pokes go to the local Event API this process serves on the same port (`events.rs` of
    // sheetlog-pipeline): the functions publish to it as they do to AppSync Events.
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let pokes = PokeConfig {
        realtime_url: Some(format!("ws://{addr}/event/realtime")),
        ..PokeConfig::new(format!("http://{addr}/event"))
    };
    cfg.pokes = Some(pokes.clone());
    // Each function signs its pokes with its own role.
    let api_poker = Arc::new(Poker::from_sdk(&roles.api, &pokes)?);
    let writer_poker = Arc::new(Poker::from_sdk(&roles.sync_writer, &pokes)?);
    let wrap = |faults: Option<Arc<Faults>>| {
        move |store: Arc<dyn sheetlog_core::ports::LogStore>,
              payloads: Arc<dyn sheetlog_core::ports::PayloadStore>|
              -> (
            Arc<dyn sheetlog_core::ports::LogStore>,
            Arc<dyn sheetlog_core::ports::PayloadStore>,
        ) {
            match faults {
                Some(f) => (
                    Arc::new(FaultyLogStore::new(store, f.clone())),
                    Arc::new(FaultyPayloadStore::new(payloads, f)),
                ),
                None => (store, payloads),
            }
        }
    };
    let writer = sheetlog_sync_writer::Handler::from_sdk_wrapped(
        &roles.sync_writer,
        &stack.resources,
        LogConfig::from_env()?,
        sheetlog_sync_writer::WriterConfig {
            trigger: sheetlog_core::log::SnapshotTrigger {
                interval: cfg.snapshot_interval,
                segment_max_entries: cfg.segment_max_entries,
            },
            ..Default::default()
        },
        wrap(faults.clone()),
    )?
    .with_poker(writer_poker);
    let state = AppState::from_sdk_wrapped(
        &roles.api,
        &stack.resources,
        LogConfig::from_env()?,
        cfg,
        wrap(faults.clone()),
    )?
    .with_poker(api_poker);
    // Lambda's limits around the function: the event's size and the function's timeout.
    let app = local_gateway::invocation(sheetlog_api::router(Arc::new(state)), &gateway);
    let timeouts = function_timeouts(&description)?;
    info!(?timeouts, "functions cut off at the template's timeouts");
    let pipeline_cfg = LocalPipelineConfig {
        worker_time_budget: Duration::from_secs_f64(args.worker_time_budget),
        stream_failure_queue: Some(stack.stream_failure_queue.clone()),
        timeouts,
        ..LocalPipelineConfig::default()
    };
    let mut pipeline = LocalPipeline::new(&roles, &stack.resources, &stack.queues, pipeline_cfg)?;
    if sync_writes == SyncWrites::Queued {
        pipeline = pipeline.with_sync_writer(&roles.sync_writer, &stack.sync_queues.queue, writer);
    }
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let pipeline_task = tokio::spawn(pipeline.run(async move {
        let _ = stop_rx.changed().await;
    }));

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (choose another with --port or SHEETLOG_PORT)"))?;
    let app = if let Some(pool) = &pool {
        let authorizer = Arc::new(pool.authorizer());
        println!(
            "Cognito authorization: user pool {} (client {}) on the emulator; roles cached {} s\n\
             demo users: {} / password {}\n\
             sign in:     sheetlog --api http://{addr} login --email {}  (password on stdin or SHEETLOG_PASSWORD)\n\
             in a browser: http://{addr}/",
            pool.pool_id,
            pool.client_id,
            args.catalog_cache_secs,
            crate::local_cognito::DEMO_USERS.join(", "),
            crate::local_cognito::DEMO_PASSWORD,
            crate::local_cognito::DEMO_USERS[0],
        );
        // The template's onSubscribe handler decides who may subscribe (under Node, its GetItem
        // on the local catalog table).
        let namespace = crate::local_appsync::ChannelNamespace::from_description(
            &description,
            &pokes.namespace,
        )?
        .with_context(|| format!("the template has no channel namespace {}", pokes.namespace))?;
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
        let access = crate::local_appsync::HandlerAccess::start(
            &repository_root()?,
            &namespace,
            authorizer.clone(),
            aws_sdk_dynamodb::Client::new(&sdk),
            table,
        )
        .await?;
        let events =
            LocalEvents::new(Arc::new(access.clone())).with_publish_handler(Arc::new(access));
        local_gateway::front(
            app.layer(axum::middleware::from_fn_with_state(
                authorizer,
                crate::local_auth::authorize,
            )),
            &gateway,
        )
        .merge(events.router())
    } else if jwt {
        use crate::local_auth::{ISSUER_PATH, IssuerKey, JwtAuthorizer, key_path};
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
        // The template's onSubscribe handler (the access claim's grants) decides, under Node.
        let namespace = crate::local_appsync::ChannelNamespace::from_description(
            &description,
            &pokes.namespace,
        )?
        .with_context(|| format!("the template has no channel namespace {}", pokes.namespace))?;
        let access = crate::local_appsync::HandlerAccess::start(
            &repository_root()?,
            &namespace,
            authorizer.clone(),
            aws_sdk_dynamodb::Client::new(&sdk),
            None,
        )
        .await?;
        let events =
            LocalEvents::new(Arc::new(access.clone())).with_publish_handler(Arc::new(access));
        local_gateway::front(
            app.layer(axum::middleware::from_fn_with_state(
                authorizer,
                crate::local_auth::authorize,
            )),
            &gateway,
        )
        .merge(crate::local_auth::issuer_routes(Arc::new(key)))
        .merge(events.router())
    } else if args.auth == "iam" {
        let region = sdk
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
            &gateway,
        )
        .merge(LocalEvents::default().router())
    } else {
        local_gateway::front(app, &gateway).merge(LocalEvents::default().router())
    };
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
        "sheetlog API listening on http://{addr}  (stream router, snapshot worker and sync writer running; pushes {}; Ctrl-C stops)\n\
         pokes: publish http://{addr}/event, subscribe ws://{addr}/event/realtime (the AppSync Events subset in docs/operations.md)\n\
         open http://{addr}/ in a browser for the spreadsheet",
        args.sync_writes
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    let _ = stop_tx.send(true);
    let _ = pipeline_task.await;
    if let Some(f) = faults {
        let kinds: Vec<String> = f
            .counts
            .by_kind()
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        println!(
            "faults injected: {} ({})",
            f.counts.total(),
            kinds.join(", ")
        );
    }
    Ok(())
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
