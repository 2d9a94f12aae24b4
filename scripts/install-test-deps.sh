#!/usr/bin/env bash
# Installs the real-client test dependencies, idempotently:
#  - $REPO/.venv: pytest, requests and the official Apache Pulsar Python client (pulsar-client,
#    which wraps the official C++ client) from PyPI, and ruff (scripts/lint.sh), versions pinned
#    in tests/differential/requirements.txt;
#  - tests/js/node_modules: pulsar-flex (pure JS client) from npm, pinned by tests/js/package-lock.json.
#  - tests/java: the Java compatibility suite's Maven dependencies and plugins (Pulsar's Java
#    client, admin client, pulsar-admin/pulsar-client/pulsar-perf) from Maven Central into ~/.m2,
#    and tools/target/cli.classpath, so scripts/test.sh can run it offline (mvn -o);
#  - tools/bookkeeper: BookKeeper 4.17's jars into ~/.m2 (scripts/bookies.sh, tests/bookkeeper).
#  - chromium (Debian package): headless browser of tests/differential/test_websocket_browser.py.
#  - tools/pulsar-reference: Apache Pulsar 4.2.4's broker jars into tools/pulsar-reference/lib
#    (tests/bookkeeper/test_pulsar_interop.py runs a Pulsar broker beside a Magnetar broker).
#  - mosquitto_pub/mosquitto_sub (Debian's mosquitto-clients) for tests/mqtt, with paho-mqtt
#    (PyPI, in the venv);
#  - tests/go: the official Go client (github.com/apache/pulsar-client-go, the version pinned in
#    tests/go/run_suite.py) and its dependencies from the Go module proxy into the Go module cache
#    (go env GOMODCACHE), with the machine's Go (/usr/local/go); a writable copy in .deps/go
#    (git-ignored), where tests/go/run_suite.py builds and runs its tests.
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

# MQTT clients we did not write (tests/mqtt): Eclipse Mosquitto's command-line clients.
if ! command -v mosquitto_pub >/dev/null 2>&1 || ! command -v mosquitto_sub >/dev/null 2>&1; then
  echo "install-test-deps: installing mosquitto-clients (Debian package)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    mosquitto-clients
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

# Java compatibility suite: a JDK 17 and Maven (Debian packages, installed here when missing), then
# everything resolved through tests/java/settings.xml (Maven Central only); the stamp is the hash
# of the poms.
# Headless Chromium for the WebSocket browser test (Debian package; skipped there when absent).
if ! command -v chromium >/dev/null 2>&1; then
  echo "install-test-deps: installing chromium (Debian package)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends chromium
fi

JAVA_DIR="$REPO/tests/java"
JSTAMP="$JAVA_DIR/tools/target/.deps.sha256"
jwant="$(cat "$JAVA_DIR/pom.xml" "$JAVA_DIR/tools/pom.xml" "$JAVA_DIR/suite/pom.xml" | sha256sum | cut -d' ' -f1)"
if ! command -v mvn >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
  echo "install-test-deps: installing Maven and a JDK 17 (Debian packages)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    openjdk-17-jdk-headless maven
fi
if [ ! -f "$JSTAMP" ] || [ "$(cat "$JSTAMP")" != "$jwant" ] || [ ! -s "$JAVA_DIR/tools/target/cli.classpath" ]; then
  echo "install-test-deps: resolving tests/java from Maven Central (first run: a few minutes)"
  # test-compile resolves the dependencies and the compile plugins and writes cli.classpath;
  # surefire (and its JUnit 5 provider, declared in suite/pom.xml) only when it runs: once, on no test.
  mvn -B -q -s "$JAVA_DIR/settings.xml" -f "$JAVA_DIR" test-compile
  mvn -B -q -s "$JAVA_DIR/settings.xml" -f "$JAVA_DIR" surefire:test -Dtest=NoSuchTest \
    -Dsurefire.failIfNoSpecifiedTests=false
  echo "$jwant" > "$JSTAMP"
else
  echo "install-test-deps: tests/java dependencies up to date"
fi

# BookKeeper 4.17 (bookies, shell, Java client) for scripts/bookies.sh and tests/bookkeeper:
# resolved into ~/.m2, classpath in tools/bookkeeper/target/bk.classpath (no jars in the tree).
BK_DIR="$REPO/tools/bookkeeper"
if [ ! -s "$BK_DIR/target/bk.classpath" ] || [ "$BK_DIR/pom.xml" -nt "$BK_DIR/target/bk.classpath" ]; then
  echo "install-test-deps: resolving BookKeeper from Maven Central"
  mvn -B -q -s "$JAVA_DIR/settings.xml" -f "$BK_DIR" package
else
  echo "install-test-deps: BookKeeper classpath up to date"
fi
# Apache Pulsar 4.2.4 (the reference broker of tools/pulsar-reference) for the interop test of the
# BookKeeper stage: lib/ resolved from Maven Central once (~250 MB), then up to date.
bash "$REPO/tools/pulsar-reference/pulsar-standalone.sh" resolve

# The Go client's suite: its module and dependencies (go mod download), idempotent (the copy is made
# again only when the pinned version changes).
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  echo "install-test-deps: no Go toolchain (PATH or /usr/local/go/bin); tests/go needs Go >= 1.24" >&2
  exit 1
fi
"$VENV/bin/python" "$REPO/tests/go/run_suite.py" --prepare
echo "install-test-deps: done"
