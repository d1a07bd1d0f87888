//! The sync routes' DynamoDB request units through the HTTP API, for `./scripts/bench log`: a
//! Replicache push of one mutation and an unchanged pull, sent to the real router on a loopback
//! port over a fresh emulator stack, with every DynamoDB request the API makes counted on the
//! wire (`sheetlog_tests::wire`). Unlike the `push_one_mutation_*` keys (the core's `push_run` alone), these
//! include everything the route reads around it.

use std::sync::Arc;

use anyhow::{Context, ensure};
use serde_json::{Value, json};
use sheetlog_api::{ApiConfig, AppState};
use sheetlog_core::config::LogConfig;
use sheetlog_pipeline::create_local_stack;
use sheetlog_tests::Emulator;
use sheetlog_tests::bench_log::ApiSyncCosts;
use sheetlog_tests::emulator::unique_prefix;
use tokio::task::JoinHandle;

use sheetlog_tests::wire::WireCounter;

/// One API process: its router served on a loopback port. A new one has no segment hints.
struct Api {
    base: String,
    task: JoinHandle<()>,
}

impl Drop for Api {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    sdk: &aws_config::SdkConfig,
    local: &sheetlog_pipeline::LocalStack,
) -> anyhow::Result<Api> {
    let state = AppState::from_sdk(
        sdk,
        &local.resources,
        LogConfig::default(),
        ApiConfig::default(),
    )?;
    listen(sheetlog_api::router(Arc::new(state))).await
}

/// Serves `app` on a loopback port.
async fn listen(app: axum::Router) -> anyhow::Result<Api> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(Api { base, task })
}

struct Client {
    http: reqwest::Client,
    group: &'static str,
    id: &'static str,
}

impl Client {
    async fn post(&self, url: String, body: Value) -> anyhow::Result<Value> {
        let v: Value = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        ensure!(v.get("error").is_none(), "{url} answered {v}");
        Ok(v)
    }

    async fn push(&self, api: &Api, log: &str, id: u64) -> anyhow::Result<()> {
        let mutation = json!({"id": id, "clientID": self.id, "name": "set",
            "args": {"cells": [{"ref": "B7", "value": 42}]}, "timestamp": id as f64});
        self.post(
            format!("{}/logs/{log}/replicache/push", api.base),
            json!({"pushVersion": 1, "clientGroupID": self.group, "mutations": [mutation],
                "profileID": "bench-log", "schemaVersion": ""}),
        )
        .await
        .map(drop)
    }

    /// Undoes the group's last step.
    async fn undo(&self, api: &Api, log: &str) -> anyhow::Result<Value> {
        self.post(
            format!("{}/logs/{log}/undo", api.base),
            json!({ "clientGroupId": self.group }),
        )
        .await
    }

    /// Pulls from `cookie`; the new cookie.
    async fn pull(&self, api: &Api, log: &str, cookie: Value) -> anyhow::Result<Value> {
        let v = self
            .post(
                format!("{}/logs/{log}/replicache/pull", api.base),
                json!({"pullVersion": 1, "clientGroupID": self.group, "cookie": cookie,
                    "profileID": "bench-log", "schemaVersion": ""}),
            )
            .await?;
        v.get("cookie")
            .cloned()
            .context("a pull answered no cookie")
    }
}

/// Measures the sync routes' units (each on a stack of its own).
pub async fn run() -> anyhow::Result<ApiSyncCosts> {
    let emulator = Emulator::start()?;
    let sdk = emulator.sdk_config().await;
    let local = create_local_stack(&sdk, &unique_prefix("bench-api")).await?;
    let wire = WireCounter::start(emulator.endpoint(), &local.resources.entry_table).await?;
    let counted = wire.sdk_config(&sdk);
    let api = serve(&counted, &local).await?;
    // Replicache's ids are 18 to 20 characters.
    let client = Client {
        http: reqwest::Client::new(),
        group: "9r0v4e2kqbdv6s5m1h3c",
        id: "b8t2n6x0f4z7c1q9w3e5",
    };
    let log = sheetlog_tests::api::create_log(&client.http, &api.base).await?;
    let units = || (wire.counts.read_units(), wire.counts.write_units() as f64);
    let since = |(r0, w0): (f64, f64)| {
        let (r, w) = units();
        (r - r0, w - w0)
    };

    // The client's first push (it joins its group), and a pull to catch up: this API process
    // now holds the log's segment hint, as a warm Lambda does.
    client.push(&api, &log, 1).await?;
    let cookie = client.pull(&api, &log, Value::Null).await?;
    let before = units();
    client.push(&api, &log, 2).await?;
    let (push_rru, push_wru) = since(before);

    let cookie = client.pull(&api, &log, cookie).await?;
    let before = units();
    let idle = client.pull(&api, &log, cookie.clone()).await?;
    let (idle_rru, _) = since(before);
    ensure!(idle == cookie, "an unchanged pull moved the cookie");

    // A fresh API process (a cold Lambda): no hint yet.
    let cold = serve(&counted, &local).await?;
    let before = units();
    client.pull(&cold, &log, cookie).await?;
    let (idle_cold_rru, _) = since(before);
    let before = units();
    client
        .push(&serve(&counted, &local).await?, &log, 3)
        .await?;
    let (push_cold_rru, push_cold_wru) = since(before);
    // An undo of that push's one-cell `set`, from the warm process.
    let before = units();
    let undone = client.undo(&api, &log).await?;
    ensure!(undone["target"]["mutationId"] == 3, "undid {undone}");
    let (undo_rru, undo_wru) = since(before);
    let (list_sheets_rru, access_check_rru) = catalog_costs(&emulator, &sdk).await?;
    let delete_clients_rru_other_logs = delete_costs(&emulator, &sdk).await?;
    Ok(ApiSyncCosts {
        list_sheets_rru,
        access_check_rru,
        delete_clients_rru_other_logs,
        api_push_one_mutation_rru: push_rru,
        api_push_one_mutation_wru: push_wru,
        api_push_one_mutation_cold_rru: push_cold_rru,
        api_push_one_mutation_cold_wru: push_cold_wru,
        idle_pull_rru: idle_rru,
        idle_pull_cold_rru: idle_cold_rru,
        undo_rru,
        undo_wru,
    })
}

/// Other sheets' sync clients in the Clients table while a delete is measured.
const OTHER_CLIENTS: usize = 10_000;

/// Read units a `DELETE /logs/{logId}` spends on other sheets' sync clients: two sheets alike
/// (one pushed mutation each, through the API), one deleted with no other sheet's client in the
/// Clients table, the other after [`OTHER_CLIENTS`] were added (written directly, uncounted);
/// the second delete's Clients-table read units less the first's.
async fn delete_costs(emulator: &Emulator, sdk: &aws_config::SdkConfig) -> anyhow::Result<f64> {
    let local = create_local_stack(sdk, &unique_prefix("bench-delete")).await?;
    let table = local.resources.require_clients_table()?.to_owned();
    let wire = WireCounter::start(emulator.endpoint(), &local.resources.entry_table).await?;
    let api = serve(&wire.sdk_config(sdk), &local).await?;
    let client = Client {
        http: reqwest::Client::new(),
        group: "9r0v4e2kqbdv6s5m1h3c",
        id: "b8t2n6x0f4z7c1q9w3e5",
    };
    let mut logs = Vec::new();
    for _ in 0..2 {
        let log = sheetlog_tests::api::create_log(&client.http, &api.base).await?;
        client.push(&api, &log, 1).await?;
        logs.push(log);
    }
    let clients_read = |log: String| {
        let (client, api, wire, table) = (&client, &api, &wire, &table);
        async move {
            let before = wire.counts.read_units_of(table);
            for _ in 0..100 {
                let r = client
                    .http
                    .delete(format!("{}/logs/{log}", api.base))
                    .send()
                    .await?;
                match r.status().as_u16() {
                    200 => return Ok(wire.counts.read_units_of(table) - before),
                    202 => {}
                    other => anyhow::bail!("DELETE answered {other}: {}", r.text().await?),
                }
            }
            anyhow::bail!("the delete of {log} never finished")
        }
    };
    let alone = clients_read(logs[0].clone()).await?;
    sheetlog_tests::stack::put_other_sheets_clients(
        &aws_sdk_dynamodb::Client::new(sdk),
        &table,
        OTHER_CLIENTS,
    )
    .await?;
    let among_others = clients_read(logs[1].clone()).await?;
    Ok(among_others - alone)
}

/// Sheets of the person whose listing is measured.
const LISTED_SHEETS: i64 = 1_000;

/// The person whose sheets are listed.
const CATALOG_USER: &str = "bench-catalog-user";

/// The catalog's costs under Cognito authorization, counted on the wire: `GET /sheets` (one
/// page of 50) for a person with 1,000 sheets, and one request's access check on an instance
/// without a cached role. The router runs behind a layer that attaches the verified-token
/// context API Gateway would (`sub` only); the catalog is seeded directly, uncounted.
async fn catalog_costs(
    emulator: &Emulator,
    sdk: &aws_config::SdkConfig,
) -> anyhow::Result<(f64, f64)> {
    let local = create_local_stack(sdk, &unique_prefix("bench-catalog")).await?;
    let table = format!("{}-catalog", local.resources.entry_table);
    seed_catalog(sdk, &table).await?;

    let wire = WireCounter::start(emulator.endpoint(), &local.resources.entry_table).await?;
    let counted = wire.sdk_config(sdk);
    let cfg = cognito_config(emulator, table);
    let http = reqwest::Client::new();
    let api = serve_signed_in(&counted, &local, &cfg).await?;
    let before = wire.counts.read_units();
    let page = get_json(&http, &api, "/sheets").await?;
    let list = wire.counts.read_units() - before;
    let sheets = page["sheets"].as_array().map_or(0, Vec::len);
    ensure!(
        sheets == 50 && page["cursor"].is_string(),
        "one full page: {page}"
    );
    let log = page["sheets"][0]["logId"]
        .as_str()
        .context("a listed sheet without logId")?
        .to_owned();

    // The same member request on a fresh instance (no cached role) and again (cached): the
    // difference is the access check.
    let cold = serve_signed_in(&counted, &local, &cfg).await?;
    let path = format!("/logs/{log}/members");
    let before = wire.counts.read_units();
    get_json(&http, &cold, &path).await?;
    let first = wire.counts.read_units() - before;
    let before = wire.counts.read_units();
    get_json(&http, &cold, &path).await?;
    let cached = wire.counts.read_units() - before;
    Ok((list, first - cached))
}

/// Creates the catalog table and writes [`LISTED_SHEETS`] sheets of [`CATALOG_USER`] into it,
/// four writers at once.
async fn seed_catalog(sdk: &aws_config::SdkConfig, table: &str) -> anyhow::Result<()> {
    use sheetlog_core::aws::DynamoCatalog;
    use sheetlog_core::catalog::{Catalog, Sheet};
    let dynamo = aws_sdk_dynamodb::Client::new(sdk);
    DynamoCatalog::create_table(&dynamo, table).await?;
    let seed = Arc::new(DynamoCatalog::new(dynamo, table.to_owned()));
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in 0..4_i64 {
        let seed = seed.clone();
        tasks.spawn(async move {
            for i in (chunk..LISTED_SHEETS).step_by(4) {
                let sheet = Sheet {
                    log: sheetlog_core::LogId::new_random(),
                    name: format!("Quarterly budget {i}"),
                    owner: CATALOG_USER.into(),
                    created_ms: 1_700_000_000_000 + i * 1000,
                    updated_ms: 1_700_000_000_000 + i * 1000,
                };
                seed.create_sheet(&sheet, Some("bench@example.com")).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// The API's settings with Cognito authorization and the catalog in `table`.
fn cognito_config(emulator: &Emulator, table: String) -> ApiConfig {
    ApiConfig {
        auth_mode: sheetlog_api::config::AuthMode::Cognito,
        catalog_table: Some(table),
        cognito: Some(sheetlog_api::config::CognitoConfig {
            region: "us-east-1".into(),
            user_pool_id: "us-east-1_bench".into(),
            client_id: "bench".into(),
            endpoint: format!("{}/", emulator.endpoint()),
        }),
        ..ApiConfig::default()
    }
}

/// Attaches the context API Gateway attaches for a verified token of [`CATALOG_USER`].
async fn signed_in(mut req: axum::extract::Request) -> axum::extract::Request {
    let claims = std::collections::HashMap::from([("sub".to_owned(), CATALOG_USER.to_owned())]);
    if let Ok(ctx) = sheetlog_pipeline::authorizer::jwt_request_context(
        req.method().as_str(),
        req.uri().path(),
        &claims,
    ) {
        req.extensions_mut().insert(ctx);
    }
    req
}

/// A fresh API process with `cfg`, every request signed in as [`CATALOG_USER`].
async fn serve_signed_in(
    sdk: &aws_config::SdkConfig,
    local: &sheetlog_pipeline::LocalStack,
    cfg: &ApiConfig,
) -> anyhow::Result<Api> {
    let state = AppState::from_sdk(sdk, &local.resources, LogConfig::default(), cfg.clone())?;
    let app = sheetlog_api::router(Arc::new(state)).layer(axum::middleware::map_request(signed_in));
    listen(app).await
}

/// `GET` of `path` on `api`, its JSON answer.
async fn get_json(http: &reqwest::Client, api: &Api, path: &str) -> anyhow::Result<Value> {
    let url = format!("{}{path}", api.base);
    let v: Value = http
        .get(&url)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(v)
}
