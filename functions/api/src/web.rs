//! The web spreadsheet (`web/`): its bundle is embedded in the binary at build time, so the same
//! function serves the page and the API it talks to, on one origin (no CORS, no second
//! deployment). `/` is the sheet list, `/sheets/{logId}` opens a sheet; both are the one page,
//! which routes itself. These routes read no storage and are not part of the OpenAPI document.
//!
//! Every response here carries the page's security headers ([`secure`]): a Content-Security-Policy
//! that allows scripts and styles from this origin only and network requests to this origin and
//! the bucket's (where the page PUTs uploads to presigned URLs), no framing, no MIME sniffing and
//! no referrer.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

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
        _ => "application/octet-stream",
    }
}

/// A file of the bundle: from `SHEETLOG_WEB_DIR` when set (the local stack, so a rebuilt page
/// shows at the next reload without rebuilding the binary), else from the embedded copy.
fn file(path: &str) -> Option<Response> {
    if path.split('/').any(|p| p == ".." || p.is_empty()) {
        return None;
    }
    let (data, tag) = match std::env::var_os("SHEETLOG_WEB_DIR") {
        Some(dir) => {
            let data = std::fs::read(std::path::Path::new(&dir).join(path)).ok()?;
            let tag = format!("{:x}", data.len());
            (data, tag)
        }
        None => {
            let f = Bundle::get(path)?;
            let tag = f.metadata.sha256_hash()[..12]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>();
            (f.data.into_owned(), tag)
        }
    };
    let mut resp = (StatusCode::OK, data).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    // Small files, revalidated each time: a new deployment shows at the next reload.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{tag}\"")) {
        h.insert(header::ETAG, etag);
    }
    Some(resp)
}

/// The page's Content-Security-Policy. `upload_origin` is the bucket's origin (scheme, host and
/// port of a presigned URL), the one place besides this origin the page talks to.
pub fn content_security_policy(upload_origin: Option<&str>) -> String {
    let connect = match upload_origin {
        Some(o) => format!("'self' {o}"),
        None => "'self'".into(),
    };
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src {connect}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// Adds the security headers every web response carries.
fn secure(mut resp: Response, upload_origin: Option<&str>) -> Response {
    let h = resp.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(&content_security_policy(upload_origin)) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    resp
}

/// The page itself, for `/` and `/sheets/{logId}`.
pub async fn page(State(state): State<SharedState>) -> Response {
    let resp = file("index.html").unwrap_or_else(|| {
        (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            NOT_BUILT,
        )
            .into_response()
    });
    secure(resp, state.upload_origin().await.as_deref())
}

/// `/sheets/{logId}`: the same page; it reads the id from its own address.
pub async fn sheet_page(state: State<SharedState>, Path(_log_id): Path<String>) -> Response {
    page(state).await
}

/// The bundle's scripts, styles and images under `/app/`.
pub async fn asset(State(state): State<SharedState>, Path(path): Path<String>) -> Response {
    let resp = file(&path).unwrap_or_else(|| {
        crate::error::ApiError::RouteNotFound {
            method: "GET".into(),
            path: format!("/app/{path}"),
        }
        .into_response()
    });
    secure(resp, state.upload_origin().await.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_only_this_origin_and_the_bucket() {
        let csp = content_security_policy(Some("http://127.0.0.1:5000"));
        assert!(
            csp.contains("connect-src 'self' http://127.0.0.1:5000;"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"));
        assert!(csp.contains("script-src 'self';"));
        assert!(!csp.contains("unsafe"));
        assert!(content_security_policy(None).contains("connect-src 'self';"));
    }
}
