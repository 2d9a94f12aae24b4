#!/usr/bin/env bash
# Starts, stops and reports on a reference Apache Pulsar broker in CLUSTER mode
# (org.apache.pulsar.PulsarBrokerStarter) on an existing ZooKeeper and BookKeeper cluster, e.g. the
# one of scripts/bookies.sh that Magnetar brokers use; and initialises cluster metadata with
# Pulsar's own tool. Same jars as pulsar-standalone.sh (lib/, resolved from Maven Central).
#
#   pulsar-broker.sh start  -m zk:HOST:PORT -c CLUSTER [-b zk://HOST:PORT/ledgers] [-d RUN_DIR]
#                           [-p BROKER_PORT] [-w WEB_PORT] [--set key=value]... [--timeout S]
#                           [--java-opts "..."]
#   pulsar-broker.sh stop   [-d RUN_DIR]
#   pulsar-broker.sh status [-d RUN_DIR]
#   pulsar-broker.sh init-cluster -m zk:HOST:PORT -c CLUSTER [-p BROKER_PORT] [-w WEB_PORT]
#                           (PulsarClusterMetadataSetup: /admin/clusters, public/default, ...;
#                           its log in RUN_DIR/logs/pulsar.log; -p/-w: the cluster's URLs, 6650/8080)
#
# -m is metadataStoreUrl and configurationMetadataStoreUrl; -b is bookkeeperMetadataServiceUri
# (default: -m's ZooKeeper with /ledgers). RUN_DIR (default tools/pulsar-reference/run-broker)
# holds broker.conf, logs/pulsar.log, pulsar.out, pulsar.pid and ports (brokerServicePort=N,
# webServicePort=M, as `magnetar broker --ports-file`). A port of 0 picks a free one.
# Heap -Xms256m -Xmx1g, direct memory 1g; PULSAR_JAVA_OPTS or --java-opts add JVM options.
# start returns once GET /admin/v2/brokers/health answers "ok" (exit 0) or fails (exit 1).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIB="$HERE/lib"

usage() { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

pid_alive() { [ -f "$1/pulsar.pid" ] && kill -0 "$(cat "$1/pulsar.pid")" 2>/dev/null; }

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

cmd=${1:-}; [ -n "$cmd" ] || usage; shift
RUN_DIR="$HERE/run-broker"; BROKER_PORT=0; WEB_PORT=0; TIMEOUT=240
META=""; BK_URI=""; CLUSTER=""
EXTRA_OPTS="${PULSAR_JAVA_OPTS:-}"; SETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -d|--run-dir) RUN_DIR="$2"; shift 2 ;;
    -m|--metadata-store) META="$2"; shift 2 ;;
    -b|--bookkeeper-uri) BK_URI="$2"; shift 2 ;;
    -c|--cluster) CLUSTER="$2"; shift 2 ;;
    -p|--broker-port) BROKER_PORT="$2"; shift 2 ;;
    -w|--web-port) WEB_PORT="$2"; shift 2 ;;
    --set) SETS+=("$2"); shift 2 ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --java-opts) EXTRA_OPTS="$EXTRA_OPTS $2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "pulsar-broker: unknown argument $1" >&2; usage ;;
  esac
done

need_meta() {
  [[ $META == zk:* ]] || { echo "pulsar-broker: -m zk:HOST:PORT is required" >&2; exit 2; }
  [ -n "$CLUSTER" ] || { echo "pulsar-broker: -c CLUSTER is required" >&2; exit 2; }
  [ -n "$BK_URI" ] || BK_URI="zk://${META#zk:}/ledgers"
}

case "$cmd" in
  init-cluster)
    need_meta
    bash "$HERE/pulsar-standalone.sh" resolve
    [ "$BROKER_PORT" = 0 ] && BROKER_PORT=6650
    [ "$WEB_PORT" = 0 ] && WEB_PORT=8080
    mkdir -p "$RUN_DIR/logs"
    java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${JVM_OPENS[@]}" \
      -Dlog4j2.configurationFile="$HERE/conf/log4j2.xml" -Dpulsar.log.dir="$RUN_DIR/logs" \
      -cp "$LIB/*" org.apache.pulsar.PulsarClusterMetadataSetup \
      --cluster "$CLUSTER" --metadata-store "$META" --configuration-metadata-store "$META" \
      --existing-bk-metadata-service-uri "$BK_URI" \
      --web-service-url "http://127.0.0.1:$WEB_PORT" \
      --broker-service-url "pulsar://127.0.0.1:$BROKER_PORT" ;;

  status)
    if pid_alive "$RUN_DIR"; then
      web=$(sed -n 's/^webServicePort=//p' "$RUN_DIR/ports")
      health=$(curl -s -m 5 "http://127.0.0.1:$web/admin/v2/brokers/health" || true)
      echo "running pid=$(cat "$RUN_DIR/pulsar.pid") $(tr '\n' ' ' < "$RUN_DIR/ports")health=${health:-none}"
    else
      echo "stopped"; exit 3
    fi ;;

  stop)
    if ! pid_alive "$RUN_DIR"; then echo "pulsar-broker: not running"; rm -f "$RUN_DIR/pulsar.pid"; exit 0; fi
    pid=$(cat "$RUN_DIR/pulsar.pid")
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "pulsar-broker: pid $pid still alive after 30 s, sending KILL"
      kill -KILL "$pid"
    fi
    rm -f "$RUN_DIR/pulsar.pid"
    echo "pulsar-broker: stopped pid $pid" ;;

  start)
    need_meta
    mkdir -p "$RUN_DIR/logs"
    RUN_DIR="$(cd "$RUN_DIR" && pwd)"
    if pid_alive "$RUN_DIR"; then
      echo "pulsar-broker: already running (pid $(cat "$RUN_DIR/pulsar.pid")) in $RUN_DIR" >&2; exit 1
    fi
    bash "$HERE/pulsar-standalone.sh" resolve
    [ "$BROKER_PORT" = 0 ] && BROKER_PORT=$(free_port)
    [ "$WEB_PORT" = 0 ] && WEB_PORT=$(free_port)
    conf="$RUN_DIR/broker.conf"
    {
      cat "$HERE/conf/broker.conf.base"
      echo "metadataStoreUrl=$META"
      echo "configurationMetadataStoreUrl=$META"
      echo "bookkeeperMetadataServiceUri=$BK_URI"
      echo "clusterName=$CLUSTER"
      echo "brokerServicePort=$BROKER_PORT"
      echo "webServicePort=$WEB_PORT"
      echo "# caller's settings"
      for kv in "${SETS[@]+"${SETS[@]}"}"; do echo "$kv"; done
    } > "$conf"
    printf 'brokerServicePort=%s\nwebServicePort=%s\n' "$BROKER_PORT" "$WEB_PORT" > "$RUN_DIR/ports"
    # shellcheck disable=SC2086
    (cd "$RUN_DIR" && exec setsid java \
        -Xms256m -Xmx1g -XX:MaxDirectMemorySize=1g -XX:+UseG1GC \
        "${JVM_OPENS[@]}" \
        -Dio.netty.tryReflectionSetAccessible=true \
        -Djava.net.preferIPv4Stack=true \
        -Dlog4j2.configurationFile="$HERE/conf/log4j2.xml" \
        -Dpulsar.log.dir="$RUN_DIR/logs" \
        $EXTRA_OPTS \
        -cp "$LIB/*" org.apache.pulsar.PulsarBrokerStarter \
        --broker-conf "$conf" \
        > "$RUN_DIR/pulsar.out" 2>&1 < /dev/null) &
    pid=$!
    echo "$pid" > "$RUN_DIR/pulsar.pid"
    echo "pulsar-broker: pid $pid, broker pulsar://127.0.0.1:$BROKER_PORT, web http://127.0.0.1:$WEB_PORT, run dir $RUN_DIR"
    start_s=$(date +%s)
    while true; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "pulsar-broker: process exited during start; see $RUN_DIR/logs/pulsar.log and $RUN_DIR/pulsar.out" >&2
        tail -n 20 "$RUN_DIR/pulsar.out" >&2 || true
        rm -f "$RUN_DIR/pulsar.pid"; exit 1
      fi
      if [ "$(curl -s -m 5 "http://127.0.0.1:$WEB_PORT/admin/v2/brokers/health" 2>/dev/null)" = "ok" ]; then
        echo "pulsar-broker: healthy after $(( $(date +%s) - start_s )) s"
        exit 0
      fi
      if [ $(( $(date +%s) - start_s )) -ge "$TIMEOUT" ]; then
        echo "pulsar-broker: not healthy after $TIMEOUT s; stopping it" >&2
        "${BASH_SOURCE[0]}" stop -d "$RUN_DIR" >&2 || true
        exit 1
      fi
      sleep 1
    done ;;

  *) usage ;;
esac
