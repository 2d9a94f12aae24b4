#!/usr/bin/env bash
# Installs the real-client test dependencies, idempotently:
#  - $REPO/.venv: pytest, requests and the official Apache Pulsar Python client (pulsar-client,
#    which wraps the official C++ client) from PyPI, versions pinned in tests/differential/requirements.txt;
#  - tests/js/node_modules: pulsar-flex (pure JS client) from npm, pinned by tests/js/package-lock.json.
# Java/Maven deps of the reference Pulsar broker are NOT installed here: tools/pulsar-reference/
# resolves them on demand (CI does not run Pulsar).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
PYTHON="${PYTHON:-python3}"

# Python venv (needs python3-venv on Debian; scripts/install-deps.sh lists it).
if [ ! -x "$VENV/bin/python" ]; then
  echo "install-test-deps: creating venv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
REQ="$REPO/tests/differential/requirements.txt"
STAMP="$VENV/.requirements.sha256"
want="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"
  echo "$want" > "$STAMP"
else
  echo "install-test-deps: venv up to date"
fi

# Node packages (pulsar-flex), exactly as locked.
if ! command -v npm >/dev/null 2>&1; then
  echo "install-test-deps: npm not found (Debian: apt-get install nodejs npm)" >&2
  exit 1
fi
JS="$REPO/tests/js"
if [ ! -d "$JS/node_modules/pulsar-flex" ] || [ "$JS/package-lock.json" -nt "$JS/node_modules/.package-lock.json" ]; then
  (cd "$JS" && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "install-test-deps: node_modules up to date"
fi
echo "install-test-deps: done"
