#!/usr/bin/env bash
# The lint stage (first in scripts/test.sh); exits non-zero on the first failing check.
#
#  1. clang-format (.clang-format) on the C++ lines changed since the lint base, as
#     `clang-format --dry-run -Werror --lines=...`: new and edited code is formatted, untouched
#     code stays as it is (no whole-file reformatting that would collide with other branches).
#  2. clang-tidy (.clang-tidy, build/compile_commands.json) on the library sources under src/
#     (not tests, tools or generated code) changed since the lint base, a changed header counting
#     for the .cc of the same name; warnings are errors. Parsing dominates (10-20 s of CPU for a
#     file that includes Boost.Asio/Beast), so all ~100 library sources take ~10 min on 2 cores:
#     the stage (and CI) checks what changed; LINT_TIDY_ALL=1 checks all of them (README.md,
#     Developing).
#  3. ruff (ruff.toml) on the Python under tests/ and tools/.
#  4. Function length on the whole of src/ (tests excluded): lizard (pinned in
#     tests/differential/requirements.txt) counts each function's lines, the lambdas inside it
#     included; every function over 80 lines must be named in scripts/function_length_exceptions.txt
#     (with its reason), and every name there must still be over 80 lines; a listed file moved
#     to another directory (same file name) still matches, with a note to update its path. ~3 s.
#  5. Blocking waits on the whole of src/ (tests excluded): scripts/check_blocking_waits.sh fails on
#     a wait on a future, condition variable, latch or barrier outside src/base/blocking_wait.h
#     and its named allowlist (issue 46: no broker executor blocks). ~1 s.
#
# The lint base, what "changed" is measured from:
#  - $MAGNETAR_LINT_BASE when set (a commit);
#  - else the merge-base of HEAD with origin/main (or main) when HEAD is not on it: a branch's
#    own commits plus uncommitted changes;
#  - else (a clone of main itself, as in CI) HEAD's first parent: the last commit's changes, for
#    a merge commit everything the merged branch brought in; plus uncommitted changes.
#  - Without a parent (a shallow clone of depth 1) no C++ line counts as changed.
#
# Whole tree (tests and tools too), e.g. before a release:
#   run-clang-tidy-14 -p build -j 2 -quiet '/(src|tools)/'
# Environment: BUILD_DIR (build), JOBS (2), CLANG_FORMAT, CLANG_TIDY, RUFF, LIZARD; LINT_SKIP_TIDY=1 skips
# clang-tidy (a quick local check).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
CLANG_TIDY=${CLANG_TIDY:-clang-tidy-14}
RUFF=${RUFF:-$REPO/.venv/bin/ruff}
LIZARD=${LIZARD:-$REPO/.venv/bin/lizard}
MAX_FUNCTION_LINES=80

timed() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "[lint $name: $((SECONDS - start)) s]"
}

lint_base() {
  if [ -n "${MAGNETAR_LINT_BASE:-}" ]; then
    git rev-parse --verify -q "$MAGNETAR_LINT_BASE^{commit}"
    return
  fi
  local ref base
  for ref in origin/main main; do
    if git rev-parse --verify -q "$ref^{commit}" >/dev/null; then
      base=$(git merge-base HEAD "$ref")
      if [ "$base" != "$(git rev-parse HEAD)" ]; then
        echo "$base"
        return
      fi
      break
    fi
  done
  git rev-parse --verify -q "HEAD^1^{commit}" || true
}

# clang-format on the changed lines of each changed C++ file.
format_changed() {
  local base=$1 failed=0 file lines
  if [ -z "$base" ]; then
    echo "clang-format: no lint base (no parent commit): nothing to check"
    return 0
  fi
  echo "clang-format: lines changed since $(git log -1 --format='%h %s' "$base" | cut -c1-72)"
  local files=()
  mapfile -t files < <(git diff --name-only --diff-filter=AMR "$base" -- '*.cc' '*.h' | sort -u)
  for file in "${files[@]}"; do
    [ -f "$file" ] || continue
    # "+start,count" of each hunk of the new side; count 0 is a pure deletion.
    mapfile -t lines < <(git diff -U0 "$base" -- "$file" |
      sed -n 's/^@@ -[0-9,]* +\([0-9]*\)\(,\([0-9]*\)\)\{0,1\} @@.*/\1 \3/p' |
      awk '{ n = ($2 == "") ? 1 : $2; if (n > 0) printf "--lines=%d:%d\n", $1, $1 + n - 1 }')
    [ "${#lines[@]}" -gt 0 ] || continue
    if ! "$CLANG_FORMAT" --dry-run -Werror "${lines[@]}" "$file"; then
      failed=1
    fi
  done
  echo "clang-format: ${#files[@]} changed C++ file(s) checked"
  if [ "$failed" != 0 ]; then
    echo "clang-format: format the lines above (git clang-format-14 $base formats only them)" >&2
    return 1
  fi
}

tidy_sources() {
  local base=$1 files=() f
  if [ "${LINT_TIDY_ALL:-0}" = "1" ]; then
    mapfile -t files < <(git ls-files 'src/*.cc' | grep -v '/tests/')
  elif [ -n "$base" ]; then
    while read -r f; do
      case "$f" in */tests/*) continue ;; *.h) f="${f%.h}.cc" ;; esac
      [ -f "$f" ] && files+=("$f")
    done < <(git diff --name-only --diff-filter=AMR "$base" -- 'src/*.cc' 'src/*.h')
    mapfile -t files < <(printf '%s\n' "${files[@]}" | grep . | sort -u)
  fi
  echo "clang-tidy: ${#files[@]} library source(s), $JOBS jobs"
  [ "${#files[@]}" -gt 0 ] || return 0
  # The compile database must exist and the generated protobuf headers be there: configure as
  # scripts/build.sh does (the build stage then reuses the directory) and generate only that.
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DMAGNETAR_WERROR=ON >/dev/null
  fi
  local headers
  mapfile -t headers < <(ninja -C "$BUILD_DIR" -t targets all | sed -n 's/^\(gen\/[^:]*\.pb\.h\): .*/\1/p')
  cmake --build "$BUILD_DIR" --target "${headers[@]}" >/dev/null
  printf '%s\n' "${files[@]}" |
    xargs -P "$JOBS" -n 1 "$CLANG_TIDY" -p "$BUILD_DIR" --quiet --warnings-as-errors='*' \
      --extra-arg=-Wthread-safety \
      2> >(grep -v -e 'warnings generated' -e '^Suppressed ' -e '^Use -header-filter' >&2)
}

# Every function under src/ (not tests) over $MAX_FUNCTION_LINES lines, as lizard counts them
# (first line to closing brace, lambdas inside included), must be in the exceptions file; an
# exception no longer over the limit must leave it.
function_length() {
  local exceptions=scripts/function_length_exceptions.txt out
  # Only the length threshold matters: CCN and parameter thresholds out of reach.
  out=$("$LIZARD" -L "$MAX_FUNCTION_LINES" -C 1000000 -a 1000 -w src --exclude '*/tests/*' || true)
  # lizard: "src/x.cc:12: warning: ns::Class::fn has 90 NLOC, ... 95 length, ..."; an exception
  # "src/x.cc:Class::fn # reason" names the function without its namespaces.
  awk -v limit="$MAX_FUNCTION_LINES" -v file="$exceptions" '
    function basename(path) { sub(/.*\//, "", path); return path }
    FNR == NR {
      sub(/#.*/, ""); gsub(/[ \t]+/, "")
      if ($0 != "") { allowed[$0] = 1 }
      next
    }
    / warning: / {
      split($1, loc, ":"); name = $3; length_ = $(NF - 3)
      found = ""; moved = ""
      for (key in allowed) {
        path = substr(key, 1, index(key, ":") - 1); fn = substr(key, index(key, ":") + 1)
        if (name != fn && substr(name, length(name) - length(fn) - 1) != "::" fn) continue
        if (path == loc[1]) {
          found = key
        } else if (basename(path) == basename(loc[1])) {
          moved = key  # the same file in another directory: a move, not a new function
        }
      }
      if (found == "" && moved != "") {
        printf "function length: note: %s is now in %s (update the path in %s)\n", moved, loc[1],
          file
        found = moved
      }
      if (found != "") { seen[found] = 1; next }
      printf "function length: %s:%s: %s is %s lines (over %d): split it, or name it in %s\n",
        loc[1], loc[2], name, length_, limit, file
      failed = 1
    }
    END {
      for (key in allowed) {
        if (!(key in seen)) {
          printf "function length: %s is in %s but not over %d lines (or not found): remove it\n",
            key, file, limit
          failed = 1
        }
      }
      exit failed
    }' "$exceptions" - <<<"$out" || {
    echo "function length: over $MAX_FUNCTION_LINES lines, see above" >&2
    return 1
  }
  echo "function length: no function in src/ over $MAX_FUNCTION_LINES lines outside $(grep -c '^src/' "$exceptions") named exception(s)"
}

for tool in "$CLANG_FORMAT" "$CLANG_TIDY" "$RUFF" "$LIZARD"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "lint: $tool not found (scripts/install-deps.sh and scripts/install-test-deps.sh)" >&2
    exit 1
  fi
done

start=$SECONDS
base=$(lint_base)
timed "clang-format" format_changed "$base"
timed "ruff" "$RUFF" check --quiet .
timed "function length" function_length
timed "blocking waits" bash scripts/check_blocking_waits.sh
if [ "${LINT_SKIP_TIDY:-0}" != "1" ]; then
  timed "clang-tidy" tidy_sources "$base"
fi
echo "[lint: $((SECONDS - start)) s]"
