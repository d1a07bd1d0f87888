//! API Gateway's HTTP API and Lambda's invocation limits, as the local stack stands in for them in
//! front of the API function (`sheetlog dev`). Every figure comes from the synthesized template,
//! through the description `cdk/bin/local-resources.ts` prints ([`GatewaySettings::from_description`]):
//!
//! - **Duplicate headers** are joined with commas into one value, as API Gateway writes them into
//!   a payload-format-2.0 event (`Idempotency-Key: a` twice arrives as `a,a`).
//! - **The stage's throttle**: a token bucket of the stage's `burstLimit`, refilled at its
//!   `rateLimit` a second, shared by every route. Past it the answer is API Gateway's own
//!   `429 {"message":"Too Many Requests"}`, before any authorizer runs.
//! - **Lambda's 6 MB request limit**, counted as Lambda counts it: the whole event (headers,
//!   path, query, request context, and the body as a JSON string with its escapes, or in base64)
//!   must fit in 6,291,456 bytes. A larger request never reaches the function; the answer is
//!   `413 {"message":"Request Entity Too Large"}`, not the API's JSON error.
//! - **The function's timeout**: a request still running at the function's `Timeout` is cut off
//!   (its work dropped mid-way, as Lambda stops the invocation) and answered
//!   `500 {"message":"Internal Server Error"}`, which is what an HTTP API answers for a function
//!   that timed out; past API Gateway's 30 s integration timeout (a function allowed longer) the
//!   answer is `503 {"message":"Service Unavailable"}`.
//!
//! The front ([`front`]) goes outside the authorizer stand-in, the invocation limits
//! ([`invocation`]) inside it, where the request context the authorizer wrote is part of the
//! event whose size is counted.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayV2httpRequest, ApiGatewayV2httpRequestContext,
    ApiGatewayV2httpRequestContextHttpDescription,
};
use lambda_http::request::RequestContext;
use serde::Deserialize;

/// Lambda's limit on a synchronous invocation's request payload: 6 MiB.
pub const LAMBDA_REQUEST_LIMIT: usize = 6 * 1024 * 1024;

/// API Gateway's HTTP API waits at most this long for an integration.
pub const INTEGRATION_TIMEOUT: Duration = Duration::from_secs(30);

/// What the local gateway reproduces, from the template.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewaySettings {
    /// The `$default` stage's throttle, if it has one.
    pub throttle: Option<Throttle>,
    /// The timeout of the function behind the API's routes.
    pub function_timeout: Duration,
    /// The function's binary (`sheetlog-api`).
    pub function: String,
    /// How long API Gateway waits for the integration ([`INTEGRATION_TIMEOUT`], a fixed quota of
    /// HTTP APIs; not in the template).
    pub integration_timeout: Duration,
}

/// A stage's throttle: a token bucket of `burst_limit` tokens refilled at `rate_limit` a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttle {
    pub rate_limit: f64,
    pub burst_limit: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Description {
    functions: Vec<DescribedFunction>,
    http_api: Option<DescribedApi>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DescribedFunction {
    binary: String,
    timeout_secs: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DescribedApi {
    throttle: Option<DescribedThrottle>,
    routes: Vec<DescribedRoute>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DescribedThrottle {
    rate_limit: f64,
    burst_limit: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DescribedRoute {
    route_key: String,
    function: String,
}

impl GatewaySettings {
    /// Reads the settings from the JSON `cdk/bin/local-resources.ts` prints.
    pub fn from_description(json: &[u8]) -> anyhow::Result<Self> {
        let desc: Description = serde_json::from_slice(json)
            .context("reading the template's description (cdk/bin/local-resources.ts)")?;
        let Some(api) = desc.http_api else {
            bail!("the template's description has no HTTP API (httpApi is null)");
        };
        let mut targets: Vec<&str> = api.routes.iter().map(|r| r.function.as_str()).collect();
        targets.sort_unstable();
        targets.dedup();
        let [function] = targets[..] else {
            bail!(
                "the local gateway serves one function; the template's routes invoke {targets:?}"
            );
        };
        let Some(described) = desc.functions.iter().find(|f| f.binary == function) else {
            bail!("the routes invoke {function}, which the description does not list");
        };
        if !(described.timeout_secs.is_finite() && described.timeout_secs > 0.0) {
            bail!("{function} has timeout {} s", described.timeout_secs);
        }
        let throttle = match api.throttle {
            None => None,
            Some(t) => {
                if !(t.rate_limit.is_finite() && t.rate_limit > 0.0 && t.burst_limit >= 1.0) {
                    bail!(
                        "the stage's throttle is rate {} burst {}: the local gateway needs both positive",
                        t.rate_limit,
                        t.burst_limit
                    );
                }
                Some(Throttle {
                    rate_limit: t.rate_limit,
                    burst_limit: t.burst_limit.min(f64::from(u32::MAX)) as u32,
                })
            }
        };
        if !api.routes.iter().any(|r| r.route_key == "$default") {
            bail!("the template's HTTP API has no $default route");
        }
        Ok(Self {
            throttle,
            function_timeout: Duration::from_secs_f64(described.timeout_secs),
            function: function.to_owned(),
            integration_timeout: INTEGRATION_TIMEOUT,
        })
    }
}

/// A request's whole body, as the gateway buffers it before an authorizer or the function sees
/// it; past 16 times Lambda's limit it stops reading and answers `413` (nothing that large can
/// reach the function anyway).
pub async fn buffer_body(body: axum::body::Body) -> Result<axum::body::Bytes, Response> {
    axum::body::to_bytes(body, 16 * LAMBDA_REQUEST_LIMIT)
        .await
        .map_err(|_| gateway_error(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large"))
}

/// API Gateway's own error answer: `{"message": …}` with a status.
fn gateway_error(status: StatusCode, message: &str) -> Response {
    let mut resp = (
        status,
        serde_json::json!({ "message": message }).to_string(),
    )
        .into_response();
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// Joins every header that came more than once into one comma-separated value.
pub fn join_duplicate_headers(headers: &mut HeaderMap) {
    let names: Vec<_> = headers.keys().cloned().collect();
    for name in names {
        // Cookies travel in the event's `cookies` list, one per value.
        if name == axum::http::header::COOKIE {
            continue;
        }
        let values: Vec<HeaderValue> = headers.get_all(&name).iter().cloned().collect();
        if values.len() < 2 {
            continue;
        }
        let mut joined = Vec::new();
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                joined.push(b',');
            }
            joined.extend_from_slice(v.as_bytes());
        }
        if let Ok(v) = HeaderValue::from_bytes(&joined) {
            headers.insert(&name, v);
        }
    }
}

struct Front {
    limiter: Option<DefaultDirectRateLimiter>,
}

/// The gateway's front, outside any authorizer: duplicate headers joined, the stage's throttle.
pub fn front(app: Router, settings: &GatewaySettings) -> Router {
    let limiter = settings.throttle.map(|t| {
        let period = Duration::from_secs_f64(1.0 / t.rate_limit);
        let burst = NonZeroU32::new(t.burst_limit.max(1)).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(period)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
            .allow_burst(burst);
        RateLimiter::direct(quota)
    });
    app.layer(axum::middleware::from_fn_with_state(
        Arc::new(Front { limiter }),
        front_layer,
    ))
}

async fn front_layer(State(front): State<Arc<Front>>, mut req: Request, next: Next) -> Response {
    if let Some(limiter) = &front.limiter
        && limiter.check().is_err()
    {
        return gateway_error(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests");
    }
    join_duplicate_headers(req.headers_mut());
    next.run(req).await
}

/// The invocation's limits, inside the authorizer: the event's size and the function's timeout.
pub fn invocation(app: Router, settings: &GatewaySettings) -> Router {
    app.layer(axum::middleware::from_fn_with_state(
        (settings.function_timeout, settings.integration_timeout),
        invocation_layer,
    ))
}

async fn invocation_layer(
    State((timeout, integration_timeout)): State<(Duration, Duration)>,
    req: Request,
    next: Next,
) -> Response {
    let (parts, body) = req.into_parts();
    // The gateway buffers the whole body before it invokes the function; so does this.
    let bytes = match buffer_body(body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let size = lambda_event_len(&parts, &bytes);
    if size > LAMBDA_REQUEST_LIMIT {
        tracing::warn!(
            size,
            limit = LAMBDA_REQUEST_LIMIT,
            "request event over Lambda's payload limit: the function is not invoked"
        );
        return gateway_error(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large");
    }
    let req = Request::from_parts(parts, Body::from(bytes));
    let (limit, status, message) = if timeout < integration_timeout {
        (
            timeout,
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error",
        )
    } else {
        (
            integration_timeout,
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable",
        )
    };
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => {
            tracing::error!(
                "Task timed out after {:.2} seconds: the request is cut off",
                limit.as_secs_f64()
            );
            gateway_error(status, message)
        }
    }
}

/// Whether API Gateway passes a body of this content type as text (else it base64-encodes it).
fn is_text(headers: &HeaderMap) -> bool {
    let Some(ct) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return true; // no content type: a GET, or text
    };
    let ct = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    ct.starts_with("text/")
        || ct == "application/json"
        || ct.ends_with("+json")
        || ct == "application/xml"
        || ct.ends_with("+xml")
        || ct == "application/javascript"
        || ct == "application/x-www-form-urlencoded"
}

/// The bytes of the payload-format-2.0 event Lambda would be invoked with for this request: the
/// event serialized as JSON, with the body as an escaped JSON string (text) or in base64
/// (binary). The request context is the one the authorizer stand-in wrote (its claims count),
/// or a typical one.
pub fn lambda_event_len(parts: &axum::http::request::Parts, body: &[u8]) -> usize {
    let context = match parts.extensions.get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(c)) => c.clone(),
        _ => typical_context(parts),
    };
    let text = is_text(&parts.headers) && std::str::from_utf8(body).is_ok();
    let mut headers = parts.headers.clone();
    let cookies: Vec<String> = headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split("; ").map(str::to_owned).collect::<Vec<_>>())
        .collect();
    headers.remove(axum::http::header::COOKIE);
    let mut event = ApiGatewayV2httpRequest::default();
    event.version = Some("2.0".into());
    event.route_key = Some("$default".into());
    event.raw_path = Some(parts.uri.path().to_owned());
    event.raw_query_string = parts.uri.query().map(str::to_owned);
    event.cookies = (!cookies.is_empty()).then_some(cookies);
    event.headers = headers;
    event.query_string_parameters = parts
        .uri
        .query()
        .map(|q| q.parse().unwrap_or_default())
        .unwrap_or_default();
    event.request_context = context;
    // Counted below, without copying it into the event.
    event.body = Some(String::new());
    event.is_base64_encoded = !text;
    // `"body":""` is in the serialized event: its two quotes are counted with the body.
    let envelope = serde_json::to_vec(&event).map(|v| v.len()).unwrap_or(0);
    let body_len = if text {
        sheetlog_api::lambda_payload_len(body)
    } else {
        base64::engine::general_purpose::STANDARD
            .encode(body)
            .len()
            .saturating_add(2)
    };
    envelope.saturating_sub(2).saturating_add(body_len)
}

/// A request context as API Gateway fills it in for a caller without an authorizer.
fn typical_context(parts: &axum::http::request::Parts) -> ApiGatewayV2httpRequestContext {
    let mut http = ApiGatewayV2httpRequestContextHttpDescription::default();
    http.method = parts.method.clone();
    http.path = Some(parts.uri.path().to_owned());
    http.protocol = Some("HTTP/1.1".into());
    http.source_ip = Some("192.0.2.1".into());
    http.user_agent = parts
        .headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut c = ApiGatewayV2httpRequestContext::default();
    c.route_key = Some("$default".into());
    c.account_id = Some("123456789012".into());
    c.stage = Some("$default".into());
    c.request_id = Some("JKJaXmPLvHcESHA=".into());
    c.apiid = Some("a1b2c3d4e5".into());
    c.domain_name = Some("a1b2c3d4e5.execute-api.us-east-1.amazonaws.com".into());
    c.domain_prefix = Some("a1b2c3d4e5".into());
    c.time = Some("27/Nov/2026:14:56:19 +0000".into());
    c.time_epoch = 1_795_791_379_000;
    c.http = http;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_headers_are_joined_with_commas() {
        let mut h = HeaderMap::new();
        h.append("idempotency-key", HeaderValue::from_static("a"));
        h.append("idempotency-key", HeaderValue::from_static("b"));
        h.append("x-one", HeaderValue::from_static("1"));
        join_duplicate_headers(&mut h);
        assert_eq!(h.get_all("idempotency-key").iter().count(), 1);
        assert_eq!(h["idempotency-key"], "a,b");
        assert_eq!(h["x-one"], "1");
    }

    #[test]
    fn the_event_counts_escapes_and_base64() {
        let parts = |ct: &str| {
            axum::http::Request::post("/logs/x/replicache/push")
                .header(CONTENT_TYPE, ct)
                .body(())
                .map(|r| r.into_parts().0)
        };
        let json = parts("application/json").expect("request");
        let plain = lambda_event_len(&json, b"aaaa");
        // Each quote takes two bytes in the event's JSON string.
        assert_eq!(lambda_event_len(&json, b"\"\"\"\""), plain + 4);
        let binary = parts("application/octet-stream").expect("request");
        // base64: 3 bytes take 4, 6 take 8, 300 take 400.
        let three = lambda_event_len(&binary, &[0u8; 3]);
        assert_eq!(lambda_event_len(&binary, &[0u8; 6]), three + 4);
        assert_eq!(lambda_event_len(&binary, &[0u8; 300]), three + 396);
    }

    #[test]
    fn settings_come_from_the_description() {
        let desc = br#"{"functions":[{"binary":"sheetlog-api","timeoutSecs":25},{"binary":"w","timeoutSecs":30}],
            "httpApi":{"throttle":{"rateLimit":100,"burstLimit":200},
            "routes":[{"routeKey":"$default","authorizationType":"AWS_IAM","function":"sheetlog-api"}]}}"#;
        let s = GatewaySettings::from_description(desc).expect("settings");
        assert_eq!(
            s,
            GatewaySettings {
                throttle: Some(Throttle {
                    rate_limit: 100.0,
                    burst_limit: 200
                }),
                function_timeout: Duration::from_secs(25),
                function: "sheetlog-api".into(),
                integration_timeout: INTEGRATION_TIMEOUT,
            }
        );
        let err = GatewaySettings::from_description(br#"{"functions":[],"httpApi":null}"#)
            .expect_err("no API");
        assert!(err.to_string().contains("no HTTP API"), "{err}");
    }
}
