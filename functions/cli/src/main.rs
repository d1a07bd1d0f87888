//! `sheetlog`: the command line. Against any sheetlog API (`--api`, default the local stack):
//! `logs create`, `set`, row and column inserts and deletes, `import` (upload with progress),
//! `history` and `cat`; see `docs/cli.md`. And `sheetlog dev`, the local stack: it creates the
//! tables, bucket and queues on the AWS endpoint named by `AWS_ENDPOINT_URL` (the emulator
//! `scripts/dev` starts), serves the same API router the Lambda function serves on loopback, and
//! drives the stream router and snapshot worker from the emulator's stream and queue (moto runs
//! no Lambda event-source mappings).
//!
//! This file parses the arguments, runs one function per command (`Session`) and gives the
//! output and exit codes; `export.rs` holds the `export` command's two formats. The commands
//! run on the API's client, `sheetlog-client` (`functions/client`); `dev` and `dev-token` on the
//! local stack, `sheetlog-local` (`functions/local`).

use clap::{Parser, Subcommand};
use export::ExportFormat;
use serde_json::{Value, json};
use sheetlog_client::api::{Api, Auth, CliError, execute_api_region};
use sheetlog_client::commands::{self, out};
use std::path::Path;
use std::time::Duration;

mod export;

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
    /// The sheet as CSV on stdout (or --output), as of now or of sequence --at; --format xlsx
    /// downloads the workbook the server writes.
    Export {
        log: String,
        /// The sheet as of every entry before this sequence.
        #[arg(long)]
        at: Option<u64>,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
        /// Write texts exactly as stored: by default a text starting with =, +, -, @, tab or
        /// carriage return gets a leading ' so spreadsheet programs do not run it as a formula
        /// (CSV only: an XLSX cell knows a text from a formula).
        #[arg(long)]
        raw: bool,
        /// csv (the default), or xlsx: a workbook the server writes, with formulas, their
        /// values and number formats.
        #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
        format: ExportFormat,
    },
    /// The cells that differ between the sheet as of --from and as of --to (default: now), one
    /// line each: the cell, what it held, what it holds (`--json`: one object per line).
    Diff {
        log: String,
        #[arg(long)]
        from: u64,
        #[arg(long)]
        to: Option<u64>,
    },
    /// The sheet's named versions, newest first: sequence, when named, name. With --name and
    /// --at, names version --at (again: renames it) first.
    Versions {
        log: String,
        #[arg(long, requires = "at")]
        name: Option<String>,
        #[arg(long, requires = "name")]
        at: Option<u64>,
    },
    /// Make the sheet what it was as of sequence --at (as `export --at` shows it) with one
    /// `restore` entry; what came after stays in history, and restoring the sequence this prints
    /// undoes it.
    Restore {
        log: String,
        /// The version to restore: the sheet as of every entry before this sequence.
        #[arg(long)]
        at: u64,
        /// Restore only if the log's next sequence is this one (else exit 6, conflict).
        #[arg(long)]
        expected_seq: Option<u64>,
    },
    /// Undo your last change made with this command line (`set`, the row and column commands),
    /// or with --group a sync client group's (the `clientGroupID` a Replicache client such as the
    /// web page pushes with): only those changes, newest first; cells someone else changed since
    /// are left alone and listed.
    Undo {
        log: String,
        /// The client group whose change to undo (it must be yours under sign-in); default: this
        /// command line's own.
        #[arg(long)]
        group: Option<String>,
    },
    /// Redo what the last undo took back.
    Redo {
        log: String,
        #[arg(long)]
        group: Option<String>,
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
    /// Invite the person who signs in with an email to a sheet (they join when they list their
    /// sheets or open it).
    Share {
        log: String,
        email: String,
        #[arg(long, default_value = "editor", value_parser = ["viewer", "editor", "owner"])]
        role: String,
    },
    /// Run the API locally against the AWS endpoint in AWS_ENDPOINT_URL (use ./scripts/dev).
    Dev(sheetlog_local::dev::DevArgs),
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

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    let result = match cli.command {
        Command::Dev(args) => {
            sheetlog_core::telemetry::init_cli("info,aws_config=warn,aws_smithy_runtime=warn");
            sheetlog_local::dev::run(args)
                .await
                .map_err(|e| CliError::Other(format!("{e:#}")))
        }
        Command::DevToken(args) => dev_token(&cli.api, args),
        Command::Login { email } => login(&cli.api, &email, json).await,
        Command::Logout => sheetlog_client::login::logout(&cli.api).and_then(|had| {
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

/// Runs a command against the API: signs in as the arguments and the stored sign-in say, then
/// hands the command to its group's function.
async fn run(
    api_url: String,
    token: Option<String>,
    iam: bool,
    json: bool,
    command: Command,
) -> Result<(), CliError> {
    let auth = authorization(&api_url, token, iam).await?;
    let api = Api::new(&api_url, auth.clone()).await?;
    let session = Session {
        api,
        api_url,
        auth,
        json,
    };
    match command {
        Command::Logs { command } => session.logs(command).await,
        Command::Set {
            log,
            cells,
            expected_seq,
            base_seq,
        } => session.set(&log, &cells, expected_seq, base_seq).await,
        Command::InsertRows(a) => session.rows("insert-rows", a).await,
        Command::DeleteRows(a) => session.rows("delete-rows", a).await,
        Command::InsertColumns(a) => session.columns("insert-columns", a).await,
        Command::DeleteColumns(a) => session.columns("delete-columns", a).await,
        Command::Import { log, file } => session.import(&log, &file).await,
        Command::Export {
            log,
            at,
            output,
            raw,
            format: ExportFormat::Csv,
        } => export::csv(&session.api, session.json, &log, at, output.as_deref(), raw).await,
        Command::Export {
            log,
            at,
            output,
            raw,
            format: ExportFormat::Xlsx,
        } => {
            if raw {
                return Err(CliError::Input(
                    "--raw is for CSV: an XLSX cell keeps a text that starts with = a text".into(),
                ));
            }
            export::xlsx(&session.api, session.json, &log, at, output.as_deref()).await
        }
        Command::History { log, from } => session.history(&log, from).await,
        Command::Diff { log, from, to } => session.diff(&log, from, to).await,
        Command::Versions { log, name, at } => session.versions(&log, name.zip(at)).await,
        Command::Restore {
            log,
            at,
            expected_seq,
        } => {
            let v = commands::restore(&session.api, &log, at, expected_seq).await?;
            if session.json {
                out(&v.to_string())
            } else {
                out(&format!(
                    "restored the sheet as of sequence {at} at sequence {} (next {}); undo with --at {} --expected-seq {}",
                    v["seq"], v["nextSeq"], v["seq"], v["nextSeq"]
                ))
            }
        }
        Command::Undo { log, group } => session.undo(&log, group, false).await,
        Command::Redo { log, group } => session.undo(&log, group, true).await,
        Command::Watch {
            log,
            from,
            poll_secs,
            poll_only,
        } => {
            let opts = sheetlog_client::watch::WatchOptions {
                log,
                from,
                poll: Duration::from_secs(poll_secs),
                poll_only,
            };
            session.watch(opts).await
        }
        Command::Cat { log, from } => session.cat(&log, from).await,
        Command::Sheets { limit, all } => session.sheets(limit, all).await,
        Command::Share { log, email, role } => session.share(&log, &email, &role).await,
        Command::Dev(_) | Command::DevToken(_) | Command::Login { .. } | Command::Logout => Err(
            CliError::Other("dev, dev-token, login and logout run on their own".into()),
        ),
    }
}

/// How requests are authorized: `--token`, else the stored sign-in for this API (unless `--iam`),
/// else SigV4 with `--iam` or for an `execute-api` URL, else not at all.
async fn authorization(api_url: &str, token: Option<String>, iam: bool) -> Result<Auth, CliError> {
    let signed_in = match (&token, iam) {
        (None, false) => sheetlog_client::login::access_token(api_url).await?,
        _ => None,
    };
    Ok(match (token.or(signed_in), iam) {
        (Some(token), _) => Auth::Bearer(token),
        (None, iam) => {
            let region = reqwest::Url::parse(api_url)
                .ok()
                .as_ref()
                .and_then(execute_api_region);
            if iam || region.is_some() {
                Auth::Iam { region }
            } else {
                Auth::None
            }
        }
    })
}

/// The API the commands run against, how it is authorized, and whether they print JSON.
struct Session {
    api: Api,
    /// The API's URL: the CLI's client group is kept per API (`groups.rs`).
    api_url: String,
    auth: Auth,
    json: bool,
}

impl Session {
    /// `logs create`, `logs show`, `logs delete`.
    async fn logs(&self, command: LogsCommand) -> Result<(), CliError> {
        let (api, json) = (&self.api, self.json);
        match command {
            LogsCommand::Create => {
                let v = api.post("logs", &json!({})).await?;
                let id = v["logId"].as_str().unwrap_or_default();
                if json {
                    out(&json!({"logId": id}).to_string())
                } else {
                    out(id)
                }
            }
            LogsCommand::Show { log } => {
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
            LogsCommand::Delete { log } => self.delete_log(&log).await,
        }
    }

    /// `logs delete`: each request deletes for up to 15 s and says whether more is left (202).
    async fn delete_log(&self, log: &str) -> Result<(), CliError> {
        let path = format!("logs/{log}");
        let mut v = Value::Null;
        for _ in 0..10_000 {
            v = self
                .api
                .send(reqwest::Method::DELETE, &path, None, None)
                .await?;
            if v["done"] == true {
                break;
            }
        }
        if v["done"] != true {
            return Err(CliError::Other(format!(
                "log {log}: the delete is not finished; run it again"
            )));
        }
        if self.json {
            out(&v.to_string())
        } else {
            out(&format!("log {log} deleted"))
        }
    }

    /// Appends an edit for the CLI's own client group (`groups.rs`), so `undo` can take it back.
    /// A group another user of this API claimed first (a different sign-in on this machine) is
    /// replaced by a new one, once.
    async fn edit(
        &self,
        log: &str,
        kind: &str,
        body: Value,
        at: Option<commands::Based>,
    ) -> Result<Value, CliError> {
        let group = sheetlog_client::groups::group_for(&self.api_url)?;
        let first =
            commands::append(&self.api, log, kind, body.clone(), at, group.as_deref()).await;
        match first {
            Err(CliError::Api { code, .. }) if code == "client-group-forbidden" => {
                let group = sheetlog_client::groups::renew(&self.api_url)?;
                commands::append(&self.api, log, kind, body, at, Some(&group)).await
            }
            other => other,
        }
    }

    /// `set`: cell assignments, appended as they are or based on a sequence.
    async fn set(
        &self,
        log: &str,
        cells: &[String],
        expected_seq: Option<u64>,
        base_seq: Option<u64>,
    ) -> Result<(), CliError> {
        let cells = cells
            .iter()
            .map(|c| commands::parse_assignment(c))
            .collect::<Result<Vec<_>, _>>()?;
        let at = match (expected_seq, base_seq) {
            (Some(seq), _) => Some(commands::Based::Expected(seq)),
            (None, Some(seq)) => Some(commands::Based::Base(seq)),
            (None, None) => None,
        };
        self.appended(self.edit(log, "set", json!({ "cells": cells }), at).await?)
    }

    /// `insert-rows`, `delete-rows` (`kind`).
    async fn rows(&self, kind: &str, a: RowsArgs) -> Result<(), CliError> {
        if a.at == 0 || a.count == 0 {
            return Err(CliError::Input(
                "--at and --count start at 1 (row 1 is the first row)".into(),
            ));
        }
        let body = json!({"at": a.at, "count": a.count});
        self.appended(self.edit(&a.log, kind, body, None).await?)
    }

    /// `insert-columns`, `delete-columns` (`kind`).
    async fn columns(&self, kind: &str, a: ColumnsArgs) -> Result<(), CliError> {
        if a.count == 0 || sheetlog_sheet::a1::parse_column(&a.at).is_err() {
            return Err(CliError::Input(format!(
                "--at {:?} is not a column (A, B, …, XFD), or --count is 0",
                a.at
            )));
        }
        let at = json!(a.at.to_ascii_uppercase());
        let body = json!({"at": at, "count": a.count});
        self.appended(self.edit(&a.log, kind, body, None).await?)
    }

    /// What an append printed: its sequence, or the answer as JSON.
    fn appended(&self, v: Value) -> Result<(), CliError> {
        if self.json {
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
    }

    /// `import`: the file uploaded and committed.
    async fn import(&self, log: &str, file: &Path) -> Result<(), CliError> {
        let v = commands::import(&self.api, log, file).await?;
        if self.json {
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

    /// `history`: the log's entries, one line each.
    async fn history(&self, log: &str, from: u64) -> Result<(), CliError> {
        commands::read_log(&self.api, log, from, |e| history_line(e, self.json))
            .await
            .map(|_| ())
    }

    /// `undo` and `redo`, in words.
    async fn undo(&self, log: &str, group: Option<String>, redo: bool) -> Result<(), CliError> {
        let what = if redo { "redo" } else { "undo" };
        let group = match group {
            Some(g) => g,
            None => sheetlog_client::groups::group_for(&self.api_url)?.ok_or_else(|| {
                CliError::Input(
                    "this command line keeps no client group here (neither XDG_CONFIG_HOME nor HOME is set): pass --group".into(),
                )
            })?,
        };
        let v = commands::undo(&self.api, log, &group, what).await?;
        if self.json {
            return out(&v.to_string());
        }
        let t = &v["target"];
        let line = match (t["clientId"].as_str(), t["mutationId"].as_u64(), redo) {
            (Some(client), Some(id), _) => format!(
                "undid client {client}'s mutation {id} (entry {}) at sequence {}",
                t["seq"], v["seq"]
            ),
            (_, _, false) => format!("undid entry {} at sequence {}", t["seq"], v["seq"]),
            (_, _, true) => format!(
                "redid what the undo at entry {} took back, at sequence {}",
                t["seq"], v["seq"]
            ),
        };
        out(&line)?;
        if v["skipped"].as_u64().unwrap_or(0) > 0 {
            let changed: Vec<&str> = v["changed"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            out(&format!(
                "{} left alone: someone else changed or deleted them since{}",
                v["skipped"],
                if changed.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", changed.join(", "))
                }
            ))?;
        }
        Ok(())
    }

    /// `diff`: every page of `GET …/diff`, a line per changed cell.
    async fn diff(&self, log: &str, from: u64, to: Option<u64>) -> Result<(), CliError> {
        let to = to.map(|t| format!("&to={t}")).unwrap_or_default();
        let mut row = 1;
        loop {
            let v = self
                .api
                .get(&format!("logs/{log}/diff?from={from}{to}&row={row}"))
                .await?;
            for c in v["changes"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                if self.json {
                    out(&c.to_string())?;
                } else {
                    out(&format!(
                        "{}\t{}\t{}",
                        c["ref"].as_str().unwrap_or("?"),
                        c["before"]["value"],
                        c["after"]["value"]
                    ))?;
                }
            }
            match v["nextRow"].as_u64() {
                Some(next) if next > row => row = next,
                _ => return Ok(()),
            }
        }
    }

    /// `versions`: names one first when asked, then lists them.
    async fn versions(&self, log: &str, name: Option<(String, u64)>) -> Result<(), CliError> {
        let path = format!("logs/{log}/versions");
        if let Some((name, at)) = name {
            let body = json!({ "seq": at, "name": name });
            self.api
                .send(reqwest::Method::POST, &path, Some(&body), None)
                .await?;
        }
        let v = self.api.get(&path).await?;
        for version in v["versions"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            if self.json {
                out(&version.to_string())?;
            } else {
                let when = version["createdAt"].as_str().unwrap_or_default();
                out(&format!(
                    "{:>8}  {when}  {}",
                    version["seq"],
                    version["name"].as_str().unwrap_or_default()
                ))?;
            }
        }
        Ok(())
    }

    /// `watch`: the entries as they land.
    async fn watch(&self, opts: sheetlog_client::watch::WatchOptions) -> Result<(), CliError> {
        sheetlog_client::watch::watch(&self.api, &self.auth, opts, |e| history_line(e, self.json))
            .await
    }

    /// `cat`: the log's entries as JSON lines.
    async fn cat(&self, log: &str, from: u64) -> Result<(), CliError> {
        commands::read_log(&self.api, log, from, |e| out(&e.to_string()))
            .await
            .map(|_| ())
    }

    /// `sheets`: the sheets shared with the caller, page by page.
    async fn sheets(&self, limit: u32, all: bool) -> Result<(), CliError> {
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("sheets?limit={limit}");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let v = self.api.get(&path).await?;
            for s in v["sheets"].as_array().into_iter().flatten() {
                if self.json {
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

    /// `share`: an invitation to the sheet for an email address.
    async fn share(&self, log: &str, email: &str, role: &str) -> Result<(), CliError> {
        let v = self
            .api
            .post(
                &format!("logs/{log}/members"),
                &json!({"email": email, "role": role}),
            )
            .await?;
        if self.json {
            out(&v.to_string())
        } else {
            // The API does not say whether the address has an account (docs/api.md,
            // "Sharing by email"), so neither can this: it is an invitation.
            out(&format!(
                "invited {} to {log} as {}: they join when they sign in to this stack with that address and run `sheetlog sheets` or open the sheet (an administrator creates accounts)",
                v["email"].as_str().unwrap_or(email),
                v["role"].as_str().unwrap_or(role)
            ))
        }
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
    // An authenticator app's code, when the pool asks: SHEETLOG_MFA_CODE, or the next line of
    // stdin after the prompt (which names the key to add at the first sign-in).
    let mut code = |prompt: &str| -> Result<String, CliError> {
        if let Ok(c) = std::env::var("SHEETLOG_MFA_CODE")
            && !c.trim().is_empty()
        {
            return Ok(c.trim().to_owned());
        }
        eprint!("{prompt}");
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .map_err(CliError::io("reading the authenticator code from stdin"))?;
        let line = line.trim();
        if line.is_empty() {
            return Err(CliError::Input(
                "the user pool asks for an authenticator app's code: give it on stdin or in SHEETLOG_MFA_CODE".into(),
            ));
        }
        Ok(line.to_owned())
    };
    let path = sheetlog_client::login::login(api, email, &password, &mut code).await?;
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
            sheetlog_local::local_auth::key_path(port)
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
    let key = sheetlog_local::local_auth::IssuerKey::load(&path)
        .map_err(|e| CliError::Input(format!("{e:#}")))?;
    let token = key
        .mint(&args.sub, &args.grants.join(" "), args.ttl)
        .map_err(|e| CliError::Other(format!("{e:#}")))?;
    out(&token)
}
