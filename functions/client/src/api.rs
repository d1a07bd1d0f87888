//! The HTTP client of the CLI: one sheetlog API, its authorization (none, a JWT bearer token, or
//! SigV4 for IAM), retries where the API says to retry, and the API's JSON errors turned into
//! [`CliError`]s with exit codes.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use serde_json::Value;

use sheetlog_core::log::Backoff;

use crate::sigv4::SigV4;

/// How many times a request answered `429` (API Gateway's stage throttle, or the API's own rate
/// limits) or `503` (busy, throttled, timed out) is sent again.
const RETRIES: u32 = 6;

/// The wait before sending a request again: its `Retry-After` (seconds) when it has one, capped
/// at 30 s; else a full-jitter exponential backoff from 200 ms (API Gateway's `429`s carry none).
fn retry_wait(headers: &reqwest::header::HeaderMap, backoff: &mut Backoff) -> Duration {
    match headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        Some(secs) => Duration::from_secs(secs.min(30)),
        None => backoff.next_delay(),
    }
}

/// What went wrong, and the exit code it gives the process.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The API answered with an error body: its code and message, as the API wrote them.
    #[error("{message} ({code}, HTTP {status})")]
    Api {
        status: u16,
        code: String,
        message: String,
        /// The whole error body, for `--json`.
        body: Value,
    },
    #[error("cannot reach the API at {url}: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest_middleware::Error,
    },
    #[error("{0}")]
    Input(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

impl CliError {
    /// Exit codes (`docs/cli.md`): 3 the request was refused as invalid (400, 413, 416, 422, or
    /// bad arguments the CLI caught first), 4 not allowed (401, 403), 5 not found or gone (404,
    /// 410), 6 conflict (409), 7 the API is unreachable or unavailable (5xx after retries),
    /// 1 anything else. Usage errors are clap's 2.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Api { status, .. } => match status {
                401 | 403 => 4,
                404 | 410 => 5,
                409 => 6,
                400..=499 => 3,
                _ => 7,
            },
            CliError::Unreachable { .. } => 7,
            CliError::Input(_) => 3,
            CliError::Io { .. } | CliError::Other(_) => 1,
        }
    }

    /// The error as JSON for `--json`: the API's own body, or one of the same shape.
    pub fn to_json(&self) -> Value {
        match self {
            CliError::Api { body, .. } => body.clone(),
            other => serde_json::json!({"error": {"code": match other {
                CliError::Unreachable { .. } => "unreachable",
                CliError::Input(_) => "invalid-input",
                _ => "failed",
            }, "message": other.to_string()}}),
        }
    }

    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> CliError {
        let context = context.into();
        move |source| CliError::Io { context, source }
    }
}

/// How the CLI authorizes its requests.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    #[default]
    None,
    /// `Authorization: Bearer <token>` (a stack deployed with JWT authorization).
    Bearer(String),
    /// SigV4 for `execute-api` with the standard credential chain (IAM authorization); the
    /// region is the one in the API's host name, else the configured one.
    Iam { region: Option<String> },
}

/// The region in an API Gateway host name (`<id>.execute-api.<region>.amazonaws.com`).
pub fn execute_api_region(url: &reqwest::Url) -> Option<String> {
    let host = url.host_str()?;
    let rest = host.split_once(".execute-api.")?.1;
    let region = rest.strip_suffix(".amazonaws.com")?;
    (!region.is_empty() && !region.contains('.')).then(|| region.to_owned())
}

#[derive(Debug, Clone)]
pub struct Api {
    base: reqwest::Url,
    http: ClientWithMiddleware,
    /// Unsigned, for presigned S3 URLs (the signature is in the URL).
    plain: reqwest::Client,
}

impl Api {
    pub async fn new(base: &str, auth: Auth) -> Result<Api, CliError> {
        let mut base = reqwest::Url::parse(base)
            .map_err(|e| CliError::Input(format!("--api {base:?} is not a URL: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(CliError::Input(format!(
                "--api must be an http(s) URL, not {base}"
            )));
        }
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let mut headers = reqwest::header::HeaderMap::new();
        if let Auth::Bearer(token) = &auth {
            let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| {
                    CliError::Input("--token holds characters a header cannot carry".into())
                })?;
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let inner = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(concat!("sheetlog-cli/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| CliError::Other(format!("building the HTTP client: {e}")))?;
        let mut builder = ClientBuilder::new(inner);
        if let Auth::Iam { region } = auth {
            let signer = SigV4::from_env_in(region)
                .await
                .map_err(|e| CliError::Other(format!("--iam: {e}")))?;
            builder = builder.with(signer);
        }
        Ok(Api {
            base,
            http: builder.build(),
            plain: reqwest::Client::new(),
        })
    }

    pub fn url(&self, path: &str) -> Result<reqwest::Url, CliError> {
        self.base
            .join(path.trim_start_matches('/'))
            .map_err(|e| CliError::Input(format!("{path}: {e}")))
    }

    /// Sends a request and returns the JSON body of a success. `429` and `503` are retried (at
    /// most [`RETRIES`] times, after [`retry_wait`]): a `429` of the stage's throttle never
    /// reached the function, and for the rest an `Idempotency-Key` makes a retry safe for
    /// appends, and every other request the CLI sends is a read or idempotent by the API's rules.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Result<Value, CliError> {
        let url = self.url(path)?;
        let mut attempt = 0;
        let mut backoff = Backoff::between(Duration::from_millis(200), Duration::from_secs(10));
        loop {
            let mut req = self.http.request(method.clone(), url.clone());
            if let Some(body) = body {
                req = req.json(body);
            }
            if let Some(key) = idempotency_key {
                req = req.header("Idempotency-Key", key);
            }
            let resp = req.send().await.map_err(|source| CliError::Unreachable {
                url: url.to_string(),
                source,
            })?;
            let status = resp.status();
            if (status == StatusCode::SERVICE_UNAVAILABLE
                || status == StatusCode::TOO_MANY_REQUESTS)
                && attempt < RETRIES
            {
                attempt += 1;
                tokio::time::sleep(retry_wait(resp.headers(), &mut backoff)).await;
                continue;
            }
            let bytes = resp.bytes().await.map_err(|e| CliError::Unreachable {
                url: url.to_string(),
                source: e.into(),
            })?;
            let json: Option<Value> = serde_json::from_slice(&bytes).ok();
            if status.is_success() {
                return json.ok_or_else(|| {
                    CliError::Other(format!(
                        "{url} answered {status} with a body that is not JSON"
                    ))
                });
            }
            return Err(api_error(status, json, &bytes));
        }
    }

    pub async fn get(&self, path: &str) -> Result<Value, CliError> {
        self.send(Method::GET, path, None, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, CliError> {
        self.send(Method::POST, path, Some(body), None).await
    }

    /// The client for presigned URLs.
    pub fn plain(&self) -> &reqwest::Client {
        &self.plain
    }
}

/// A failed answer as a [`CliError::Api`]: the API's `{"error": {"code", "message"}}`, or what
/// a gateway in front of it said.
pub fn api_error(status: StatusCode, json: Option<Value>, raw: &[u8]) -> CliError {
    let (code, message) = match json.as_ref().and_then(|j| j.get("error")) {
        Some(Value::Object(e)) => (
            e.get("code")
                .and_then(Value::as_str)
                .unwrap_or("error")
                .to_owned(),
            e.get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        ),
        _ => (
            status
                .canonical_reason()
                .unwrap_or("error")
                .to_lowercase()
                .replace(' ', "-"),
            // API Gateway's own errors are `{"message": "..."}`.
            json.as_ref()
                .and_then(|j| j.get("message"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| String::from_utf8_lossy(&raw[..raw.len().min(300)]).into()),
        ),
    };
    let body =
        json.unwrap_or_else(|| serde_json::json!({"error": {"code": code, "message": message}}));
    CliError::Api {
        status: status.as_u16(),
        code,
        message,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_api_status() {
        let e = |status| {
            api_error(
                StatusCode::from_u16(status).unwrap(),
                Some(serde_json::json!({"error": {"code": "x", "message": "m"}})),
                b"",
            )
            .exit_code()
        };
        assert_eq!(
            [
                e(400),
                e(403),
                e(404),
                e(409),
                e(410),
                e(413),
                e(500),
                e(503)
            ],
            [3, 4, 5, 6, 5, 3, 7, 7]
        );
    }

    #[test]
    fn a_retry_waits_for_retry_after_or_backs_off() {
        let mut backoff = Backoff::between(Duration::from_millis(200), Duration::from_secs(10));
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_wait(&h, &mut backoff), Duration::from_secs(7));
        h.insert(reqwest::header::RETRY_AFTER, "3600".parse().unwrap());
        assert_eq!(retry_wait(&h, &mut backoff), Duration::from_secs(30));
        let none = reqwest::header::HeaderMap::new();
        let waits: Vec<Duration> = (0..6).map(|_| retry_wait(&none, &mut backoff)).collect();
        assert!(
            waits.iter().all(|w| *w <= Duration::from_secs(10)),
            "{waits:?}"
        );
    }

    #[test]
    fn gateway_errors_keep_their_message() {
        let err = api_error(
            StatusCode::FORBIDDEN,
            Some(serde_json::json!({"message": "Forbidden"})),
            b"",
        );
        assert_eq!(err.to_string(), "Forbidden (forbidden, HTTP 403)");
        let err = api_error(StatusCode::BAD_GATEWAY, None, b"<html>bad gateway</html>");
        assert!(err.to_string().contains("bad gateway"), "{err}");
    }

    #[test]
    fn finds_the_region_of_an_execute_api_host() {
        let url = |s| reqwest::Url::parse(s).unwrap();
        assert_eq!(
            execute_api_region(&url("https://abc123.execute-api.eu-west-1.amazonaws.com/")),
            Some("eu-west-1".into())
        );
        assert_eq!(execute_api_region(&url("http://127.0.0.1:8080")), None);
        assert_eq!(
            execute_api_region(&url("https://api.example.com/sheetlog")),
            None
        );
    }
}
