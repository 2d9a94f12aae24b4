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
NAME=pulsar-broker
# shellcheck source=common.sh
. "$HERE/common.sh"

usage() { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }

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
    resolve
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

  status) status_cmd ;;

  stop) stop_cmd ;;

  start)
    need_meta
    mkdir -p "$RUN_DIR/logs"
    RUN_DIR="$(cd "$RUN_DIR" && pwd)"
    prepare_start
    conf="$RUN_DIR/broker.conf"
    write_conf "$HERE/conf/broker.conf.base" "$conf" \
      "metadataStoreUrl=$META" "configurationMetadataStoreUrl=$META" \
      "bookkeeperMetadataServiceUri=$BK_URI" "clusterName=$CLUSTER"
    launch "-Xms256m -Xmx1g -XX:MaxDirectMemorySize=1g" org.apache.pulsar.PulsarBrokerStarter \
      --broker-conf "$conf"
    wait_healthy ;;

  *) usage ;;
esac
