//! The local API Gateway stand-in (`sheetlog_local::local_gateway`) with the settings of the
//! synthesized template, in front of the real API router: where AWS is stricter than a bare
//! local server, the local stack is now as strict, and the clients live with it.
//!
//! - the stage's throttle answers `429`s to a burst, and the CLI's client gets every request
//!   through by retrying them;
//! - a push whose Lambda event (the body JSON-escaped) is over 6 MiB never reaches the function,
//!   though its raw body is under the API's own 6 MiB limit;
//! - a request still running at the function's timeout is cut off and answered as API Gateway
//!   answers a timed-out function;
//! - a repeated header arrives joined with commas, and the API refuses a joined
//!   `Idempotency-Key` rather than taking it for a key.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use axum::routing::get;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_local::local_gateway::{self, GatewaySettings, LAMBDA_REQUEST_LIMIT};
use sheetlog_tests::api::{ApiConfig, TestApi, new_log, template_gateway};
use sheetlog_tests::fixtures::{push_body, set_body, set_mutation};
use tower::ServiceExt;

async fn behind_gateway(label: &str) -> anyhow::Result<Option<(TestApi, GatewaySettings)>> {
    let settings = template_gateway().await?;
    Ok(
        TestApi::start_behind_gateway(label, ApiConfig::default(), &settings)
            .await?
            .map(|api| (api, settings)),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_past_the_stages_throttle_gets_429s_and_the_cli_recovers() -> anyhow::Result<()> {
    // A stage set lower than the default (1,000/s, which refills faster than a test sends), as
    // an operator may set it; the stand-in reads it from the template all the same.
    let settings = GatewaySettings::from_description(
        sheetlog_tests::stack::described(&["throttlingRateLimit=100", "throttlingBurstLimit=200"])
            .await?,
    )?;
    let Some(api) =
        TestApi::start_behind_gateway("gw-throttle", ApiConfig::default(), &settings).await?
    else {
        return Ok(());
    };
    let throttle = settings
        .throttle
        .context("the template's $default stage has no throttle")?;
    println!(
        "stage throttle from the template: {} requests/s, burst {}",
        throttle.rate_limit, throttle.burst_limit
    );
    let over = 150;
    let total = throttle.burst_limit as usize + over;

    // A burst of plain requests: past the bucket, API Gateway's own 429.
    let http = reqwest::Client::new();
    let url = api.url("/health");
    let answers = futures::future::join_all((0..total).map(|_| {
        let http = http.clone();
        let url = url.clone();
        async move {
            let r = http.get(url).send().await?;
            let status = r.status();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            anyhow::Ok((status, body))
        }
    }))
    .await
    .into_iter()
    .collect::<anyhow::Result<Vec<_>>>()?;
    let throttled: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::TOO_MANY_REQUESTS)
        .map(|(_, b)| b)
        .collect();
    let ok = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    println!(
        "{total} requests at once: {ok} answered, {} throttled",
        throttled.len()
    );
    assert_eq!(ok + throttled.len(), total, "only 200s and 429s");
    // Tokens refill while the burst is sent, so a few more than the bucket may pass.
    assert!(
        throttled.len() >= over / 2,
        "{} of {total} throttled",
        throttled.len()
    );
    assert!(
        throttled
            .iter()
            .all(|b| **b == json!({"message": "Too Many Requests"})),
        "API Gateway's body: {:?}",
        throttled.first()
    );

    // The CLI's client sends the same burst and every request gets through.
    tokio::time::sleep(Duration::from_secs_f64(
        f64::from(throttle.burst_limit) / throttle.rate_limit,
    ))
    .await;
    let cli = sheetlog_client::api::Api::new(&api.base, sheetlog_client::api::Auth::None).await?;
    let cli = Arc::new(cli);
    let results = futures::future::join_all((0..total).map(|_| {
        let cli = cli.clone();
        async move { cli.get("/health").await }
    }))
    .await;
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(ToString::to_string))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {total} failed: {:?}",
        failed.len(),
        failed.first()
    );
    Ok(())
}

/// One `set` of a value made of `n` quotes: JSON writes each as `\"`, the Lambda event as 4 bytes.
fn quote_heavy_push(mutations: usize, quotes: usize) -> Value {
    let value = "\"".repeat(quotes);
    let mutations: Vec<Value> = (1..=mutations as u64)
        .map(|id| set_mutation("c1", id, "A1", json!(value)))
        .collect();
    push_body("g1", json!(mutations))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_push_over_lambdas_event_limit_is_refused_though_its_body_is_under_6_mib()
-> anyhow::Result<()> {
    let Some((api, _)) = behind_gateway("gw-size").await? else {
        return Ok(());
    };
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let push = api.url(&format!("/logs/{log}/replicache/push"));

    // 5 MB on the wire, over 8 MB in the event.
    let body = serde_json::to_vec(&quote_heavy_push(500, 5_000))?;
    let escaped = sheetlog_api::lambda_payload_len(&body);
    println!("push body {} bytes, {escaped} as a JSON string", body.len());
    assert!(body.len() < ApiConfig::default().max_request_bytes);
    assert!(escaped > LAMBDA_REQUEST_LIMIT);
    let r = c
        .post(&push)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        r.json::<Value>().await?,
        json!({"message": "Request Entity Too Large"})
    );

    // Split as the page splits it (web/src/push.ts: the event bytes of each push under
    // MAX_PUSH_BYTES), the same mutations go through.
    for part in [1..=250u64, 251..=500] {
        let mut one = quote_heavy_push(500, 5_000);
        let all = one["mutations"].as_array().cloned().unwrap_or_default();
        one["mutations"] = Value::Array(
            all.into_iter()
                .filter(|m| part.contains(&m["id"].as_u64().unwrap_or(0)))
                .collect(),
        );
        let bytes = serde_json::to_vec(&one)?;
        assert!(sheetlog_api::lambda_payload_len(&bytes) < LAMBDA_REQUEST_LIMIT - 64 * 1024);
        let r = c
            .post(&push)
            .header("content-type", "application/json")
            .body(bytes)
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await?);
    }
    Ok(())
}

/// Serves a route that takes a minute behind the invocation limits of `settings`: what the
/// gateway answered, after how long, and whether the handler ran to its end.
async fn slow_request(
    settings: &GatewaySettings,
) -> anyhow::Result<(StatusCode, Value, Duration, bool)> {
    let finished = Arc::new(AtomicBool::new(false));
    let done = finished.clone();
    let app = axum::Router::new().route(
        "/slow",
        get(move || async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            done.store(true, Ordering::SeqCst);
            "done"
        }),
    );
    let app = local_gateway::invocation(app, settings);
    let start = std::time::Instant::now();
    let resp = app
        .oneshot(axum::http::Request::get("/slow").body(axum::body::Body::empty())?)
        .await?;
    let took = start.elapsed();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await?;
    // A handler that was not cut off would finish within this.
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok((
        status,
        serde_json::from_slice(&body)?,
        took,
        finished.load(Ordering::SeqCst),
    ))
}

/// The template gives the API 25 s; the behaviour is shown with the same settings scaled down to
/// fractions of a second (25 s of waiting would prove nothing more).
#[tokio::test]
async fn a_request_past_the_functions_timeout_is_cut_off() -> anyhow::Result<()> {
    let settings = template_gateway().await?;
    println!(
        "{} timeout from the template: {:?}, integration timeout {:?}",
        settings.function, settings.function_timeout, settings.integration_timeout
    );
    assert_eq!(settings.function_timeout, Duration::from_secs(25));
    assert!(settings.function_timeout < settings.integration_timeout);
    let scaled = GatewaySettings {
        function_timeout: Duration::from_millis(250),
        integration_timeout: Duration::from_millis(300),
        ..settings.clone()
    };
    let (status, body, took, finished) = slow_request(&scaled).await?;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body, json!({"message": "Internal Server Error"}));
    assert!(
        took >= scaled.function_timeout && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert!(!finished, "the cut-off handler went on running");

    // A function allowed longer than API Gateway waits: the gateway gives up first.
    let patient = GatewaySettings {
        function_timeout: Duration::from_secs(60),
        ..scaled
    };
    let (status, body, took, _) = slow_request(&patient).await?;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, json!({"message": "Service Unavailable"}));
    assert!(
        took >= patient.integration_timeout && took < Duration::from_secs(5),
        "{took:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_idempotency_key_arrives_joined_and_is_refused() -> anyhow::Result<()> {
    let Some((api, _)) = behind_gateway("gw-headers").await? else {
        return Ok(());
    };
    let c = api.client().await?;
    let log = new_log(&c, &api).await?;
    let url = api.url(&format!("/logs/{log}/entries"));
    let entry = set_body(&[("A1", json!(1))]);
    let r = c
        .post(&url)
        .header("Idempotency-Key", "k1")
        .header("Idempotency-Key", "k2")
        .json(&entry)
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v: Value = r.json().await?;
    assert_eq!(v["error"]["code"], "invalid-header", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("commas")),
        "{v}"
    );
    let r = c
        .post(&url)
        .header("Idempotency-Key", "k1")
        .json(&entry)
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CREATED);
    Ok(())
}

/// The page counts a push as Lambda's event will hold it (`eventBytes`, `MAX_PUSH_BYTES` in
/// `web/src/push.ts`); the gateway stand-in counts the whole event (`lambda_event_len`). The two
/// must agree on every kind of text a push carries, and the room `MAX_PUSH_BYTES` leaves must hold
/// the rest of a push's event, or the page would send pushes Lambda refuses. The page's code runs
/// under Node, as its tests run it.
#[test]
fn the_page_counts_a_push_as_the_gateway_does() -> anyhow::Result<()> {
    let mutation = |value: Value| {
        json!({"clientID": "c1", "id": 7, "name": "set", "timestamp": 1.5,
            "args": {"cells": [{"ref": "A1", "value": value}]}})
        .to_string()
    };
    let texts: Vec<String> = [
        json!("plain"),
        json!("say \"hi\""),
        json!("C:\\temp\\x"),
        json!("two\nlines\tand\r\u{1}\u{1f}"),
        json!("héllo wörld, 日本語"),
        json!("𝄞 and 😀"),
        json!("\u{2028}\u{2029}"),
        json!("\"\\\"\\\\"),
        json!(""),
    ]
    .into_iter()
    .map(mutation)
    .collect();
    let script = "const { eventBytes, MAX_PUSH_BYTES } = await import('./web/src/push.ts');\n\
        let input = '';\n\
        for await (const chunk of process.stdin) input += chunk;\n\
        const texts = JSON.parse(input);\n\
        console.log(JSON.stringify({ counts: texts.map(eventBytes), max: MAX_PUSH_BYTES }));";
    let mut child = std::process::Command::new("node")
        .args(["--import", "tsx", "--input-type=module", "-e", script])
        .current_dir(sheetlog_tests::emulator::workspace_root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("running node (npm ci installs tsx)")?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().context("node's stdin")?;
        stdin.write_all(serde_json::to_string(&texts)?.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "node failed: {:?}", out.status);
    let page: Value = serde_json::from_slice(&out.stdout)?;

    let parts = |auth_bytes: usize| {
        axum::http::Request::post(format!("/logs/{}/replicache/push", uuid::Uuid::nil()))
            .header("content-type", "application/json")
            .header("authorization", "x".repeat(auth_bytes))
            .body(())
            .map(|r| r.into_parts().0)
    };
    let small = parts(0)?;
    let empty = local_gateway::lambda_event_len(&small, b"");
    for (i, text) in texts.iter().enumerate() {
        let gateway = local_gateway::lambda_event_len(&small, text.as_bytes()) - empty;
        assert_eq!(
            page["counts"][i].as_u64(),
            Some(gateway as u64),
            "the page and the gateway count {text} differently"
        );
    }
    // A push at the page's byte limit, with a large token (API Gateway takes at most 10 KiB of
    // headers) and the push's envelope around the mutations, fits Lambda's event.
    let max = page["max"].as_u64().context("MAX_PUSH_BYTES")? as usize;
    let envelope = json!({"pushVersion": 1, "clientGroupID": uuid::Uuid::nil().to_string(),
        "profileID": uuid::Uuid::nil().to_string(), "schemaVersion": "", "mutations": []})
    .to_string();
    let rest = local_gateway::lambda_event_len(&parts(10 * 1024)?, envelope.as_bytes());
    assert!(
        max + rest <= LAMBDA_REQUEST_LIMIT,
        "MAX_PUSH_BYTES ({max}) leaves {} bytes for the rest of the event, which takes {rest}",
        LAMBDA_REQUEST_LIMIT - max
    );
    println!(
        "the page's push budget: {max} bytes of mutations + {rest} for the rest of the event <= {LAMBDA_REQUEST_LIMIT}"
    );
    Ok(())
}
