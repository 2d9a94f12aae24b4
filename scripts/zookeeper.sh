#!/usr/bin/env bash
# A local Apache ZooKeeper server (Debian's `zookeeper` package, installed by
# scripts/install-deps.sh) for tests and local clusters.
#
#   scripts/zookeeper.sh start -d DIR [-p PORT] [--tick-ms N] [--no-sync]
#                                                   # prints "zookeeper pid PORT"
#   scripts/zookeeper.sh stop -d DIR
#   scripts/zookeeper.sh status -d DIR                          # "zookeeper pid PORT" or exit 1
#
# Standalone mode, listening on 127.0.0.1 only; data, config and log under DIR. A low --tick-ms
# (default 2000, ZooKeeper's) lets tests use short session timeouts: ZooKeeper grants sessions of
# 2 to 20 ticks. --no-sync: the transaction log is not fsynced (ZooKeeper's forceSync=no), as
# bookies.sh --no-sync does for the journals: writes survive a killed server, not a machine
# crash; a test beside fsync-heavy tests then does not wait tens of ms per znode write.
set -euo pipefail

cmd=${1:-}
shift || true
dir="" port=2181 tick=2000 force_sync=yes
while [ $# -gt 0 ]; do
  case "$1" in
    -d) dir=$2; shift 2 ;;
    -p) port=$2; shift 2 ;;
    --tick-ms) tick=$2; shift 2 ;;
    --no-sync) force_sync=no; shift ;;
    *) echo "zookeeper.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$dir" ] || { echo "zookeeper.sh: -d DIR is required" >&2; exit 2; }

jars=/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar
pidfile=$dir/zookeeper.pid

# Alive and not a zombie (a killed server whose parent has not reaped it yet still answers
# kill -0).
running() {
  [ -f "$pidfile" ] || return 1
  local pid
  pid=$(cat "$pidfile")
  kill -0 "$pid" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

answers() {  # "ruok" -> "imok" on the client port
  local reply
  reply=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf ruok >&3 && cat <&3" \
    2>/dev/null || true)
  [ "$reply" = "imok" ]
}

case "$cmd" in
  start)
    [ -f /usr/share/java/zookeeper.jar ] || {
      echo "zookeeper.sh: /usr/share/java/zookeeper.jar missing: run scripts/install-deps.sh" >&2
      exit 1
    }
    if running; then
      echo "zookeeper.sh: already running in $dir (pid $(cat "$pidfile"))" >&2
      exit 1
    fi
    mkdir -p "$dir/data"
    cat > "$dir/zoo.cfg" <<CFG
tickTime=$tick
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
maxClientCnxns=0
forceSync=$force_sync
CFG
    nohup java -Xmx256m -XX:+UseSerialGC -cp "$dir:$jars" \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
      > "$dir/zookeeper.log" 2>&1 &
    echo $! > "$pidfile"
    for _ in $(seq 1 300); do
      if answers "$port"; then
        echo "zookeeper $(cat "$pidfile") $port"
        exit 0
      fi
      running || { echo "zookeeper.sh: the server exited; see $dir/zookeeper.log" >&2; exit 1; }
      sleep 0.1
    done
    echo "zookeeper.sh: no answer on 127.0.0.1:$port after 30 s; see $dir/zookeeper.log" >&2
    exit 1
    ;;
  stop)
    if running; then
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
    ;;
  status)
    running || exit 1
    echo "zookeeper $(cat "$pidfile") $(sed -n 's/^clientPort=//p' "$dir/zoo.cfg")"
    ;;
  *)
    echo "usage: zookeeper.sh start|stop|status -d DIR [-p PORT] [--tick-ms N]" >&2
    exit 2
    ;;
esac
