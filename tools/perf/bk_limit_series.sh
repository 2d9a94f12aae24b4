#!/usr/bin/env bash
# Issue 47's BookKeeper series: the bookies' own limit and iot-telemetry-max-rate-small on
# Magnetar-BK in one series, to run under one exclusive hold of the measuring lock:
#
#   flock -x /tmp/perf.lock unshare -n bash -c 'ip link set lo up && \
#     tools/perf/bk_limit_series.sh OUT BASE_MAGNETAR NEW_MAGNETAR PERF_WORKER'
#
# 1. A fresh ensemble as tools/perf starts it (scripts/zookeeper.sh, scripts/bookies.sh: 3
#    bookies, journalSyncData=true, no extra configuration), then on it, one after the other:
#    `magnetar bookkeeper bench -e 2 -w 2 -a 2 -s 128 -n 500000` with 1,000 and 3,000 adds in
#    flight, for each binary, and BookKeeper's Java client (tools/bookkeeper/src/BenchAdds.java,
#    1,000 in flight); per run the bookies' CPU (their /proc/PID/stat ticks) over its wall time.
#    The ensemble is stopped and its data removed.
# 2. The scenario on magnetar-bk (2/2/2 on 3 bookies of its own, as it runs it): BASE, NEW,
#    BASE, NEW.
# 3. Step 1 again.
# OUT/bench.txt holds the bench lines, OUT/<run>/ the scenario reports, OUT/top.txt a `top`
# sample every 2 s (to see other processes), OUT/uptime.txt the load. Ports: bookies from 34100,
# their ZooKeeper on 34150, the scenario's cluster from 34000 (broker.bookkeeper.portBase).
set -uo pipefail
[ $# -eq 4 ] || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
OUT=$1 BASE=$2 NEW=$3 WBIN=$4
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
CP=$(cat "$REPO/tools/bookkeeper/target/bk.classpath")
mkdir -p "$OUT"

ticks() {  # CPU ticks of the bookies under DIR $1, summed
  local s=0 p
  for p in $(cat "$1"/bookie-*/pid); do s=$((s + $(awk '{print $14+$15}' /proc/"$p"/stat))); done
  echo "$s"
}

one() {  # DIR LABEL CMD...: one bench run, its client CPU and the bookies' CPU
  local d=$1 label=$2 t0 s0 t1 s1
  shift 2
  t0=$(ticks "$d") s0=$(date +%s.%N)
  echo "== $label" >> "$OUT/bench.txt"
  (cd "$d" && /usr/bin/time -f "client cpu user %U sys %S wall %e" "$@") >> "$OUT/bench.txt" 2>&1
  t1=$(ticks "$d") s1=$(date +%s.%N)
  python3 -c "print('bookies cpu %.2f s over %.2f s wall = %.0f %% of a core' % \
    (($t1-$t0)/100, $s1-$s0, ($t1-$t0)/($s1-$s0)))" >> "$OUT/bench.txt"
}

bench() {  # TAG
  local d=$OUT/bk-$1 uri o
  rm -rf "$d"
  mkdir -p "$d"
  bash "$REPO/scripts/zookeeper.sh" start -d "$d/zk" -p 34150 > "$d/start.log" 2>&1
  uri=$(bash "$REPO/scripts/bookies.sh" start -n 3 -d "$d" --port-base 34100 2>> "$d/start.log" | tail -1)
  for o in 1000 3000; do
    for b in "base:$BASE" "new:$NEW"; do
      one "$d" "${b%%:*} bench $1 outstanding $o" "${b#*:}" bookkeeper --metadata-service-uri "$uri" \
        bench -e 2 -w 2 -a 2 -s 128 -n 500000 --outstanding "$o"
    done
  done
  one "$d" "java BenchAdds $1 outstanding 1000" java -cp "$CP" \
    "$REPO/tools/bookkeeper/src/BenchAdds.java" "$uri" 2 2 2 500000 128 1000
  bash "$REPO/scripts/bookies.sh" stop -d "$d" >> "$d/start.log" 2>&1
  bash "$REPO/scripts/zookeeper.sh" stop -d "$d/zk" >> "$d/start.log" 2>&1
  rm -rf "$d"/bookie-*/journal "$d"/bookie-*/ledgers
}

scen() {  # RUN BINARY
  (cd "$REPO" && python3 tools/perf/magnetar-perf run tools/perf/scenarios/iot-telemetry-max-rate-small.yaml \
    --set broker.kind=magnetar-bk --set broker.bookkeeper.portBase=34000 \
    --magnetar-bin "$2" --worker-bin "$WBIN" --output "$OUT/$1" > "$OUT/$1.log" 2>&1)
  uptime >> "$OUT/uptime.txt"
}

uptime > "$OUT/uptime.txt"
top -b -d 2 -n 200 -w 200 > "$OUT/top.txt" &
TOP=$!
bench a
scen base1 "$BASE"
scen new1 "$NEW"
scen base2 "$BASE"
scen new2 "$NEW"
bench b
kill "$TOP" 2> /dev/null
for r in base1 new1 base2 new2; do
  echo "== scenario $r"
  grep -E "^  valid|delivered \(|broker CPU|busiest|bookies'|other proc|load generator CPU|end-to-end, all" \
    "$OUT/$r.log"
done
grep -E "^==|adds/s|bookie requests|client cpu|bookies cpu" "$OUT/bench.txt"
