#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ (docs/fuzzing.md). The build directory must be configured
# with clang and -DMAGNETAR_FUZZ=ON (usually also -DMAGNETAR_SANITIZE=address).
#
#   scripts/fuzz.sh smoke <build-dir>              each target FUZZ_SECONDS (default 30) s
#   scripts/fuzz.sh long  <build-dir> [seconds]    each target `seconds` (default 600) s
#   scripts/fuzz.sh run   <build-dir> <target> [seconds]
#
# Each target starts from a copy of fuzz/corpus/<target> (the repository is not modified). A crash,
# leak, timeout or out-of-memory fails that target (the others still run; the script exits 1 at the
# end); the input is kept as <out>/<target>/crash-* (reproduce: <build-dir>/fuzz/<target> <file>).
# Environment: FUZZ_TARGETS (default: all of them), FUZZ_OUT (work directory, default a new one
# under /tmp, kept when something failed), FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALL_TARGETS="fuzz_frames fuzz_http fuzz_config fuzz_journal fuzz_bk_codec fuzz_mqtt_codec"

usage() {
  sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
}

[ $# -ge 2 ] || usage
MODE="$1"
BUILD="$(cd "$2" && pwd)"
case "$MODE" in
  smoke) SECONDS_EACH="${FUZZ_SECONDS:-30}"; TARGETS="${FUZZ_TARGETS:-$ALL_TARGETS}" ;;
  long) SECONDS_EACH="${3:-600}"; TARGETS="${FUZZ_TARGETS:-$ALL_TARGETS}" ;;
  run) [ $# -ge 3 ] || usage; TARGETS="$3"; SECONDS_EACH="${4:-${FUZZ_SECONDS:-30}}" ;;
  *) usage ;;
esac

OUT="${FUZZ_OUT:-$(mktemp -d /tmp/magnetar-fuzz.XXXXXX)}"
mkdir -p "$OUT"
failed=()

# Input size cap per target: a little above the largest seed (frames/http/config streams,
# journal disk images).
max_len() {
  case "$1" in
    fuzz_journal) echo 8192 ;;
    fuzz_config) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

for t in $TARGETS; do
  bin="$BUILD/fuzz/$t"
  if [ ! -x "$bin" ]; then
    echo "fuzz: $bin missing (cmake --build $BUILD --target $t)" >&2
    exit 2
  fi
  work="$OUT/$t"
  mkdir -p "$work/corpus"
  cp -r "$ROOT/fuzz/corpus/$t/." "$work/corpus/"
  args=(-max_total_time="$SECONDS_EACH" -timeout=60 -rss_limit_mb=2048 -max_len="$(max_len "$t")"
        -artifact_prefix="$work/" -print_final_stats=1)
  [ -f "$ROOT/fuzz/$t.dict" ] && args+=(-dict="$ROOT/fuzz/$t.dict")
  # shellcheck disable=SC2206
  [ -n "${FUZZ_ARGS:-}" ] && args+=(${FUZZ_ARGS})
  echo "fuzz: $t for ${SECONDS_EACH}s (log $work/log)"
  if "$bin" "${args[@]}" "$work/corpus" >"$work/log" 2>&1; then
    execs=$(grep -m1 '^stat::number_of_executed_units' "$work/log" | awk '{print $2}')
    echo "fuzz: $t ok, ${execs:-?} inputs"
  else
    echo "fuzz: $t FAILED; last lines of $work/log:" >&2
    grep -E 'ERROR|INVARIANT|SUMMARY|Test unit written|==[0-9]+==' "$work/log" | tail -n 20 >&2 || true
    failed+=("$t")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failures in ${failed[*]}; inputs and logs kept in $OUT" >&2
  exit 1
fi
[ -n "${FUZZ_OUT:-}" ] || rm -rf "$OUT"
echo "fuzz: all targets passed"
