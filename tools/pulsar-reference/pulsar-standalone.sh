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
MAIN_CLASS=org.apache.pulsar.PulsarStandaloneStarter

usage() { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Resolves lib/ from Maven Central when it is missing or older than pom.xml.
resolve() {
  if [ -f "$LIB/.complete" ] && [ "$LIB/.complete" -nt "$HERE/pom.xml" ]; then return 0; fi
  command -v mvn >/dev/null || { echo "pulsar-standalone: mvn not found (apt-get install maven)" >&2; exit 1; }
  echo "pulsar-standalone: resolving Pulsar jars from Maven Central into $LIB (first run: a few minutes)"
  rm -rf "$LIB"
  (cd "$HERE" && mvn -q -B -Dstyle.color=never package)
  touch "$LIB/.complete"
}

pid_alive() { [ -f "$1/pulsar.pid" ] && kill -0 "$(cat "$1/pulsar.pid")" 2>/dev/null; }

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

  status)
    if pid_alive "$RUN_DIR"; then
      web=$(sed -n 's/^webServicePort=//p' "$RUN_DIR/ports")
      health=$(curl -s -m 5 "http://127.0.0.1:$web/admin/v2/brokers/health" || true)
      echo "running pid=$(cat "$RUN_DIR/pulsar.pid") $(tr '\n' ' ' < "$RUN_DIR/ports")health=${health:-none}"
    else
      echo "stopped"; exit 3
    fi ;;

  stop)
    if ! pid_alive "$RUN_DIR"; then echo "pulsar-standalone: not running"; rm -f "$RUN_DIR/pulsar.pid"; exit 0; fi
    pid=$(cat "$RUN_DIR/pulsar.pid")
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "pulsar-standalone: pid $pid still alive after 30 s, sending KILL"
      kill -KILL "$pid"
    fi
    rm -f "$RUN_DIR/pulsar.pid"
    echo "pulsar-standalone: stopped pid $pid" ;;

  start)
    if pid_alive "$RUN_DIR"; then
      echo "pulsar-standalone: already running (pid $(cat "$RUN_DIR/pulsar.pid")) in $RUN_DIR" >&2; exit 1
    fi
    resolve
    [ "$BROKER_PORT" = 0 ] && BROKER_PORT=$(free_port)
    [ "$WEB_PORT" = 0 ] && WEB_PORT=$(free_port)
    BK_PORT=$(free_port)
    [ "$WIPE" = 1 ] && rm -rf "$RUN_DIR/data"
    mkdir -p "$RUN_DIR/data" "$RUN_DIR/logs"
    conf="$RUN_DIR/standalone.conf"
    {
      cat "$HERE/conf/standalone.conf.base"
      echo "brokerServicePort=$BROKER_PORT"
      echo "webServicePort=$WEB_PORT"
      echo "# caller's settings"
      for kv in "${SETS[@]+"${SETS[@]}"}"; do echo "$kv"; done
    } > "$conf"
    printf 'brokerServicePort=%s\nwebServicePort=%s\n' "$BROKER_PORT" "$WEB_PORT" > "$RUN_DIR/ports"
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

    # Module opens that Pulsar's own launcher passes on Java 17 (netty, bookkeeper, metrics).
    JVM_OPENS=(
      --add-opens java.base/java.io=ALL-UNNAMED
      --add-opens java.base/java.util.zip=ALL-UNNAMED
      --add-opens java.base/sun.net=ALL-UNNAMED
      --add-opens java.base/java.nio=ALL-UNNAMED
      --add-opens java.base/jdk.internal.misc=ALL-UNNAMED
      --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
      --add-opens java.management/sun.management=ALL-UNNAMED
      --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    )
    # shellcheck disable=SC2086
    (cd "$RUN_DIR" && exec setsid java \
        -Xms1g -Xmx2g -XX:MaxDirectMemorySize=2g -XX:+UseG1GC \
        "${JVM_OPENS[@]}" \
        -Dio.netty.tryReflectionSetAccessible=true \
        -Djava.net.preferIPv4Stack=true \
        -Dlog4j2.configurationFile="$HERE/conf/log4j2.xml" \
        -Dpulsar.log.dir="$RUN_DIR/logs" \
        $EXTRA_OPTS \
        -cp "$LIB/*" "$MAIN_CLASS" \
        --config "$conf" \
        --no-functions-worker --no-stream-storage \
        --metadata-dir "$RUN_DIR/data/metadata" \
        --bookkeeper-dir "$RUN_DIR/data/bookkeeper" \
        --zookeeper-dir "$RUN_DIR/data/zookeeper-unused" \
        --bookkeeper-port "$BK_PORT" \
        > "$RUN_DIR/pulsar.out" 2>&1 < /dev/null) &
    pid=$!
    echo "$pid" > "$RUN_DIR/pulsar.pid"
    echo "pulsar-standalone: pid $pid, broker pulsar://127.0.0.1:$BROKER_PORT, web http://127.0.0.1:$WEB_PORT, run dir $RUN_DIR"
    start_s=$(date +%s)
    while true; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "pulsar-standalone: process exited during start; see $RUN_DIR/logs/pulsar.log and $RUN_DIR/pulsar.out" >&2
        tail -n 20 "$RUN_DIR/pulsar.out" >&2 || true
        rm -f "$RUN_DIR/pulsar.pid"; exit 1
      fi
      if [ "$(curl -s -m 5 "${HEALTH_AUTH[@]+"${HEALTH_AUTH[@]}"}" "http://127.0.0.1:$WEB_PORT/admin/v2/brokers/health" 2>/dev/null)" = "ok" ]; then
        echo "pulsar-standalone: healthy after $(( $(date +%s) - start_s )) s"
        exit 0
      fi
      if [ $(( $(date +%s) - start_s )) -ge "$TIMEOUT" ]; then
        echo "pulsar-standalone: not healthy after $TIMEOUT s; stopping it" >&2
        "${BASH_SOURCE[0]}" stop -d "$RUN_DIR" >&2 || true
        exit 1
      fi
      sleep 1
    done ;;

  *) usage ;;
esac
