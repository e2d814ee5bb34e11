#!/usr/bin/env bash
# Every test of the workspace, as `cargo test --workspace --all-features`
# runs them, but with the test binaries side by side instead of one after
# another: the two journeys binaries (opkit-tests' and cargo-opkit's `it`)
# spend most of their time waiting on clusters, so each gets a lane of its
# own while a third lane runs every other binary and then the doc tests.
#
# Each binary runs as cargo runs it: in its package's directory, with CARGO,
# CARGO_MANIFEST_DIR, CARGO_MANIFEST_PATH, CARGO_PKG_NAME and
# CARGO_PKG_VERSION and LD_LIBRARY_PATH set. Its output is printed whole when it ends (lanes
# never interleave lines), and the last line sums up every binary:
# `tests: N passed, N failed`. Exits non-zero if a build, a binary or the
# doc tests failed.
#
# Arguments after the script name go to every test binary (a name filter,
# `--nocapture`, ...); the doc tests then run with the same filter.
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

# 2. Run them in three lanes.
heavy_lane() { # which lane a binary runs in: 1, 2 or 3
  case "$1" in
    */tests/Cargo.toml\ test\ it) echo 1 ;;
    */templates/Cargo.toml\ test\ it) echo 2 ;;
    *) echo 3 ;;
  esac
}

# run_binary ID MANIFEST KIND NAME EXECUTABLE ARGS...: runs one binary into
# $work/ID.log, then prints the log whole (under a lock) and records its
# counts in $work/ID.result.
run_binary() {
  local id=$1 manifest=$2 kind=$3 name=$4 exe=$5
  shift 5
  local dir pkg version start rc
  dir=$(dirname "$manifest")
  IFS=$'\t' read -r _ pkg version < <(grep -F "$manifest"$'\t' "$work/packages.tsv")
  start=$SECONDS
  (cd "$dir" && CARGO=$cargo_bin CARGO_MANIFEST_DIR=$dir CARGO_MANIFEST_PATH=$manifest \
    CARGO_PKG_NAME=$pkg CARGO_PKG_VERSION=$version \
    LD_LIBRARY_PATH="$(dirname "$exe"):$sysroot_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$exe" "$@") >"$work/$id.log" 2>&1
  rc=$?
  report "$id" "$rc" "$pkg ($kind $name, $((SECONDS - start)) s)"
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

run_lane() {
  local lane=$1 id=0 manifest kind name exe
  shift
  while IFS=$'\t' read -r manifest kind name exe; do
    id=$((id + 1))
    [ "$(heavy_lane "$manifest $kind $name")" = "$lane" ] || continue
    run_binary "lane$lane-$id" "$manifest" "$kind" "$name" "$exe" "$@"
  done <"$work/binaries.tsv"
  if [ "$lane" = 3 ]; then
    local start=$SECONDS rc
    "$CARGO" test --workspace --all-features --doc -- "$@" >"$work/doc.log" 2>&1
    rc=$?
    report doc "$rc" "doc tests ($((SECONDS - start)) s)"
  fi
}

started=$SECONDS
pids=()
for lane in 1 2 3; do
  run_lane "$lane" "$@" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

passed=0 failed=0
for result in "$work"/*.result; do
  read -r p f <"$result"
  passed=$((passed + p)) failed=$((failed + f))
done
echo "== every test binary and the doc tests ran in $((SECONDS - started)) s"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
