//! `sheetlog`: the command line. Against any sheetlog API (`--api`, default the local stack):
//! `logs create`, `set`, row and column inserts and deletes, `import` (upload with progress),
//! `history` and `cat`; see `docs/cli.md`. And `sheetlog dev`, the local stack: it creates the
//! tables, bucket and queues on the AWS endpoint named by `AWS_ENDPOINT_URL` (the emulator
//! `scripts/dev` starts), serves the same API router the Lambda function serves on loopback, and
//! drives the stream router and snapshot worker from the emulator's stream and queue (moto runs
//! no Lambda event-source mappings).
//!
//! Layout:
//! - `main.rs` — argument parsing, output, exit codes, and the `dev` runner
//! - the library (`lib.rs`): the API client and the commands

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};
use sheetlog::api::{Api, Auth, CliError, execute_api_region};
use sheetlog::commands::{self, out};
use sheetlog_api::config::AuthMode;
use sheetlog_api::{ApiConfig, AppState, SyncWrites};
use std::time::Duration;

use sheetlog_core::config::LogConfig;
use sheetlog_core::faults::{FaultProfile, Faults, FaultyLogStore, FaultyPayloadStore};
use sheetlog_core::poke::{PokeConfig, Poker};
use sheetlog_pipeline::events::LocalEvents;
use sheetlog_pipeline::{LocalPipeline, LocalPipelineConfig, create_local_stack};
use tracing::info;

#[derive(Debug, Parser)]
#[command(
    name = "sheetlog",
    version,
    about = "sheetlog: an event-sourced spreadsheet backend"
)]
struct Cli {
    /// The sheetlog API: the local stack's, or a deployment's `ApiUrl` output.
    #[arg(
        long,
        global = true,
        env = "SHEETLOG_API",
        default_value = "http://127.0.0.1:8080"
    )]
    api: String,
    /// A JWT for a stack deployed with JWT authorization (sent as a bearer token).
    #[arg(long, global = true, env = "SHEETLOG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Sign requests with SigV4 and the standard AWS credential chain (a stack deployed with IAM
    /// authorization, the default). On by default for `*.execute-api.*.amazonaws.com` URLs.
    #[arg(long, global = true, conflicts_with = "token")]
    iam: bool,
    /// Print JSON for scripts: one object per command (`cat`: one per line); errors as the API's
    /// error object on stderr.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Logs (one per sheet).
    Logs {
        #[command(subcommand)]
        command: LogsCommand,
    },
    /// Set cells: `sheetlog set LOG A1=42 B1=text C1= D1="'007"` (empty
    /// clears; a leading ' keeps text).
    Set {
        log: String,
        #[arg(required = true, value_name = "REF=VALUE")]
        cells: Vec<String>,
        /// Append only if the log's next sequence is this one (else exit 6, conflict).
        #[arg(long, conflicts_with = "base_seq")]
        expected_seq: Option<u64>,
        /// The log's next sequence when you read the sheet these references come from (the
        /// `next` an earlier command printed, or the API's `nextSeq`): the cells follow rows and
        /// columns inserted or deleted since; exit 6 if their rows or columns were deleted.
        #[arg(long)]
        base_seq: Option<u64>,
    },
    /// Insert empty rows before row AT.
    InsertRows(RowsArgs),
    /// Delete COUNT rows starting at row AT.
    DeleteRows(RowsArgs),
    /// Insert empty columns before column AT (a letter).
    InsertColumns(ColumnsArgs),
    /// Delete COUNT columns starting at column AT.
    DeleteColumns(ColumnsArgs),
    /// Import a .csv or .xlsx file into the sheet: upload (with progress), then commit.
    Import {
        log: String,
        file: std::path::PathBuf,
    },
    /// The sheet as CSV on stdout (or --output), as of now or of sequence --at.
    Export {
        log: String,
        /// The sheet as of every entry before this sequence.
        #[arg(long)]
        at: Option<u64>,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
        /// Write texts exactly as stored: by default a text starting with =, +, -, @, tab or
        /// carriage return gets a leading ' so spreadsheet programs do not run it as a formula.
        #[arg(long)]
        raw: bool,
    },
    /// The log's entries, one line each: sequence, time, what it did.
    History {
        log: String,
        /// First sequence to show.
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// The log's entries as JSON lines, from sequence FROM.
    Cat {
        log: String,
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// Print the log's entries as they land, one line each (`--json`: one object per line), from
    /// its head now; subscribes to the sheet's pokes and polls while there are none. Ctrl-C ends.
    Watch {
        log: String,
        /// Start at this sequence instead of the head (entries since then are printed first).
        #[arg(long)]
        from: Option<u64>,
        /// Seconds between reads of the log while no poke channel is up.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=3600))]
        poll_secs: u64,
        /// Ignore the Event API and poll.
        #[arg(long)]
        poll_only: bool,
    },
    /// Sign in to a stack with Cognito authorization (email and password; the password from
    /// SHEETLOG_PASSWORD or the first line of stdin). Keeps a refresh token in
    /// $XDG_CONFIG_HOME/sheetlog/credentials.json (mode 0600); later commands use it.
    Login {
        #[arg(long)]
        email: String,
    },
    /// Forget the sign-in for this API.
    Logout,
    /// The sheets shared with you, newest first: id, your role, last change, name.
    Sheets {
        /// Sheets per page (1 to 100).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Every page, not just the first.
        #[arg(long)]
        all: bool,
    },
    /// Share a sheet with a person by the email they sign in with.
    Share {
        log: String,
        email: String,
        #[arg(long, default_value = "editor", value_parser = ["viewer", "editor", "owner"])]
        role: String,
    },
    /// Run the API locally against the AWS endpoint in AWS_ENDPOINT_URL (use ./scripts/dev).
    Dev(DevArgs),
    /// Mint a token from the local stack's issuer (`./scripts/dev --auth jwt`): prints a JWT for
    /// `--token`/`SHEETLOG_TOKEN` or the web page's `#token=`.
    DevToken(DevTokenArgs),
}

#[derive(Debug, clap::Args)]
struct DevTokenArgs {
    /// A grant for the access claim, repeatable: LOG_ID, LOG_ID:read, LOG_ID:write, *, *:read,
    /// create.
    #[arg(long = "grant", value_name = "GRANT")]
    grants: Vec<String>,
    /// The token's subject (`sub`): who the user is. Sync client groups belong to it.
    #[arg(long, default_value = "local-user")]
    sub: String,
    /// Seconds until the token expires.
    #[arg(long, default_value_t = 3600)]
    ttl: u64,
    /// The issuer's key file (default: the one `sheetlog dev --auth jwt` saved for the port in
    /// --api).
    #[arg(long)]
    key_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum LogsCommand {
    /// Create a log; prints its id.
    Create,
    /// A log's state: its newest snapshot and next sequence.
    Show { log: String },
    /// Delete a log and all its data, for good (repeats `DELETE /logs/{logId}` until done).
    Delete { log: String },
}

#[derive(Debug, clap::Args)]
struct RowsArgs {
    log: String,
    /// Row number (1 is the first row).
    #[arg(long)]
    at: u32,
    #[arg(long, default_value_t = 1)]
    count: u32,
}

#[derive(Debug, clap::Args)]
struct ColumnsArgs {
    log: String,
    /// Column letter(s), e.g. C.
    #[arg(long)]
    at: String,
    #[arg(long, default_value_t = 1)]
    count: u32,
}

#[derive(Debug, clap::Args)]
struct DevArgs {
    /// Port to serve the API on (loopback only).
    #[arg(long, env = "SHEETLOG_PORT", default_value_t = 8080)]
    port: u16,
    /// Prefix of the local table, bucket and queue names.
    #[arg(long, env = "SHEETLOG_LOCAL_PREFIX", default_value = "sheetlog-local")]
    prefix: String,
    /// Entries between Snapshot entries.
    #[arg(long, env = "SHEETLOG_SNAPSHOT_INTERVAL", default_value_t = 100)]
    snapshot_interval: u64,
    /// Entries after which a new segment starts (once its snapshot is complete).
    #[arg(long, env = "SHEETLOG_SEGMENT_MAX_ENTRIES", default_value_t = 10_000)]
    segment_max_entries: u64,
    /// Seconds each snapshot-worker invocation may run before it checkpoints and hands off
    /// (Lambda's is its timeout less a reserve); small values exercise hand-off locally.
    #[arg(
        long,
        env = "SHEETLOG_WORKER_TIME_BUDGET_SECS",
        default_value_t = 240.0
    )]
    worker_time_budget: f64,
    /// Serve the API over a hostile backend: `PROFILE` or `PROFILE:SEED`, one of none, stale,
    /// lossy, throttle, conflict, hostile (stale reads, lost responses, throttling, transaction
    /// conflicts, latency spikes, as AWS has them and the emulator does not).
    #[arg(long, env = "SHEETLOG_FAULTS")]
    faults: Option<String>,
    /// How Replicache pushes are written: `queued` (enqueued on the sync FIFO queue and applied
    /// by the sync writer, one writer per sheet; the default) or `direct` (applied by the API
    /// before it answers).
    #[arg(long, env = "SHEETLOG_SYNC_WRITES", default_value = "queued")]
    sync_writes: String,
    /// How requests are authorized: `none` (every request may use every log), `jwt` (a local
    /// token issuer and API Gateway's JWT authorizer in front of the API, with per-log access
    /// from the token's access claim; mint tokens with `sheetlog dev-token`) or `cognito` (a
    /// user pool on the emulator with demo users, access from the catalog of sheets; sign in
    /// with `sheetlog login`).
    #[arg(long, env = "SHEETLOG_AUTH", default_value = "none", value_parser = ["none", "jwt", "cognito"])]
    auth: String,
    /// With `--auth cognito`: seconds the API trusts a role it read from the catalog (how long
    /// a removed member may keep access).
    #[arg(long, env = "SHEETLOG_CATALOG_CACHE_SECS", default_value_t = 30)]
    catalog_cache_secs: u64,
    /// With `--auth jwt`: the claim that lists a token's grants (`jwtAccessClaim`).
    #[arg(long, default_value = sheetlog_api::access::DEFAULT_ACCESS_CLAIM)]
    access_claim: String,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    let result = match cli.command {
        Command::Dev(args) => {
            sheetlog_core::telemetry::init_cli("info,aws_config=warn,aws_smithy_runtime=warn");
            dev(args)
                .await
                .map_err(|e| CliError::Other(format!("{e:#}")))
        }
        Command::DevToken(args) => dev_token(&cli.api, args),
        Command::Login { email } => login(&cli.api, &email, json).await,
        Command::Logout => sheetlog::login::logout(&cli.api).and_then(|had| {
            out(if had {
                "signed out"
            } else {
                "not signed in to this API"
            })
        }),
        command => run(cli.api, cli.token, cli.iam, json, command).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if json {
                eprintln!("{}", e.to_json());
            } else {
                eprintln!("sheetlog: {e}");
            }
            std::process::ExitCode::from(e.exit_code())
        }
    }
}

async fn run(
    api_url: String,
    token: Option<String>,
    iam: bool,
    json: bool,
    command: Command,
) -> Result<(), CliError> {
    let signed_in = match (&token, iam) {
        (None, false) => sheetlog::login::access_token(&api_url).await?,
        _ => None,
    };
    let auth = match (token.or(signed_in), iam) {
        (Some(token), _) => Auth::Bearer(token),
        (None, iam) => {
            let region = reqwest::Url::parse(&api_url)
                .ok()
                .as_ref()
                .and_then(execute_api_region);
            if iam || region.is_some() {
                Auth::Iam { region }
            } else {
                Auth::None
            }
        }
    };
    let api = Api::new(&api_url, auth.clone()).await?;
    // What an append printed: its sequence, or the answer as JSON.
    let appended = |v: Value| {
        if json {
            out(&v.to_string())
        } else {
            out(&format!(
                "appended at sequence {} (next {})",
                v["seq"], v["nextSeq"]
            ))?;
            match v.get("appliedAs") {
                Some(moved) => out(&format!(
                    "rows or columns moved since --base-seq; written as {moved}"
                )),
                None => Ok(()),
            }
        }
    };
    match command {
        Command::Logs {
            command: LogsCommand::Create,
        } => {
            let v = api.post("logs", &json!({})).await?;
            let id = v["logId"].as_str().unwrap_or_default();
            if json {
                out(&json!({"logId": id}).to_string())
            } else {
                out(id)
            }
        }
        Command::Logs {
            command: LogsCommand::Show { log },
        } => {
            let v = api.get(&format!("logs/{log}")).await?;
            if json {
                out(&v.to_string())
            } else {
                out(&format!(
                    "log {log}: next sequence {}, newest snapshot at {} ({})",
                    v["nextSeq"], v["snapshot"]["seq"], v["snapshot"]["status"]
                ))
            }
        }
        Command::Logs {
            command: LogsCommand::Delete { log },
        } => {
            // Each request deletes for up to 15 s and says whether more is left (202).
            let path = format!("logs/{log}");
            let mut v = Value::Null;
            for _ in 0..10_000 {
                v = api.send(reqwest::Method::DELETE, &path, None, None).await?;
                if v["done"] == true {
                    break;
                }
            }
            if v["done"] != true {
                return Err(CliError::Other(format!(
                    "log {log}: the delete is not finished; run it again"
                )));
            }
            if json {
                out(&v.to_string())
            } else {
                out(&format!("log {log} deleted"))
            }
        }
        Command::Set {
            log,
            cells,
            expected_seq,
            base_seq,
        } => {
            let cells = cells
                .iter()
                .map(|c| commands::parse_assignment(c))
                .collect::<Result<Vec<_>, _>>()?;
            let at = match (expected_seq, base_seq) {
                (Some(seq), _) => Some(commands::Based::Expected(seq)),
                (None, Some(seq)) => Some(commands::Based::Base(seq)),
                (None, None) => None,
            };
            appended(commands::append(&api, &log, "set", json!({ "cells": cells }), at).await?)
        }
        Command::InsertRows(a) | Command::DeleteRows(a) if a.at == 0 || a.count == 0 => Err(
            CliError::Input("--at and --count start at 1 (row 1 is the first row)".into()),
        ),
        Command::InsertRows(a) => {
            appended(shape(&api, &a.log, "insert-rows", json!(a.at), a.count).await?)
        }
        Command::DeleteRows(a) => {
            appended(shape(&api, &a.log, "delete-rows", json!(a.at), a.count).await?)
        }
        Command::InsertColumns(a) | Command::DeleteColumns(a)
            if a.count == 0 || sheetlog_sheet::a1::parse_column(&a.at).is_err() =>
        {
            Err(CliError::Input(format!(
                "--at {:?} is not a column (A, B, …, XFD), or --count is 0",
                a.at
            )))
        }
        Command::InsertColumns(a) => appended(
            shape(
                &api,
                &a.log,
                "insert-columns",
                json!(a.at.to_ascii_uppercase()),
                a.count,
            )
            .await?,
        ),
        Command::DeleteColumns(a) => appended(
            shape(
                &api,
                &a.log,
                "delete-columns",
                json!(a.at.to_ascii_uppercase()),
                a.count,
            )
            .await?,
        ),
        Command::Import { log, file } => {
            let v = commands::import(&api, &log, &file).await?;
            if json {
                out(&v.to_string())
            } else {
                out(&format!(
                    "imported {} at sequence {} (next {})",
                    file.display(),
                    v["seq"],
                    v["nextSeq"]
                ))
            }
        }
        Command::Export {
            log,
            at,
            output,
            raw,
        } => {
            let done = match &output {
                Some(path) => {
                    let file = std::fs::File::create(path)
                        .map_err(CliError::io(format!("creating {}", path.display())))?;
                    commands::export(&api, &log, at, raw, std::io::BufWriter::new(file)).await?
                }
                None => commands::export(&api, &log, at, raw, std::io::stdout().lock()).await?,
            };
            let summary = json!({"seq": done.seq, "rows": done.rows, "columns": done.columns,
                "requests": done.requests});
            if json {
                eprintln!("{summary}");
            } else if output.is_some() {
                out(&format!(
                    "exported {} rows x {} columns as of sequence {}",
                    done.rows, done.columns, done.seq
                ))?;
            }
            Ok(())
        }
        Command::History { log, from } => {
            commands::read_log(&api, &log, from, |e| history_line(e, json))
                .await
                .map(|_| ())
        }
        Command::Watch {
            log,
            from,
            poll_secs,
            poll_only,
        } => {
            let opts = sheetlog::watch::WatchOptions {
                log,
                from,
                poll: Duration::from_secs(poll_secs),
                poll_only,
            };
            sheetlog::watch::watch(&api, &auth, opts, |e| history_line(e, json)).await
        }
        Command::Cat { log, from } => commands::read_log(&api, &log, from, |e| out(&e.to_string()))
            .await
            .map(|_| ()),
        Command::Sheets { limit, all } => {
            let mut cursor: Option<String> = None;
            loop {
                let mut path = format!("sheets?limit={limit}");
                if let Some(c) = &cursor {
                    path.push_str(&format!("&cursor={c}"));
                }
                let v = api.get(&path).await?;
                for s in v["sheets"].as_array().into_iter().flatten() {
                    if json {
                        out(&s.to_string())?;
                    } else {
                        out(&format!(
                            "{}  {:<6}  {}  {}",
                            s["logId"].as_str().unwrap_or(""),
                            s["role"].as_str().unwrap_or(""),
                            s["updatedAt"].as_str().unwrap_or(""),
                            s["name"].as_str().unwrap_or("")
                        ))?;
                    }
                }
                cursor = v["cursor"].as_str().map(str::to_owned);
                if !all || cursor.is_none() {
                    return Ok(());
                }
            }
        }
        Command::Share { log, email, role } => {
            let v = api
                .post(
                    &format!("logs/{log}/members"),
                    &json!({"email": email, "role": role}),
                )
                .await?;
            if json {
                out(&v.to_string())
            } else {
                // The API does not say whether the address has an account (docs/api.md,
                // "Sharing by email"), so neither can this.
                out(&format!(
                    "shared {log} with {} as {}, if they can sign in to this stack (otherwise nothing was shared: have an administrator create their account, then share again)",
                    v["email"].as_str().unwrap_or(&email),
                    v["role"].as_str().unwrap_or(&role)
                ))
            }
        }
        Command::Dev(_) | Command::DevToken(_) | Command::Login { .. } | Command::Logout => Err(
            CliError::Other("dev, dev-token, login and logout run on their own".into()),
        ),
    }
}

/// One entry as `history` and `watch` print it: sequence, time, what it did (or JSON).
fn history_line(e: &Value, json: bool) -> Result<(), CliError> {
    if json {
        out(
            &json!({"seq": e["seq"], "created": e["created"], "type": e["type"],
                        "summary": commands::describe(e)})
            .to_string(),
        )
    } else {
        out(&format!(
            "{:>8}  {}  {}",
            e["seq"],
            e["created"].as_str().unwrap_or(""),
            commands::describe(e)
        ))
    }
}

/// `sheetlog login`: the password from SHEETLOG_PASSWORD or the first line of stdin.
async fn login(api: &str, email: &str, json: bool) -> Result<(), CliError> {
    let password = match std::env::var("SHEETLOG_PASSWORD") {
        Ok(p) if !p.is_empty() => p,
        _ => {
            if !json {
                eprint!("password for {email}: ");
            }
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map_err(CliError::io("reading the password from stdin"))?;
            line.trim_end_matches(['\r', '\n']).to_owned()
        }
    };
    let path = sheetlog::login::login(api, email, &password).await?;
    if json {
        out(&json!({"email": email, "credentials": path}).to_string())
    } else {
        out(&format!(
            "signed in as {email}; refresh token kept in {}",
            path.display()
        ))
    }
}

/// `sheetlog dev-token`: signs a token with the local issuer's key.
fn dev_token(api: &str, args: DevTokenArgs) -> Result<(), CliError> {
    let path = match args.key_file {
        Some(p) => p,
        None => {
            let url = reqwest::Url::parse(api)
                .map_err(|e| CliError::Input(format!("--api {api:?} is not a URL: {e}")))?;
            let port = url.port_or_known_default().unwrap_or(80);
            sheetlog::local_auth::key_path(port)
        }
    };
    if args.grants.is_empty() {
        return Err(CliError::Input(
            "give at least one --grant (LOG_ID, LOG_ID:read, *, *:read or create)".into(),
        ));
    }
    if args.sub.trim().is_empty() {
        return Err(CliError::Input("--sub must not be empty".into()));
    }
    let key = sheetlog::local_auth::IssuerKey::load(&path)
        .map_err(|e| CliError::Input(format!("{e:#}")))?;
    let token = key
        .mint(&args.sub, &args.grants.join(" "), args.ttl)
        .map_err(|e| CliError::Other(format!("{e:#}")))?;
    out(&token)
}

async fn dev(args: DevArgs) -> anyhow::Result<()> {
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
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
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
        let pool = sheetlog::local_cognito::create_pool(
            &sdk,
            &endpoint,
            &format!("{}-users", args.prefix),
            &sheetlog::local_cognito::DEMO_USERS,
            sheetlog::local_cognito::DEMO_PASSWORD,
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
    let poker = Arc::new(Poker::from_sdk(&sdk, &pokes)?);
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
        &sdk,
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
    .with_poker(poker.clone());
    let state = AppState::from_sdk_wrapped(
        &sdk,
        &stack.resources,
        LogConfig::from_env()?,
        cfg,
        wrap(faults.clone()),
    )?
    .with_poker(poker);
    let app = sheetlog_api::router(Arc::new(state));
    let pipeline_cfg = LocalPipelineConfig {
        worker_time_budget: Duration::from_secs_f64(args.worker_time_budget),
        stream_failure_queue: Some(stack.stream_failure_queue.clone()),
        ..LocalPipelineConfig::default()
    };
    let mut pipeline = LocalPipeline::new(&sdk, &stack.resources, &stack.queues, pipeline_cfg)?;
    if sync_writes == SyncWrites::Queued {
        pipeline = pipeline.with_sync_writer(&sdk, &stack.sync_queues.queue, writer);
    }
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let pipeline_task = tokio::spawn(pipeline.run(async move {
        let _ = stop_rx.changed().await;
    }));

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (choose another with --port or SHEETLOG_PORT)"))?;
    let app = if let Some(pool) = &pool {
        use sheetlog::local_auth::MemberChannelAccess;
        let authorizer = Arc::new(pool.authorizer());
        println!(
            "Cognito authorization: user pool {} (client {}) on the emulator; roles cached {} s\n\
             demo users: {} / password {}\n\
             sign in:     sheetlog --api http://{addr} login --email {}  (password on stdin or SHEETLOG_PASSWORD)\n\
             in a browser: http://{addr}/",
            pool.pool_id,
            pool.client_id,
            args.catalog_cache_secs,
            sheetlog::local_cognito::DEMO_USERS.join(", "),
            sheetlog::local_cognito::DEMO_PASSWORD,
            sheetlog::local_cognito::DEMO_USERS[0],
        );
        let catalog = Arc::new(sheetlog_core::aws::DynamoCatalog::new(
            aws_sdk_dynamodb::Client::new(&sdk),
            format!("{}-catalog", args.prefix),
        ));
        let events = LocalEvents::new(Arc::new(MemberChannelAccess {
            authorizer: authorizer.clone(),
            catalog,
            namespace: pokes.namespace.clone(),
        }));
        app.layer(axum::middleware::from_fn_with_state(
            authorizer,
            sheetlog::local_auth::authorize,
        ))
        .merge(events.router())
    } else if jwt {
        use sheetlog::local_auth::{ISSUER_PATH, IssuerKey, JwtAuthorizer, key_path};
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
        let events = LocalEvents::new(Arc::new(sheetlog::local_auth::ChannelAccess {
            authorizer: authorizer.clone(),
            claim: args.access_claim.clone(),
            namespace: pokes.namespace.clone(),
        }));
        app.layer(axum::middleware::from_fn_with_state(
            authorizer,
            sheetlog::local_auth::authorize,
        ))
        .merge(sheetlog::local_auth::issuer_routes(Arc::new(key)))
        .merge(events.router())
    } else {
        app.merge(LocalEvents::default().router())
    };
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

/// Appends a row or column insert or delete: `{"at", "count"}` of type `kind`.
async fn shape(api: &Api, log: &str, kind: &str, at: Value, count: u32) -> Result<Value, CliError> {
    commands::append(api, log, kind, json!({"at": at, "count": count}), None).await
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
