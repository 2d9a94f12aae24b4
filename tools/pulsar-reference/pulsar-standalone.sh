#!/usr/bin/env bash
# Starts, stops and reports on a reference Apache Pulsar standalone, run from the jars that
# `mvn package` in this directory copies into lib/ (resolved from Maven Central on first use).
#
#   pulsar-standalone.sh start  [-d RUN_DIR] [-p BROKER_PORT] [-w WEB_PORT] [--set key=value]...
#                               [--wipe] [--timeout SECONDS] [--java-opts "..."]
#                               [--health-token TOKEN]
#   pulsar-standalone.sh stop   [-d RUN_DIR]
#   pulsar-standalone.sh status [-d RUN_DIR]
#   pulsar-standalone.sh resolve          (only fetch the jars into lib/)
#
# RUN_DIR (default tools/pulsar-reference/run) holds standalone.conf, data/, logs/pulsar.log,
# pulsar.out (JVM stdout/stderr), pulsar.pid and ports (lines brokerServicePort=N, webServicePort=M,
# the same format as `magnetar standalone --ports-file`). A port of 0 means "pick a free one".
# Metadata lives in RocksDB under RUN_DIR/data/metadata (Pulsar 4 standalone's default, no
# ZooKeeper); one embedded bookie stores the ledgers; functions worker and stream storage are off.
# Heap: -Xms1g -Xmx2g, direct memory 2g (sized for the 2-core, 24 GiB machine); PULSAR_JAVA_OPTS or
# --java-opts add JVM options (e.g. -XX:ActiveProcessorCount=2).
# start returns once GET /admin/v2/brokers/health answers "ok" (exit 0) or fails (exit 1); with
# authorization on, that check (super-user only) sends --health-token, else the token of
# brokerClientAuthenticationParameters=token:... .
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIB="$HERE/lib"
NAME=pulsar-standalone
MAIN_CLASS=org.apache.pulsar.PulsarStandaloneStarter
# shellcheck source=common.sh
. "$HERE/common.sh"

usage() { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }

cmd=${1:-}; [ -n "$cmd" ] || usage; shift
RUN_DIR="$HERE/run"; BROKER_PORT=6650; WEB_PORT=8080; TIMEOUT=240; WIPE=0
EXTRA_OPTS="${PULSAR_JAVA_OPTS:-}"; SETS=(); HEALTH_TOKEN=""
while [ $# -gt 0 ]; do
  case "$1" in
    -d|--run-dir) RUN_DIR="$2"; shift 2 ;;
    -p|--broker-port) BROKER_PORT="$2"; shift 2 ;;
    -w|--web-port) WEB_PORT="$2"; shift 2 ;;
    --set) SETS+=("$2"); shift 2 ;;
    --wipe) WIPE=1; shift ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --java-opts) EXTRA_OPTS="$EXTRA_OPTS $2"; shift 2 ;;
    --health-token) HEALTH_TOKEN="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "pulsar-standalone: unknown argument $1" >&2; usage ;;
  esac
done
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"

case "$cmd" in
  resolve)
    resolve ;;

  status) status_cmd ;;

  stop) stop_cmd ;;

  start)
    prepare_start
    BK_PORT=$(free_port)
    [ "$WIPE" = 1 ] && rm -rf "$RUN_DIR/data"
    mkdir -p "$RUN_DIR/data" "$RUN_DIR/logs"
    conf="$RUN_DIR/standalone.conf"
    write_conf "$HERE/conf/standalone.conf.base" "$conf"
    # With authentication on, the health check (super-user only) uses the broker's own client
    # token (brokerClientAuthenticationParameters=token:...).
    HEALTH_AUTH=()
    for kv in "${SETS[@]+"${SETS[@]}"}"; do
      case "$kv" in
        brokerClientAuthenticationParameters=token:*)
          HEALTH_AUTH=(-H "Authorization: Bearer ${kv#brokerClientAuthenticationParameters=token:}") ;;
      esac
    done
    if [ -n "$HEALTH_TOKEN" ]; then HEALTH_AUTH=(-H "Authorization: Bearer $HEALTH_TOKEN"); fi

    launch "-Xms1g -Xmx2g -XX:MaxDirectMemorySize=2g" "$MAIN_CLASS" \
        --config "$conf" \
        --no-functions-worker --no-stream-storage \
        --metadata-dir "$RUN_DIR/data/metadata" \
        --bookkeeper-dir "$RUN_DIR/data/bookkeeper" \
        --zookeeper-dir "$RUN_DIR/data/zookeeper-unused" \
        --bookkeeper-port "$BK_PORT"
    wait_healthy "${HEALTH_AUTH[@]+"${HEALTH_AUTH[@]}"}" ;;

  *) usage ;;
esac
