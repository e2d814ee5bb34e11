#!/usr/bin/env bash
# Every test of the workspace, as `make test` runs them:
#
#   1. the test binaries, built once (`cargo test --no-run`, cargo's own
#      progress);
#   2. the doc tests (`cargo test --doc`; nextest does not run them), in
#      the background while
#   3. cargo-nextest (pinned, tests/nextest.sh) runs every other test, each
#      in a process of its own, as .config/nextest.toml says: the journeys
#      first and at most six at once, per-test timeouts that name a hang,
#      a JUnit report in $CARGO_TARGET_DIR/nextest/<profile>/junit.xml;
#   4. the control planes the tests shared are stopped (ControlPlane::shared
#      keeps one per test binary under $OPKIT_SHARED_PLANES across nextest's
#      processes; see envtest/src/control_plane.rs).
#
#   tests/run-tests.sh [NEXTEST ARGS...]     # e.g. --profile fast, -E 'test(leader)'
#   tests/run-tests.sh --build-only          # step 1 alone (make's test-binaries)
#
# OPKIT_RUN_DIR must be set (the Makefile does; tests/check-orphans.sh then
# judges what it recorded). NEXTEST_PROFILE picks the profile (default).
# The last line sums up nextest's tests and the doc tests:
# `tests: N passed, N failed`. Exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
# The one test build, here and in `make test-prerequisites`.
build_tests=("$CARGO" test --workspace --all-features --no-run)
if [ "${1:-}" = --build-only ]; then
  exec "${build_tests[@]}"
fi
: "${OPKIT_RUN_DIR:?set OPKIT_RUN_DIR to a directory this run records into (make test does)}"
nextest=$(tests/nextest.sh) || { echo "error: cargo-nextest could not be installed" >&2; exit 1; }
export PATH="$(dirname "$nextest"):$PATH"
export OPKIT_SHARED_PLANES="$OPKIT_RUN_DIR/planes"

# The shared control planes: their processes outlive the tests. Killed
# as envtest kills a plane (SIGKILL), then waited for (up to 20 s) before
# their directories go and check-orphans looks; also when the run is
# interrupted.
started_at() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}'; }
stop_planes() {
  local pids pid start entry alive planes=()
  for pids in "$OPKIT_SHARED_PLANES"/*/pids; do
    # Each plane's directory, not the per-binary link to it.
    [ -e "$pids" ] && [ ! -L "$(dirname "$pids")" ] || continue
    while read -r pid start; do
      [ "$(started_at "$pid")" = "$start" ] && kill -KILL "$pid" 2>/dev/null && planes+=("$pid $start")
    done <"$pids"
  done
  for _ in $(seq 1 200); do
    alive=0
    for entry in "${planes[@]}"; do
      read -r pid start <<<"$entry"
      [ "$(started_at "$pid")" = "$start" ] && alive=1
    done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
  done
  rm -rf "$OPKIT_SHARED_PLANES"
}
trap stop_planes EXIT
trap 'exit 130' INT TERM

if ! "${build_tests[@]}"; then
  echo "tests: 0 passed, 1 failed (the build failed)"
  exit 1
fi

doc_log="$OPKIT_RUN_DIR/doc-tests.log"
"$CARGO" test --workspace --all-features --doc >"$doc_log" 2>&1 &
doc_pid=$!

run_log="$OPKIT_RUN_DIR/nextest.log"
started=$SECONDS
"$CARGO" nextest run --workspace --all-features --no-tests=fail \
  --profile "${NEXTEST_PROFILE:-default}" "$@" 2>&1 | tee "$run_log"
rc=${PIPESTATUS[0]}

wait "$doc_pid"; doc_rc=$?
echo "== doc tests (cargo test --doc): exit $doc_rc"
if [ "$doc_rc" -ne 0 ]; then cat "$doc_log"; else grep -E '^(test result|error)' "$doc_log" | tail -n 3; fi

stop_planes

# nextest's summary: "Summary [ 612.3s] 700 tests run: 699 passed, 1 failed, 3 skipped"
read -r passed failed < <(sed 's/\x1b\[[0-9;]*m//g' "$run_log" | awk '/^ *Summary \[/ {
    for (i = 1; i < NF; i++) { w = $(i + 1); sub(/[,;]$/, "", w)
      if (w == "passed") p += $i; if (w == "failed" || w == "timed" || w == "exec") f += $i } }
  END { print p + 0, f + 0 }')
read -r doc_passed doc_failed < <(awk '/^test result: / {
    for (i = 1; i < NF; i++) { if ($(i + 1) ~ /^passed/) p += $i; if ($(i + 1) ~ /^failed/) f += $i }
  } END { print p + 0, f + 0 }' "$doc_log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
if [ "$doc_rc" -ne 0 ] && [ "$doc_failed" -eq 0 ]; then doc_failed=1; fi
echo "== nextest ran in $((SECONDS - started)) s (JUnit: ${CARGO_TARGET_DIR:-target}/nextest/${NEXTEST_PROFILE:-default}/junit.xml)"
echo "tests: $((passed + doc_passed)) passed, $((failed + doc_failed)) failed"
[ "$rc" -eq 0 ] && [ "$doc_rc" -eq 0 ]
