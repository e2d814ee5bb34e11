#!/usr/bin/env bash
# Every test of the workspace, as `cargo test --workspace --all-features`
# runs them, but side by side instead of one after another: the work is cut
# into jobs (a test binary; or one module of a binary whose modules are long
# journeys that mostly wait on clusters, see tests/test-times.tsv; or the
# doc tests), and OPKIT_TEST_JOBS workers (default 4) take them longest
# first, by the seconds tests/test-times.tsv expects of each.
#
# Each binary runs as cargo runs it: in its package's directory, with CARGO,
# CARGO_MANIFEST_DIR, CARGO_MANIFEST_PATH, CARGO_PKG_NAME and
# CARGO_PKG_VERSION and LD_LIBRARY_PATH set. Its output is printed whole when it ends (lanes
# never interleave lines), and the last line sums up every binary:
# `tests: N passed, N failed`. Exits non-zero if a build, a binary or the
# doc tests failed.
#
# Arguments after the script name go to every test binary (a name filter,
# `--nocapture`, ...); the doc tests then run with the same filter, and no
# binary is cut into modules.
#
# At the end it prints the ten longest jobs (wall and CPU seconds) and
# writes every job's seconds to $CARGO_TARGET_DIR/test-times.tsv (or
# target/test-times.tsv), in the shape of tests/test-times.tsv: copy the
# lines whose expectations changed much to re-balance the jobs.
set -uo pipefail
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
command -v "$CARGO" >/dev/null || { echo "error: $CARGO is not on PATH" >&2; exit 1; }
# What the tests see as CARGO and rustup's variables, as under `cargo test`:
# the toolchain's own cargo (not rustup's proxy), and RUSTUP_HOME,
# RUSTUP_TOOLCHAIN and CARGO_HOME set, so a test that gives a command another
# HOME (e.g. for ~/.docker/config.json) still finds the toolchain.
cargo_bin=$(command -v "$CARGO")
if command -v rustup >/dev/null && [ "$(basename "$cargo_bin")" = cargo ]; then
  cargo_bin=$(rustup which cargo)
  RUSTUP_HOME=${RUSTUP_HOME:-$(rustup show home)}
  RUSTUP_TOOLCHAIN=${RUSTUP_TOOLCHAIN:-$(rustup show active-toolchain | cut -d' ' -f1)}
  export RUSTUP_HOME RUSTUP_TOOLCHAIN
fi
export CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
command -v jq >/dev/null || {
  echo "run-tests: installing jq (reads cargo's build messages)" >&2
  { apt-get update -qq && apt-get install -y -qq jq; } >/dev/null || { echo "error: jq is missing and could not be installed" >&2; exit 1; }
}

# Where a proc-macro crate's test binary finds libstd (cargo sets this too).
sysroot_lib="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n "s/^host: //p")/lib"

work=$(mktemp -d "${TMPDIR:-/tmp}/opkit-tests.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. Build every test binary once (cargo's own progress and diagnostics
#    on stderr); the JSON lines name each executable and its package.
if ! "$CARGO" test --workspace --all-features --no-run --message-format=json-render-diagnostics >"$work/build.json"; then
  echo "tests: 0 passed, 1 failed (the build failed)"
  exit 1
fi
"$CARGO" metadata --no-deps --format-version 1 |
  jq -r '.packages[] | [.manifest_path, .name, .version] | @tsv' >"$work/packages.tsv"
jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
       | [.manifest_path, .target.kind[0], .target.name, .executable] | @tsv' \
  <"$work/build.json" | sort -u >"$work/binaries.tsv"

# 2. The jobs. A job is one test binary, or, for a binary that
#    tests/test-times.tsv names modules of, one of those modules (a long
#    journey runs as a process of its own) and then the rest of the binary.
#    The doc tests are one more job. With arguments (a filter), every
#    binary is one job and gets them.
times_file=tests/test-times.tsv
expected() { # expected seconds of job NAME (the times file, else a guess)
  local seconds
  seconds=$(awk -F'\t' -v n="$1" '$1 == n {print $2; exit}' "$times_file" 2>/dev/null)
  echo "${seconds:-${2:-10}}"
}
: >"$work/jobs.tsv"
job_count=0
add_job() { # add_job NAME EXPECTED MANIFEST KIND TARGET EXE [TEST NAMES...]
  job_count=$((job_count + 1))
  local id=job$job_count
  printf '%s\n' "${@:7}" | sed '/^$/d' >"$work/$id.names"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$2" "$id" "$1" "$3" "$4" "$5" "$6" >>"$work/jobs.tsv"
}
while IFS=$'\t' read -r manifest kind name exe; do
  pkg=$(awk -F'\t' -v m="$manifest" '$1 == m {print $2}' "$work/packages.tsv")
  binary="$pkg/$name"
  split=$(awk -F'\t' -v b="$binary::" 'index($1, b) == 1 {print substr($1, length(b) + 1)}' "$times_file" 2>/dev/null)
  if [ "$#" -gt 0 ] || [ -z "$split" ]; then
    add_job "$binary" "$(expected "$binary" 5)" "$manifest" "$kind" "$name" "$exe"
    continue
  fi
  "$exe" --list --format terse 2>/dev/null | sed -n 's/: test$//p' >"$work/list"
  rest=$(cat "$work/list")
  for module in $split; do
    mapfile -t names < <(grep -E "^$module::" "$work/list")
    [ "${#names[@]}" -gt 0 ] || continue
    add_job "$binary::$module" "$(expected "$binary::$module")" "$manifest" "$kind" "$name" "$exe" "${names[@]}"
    rest=$(grep -vE "^$module::" <<<"$rest")
  done
  mapfile -t names <<<"$rest"
  [ -n "$rest" ] && add_job "$binary (the rest)" "$(expected "$binary (the rest)" 60)" "$manifest" "$kind" "$name" "$exe" "${names[@]}"
done <"$work/binaries.tsv"
add_job "doc tests" "$(expected "doc tests" 120)" - doc - -

# run_job ID NAME MANIFEST KIND TARGET EXE ARGS...: runs one job into
# $work/ID.log (a binary as cargo runs it, its test names given with
# --exact), then prints the log whole (under a lock) and records its counts
# in $work/ID.result and its wall and CPU seconds in $work/ID.time.
run_job() {
  local id=$1 job=$2 manifest=$3 kind=$4 target=$5 exe=$6 rc
  shift 6
  local names=()
  mapfile -t names <"$work/$id.names"
  [ "${#names[@]}" -gt 0 ] && names=(--exact "${names[@]}")
  local TIMEFORMAT='%R %U %S'
  { time {
    if [ "$kind" = doc ]; then
      "$CARGO" test --workspace --all-features --doc -- "$@" >"$work/$id.log" 2>&1
    else
      local dir pkg version
      dir=$(dirname "$manifest")
      IFS=$'\t' read -r _ pkg version < <(grep -F "$manifest"$'\t' "$work/packages.tsv")
      (cd "$dir" && CARGO=$cargo_bin CARGO_MANIFEST_DIR=$dir CARGO_MANIFEST_PATH=$manifest \
        CARGO_PKG_NAME=$pkg CARGO_PKG_VERSION=$version \
        LD_LIBRARY_PATH="$(dirname "$exe"):$sysroot_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$exe" "${names[@]}" "$@") >"$work/$id.log" 2>&1
    fi
    echo $? >"$work/$id.rc"
  }; } 2>"$work/$id.time"
  rc=$(cat "$work/$id.rc")
  read -r wall user sys <"$work/$id.time"
  awk -v job="$job" -v w="$wall" -v u="$user" -v s="$sys" \
    'BEGIN { printf "%s\t%.0f\t%.0f\n", job, w, u + s }' >"$work/$id.time"
  report "$id" "$rc" "$job ($kind $target, $(cut -f2 "$work/$id.time") s)"
}

# report ID RC TITLE: prints $work/ID.log under a lock and sums its result
# lines into $work/ID.result (a non-zero exit without a failed test counts
# as one failure: a crash or a harness error).
report() {
  local id=$1 rc=$2 title=$3 passed failed
  read -r passed failed < <(awk '/^test result: / {
      for (i = 1; i < NF; i++) { if ($(i + 1) ~ /^passed/) p += $i; if ($(i + 1) ~ /^failed/) f += $i }
    } END { print p + 0, f + 0 }' "$work/$id.log")
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
  echo "$passed $failed" >"$work/$id.result"
  {
    flock 9
    echo "== $title: exit $rc"
    cat "$work/$id.log"
  } 9>"$work/print.lock"
}

# 3. The workers: each takes the longest job left until none is.
sort -t$'\t' -k1,1nr "$work/jobs.tsv" | cut -f2- >"$work/queue"
next_job() {
  {
    flock 8
    head -n 1 "$work/queue"
    sed -i 1d "$work/queue"
  } 8>"$work/queue.lock"
}
worker() {
  local line id job manifest kind target exe
  while line=$(next_job) && [ -n "$line" ]; do
    IFS=$'\t' read -r id job manifest kind target exe <<<"$line"
    run_job "$id" "$job" "$manifest" "$kind" "$target" "$exe" "$@"
  done
}

started=$SECONDS
pids=()
for _ in $(seq "${OPKIT_TEST_JOBS:-4}"); do
  worker "$@" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

passed=0 failed=0
for result in "$work"/*.result; do
  read -r p f <"$result"
  passed=$((passed + p)) failed=$((failed + f))
done
times_out="${CARGO_TARGET_DIR:-target}/test-times.tsv"
mkdir -p "$(dirname "$times_out")"
cat "$work"/*.time | sort -t$'\t' -k2,2nr >"$times_out"
echo "== $job_count jobs in ${OPKIT_TEST_JOBS:-4} workers ran in $((SECONDS - started)) s; the longest (wall s, CPU s; all in $times_out):"
head -n 10 "$times_out" | awk -F'\t' '{ printf "   %5d %5d  %s\n", $2, $3, $1 }'
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
