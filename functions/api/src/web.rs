//! The web spreadsheet (`web/`): its bundle is embedded in the binary at build time, so the same
//! function serves the page and the API it talks to, on one origin (no CORS, no second
//! deployment). `/` is the sheet list, `/sheets/{logId}` opens a sheet; both are the one page,
//! which routes itself. These routes read no storage and are not part of the OpenAPI document.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

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
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    Some(resp)
}

/// The page itself, for `/` and `/sheets/{logId}`.
pub async fn page() -> Response {
    file("index.html").unwrap_or_else(|| {
        (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            NOT_BUILT,
        )
            .into_response()
    })
}

/// `/sheets/{logId}`: the same page; it reads the id from its own address.
pub async fn sheet_page(Path(_log_id): Path<String>) -> Response {
    page().await
}

/// The bundle's scripts, styles and images under `/app/`.
pub async fn asset(Path(path): Path<String>) -> Response {
    file(&path).unwrap_or_else(|| {
        crate::error::ApiError::RouteNotFound {
            method: "GET".into(),
            path: format!("/app/{path}"),
        }
        .into_response()
    })
}
