//! The routes that carry no authorizer, defined once in `open_routes.json` (next to this file) for
//! the deployed stack (the CDK app creates them without an authorizer), this function (they need
//! no grant, [`is_open`]) and the local authorizer stand-in (`sheetlog dev --auth …`). Paths are
//! in API Gateway's route syntax and matched as API Gateway matches them: a literal segment
//! exactly, `{name}` one non-empty segment, `{name+}` (last) one or more.

use std::sync::LazyLock;

use serde::Deserialize;

/// One route without an authorizer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OpenRoute {
    /// `GET`; API Gateway matches the method exactly (a `HEAD` is not a `GET`).
    pub method: String,
    /// In API Gateway's syntax: `/sheets/{logId}`, `/app/{proxy+}`.
    pub path: String,
    /// Why it may be open (the cdk-nag acknowledgement).
    pub why: String,
}

#[derive(Debug, Deserialize)]
struct OpenRoutesFile {
    routes: Vec<OpenRoute>,
}

/// The file, as compiled in.
pub const OPEN_ROUTES_JSON: &str = include_str!("open_routes.json");

static ROUTES: LazyLock<Vec<OpenRoute>> = LazyLock::new(|| {
    // Compiled in and checked by a test; were it ever unreadable, nothing would be open (every
    // request then needs a token), never everything.
    serde_json::from_str::<OpenRoutesFile>(OPEN_ROUTES_JSON)
        .map(|f| f.routes)
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "open_routes.json is unreadable: no route is open");
            Vec::new()
        })
});

/// The routes without an authorizer.
pub fn routes() -> &'static [OpenRoute] {
    &ROUTES
}

/// Whether API Gateway serves `method path` (a request's path, no query) without an authorizer.
pub fn is_open(method: &str, path: &str) -> bool {
    routes()
        .iter()
        .any(|r| r.method.eq_ignore_ascii_case(method) && matches(&r.path, path))
}

/// Whether the request path `path` matches the route path `route` (API Gateway's syntax).
pub fn matches(route: &str, path: &str) -> bool {
    if route == "/" || path == "/" {
        return route == path;
    }
    let mut want = route.trim_start_matches('/').split('/');
    let mut got = path.trim_start_matches('/').split('/');
    loop {
        match (want.next(), got.next()) {
            (None, None) => return true,
            (Some(w), Some(g)) if w.starts_with('{') && w.ends_with("+}") => {
                // Greedy: this segment and the rest, at least one non-empty segment.
                return !g.is_empty() || got.any(|s| !s.is_empty());
            }
            (Some(w), Some(g)) if w.starts_with('{') && w.ends_with('}') => {
                if g.is_empty() {
                    return false;
                }
            }
            (Some(w), Some(g)) if w == g => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_reads_and_says_why_each_route_is_open() {
        let file: OpenRoutesFile =
            serde_json::from_str(OPEN_ROUTES_JSON).expect("open_routes.json reads");
        assert!(!file.routes.is_empty());
        assert_eq!(routes(), file.routes.as_slice());
        for r in routes() {
            assert!(r.path.starts_with('/'), "{r:?}");
            assert!(r.why.len() > 20, "{r:?} needs a reason");
        }
    }

    #[test]
    fn paths_match_as_api_gateway_matches_them() {
        assert!(matches("/", "/"));
        assert!(!matches("/", "/x"));
        assert!(matches("/config.json", "/config.json"));
        assert!(!matches("/config.json", "/config.json/x"));
        assert!(matches("/sheets/{logId}", "/sheets/abc"));
        assert!(!matches("/sheets/{logId}", "/sheets/"));
        assert!(!matches("/sheets/{logId}", "/sheets"));
        assert!(!matches("/sheets/{logId}", "/sheets/a/b"));
        assert!(matches("/app/{proxy+}", "/app/main.js"));
        assert!(matches("/app/{proxy+}", "/app/a/b.css"));
        assert!(!matches("/app/{proxy+}", "/app/"));
        assert!(!matches("/app/{proxy+}", "/app"));
    }

    #[test]
    fn only_the_listed_methods_are_open() {
        assert!(is_open("GET", "/config.json") && is_open("GET", "/sheets/x"));
        assert!(!is_open("POST", "/config.json"));
        assert!(!is_open("HEAD", "/"));
        for path in ["/logs", "/logs/x/entries", "/me", "/sheets", "/sheets/a/b"] {
            assert!(!is_open("GET", path), "{path}");
        }
    }
}
