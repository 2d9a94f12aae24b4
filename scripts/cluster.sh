#!/usr/bin/env bash
# A local Magnetar cluster: one Apache ZooKeeper (scripts/zookeeper.sh) and N brokers
# (`magnetar broker`, cluster mode), all on free loopback ports, state under DIR.
#
#   scripts/cluster.sh start [-d DIR] [--brokers N] [--session-timeout-ms MS] [--tick-ms MS]
#                            [--port-base P [--listeners]]
#   scripts/cluster.sh stop [-d DIR]
#   scripts/cluster.sh status [-d DIR]   # one line per process: kind pid binary-port web-port
#
# start prints the binary service URL (pulsar://h:p1,h:p2,...) and the brokers' web URLs, after
# `magnetar initialize-cluster-metadata` wrote the cluster "magnetar-cluster" (first start only).
# Defaults: DIR=data/cluster, 3 brokers, ZooKeeper tickTime 2000 ms and Pulsar's 30 s session
# timeout (tests use a low tick and timeout). --port-base P: broker i (from 1) listens on
# P+2(i-1) (binary) and P+2(i-1)+1 (web) instead of free ports; with --listeners each broker also
# advertises two listeners on its binary port, internal:pulsar://127.0.0.1:port (the
# internalListenerName) and external:pulsar://localhost:port. MAGNETAR_BIN overrides build/src/app/magnetar;
# extra broker settings: MAGNETAR_BROKER_ARGS="--set key=value ...".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MAGNETAR_BIN:-$root/build/src/app/magnetar}

cmd=${1:-}
shift || true
dir=data/cluster brokers=3 session=30000 tick=2000 port_base="" listeners=0
while [ $# -gt 0 ]; do
  case "$1" in
    -d) dir=$2; shift 2 ;;
    --brokers) brokers=$2; shift 2 ;;
    --session-timeout-ms) session=$2; shift 2 ;;
    --tick-ms) tick=$2; shift 2 ;;
    --port-base) port_base=$2; shift 2 ;;
    --listeners) listeners=1; shift ;;
    *) echo "cluster.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$brokers" in ''|*[!0-9]*|0) echo "cluster.sh: --brokers needs a count >= 1" >&2; exit 2 ;; esac
case "$port_base" in ''|[1-9]*) ;; *) echo "cluster.sh: --port-base needs a port number" >&2; exit 2 ;; esac
if [ "$listeners" = 1 ] && [ -z "$port_base" ]; then
  echo "cluster.sh: --listeners needs --port-base (listeners name fixed ports)" >&2; exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cluster=magnetar-cluster

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# Alive and not a zombie (a killed broker not reaped yet still answers kill -0).
alive() {
  [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null &&
    ! grep -q '^State:[[:space:]]*Z' "/proc/$(cat "$1")/status" 2>/dev/null
}
port_of() { sed -n "s/^$1=//p" "$2" 2>/dev/null; }

status() {
  local any=1
  if out=$(bash "$root/scripts/zookeeper.sh" status -d "$dir/zookeeper" 2>/dev/null); then
    set -- $out
    echo "zookeeper $2 $3 -"
    any=0
  fi
  for b in "$dir"/broker-*; do
    [ -d "$b" ] || continue
    if alive "$b/broker.pid"; then
      echo "broker $(cat "$b/broker.pid") $(port_of brokerServicePort "$b/ports") $(port_of webServicePort "$b/ports")"
      any=0
    fi
  done
  return $any
}

stop() {
  for b in "$dir"/broker-*; do
    [ -d "$b" ] || continue
    if alive "$b/broker.pid"; then
      pid=$(cat "$b/broker.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$b/broker.pid"
  done
  bash "$root/scripts/zookeeper.sh" stop -d "$dir/zookeeper"
}

start() {
  [ -x "$bin" ] || { echo "cluster.sh: $bin missing: run scripts/build.sh" >&2; exit 1; }
  if status >/dev/null; then
    echo "cluster.sh: already running in $dir (cluster.sh stop -d $dir first)" >&2
    exit 1
  fi
  mkdir -p "$dir/zookeeper"
  zk_port=$(free_port)
  bash "$root/scripts/zookeeper.sh" start -d "$dir/zookeeper" -p "$zk_port" --tick-ms "$tick" \
    > /dev/null
  zk=zk:127.0.0.1:$zk_port
  "$bin" initialize-cluster-metadata --cluster "$cluster" --metadata-store "$zk" \
    --web-service-url "http://127.0.0.1:8080" --broker-service-url "pulsar://127.0.0.1:6650" \
    > "$dir/initialize-cluster-metadata.log" 2>&1 || {
    echo "cluster.sh: initialize-cluster-metadata failed; see $dir/initialize-cluster-metadata.log" >&2
    stop; exit 1
  }
  for i in $(seq 1 "$brokers"); do
    b=$dir/broker-$i
    mkdir -p "$b/data"
    rm -f "$b/ports"
    bport=0 wport=0 extra=()
    if [ -n "$port_base" ]; then
      bport=$((port_base + 2 * (i - 1))) wport=$((port_base + 2 * (i - 1) + 1))
    fi
    if [ "$listeners" = 1 ]; then
      extra=(--set "advertisedListeners=internal:pulsar://127.0.0.1:$bport,external:pulsar://localhost:$bport"
             --set internalListenerName=internal)
    fi
    # shellcheck disable=SC2086
    nohup "$bin" broker --ports-file "$b/ports" \
      --set metadataStoreUrl="$zk" --set clusterName="$cluster" \
      --set advertisedAddress=127.0.0.1 --set bindAddress=127.0.0.1 \
      --set brokerServicePort=$bport --set webServicePort=$wport "${extra[@]}" \
      --set journalDirectory="$b/data/journal" \
      --set metadataStoreSessionTimeoutMillis="$session" \
      ${MAGNETAR_BROKER_ARGS:-} > "$b/broker.log" 2>&1 &
    echo $! > "$b/broker.pid"
  done
  urls="" web=""
  for i in $(seq 1 "$brokers"); do
    b=$dir/broker-$i
    for _ in $(seq 1 300); do
      [ -f "$b/ports" ] && grep -q "Registered in the cluster" "$b/broker.log" && break
      alive "$b/broker.pid" || { echo "cluster.sh: broker $i exited; see $b/broker.log" >&2; stop; exit 1; }
      sleep 0.1
    done
    grep -q "Registered in the cluster" "$b/broker.log" || {
      echo "cluster.sh: broker $i did not join in 30 s; see $b/broker.log" >&2; stop; exit 1
    }
    urls="$urls${urls:+,}127.0.0.1:$(port_of brokerServicePort "$b/ports")"
    web="$web http://127.0.0.1:$(port_of webServicePort "$b/ports")"
  done
  echo "serviceUrl pulsar://$urls"
  echo "webServiceUrls$web"
  echo "metadataStoreUrl $zk"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: cluster.sh start|stop|status [-d DIR] [--brokers N]" >&2; exit 2 ;;
esac
