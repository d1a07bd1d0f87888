//! The web spreadsheet (`web/`): its bundle is embedded in the binary at build time, so the same
//! function serves the page and the API it talks to, on one origin (no CORS, no second
//! deployment). `/` is the sheet list, `/sheets/{logId}` opens a sheet; both are the one page,
//! which routes itself. These routes read no storage and are not part of the OpenAPI document.
//! The bundle's files go out gzipped to a browser that takes gzip (web/build.mjs writes the copies),
//! and as `304 Not Modified` to one that holds the copy it would get ([`file`]).
//!
//! Every response here carries the page's security headers: a Content-Security-Policy ([`secure`],
//! built per stack) that allows scripts and styles from this origin only (and the compiling of
//! WebAssembly, the page's formula engine, but no `eval`) and network requests to
//! this origin and the bucket's (where the page PUTs uploads to presigned URLs), and the constant
//! ones ([`with_headers`], tower-http's `SetResponseHeaderLayer`): no framing, no MIME sniffing and
//! no referrer.

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::state::SharedState;

#[derive(rust_embed::RustEmbed)]
#[folder = "../../web/dist"]
#[allow_missing = true]
struct Bundle;

const NOT_BUILT: &str = "<!doctype html><meta charset=utf-8><title>sheetlog</title>\
<p>The web client was not built into this binary. Run <code>npm run build:web</code> \
(<code>./scripts/dev</code> does) and build again.</p>";

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json" | "map") => "application/json",
        // The formula engine (web/src/formula.ts); browsers compile it as it streams only with this type.
        Some("wasm") => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// A file of the bundle and its tag: from `SHEETLOG_WEB_DIR` when set (the local stack, so a
/// rebuilt page shows at the next reload without rebuilding the binary), else from the embedded
/// copy.
fn load(path: &str) -> Option<(Vec<u8>, String)> {
    if path.split('/').any(|p| p == ".." || p.is_empty()) {
        return None;
    }
    match std::env::var_os("SHEETLOG_WEB_DIR") {
        Some(dir) => {
            let at = std::path::Path::new(&dir).join(path);
            let data = std::fs::read(&at).ok()?;
            // Length and modification time: a rebuilt file of the same length is a new tag too.
            let modified = std::fs::metadata(&at)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            let tag = format!("{:x}-{modified:x}", data.len());
            Some((data, tag))
        }
        None => {
            let f = Bundle::get(path)?;
            let tag = f.metadata.sha256_hash()[..12]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>();
            Some((f.data.into_owned(), tag))
        }
    }
}

/// Files web/build.mjs also writes gzipped (`<name>.gz`): the scripts, the stylesheet and the
/// formula engine (1.9 MB of WebAssembly, about 0.7 MB gzipped).
fn compressible(path: &str) -> bool {
    matches!(
        path.rsplit_once('.').map(|(_, ext)| ext),
        Some("js" | "css" | "wasm")
    )
}

/// What a request for a file says about the copies it can take.
#[derive(Debug, Default)]
struct Wants {
    /// `Accept-Encoding` names gzip.
    gzip: bool,
    /// `If-None-Match`: the tag of the copy the browser holds.
    held: Option<String>,
}

impl Wants {
    fn of(headers: &HeaderMap) -> Self {
        let text = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok());
        Wants {
            gzip: text(header::ACCEPT_ENCODING).is_some_and(|v| {
                v.split(',').any(|e| {
                    let mut parts = e.split(';');
                    let name = parts.next().unwrap_or("").trim();
                    // `gzip;q=0` refuses it.
                    name.eq_ignore_ascii_case("gzip")
                        && !parts.any(|p| p.trim().replace(' ', "") == "q=0")
                })
            }),
            held: text(header::IF_NONE_MATCH).map(str::to_owned),
        }
    }
}

/// A file of the bundle as `wants` takes it: gzipped when it accepts gzip and a gzipped copy
/// exists, and `304 Not Modified` without a body when it holds that copy already (the page's
/// files are revalidated on every load, so the engine is not downloaded again).
fn file(
    path: &str,
    wants: &Wants,
    load: impl Fn(&str) -> Option<(Vec<u8>, String)>,
) -> Option<Response> {
    let gz = (wants.gzip && compressible(path))
        .then(|| load(&format!("{path}.gz")))
        .flatten();
    let (data, tag, gzipped) = match gz {
        Some((data, tag)) => (data, format!("{tag}-gz"), true),
        None => {
            let (data, tag) = load(path)?;
            (data, tag, false)
        }
    };
    let etag = format!("\"{tag}\"");
    let fresh = wants
        .held
        .as_deref()
        .is_some_and(|held| held.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, data).into_response()
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    // Small files, revalidated each time: a new deployment shows at the next reload.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if compressible(path) {
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    if gzipped {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, etag);
    }
    Some(resp)
}

/// The page's Content-Security-Policy. `upload_origin` is the bucket's origin (scheme, host and
/// port of a presigned URL), the one place besides this origin the page talks to.
pub fn content_security_policy(upload_origin: Option<&str>) -> String {
    content_security_policy_with(upload_origin, None)
}

/// As [`content_security_policy`], also allowing the Event API's WebSocket origin (pokes).
pub fn content_security_policy_with(upload_origin: Option<&str>, events: Option<&str>) -> String {
    let mut connect = "'self'".to_owned();
    for o in [upload_origin, events].into_iter().flatten() {
        connect.push(' ');
        connect.push_str(o);
    }
    format!(
        "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data:; \
         connect-src {connect}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// The page's other `connect-src` origins: the Event API's WebSocket (pokes) and, under Cognito
/// authorization, the user pool's endpoint (the page signs in there).
fn connect_origins(state: &SharedState) -> Option<String> {
    let cognito = state
        .cfg
        .cognito
        .as_ref()
        .and_then(|c| crate::state::origin_of(&c.endpoint));
    let both: Vec<String> = [events_origin(state), cognito]
        .into_iter()
        .flatten()
        .collect();
    (!both.is_empty()).then(|| both.join(" "))
}

/// `scheme://authority` of the Event API's real-time URL, for the page's `connect-src`.
fn events_origin(state: &SharedState) -> Option<String> {
    let url = state.cfg.pokes.as_ref()?.realtime_url.as_deref()?;
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let ok = |c: char| c.is_ascii_alphanumeric() || "-._:[]".contains(c);
    (matches!(scheme, "ws" | "wss") && !authority.is_empty() && authority.chars().all(ok))
        .then(|| format!("{scheme}://{authority}"))
}

/// The `<meta name="sheetlog-events">` the page reads its Event API from (`web/src/pokes.ts`):
/// the real-time URL, the HTTP domain its authorization names as `host`, and the namespace.
/// Empty without pokes (the page then polls).
pub fn events_meta(state: &SharedState) -> String {
    let Some(p) = state.cfg.pokes.as_ref() else {
        return String::new();
    };
    let (Some(realtime), Some(_)) = (p.realtime_url.as_deref(), events_origin(state)) else {
        return String::new();
    };
    let host = p
        .http_url
        .split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap_or_default();
    let config = serde_json::json!({
        "realtimeUrl": realtime,
        "httpHost": host,
        "namespace": p.namespace,
    })
    .to_string();
    // An attribute value: escape what HTML would read as markup.
    let escaped = config
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!("<meta name=\"sheetlog-events\" content=\"{escaped}\">\n")
}

/// Adds the page's Content-Security-Policy, which names this stack's upload and Event API origins.
fn secure(mut resp: Response, upload_origin: Option<&str>, events: Option<&str>) -> Response {
    if let Ok(csp) = HeaderValue::from_str(&content_security_policy_with(upload_origin, events)) {
        resp.headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    resp
}

/// A web route with the constant security headers on every answer: no MIME sniffing, no framing,
/// no referrer.
pub fn with_headers<S>(route: MethodRouter<S>) -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    route
        .layer::<_, Infallible>(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer::<_, Infallible>(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer::<_, Infallible>(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
}

/// The page itself, for `/` and `/sheets/{logId}`.
pub async fn page(State(state): State<SharedState>) -> Response {
    let resp = match file("index.html", &Wants::default(), load) {
        Some(resp) => with_events_meta(resp, &events_meta(&state)).await,
        // The meta tag still tells other clients (`sheetlog watch`) where the pokes are.
        None => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            NOT_BUILT.replacen("<title>", &format!("{}<title>", events_meta(&state)), 1),
        )
            .into_response(),
    };
    let events = connect_origins(&state);
    secure(
        resp,
        state.upload_origin().await.as_deref(),
        events.as_deref(),
    )
}

/// The page with the Event API's meta tag before `</head>` (its ETag changes with it).
async fn with_events_meta(resp: Response, meta: &str) -> Response {
    if meta.is_empty() {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 16 * 1024 * 1024).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let html = String::from_utf8_lossy(&bytes).replacen("</head>", &format!("{meta}</head>"), 1);
    parts.headers.remove(header::ETAG);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(html))
}

/// `/sheets/{logId}`: the same page; it reads the id from its own address.
pub async fn sheet_page(state: State<SharedState>, Path(_log_id): Path<String>) -> Response {
    page(state).await
}

/// The bundle's scripts, styles and images under `/app/`.
pub async fn asset(
    State(state): State<SharedState>,
    Path(path): Path<String>,
    headers: HeaderMap,
) -> Response {
    let resp = file(&path, &Wants::of(&headers), load).unwrap_or_else(|| {
        crate::error::ApiError::RouteNotFound {
            method: "GET".into(),
            path: format!("/app/{path}"),
        }
        .into_response()
    });
    let events = connect_origins(&state);
    secure(
        resp,
        state.upload_origin().await.as_deref(),
        events.as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(path: &str) -> Option<(Vec<u8>, String)> {
        match path {
            "e.wasm" => Some((b"raw engine".to_vec(), "raw".into())),
            "e.wasm.gz" => Some((b"gz engine".to_vec(), "small".into())),
            "plain.js" => Some((b"js".to_vec(), "js".into())),
            _ => None,
        }
    }

    fn wants(accept: Option<&str>, held: Option<&str>) -> Wants {
        let mut h = HeaderMap::new();
        if let Some(a) = accept {
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(a).unwrap());
        }
        if let Some(t) = held {
            h.insert(header::IF_NONE_MATCH, HeaderValue::from_str(t).unwrap());
        }
        Wants::of(&h)
    }

    fn header_of(r: &Response, name: header::HeaderName) -> Option<&str> {
        r.headers().get(name).and_then(|v| v.to_str().ok())
    }

    #[test]
    fn a_browser_that_takes_gzip_gets_the_gzipped_copy_and_a_held_copy_is_not_sent_again() {
        let gz = file("e.wasm", &wants(Some("gzip, deflate, br"), None), bundle).unwrap();
        assert_eq!(gz.status(), StatusCode::OK);
        assert_eq!(header_of(&gz, header::CONTENT_ENCODING), Some("gzip"));
        assert_eq!(
            header_of(&gz, header::CONTENT_TYPE),
            Some("application/wasm")
        );
        assert_eq!(header_of(&gz, header::VARY), Some("accept-encoding"));
        assert_eq!(header_of(&gz, header::ETAG), Some("\"small-gz\""));
        // Without gzip (or refusing it): the file as it is, under its own tag.
        for accept in [None, Some("br"), Some("gzip;q=0, br")] {
            let raw = file("e.wasm", &wants(accept, None), bundle).unwrap();
            assert_eq!(
                header_of(&raw, header::CONTENT_ENCODING),
                None,
                "{accept:?}"
            );
            assert_eq!(header_of(&raw, header::ETAG), Some("\"raw\""), "{accept:?}");
        }
        // The copy the browser holds: 304, no body; another tag: the file.
        let held = file("e.wasm", &wants(Some("gzip"), Some("\"small-gz\"")), bundle).unwrap();
        assert_eq!(held.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(header_of(&held, header::ETAG), Some("\"small-gz\""));
        let stale = file("e.wasm", &wants(Some("gzip"), Some("\"raw\"")), bundle).unwrap();
        assert_eq!(stale.status(), StatusCode::OK);
        // No gzipped copy: the file; and no file at all: none.
        let js = file("plain.js", &wants(Some("gzip"), None), bundle).unwrap();
        assert_eq!(header_of(&js, header::CONTENT_ENCODING), None);
        assert!(file("missing.js", &wants(Some("gzip"), None), bundle).is_none());
        assert!(file("../e.wasm", &Wants::default(), load).is_none());
    }

    #[test]
    fn the_policy_allows_only_this_origin_and_the_bucket() {
        let csp = content_security_policy(Some("http://127.0.0.1:5000"));
        assert!(
            csp.contains("connect-src 'self' http://127.0.0.1:5000;"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"));
        // WebAssembly may be compiled (the formula engine); no script may be evaluated from text.
        assert!(
            csp.contains("script-src 'self' 'wasm-unsafe-eval';"),
            "{csp}"
        );
        assert!(
            !csp.replace("'wasm-unsafe-eval'", "").contains("unsafe"),
            "{csp}"
        );
        assert_eq!(content_type("ironcalc.wasm"), "application/wasm");
        assert!(content_security_policy(None).contains("connect-src 'self';"));
        let with_events = content_security_policy_with(
            Some("https://b"),
            Some("wss://x.appsync-realtime-api.eu-west-1.amazonaws.com"),
        );
        assert!(
            with_events.contains(
                "connect-src 'self' https://b wss://x.appsync-realtime-api.eu-west-1.amazonaws.com;"
            ),
            "{with_events}"
        );
    }
}
