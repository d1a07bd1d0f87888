# Helpers for the scripts that synthesize or deploy the CDK app. Source it after common.sh; it
# changes nothing by itself.
# shellcheck shell=bash

# ensure_node_modules: the CDK app's npm dependencies, exactly as locked (npm ci), unless
# node_modules already matches package-lock.json.
ensure_node_modules() {
  command -v node >/dev/null || die "node is not installed (Node.js 20 or later is needed for the CDK app)"
  # npm ci rewrites node_modules/.package-lock.json, so a lockfile newer than it means a change.
  local stamp="$SHEETLOG_ROOT/node_modules/.package-lock.json"
  if [ ! -f "$stamp" ] || [ "$SHEETLOG_ROOT/package-lock.json" -nt "$stamp" ]; then
    log "installing the CDK app's npm dependencies (npm ci)"
    (cd "$SHEETLOG_ROOT" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
  fi
}

# ensure_cargo_lambda: cargo-lambda (with its zig toolchain) in the project venv, and that venv on
# PATH, so cargo-lambda-cdk bundles locally instead of trying Docker.
ensure_cargo_lambda() {
  ensure_pip_pkg cargo-lambda "$CARGO_LAMBDA_VERSION"
  case ":$PATH:" in *":$SHEETLOG_VENV/bin:"*) ;; *) export PATH="$SHEETLOG_VENV/bin:$PATH" ;; esac
}

# lambda_arch_context: prints `-c architecture=x86_64` when the arm64 Rust target cannot be
# installed (the functions then run on x86_64 Lambda), nothing when arm64 builds work.
lambda_arch_context() {
  if rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then return 0; fi
  if command -v rustup >/dev/null && rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1; then return 0; fi
  log "cannot add the aarch64-unknown-linux-gnu Rust target; building the functions for x86_64 instead"
  echo "-c architecture=x86_64"
}

# build_web: the web client's bundle (web/dist: esbuild, from web/src), which the API binary
# embeds; run it before cargo builds the API.
build_web() {
  ensure_node_modules
  (cd "$SHEETLOG_ROOT" && node web/build.mjs) || die "building the web client (web/build.mjs) failed"
}

# ensure_chromium: Debian's chromium for the browser tests, installed with apt when missing (the
# tests drive it with playwright-core; no browser is downloaded).
ensure_chromium() {
  [ -x "${SHEETLOG_CHROMIUM:-/usr/bin/chromium}" ] && return 0
  log "installing Debian's chromium for the browser tests (apt)"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
    && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
    || die "could not install chromium with apt-get (the browser tests need Debian's chromium package)"
}
