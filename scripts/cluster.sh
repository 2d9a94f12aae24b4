#!/usr/bin/env bash
# A local Magnetar cluster: one Apache ZooKeeper (scripts/zookeeper.sh), N brokers (`magnetar
# broker`, cluster mode) and, with --bookies B, B BookKeeper bookies (scripts/bookies.sh) holding
# the topics; all on loopback ports, state under DIR.
#
#   scripts/cluster.sh start [-d DIR] [--brokers N] [--bookies B] [--session-timeout-ms MS]
#                            [--tick-ms MS] [--port-base P [--listeners]]
#   scripts/cluster.sh stop [-d DIR]
#   scripts/cluster.sh status [-d DIR]   # one line per process: kind pid binary-port web-port
#                                        # (a bookie's line: bookie pid port -); exit 1 when
#                                        # nothing runs or DIR does not exist (not created)
#
# start prints the binary service URL (pulsar://h:p1,h:p2,...) and the brokers' web URLs, after
# `magnetar initialize-cluster-metadata` wrote the cluster "magnetar-cluster" (first start only)
# with the first broker's URLs as its ClusterData (broker 1's ports are chosen free up front).
# Defaults: DIR=data/cluster, 3 brokers, ZooKeeper tickTime 2000 ms and Pulsar's 30 s session
# timeout (tests use a low tick and timeout). --port-base P: every port follows P instead of being
# a free one: broker i (from 1) listens on P+2(i-1) (binary) and P+2(i-1)+1 (web), ZooKeeper on
# P+99 and bookie I (from 0) on P+100+I, so that clusters with bases 200 apart do not meet (at most
# 49 brokers then); with --listeners each broker also
# advertises two listeners on its binary port, internal:pulsar://127.0.0.1:port (the
# internalListenerName) and external:pulsar://localhost:port. MAGNETAR_BIN overrides build/src/app/magnetar;
# extra broker settings: MAGNETAR_BROKER_ARGS="--set key=value ...".
# --bookies B: the ZooKeeper (under DIR/bookies/zk) also holds BookKeeper's metadata
# (/ledgers, `bookkeeper shell initnewcluster`), B bookies run from DIR/bookies/bookie-I (Java 17
# and the jars of scripts/bookies.sh: scripts/install-test-deps.sh), and the brokers get
# bookkeeperMetadataServiceUri (topics on the bookies;
# ensemble, write and ack quorum min(B, 2), Pulsar's default 2). start then also prints
# `bookkeeperMetadataServiceUri zk://127.0.0.1:PORT/ledgers`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MAGNETAR_BIN:-$root/build/src/app/magnetar}

cmd=${1:-}
shift || true
dir=data/cluster brokers=3 bookies=0 session=30000 tick=2000 port_base="" listeners=0
while [ $# -gt 0 ]; do
  case "$1" in
    -d) dir=$2; shift 2 ;;
    --brokers) brokers=$2; shift 2 ;;
    --bookies) bookies=${2:-}; shift 2 || { echo "cluster.sh: --bookies needs a count" >&2; exit 2; } ;;
    --session-timeout-ms) session=$2; shift 2 ;;
    --tick-ms) tick=$2; shift 2 ;;
    --port-base) port_base=$2; shift 2 ;;
    --listeners) listeners=1; shift ;;
    *) echo "cluster.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$brokers" in ''|*[!0-9]*|0) echo "cluster.sh: --brokers needs a count >= 1" >&2; exit 2 ;; esac
case "$bookies" in ''|*[!0-9]*) echo "cluster.sh: --bookies needs a count >= 0" >&2; exit 2 ;; esac
case "$port_base" in '') ;; 0*|*[!0-9]*) echo "cluster.sh: --port-base needs a port number" >&2; exit 2 ;; esac
if [ -n "$port_base" ] && { [ "$brokers" -gt 49 ] || [ $((port_base + 100 + bookies)) -gt 65535 ]; }; then
  echo "cluster.sh: --port-base P takes ports P to P+99+bookies: at most 49 brokers, P+100+bookies <= 65535" >&2
  exit 2
fi
if [ "$listeners" = 1 ] && [ -z "$port_base" ]; then
  echo "cluster.sh: --listeners needs --port-base (listeners name fixed ports)" >&2; exit 2
fi
usage="usage: cluster.sh start|stop|status [-d DIR] [--brokers N] [--bookies B]"
case "$cmd" in start|stop|status) ;; -h|--help) echo "$usage"; exit 0 ;; *) echo "$usage" >&2; exit 2 ;; esac
# Only start creates DIR: status and stop of a directory that does not exist say so.
if [ "$cmd" = start ]; then
  mkdir -p "$dir"
elif [ ! -d "$dir" ]; then
  echo "cluster.sh: no cluster in $dir (no such directory)" >&2
  exit 1
fi
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
# The ZooKeeper's directory: inside the bookies' directory when the cluster has bookies, so that
# scripts/bookies.sh uses it (and stops it).
zk_dir() { if [ -d "$dir/bookies" ]; then echo "$dir/bookies/zk"; else echo "$dir/zookeeper"; fi; }

status() {
  local any=1
  if out=$(bash "$root/scripts/zookeeper.sh" status -d "$(zk_dir)" 2>/dev/null); then
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
  for b in "$dir"/bookies/bookie-*; do
    [ -d "$b" ] || continue
    if alive "$b/pid"; then
      echo "bookie $(cat "$b/pid") $(cat "$b/port") -"
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
  if [ -d "$dir/bookies" ]; then
    bash "$root/scripts/bookies.sh" stop -d "$dir/bookies"  # the bookies, then the ZooKeeper
  else
    bash "$root/scripts/zookeeper.sh" stop -d "$dir/zookeeper"
  fi
}

start() {
  [ -x "$bin" ] || { echo "cluster.sh: $bin missing: run scripts/build.sh" >&2; exit 1; }
  if status >/dev/null; then
    echo "cluster.sh: already running in $dir (cluster.sh stop -d $dir first)" >&2
    exit 1
  fi
  if [ "$bookies" -gt 0 ]; then
    mkdir -p "$dir/bookies"
  elif [ -d "$dir/bookies" ]; then
    echo "cluster.sh: $dir was a cluster with bookies: use --bookies (or another -d)" >&2
    exit 2
  fi
  mkdir -p "$(zk_dir)"
  zk_port=$(free_port)
  [ -n "$port_base" ] && zk_port=$((port_base + 99))
  bash "$root/scripts/zookeeper.sh" start -d "$(zk_dir)" -p "$zk_port" --tick-ms "$tick" \
    > /dev/null || { echo "cluster.sh: ZooKeeper did not start on port $zk_port; see $(zk_dir)/zookeeper.log" >&2; exit 1; }
  zk=zk:127.0.0.1:$zk_port
  bk_args=()
  if [ "$bookies" -gt 0 ]; then
    bport_args=()
    [ -n "$port_base" ] && bport_args=(--port-base $((port_base + 100)))
    bk_uri=$(bash "$root/scripts/bookies.sh" start -n "$bookies" -d "$dir/bookies" \
      "${bport_args[@]}" 2> "$dir/bookies.log") || {
      echo "cluster.sh: scripts/bookies.sh start failed; see $dir/bookies.log" >&2
      stop; exit 1
    }
    q=$((bookies < 2 ? bookies : 2))
    bk_args=(--set bookkeeperMetadataServiceUri="$bk_uri"
             --set managedLedgerDefaultEnsembleSize=$q --set managedLedgerDefaultWriteQuorum=$q
             --set managedLedgerDefaultAckQuorum=$q)
  fi
  # The cluster's URLs are its first broker's (Pulsar's initialize-cluster-metadata
  # --web-service-url --broker-service-url): its ports are chosen here when not fixed.
  if [ -n "$port_base" ]; then
    first_bport=$port_base first_wport=$((port_base + 1))
  else
    first_bport=$(free_port) first_wport=$(free_port)
    while [ "$first_wport" = "$first_bport" ]; do first_wport=$(free_port); done
  fi
  "$bin" initialize-cluster-metadata --cluster "$cluster" --metadata-store "$zk" \
    --web-service-url "http://127.0.0.1:$first_wport" \
    --broker-service-url "pulsar://127.0.0.1:$first_bport" \
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
    elif [ "$i" = 1 ]; then
      bport=$first_bport wport=$first_wport
    fi
    if [ "$listeners" = 1 ]; then
      extra=(--set "advertisedListeners=internal:pulsar://127.0.0.1:$bport,external:pulsar://localhost:$bport"
             --set internalListenerName=internal)
    fi
    # shellcheck disable=SC2086
    nohup "$bin" broker --ports-file "$b/ports" \
      --set metadataStoreUrl="$zk" --set clusterName="$cluster" \
      --set advertisedAddress=127.0.0.1 --set bindAddress=127.0.0.1 \
      --set brokerServicePort=$bport --set webServicePort=$wport "${extra[@]}" "${bk_args[@]}" \
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
  if grep -q "^exists  /admin/clusters/$cluster\$" "$dir/initialize-cluster-metadata.log"; then
    # Started again: the ClusterData of the first start named broker 1's old ports; updated as
    # `pulsar-admin clusters update` does.
    b1=$dir/broker-1
    python3 - "http://127.0.0.1:$(port_of webServicePort "$b1/ports")" \
      "pulsar://127.0.0.1:$(port_of brokerServicePort "$b1/ports")" "$cluster" <<'PY' || {
import json, sys, urllib.request
web, native, cluster = sys.argv[1:4]
req = urllib.request.Request(f"{web}/admin/v2/clusters/{cluster}", method="POST",
                             data=json.dumps({"serviceUrl": web, "brokerServiceUrl": native}).encode(),
                             headers={"Content-Type": "application/json"})
urllib.request.urlopen(req, timeout=10)
PY
      echo "cluster.sh: could not update the ClusterData of $cluster" >&2; stop; exit 1
    }
  fi
  echo "serviceUrl pulsar://$urls"
  echo "webServiceUrls$web"
  echo "metadataStoreUrl $zk"
  [ "$bookies" -gt 0 ] && echo "bookkeeperMetadataServiceUri $bk_uri"
  return 0
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) status ;;
esac
