#!/usr/bin/env bash
# A local Apache BookKeeper cluster for tests and development: one ZooKeeper (scripts/zookeeper.sh)
# and N bookies of BookKeeper 4.17 (the Maven Central jars resolved by tools/bookkeeper/pom.xml into
# ~/.m2; no binary distribution), all on 127.0.0.1 with free ports.
#
#   scripts/bookies.sh start [-n 3] [-d DIR] [--no-sync] [--port-base P] [--conf KEY=VALUE]... [--http]
#   scripts/bookies.sh stop [-d DIR]
#   scripts/bookies.sh shell [-d DIR] CMD ARGS...          # `bookkeeper shell CMD ARGS` on DIR's cluster
#   scripts/bookies.sh kill9 [-d DIR] I                    # SIGKILL bookie I (0-based), for fault tests
#   scripts/bookies.sh readonly|writable [-d DIR] I        # turn running bookie I read-only / writable
#   scripts/bookies.sh status [-d DIR]
#
# start: ZooKeeper under DIR/zk, cluster metadata initialised once (`bookkeeper shell initnewcluster`,
# whose default layout is the hierarchical ledger manager), bookie I's journal and ledgers under
# DIR/bookie-I (journalSyncData=true unless --no-sync, which also turns ZooKeeper's forceSync off),
# -Xmx256m each. --conf lines are added to
# every bookie's configuration (kept in DIR/bookie-extra.conf for later starts of that cluster),
# e.g. --conf maxPendingAddRequestsPerThread=1000. Returns once every bookie it started is
# registered, writable (under /ledgers/available) or read-only (/ledgers/available/readonly: a
# full disk, forceReadOnlyBookie), naming on stderr each read-only one, and prints
# `zk://127.0.0.1:PORT/ledgers` on stdout (only that).
# --http: each bookie also serves BookKeeper's admin REST API (httpServerEnabled, Vert.x) on
# 127.0.0.1 and a free port (also with --port-base) kept in DIR/bookie-I/http-port; kept for later
# starts of that cluster (DIR/bookies-http), as --conf lines are. readonly and writable need it.
# readonly / writable: BookKeeper's `PUT /api/v1/bookie/state/readonly` with {"readOnly":true}
# or false on bookie I's HTTP port; returns once the bookie re-registered under
# /ledgers/available/readonly (it answers adds with EREADONLY, serves reads) or back under
# /ledgers/available. A restart of the bookie forgets it (persistBookieStatusEnabled=false).
# --port-base P: bookie I listens on P+I and a ZooKeeper started here on P-1 (default: free
# ports; a restart keeps a bookie's and the ZooKeeper's port). A ZooKeeper already running under
# DIR/zk (scripts/cluster.sh --bookies starts its own there) is used as it is.
# status: the ZooKeeper's line, then `bookie-I PID PORT STATE` per running bookie, STATE writable,
# read-only or unregistered (not in /ledgers/available), then the URI. DIR defaults to ./data/bookies; only start creates it. Needs Java 17 and Maven
# (scripts/install-test-deps.sh).
# Log level of the JVMs (log4j2, to stderr): BK_LOGLEVEL, default warn for the bookies and info for
# `shell` (BookKeeper's shell prints its results as INFO log lines).
# BK_FAULTSHIM=LIB (tests/chaos): bookie I's JVM runs with LD_PRELOAD=LIB and
# MAGNETAR_FAULTSHIM_CTL=DIR/bookie-I/faultshim.ctl, its slow-disk and clock control file.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
  sed -n '6,11p' "$0" | sed 's/^# *//'
  echo "BK_LOGLEVEL=trace|debug|info|warn|error: the JVMs' log level (default warn, info for shell)"
}

cmd=${1:-}
shift || true
case "$cmd" in
  start | stop | status | shell | kill9 | readonly | writable) ;;
  -h | --help | help)
    usage
    exit 0
    ;;
  *)
    [ -n "$cmd" ] && echo "bookies.sh: unknown command '$cmd'" >&2
    usage >&2
    exit 2
    ;;
esac
dir="$PWD/data/bookies" n=3 sync=true port_base="" http=false
args=() extra_conf=()
while [ $# -gt 0 ]; do
  case "$1" in
    -d | -n)
      [ $# -ge 2 ] || { echo "bookies.sh: $1 needs a value" >&2; exit 2; }
      if [ "$1" = -d ]; then dir=$2; else n=$2; fi
      shift 2 ;;
    --no-sync) sync=false; shift ;;
    --http) http=true; shift ;;
    --port-base)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "bookies.sh: --port-base needs a port number" >&2; exit 2; }
      port_base=$2; shift 2 ;;
    --conf)
      [[ ${2:-} == *=* ]] || { echo "bookies.sh: --conf needs KEY=VALUE" >&2; exit 2; }
      extra_conf+=("$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bookies.sh: -n needs a positive number" >&2; exit 2; }
if [ "$cmd" = start ]; then
  mkdir -p "$dir"
elif [ ! -d "$dir" ]; then
  echo "bookies.sh: no cluster in $dir" >&2
  [ "$cmd" = stop ] && exit 0
  exit 1
fi
dir="$(cd "$dir" && pwd)"

log() { echo "bookies.sh: $*" >&2; }

classpath() {  # the runtime classpath of bookkeeper-server 4.17 (resolved once, then offline)
  local tools=$REPO/tools/bookkeeper cp=$REPO/tools/bookkeeper/target/bk.classpath
  if [ ! -s "$cp" ] || [ "$tools/pom.xml" -nt "$cp" ]; then
    log "resolving BookKeeper from Maven Central (first run only)"
    (cd "$tools" && mvn -q -B -s "$REPO/tests/java/settings.xml" package >&2)
  fi
  cat "$cp"
}

default_level=warn
[ "$cmd" = shell ] && default_level=info
jvm_opts=(-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k
  -Dlog4j2.configurationFile="$dir/log4j2.properties" -Dbk.loglevel="${BK_LOGLEVEL:-$default_level}"
  -Djava.net.preferIPv4Stack=true)

write_log4j() {
  cat > "$dir/log4j2.properties" <<'CFG'
status = error
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_ERR
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{HH:mm:ss.SSS} %-5p [%t] %c{1} - %m%n
rootLogger.level = ${sys:bk.loglevel:-warn}
rootLogger.appenderRef.out.ref = out
CFG
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

zk_port() { sed -n 's/^clientPort=//p' "$dir/zk/zoo.cfg"; }

# Writes DIR/client.conf, the shell's configuration for this cluster.
write_client_conf() {
  cat > "$dir/client.conf" <<CFG
metadataServiceUri=zk://127.0.0.1:$(zk_port)/ledgers
zkTimeout=10000
allowShadedLedgerManagerFactoryClass=false
CFG
}

run_shell() {  # bookkeeper shell with DIR/client.conf; stdout and stderr as the tool writes them
  java -Xmx256m "${jvm_opts[@]}" -cp "$(classpath)" org.apache.bookkeeper.bookie.BookieShell \
    -conf "$dir/client.conf" "$@"
}

zk_ls() {  # the children of PATH on this cluster's ZooKeeper, one a line (none if it has none)
  local out
  out=$(java -Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -cp /usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar \
    org.apache.zookeeper.ZooKeeperMain -server "127.0.0.1:$(zk_port)" ls "$1" \
    2>/dev/null | grep '^\[' | tail -1 || true)
  echo "$out" | tr -d '[] ' | tr ',' '\n' | grep . || true
}

# "ADDRESS STATE" per registered bookie, STATE writable (a child of /ledgers/available) or
# read-only (a child of /ledgers/available/readonly, where BookKeeper registers a bookie that
# takes no new entries).
registered_bookies() {
  zk_ls /ledgers/available | grep ':' | sed 's/$/ writable/' || true
  zk_ls /ledgers/available/readonly | grep ':' | sed 's/$/ read-only/' || true
}

state_of() {  # PORT REGISTERED-LINES -> writable | read-only | unregistered
  local s
  s=$(echo "$2" | awk -v a="127.0.0.1:$1" '$1 == a { print $2; exit }')
  echo "${s:-unregistered}"
}

bookie_running() { [ -f "$dir/bookie-$1/pid" ] && kill -0 "$(cat "$dir/bookie-$1/pid")" 2>/dev/null; }

start_bookie() {  # I PORT HTTP-PORT
  local i=$1 port=$2 http_port=$3 b=$dir/bookie-$1
  mkdir -p "$b/journal" "$b/ledgers"
  cat > "$b/bookie.conf" <<CFG
metadataServiceUri=zk://127.0.0.1:$(zk_port)/ledgers
bookiePort=$port
advertisedAddress=127.0.0.1
listeningInterface=lo
allowLoopback=true
journalDirectories=$b/journal
ledgerDirectories=$b/ledgers
journalSyncData=$sync
httpServerEnabled=$([ -n "$http_port" ] && echo true || echo false)
zkTimeout=10000
diskUsageThreshold=0.99
diskUsageWarnThreshold=0.98
skipListSizeLimit=8388608
skipListArenaChunkSize=1048576
journalPreAllocSizeMB=4
journalWriteBufferSizeKB=64
numAddWorkerThreads=1
numReadWorkerThreads=1
numJournalCallbackThreads=1
serverNumIOThreads=2
nettyMaxFrameSizeBytes=5253120
CFG
  [ -f "$dir/bookie-extra.conf" ] && cat "$dir/bookie-extra.conf" >> "$b/bookie.conf"
  if [ -n "$http_port" ]; then
    cat >> "$b/bookie.conf" <<CFG
httpServerClass=org.apache.bookkeeper.http.vertx.VertxHttpServer
httpServerHost=127.0.0.1
httpServerPort=$http_port
CFG
    echo "$http_port" > "$b/http-port"
  else
    rm -f "$b/http-port"
  fi
  echo "$port" > "$b/port"
  local shim=()
  if [ -n "${BK_FAULTSHIM:-}" ]; then
    shim=(env "LD_PRELOAD=$BK_FAULTSHIM" "MAGNETAR_FAULTSHIM_CTL=$b/faultshim.ctl")
  fi
  nohup "${shim[@]}" java -Xmx256m -XX:MaxDirectMemorySize=128m "${jvm_opts[@]}" -cp "$CP" \
    org.apache.bookkeeper.server.Main --conf "$b/bookie.conf" > "$b/bookie.log" 2>&1 &
  echo $! > "$b/pid"
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

case "$cmd" in
  start)
    command -v java >/dev/null || { log "java not found (scripts/install-test-deps.sh)"; exit 1; }
    CP=$(classpath)
    write_log4j
    if [ ${#extra_conf[@]} -gt 0 ]; then
      printf '%s\n' "${extra_conf[@]}" > "$dir/bookie-extra.conf"
    fi
    [ "$http" = true ] && touch "$dir/bookies-http"
    if ! bash "$REPO/scripts/zookeeper.sh" status -d "$dir/zk" >/dev/null 2>&1; then
      zkp=$(free_port)
      [ -n "$port_base" ] && zkp=$((port_base - 1))
      [ -f "$dir/zk/zoo.cfg" ] && zkp=$(zk_port)  # a restart keeps the port in the saved URI
      zk_sync=()
      [ "$sync" = false ] && zk_sync=(--no-sync)  # its transaction log not fsynced either
      bash "$REPO/scripts/zookeeper.sh" start -d "$dir/zk" -p "$zkp" --tick-ms 500 "${zk_sync[@]}" >&2
    fi
    write_client_conf
    if [ ! -f "$dir/zk/.bk-initialised" ]; then
      run_shell initnewcluster > "$dir/initnewcluster.log" 2>&1 || {
        log "initnewcluster failed; see $dir/initnewcluster.log"; exit 1; }
      touch "$dir/zk/.bk-initialised"
    fi
    for i in $(seq 0 $((n - 1))); do
      bookie_running "$i" && continue
      if [ -n "$port_base" ]; then
        port=$((port_base + i))
      else
        port=$(cat "$dir/bookie-$i/port" 2>/dev/null || free_port)
      fi
      http_port=""
      if [ -f "$dir/bookies-http" ]; then
        http_port=$(cat "$dir/bookie-$i/http-port" 2>/dev/null || free_port)
      fi
      start_bookie "$i" "$port" "$http_port"
    done
    # Ready when every bookie started accepts connections and is registered, writable or
    # read-only (a read-only bookie is up but takes no new ledgers: said on stderr).
    for _ in $(seq 1 600); do
      up=0
      for i in $(seq 0 $((n - 1))); do
        bookie_running "$i" || { log "bookie $i exited; see $dir/bookie-$i/bookie.log"; exit 1; }
        # With --http the admin port too (Vert.x starts after the bookie registered).
        if listening "$(cat "$dir/bookie-$i/port")" &&
          { [ ! -s "$dir/bookie-$i/http-port" ] || listening "$(cat "$dir/bookie-$i/http-port")"; }; then
          up=$((up + 1))
        fi
      done
      if [ "$up" = "$n" ]; then
        registered=$(registered_bookies)
        unregistered=0 ro=()
        for i in $(seq 0 $((n - 1))); do
          case $(state_of "$(cat "$dir/bookie-$i/port")" "$registered") in
            unregistered) unregistered=$((unregistered + 1)) ;;
            read-only) ro+=("$i") ;;
          esac
        done
        if [ "$unregistered" = 0 ]; then
          for i in "${ro[@]}"; do
            log "bookie $i (127.0.0.1:$(cat "$dir/bookie-$i/port")) is read-only (under" \
              "/ledgers/available/readonly): it takes no new ledgers; see $dir/bookie-$i/bookie.log"
          done
          echo "zk://127.0.0.1:$(zk_port)/ledgers"
          exit 0
        fi
      fi
      sleep 0.2
    done
    log "bookies not registered after 120 s; see $dir/bookie-*/bookie.log"
    exit 1
    ;;
  stop)
    for p in "$dir"/bookie-*/pid; do
      [ -f "$p" ] || continue
      pid=$(cat "$p")
      kill "$pid" 2>/dev/null || true
    done
    for p in "$dir"/bookie-*/pid; do
      [ -f "$p" ] || continue
      pid=$(cat "$p")
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$p"
    done
    bash "$REPO/scripts/zookeeper.sh" stop -d "$dir/zk"
    ;;
  kill9)
    i=${args[0]:-}
    [[ $i =~ ^[0-9]+$ ]] || { echo "bookies.sh: kill9 needs a bookie index (0, 1, ...)" >&2; exit 2; }
    [ -s "$dir/bookie-$i/pid" ] || { echo "bookies.sh: bookie $i is not running in $dir" >&2; exit 1; }
    kill -9 "$(cat "$dir/bookie-$i/pid")"
    rm -f "$dir/bookie-$i/pid"
    ;;
  readonly | writable)
    i=${args[0]:-}
    [[ $i =~ ^[0-9]+$ ]] || { echo "bookies.sh: $cmd needs a bookie index (0, 1, ...)" >&2; exit 2; }
    bookie_running "$i" || { echo "bookies.sh: bookie $i is not running in $dir" >&2; exit 1; }
    [ -s "$dir/bookie-$i/http-port" ] || {
      log "bookie $i has no HTTP admin port: start the cluster with --http (then restart it)"; exit 1; }
    want=false state=writable
    [ "$cmd" = readonly ] && want=true state=read-only
    url="http://127.0.0.1:$(cat "$dir/bookie-$i/http-port")/api/v1/bookie/state/readonly"
    if ! out=$(python3 - "$url" "$want" 2>&1 <<'PY'
import sys, urllib.request
body = ('{"readOnly":%s}' % sys.argv[2]).encode()
req = urllib.request.Request(sys.argv[1], data=body, method="PUT",
                             headers={"Content-Type": "application/json"})
try:
    urllib.request.urlopen(req, timeout=30).read()
except Exception as e:  # HTTPError (with the bookie's reason), connection refused, timeout
    detail = e.read().decode(errors="replace") if hasattr(e, "read") else ""
    sys.exit(f"{e} {detail}".strip())
PY
    ); then
      log "bookie $i: PUT $url failed: $out"; exit 1
    fi
    port=$(cat "$dir/bookie-$i/port")
    deadline=$((SECONDS + 20))
    while [ "$SECONDS" -lt "$deadline" ]; do
      [ "$(state_of "$port" "$(registered_bookies)")" = "$state" ] && exit 0
      sleep 0.2
    done
    log "bookie $i answered the state change but is not registered $state after 20 s"
    exit 1
    ;;
  shell)
    [ -f "$dir/client.conf" ] || { log "no cluster in $dir"; exit 1; }
    run_shell "${args[@]}"
    ;;
  status)
    bash "$REPO/scripts/zookeeper.sh" status -d "$dir/zk"
    registered=$(registered_bookies)
    for p in "$dir"/bookie-*/pid; do
      [ -f "$p" ] || continue
      i=$(basename "$(dirname "$p")")
      port=$(cat "$(dirname "$p")/port")
      kill -0 "$(cat "$p")" 2>/dev/null &&
        echo "$i $(cat "$p") $port $(state_of "$port" "$registered")"
    done
    echo "zk://127.0.0.1:$(zk_port)/ledgers"
    ;;
esac
