#!/usr/bin/env bash
# No blocking wait on a broker executor (issue 46): every wait on a future, condition variable,
# latch or barrier in src/ (tests excluded) goes through src/base/blocking_wait.h, whose helpers
# check at run time that the calling thread is no executor (net::EventLoop marks its threads:
# pulsar-io-*, ml-worker-*, the metadata loops). This check fails on a wait written anywhere
# else, except in the files named below, each with the thread that waits and why.
#
# Flagged: `.wait(`, `.wait_for(`, `.wait_until(`, `arrive_and_wait(`, `std::latch`,
# `std::barrier`, `get_future().get()`, and `X.get()` where X is declared in the same file as a
# std::future / std::shared_future (or `auto X = ...get_future()` / `std::async(`).
#
# Usage: scripts/check_blocking_waits.sh [SRC_DIR]   (default: src of this repository)
# Exit status 1 with one line per wait found (file:line: text).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-src}

# file (relative to SRC) | thread that waits | why it may block
ALLOWLIST=$(cat <<'EOF'
base/blocking_wait.h | any but an executor | the helpers themselves
base/blocking_wait.cc | any but an executor | the helpers themselves
metadata/zk_store.cc | its deadline thread; openZkStore's caller (main) | ZooKeeper's session and operation deadlines
admin/http_server.cc | main, at start | waits until every pulsar-web thread is named
app/bookkeeper_cli.cc | main (CLI tool) | bookkeeper shell commands
app/cluster_cli.cc | main (CLI tool) | cluster metadata commands
bookkeeper/client.cc | the caller of open/close (main, CLI) | BookKeeper client start and stop
bookkeeper/bookie_recovery.cc | the recovery tool's thread | autorecovery steps
storage/journal.cc | storage's journal thread | group commit timer
storage/task_thread.h | storage's own task threads | their queue
storage/read_pool.cc | storage's read threads | their queue
storage/durable_storage.cc | storage's gc thread; main at open and shutdown | recovery, flush, gc timer
storage/bk/bk_factory.cc | main, at start and shutdown | BookKeeper factory open and close
client/client.cc | the application's thread | the client library's blocking API
client/client_impl.cc | the application's thread | the client library's blocking API
client/producer_send.cc | the application's thread | a full producer queue (blockIfQueueFull)
client/receive_queue.cc | the application's thread | Consumer::receive
EOF
)

declare -A ALLOWED=()
while IFS='|' read -r file _; do
  file=${file%"${file##*[![:space:]]}"}  # trailing blanks
  ALLOWED[$file]=1
done <<<"$ALLOWLIST"

# Each allowlisted file must still exist (a stale entry hides nothing, but says the list is off).
status=0
for file in "${!ALLOWED[@]}"; do
  if [ ! -f "$SRC/$file" ]; then
    echo "check_blocking_waits: allowlisted $file does not exist; update scripts/check_blocking_waits.sh"
    status=1
  fi
done

GENERIC='\.wait\(|\.wait_for\(|\.wait_until\(|arrive_and_wait\(|std::latch|std::barrier|get_future\(\)\.get\(\)'
found=0
while IFS= read -r -d '' path; do
  rel=${path#"$SRC"/}
  case "$rel" in */tests/*|tests/*) continue ;; esac
  [ -n "${ALLOWED[$rel]:-}" ] && continue
  hits=$(grep -nE "$GENERIC" "$path" || true)
  # Names declared as futures in this file; their .get() is a wait.
  names=$(grep -oE '(std::)?(shared_)?future<[^;(]*>[&*]?[[:space:]]+[A-Za-z_][A-Za-z0-9_]*|auto[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*=[^;]*(get_future\(\)|std::async\()' "$path" |
          sed -E 's/^auto[[:space:]]+([A-Za-z_][A-Za-z0-9_]*).*/\1/; s/.*[[:space:]&*]([A-Za-z_][A-Za-z0-9_]*)$/\1/' | sort -u || true)
  for n in $names; do
    more=$(grep -nE "(^|[^A-Za-z0-9_.>])$n(\.|->)get\(\)" "$path" || true)
    [ -n "$more" ] && hits=$(printf '%s\n%s' "$hits" "$more")
  done
  hits=$(echo "$hits" | grep -v '^$' | sort -t: -k1,1n -u || true)
  [ -z "$hits" ] && continue
  while IFS= read -r h; do
    echo "$SRC/$rel:$h"
    found=1
  done <<<"$hits"
done < <(grep -rlZE --include='*.cc' --include='*.h' 'wait|future|latch|barrier' "$SRC" | sort -z)

if [ "$found" = 1 ]; then
  echo "check_blocking_waits: blocking waits outside src/base/blocking_wait.h (use its helpers," \
       "which check the thread, or make the code asynchronous; an allowed file needs its thread" \
       "and reason in scripts/check_blocking_waits.sh)"
  status=1
fi
exit $status
