#!/usr/bin/env bash
# Build figures of generated operator projects (issue 37; BENCHMARKS.md,
# "Cargo features and release profile (issue 37)").
#
# Usage:
#   tests/peers/build-figures.sh [STEP...]        (default: deps debug release)
#
# Steps:
#   deps      crates in each project's dependency graph (host platform)
#   debug     cold `cargo build` (dev profile) of each project, each in an
#             empty target directory that is deleted afterwards
#   release   `cargo opkit image --release` (the project's own release
#             profile) of the plain project in an empty target directory,
#             again after a one-line edit of its src/main.rs, then of the
#             webhook project in the same target directory: build time,
#             binary and image size
#   profiles  the plain project's cold release image and its rebuild after
#             a one-line edit under other release profiles (PROFILES)
#   sizes     `cargo opkit image --release` of both projects in
#             RELEASE_TARGET (kept: the builds reuse what it holds, so only
#             the sizes are comparable, not the times)
#
# Two projects are generated from the opkit checkout OPKIT with the
# cargo-opkit binary CARGO_OPKIT (built from that same checkout, so its
# templates match): `plain-operator` (`cargo opkit new --kind Widget`) and `webhook-operator`
# (the same, then `cargo opkit create webhook --kind Widget`). Both get the
# checkout's Cargo.lock, so every run resolves the same versions.
#
# Environment:
#   OPKIT        the opkit checkout to build against (default: this one)
#   CARGO_OPKIT  cargo-opkit built from OPKIT (default: ${CARGO_TARGET_DIR:-$OPKIT/target}/debug/cargo-opkit,
#                else cargo-opkit on PATH)
#   SCRATCH      where projects and target directories go
#                (default: $OPKIT/target/build-figures/<commit>)
#   NICE         niceness of the builds (default 5)
#   PROFILES     for `profiles`: space-separated LTO:CODEGEN_UNITS pairs
#                (default "thin:16 false:16"; fat:1 is the template's, measured by `release`)
#   RELEASE_TARGET  for `profiles` and `sizes`: one target directory, kept
#                (default: an empty one per profile, deleted afterwards; for
#                `sizes`, $SCRATCH/target-release)
#
# Each figure is one tab-separated line on stdout and appended to
# $SCRATCH/figures.tsv:
#   commit project step wall_s user_s sys_s load1_before load1_after extra
# (CPU = user + sys; load1 = the 1-minute load average before and after).
# Examples (make bench-build runs the first):
#   cargo build -p cargo-opkit && tests/peers/build-figures.sh
#   tests/peers/build-figures.sh profiles
# An older commit (one without this script): a worktree of it and its own
# cargo-opkit, measured by this script:
#   git worktree add --detach ../before 36b99f7
#   (cd ../before && cargo build -p cargo-opkit)
#   OPKIT=../before CARGO_OPKIT=../before/target/debug/cargo-opkit \
#     tests/peers/build-figures.sh deps debug release
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OPKIT="$(cd "${OPKIT:-$here}" && pwd)"
commit="$(git -C "$OPKIT" rev-parse --short HEAD)"
if [[ -z "${CARGO_OPKIT:-}" ]]; then
  if [[ -x "${CARGO_TARGET_DIR:-$OPKIT/target}/debug/cargo-opkit" ]]; then
    CARGO_OPKIT="${CARGO_TARGET_DIR:-$OPKIT/target}/debug/cargo-opkit"
  else
    CARGO_OPKIT="$(command -v cargo-opkit)"
  fi
fi
SCRATCH="${SCRATCH:-$OPKIT/target/build-figures/$commit}"
NICE="${NICE:-5}"
PROFILES="${PROFILES:-thin:16 false:16}"
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(deps debug release)

mkdir -p "$SCRATCH"
SCRATCH="$(cd "$SCRATCH" && pwd)"
figures="$SCRATCH/figures.tsv"
unset CARGO_TARGET_DIR
export CARGO_INCREMENTAL=0

load1() { cut -d' ' -f1 /proc/loadavg; }

# record PROJECT STEP EXTRA TIMEFILE LOAD_BEFORE
record() {
  local line
  line="$(printf '%s\t%s\t%s\t%s\t%s\t%s' "$commit" "$1" "$2" "$(tr ' ' '\t' <"$4")" "$5" "$(load1)")"
  line="$line"$'\t'"$3"
  echo "$line" | tee -a "$figures"
}

# timed TIMEFILE CMD...: runs CMD under nice, its wall, user and sys seconds in TIMEFILE.
timed() {
  local out="$1"
  shift
  /usr/bin/time -o "$out" -f '%e %U %S' nice -n "$NICE" "$@"
}

generate() {
  local project="$1" dir="$SCRATCH/$1"
  [[ -f "$dir/Cargo.toml" ]] && return 0
  "$CARGO_OPKIT" opkit new "$project" --group widgets.example.com --kind Widget \
    --dir "$SCRATCH" --opkit-path "$OPKIT" --skip-manifests >&2
  if [[ "$project" == webhook-* ]]; then
    "$CARGO_OPKIT" opkit create webhook --kind Widget --dir "$dir" --skip-manifests >&2
  fi
  # Build where this script says, not in the shared cache `new` points at,
  # and as a workspace of its own (SCRATCH may be inside a checkout's).
  rm -f "$dir/.cargo/config.toml"
  printf '\n[workspace]\n' >>"$dir/Cargo.toml"
  cp "$OPKIT/Cargo.lock" "$dir/Cargo.lock"
}

step_deps() {
  local project="$1" dir="$SCRATCH/$1" normal all
  # Every package once (cargo tree marks repeats with "(*)"), the root included.
  normal="$(cd "$dir" && cargo tree -e normal --prefix none | sed 's/ (\*)$//' | sort -u | wc -l)"
  all="$(cd "$dir" && cargo tree -e normal,build --prefix none | sed 's/ (\*)$//' | sort -u | wc -l)"
  printf '%s\t%s\tdeps\t\t\t\t\t\tnormal=%s normal+build=%s\n' "$commit" "$project" "$normal" "$all" | tee -a "$figures"
}

step_debug() {
  local project="$1" dir="$SCRATCH/$1" target="$SCRATCH/target-debug-$1" before
  rm -rf "$target"
  before="$(load1)"
  (cd "$dir" && CARGO_TARGET_DIR="$target" timed "$SCRATCH/time" cargo build --timings 2>"$SCRATCH/$project-debug.log")
  record "$project" debug-cold "units=$(grep -c ' Compiling ' "$SCRATCH/$project-debug.log")" "$SCRATCH/time" "$before"
  cp "$target/cargo-timings/cargo-timing.html" "$SCRATCH/$project-debug-timing.html"
  top_units "$SCRATCH/$project-debug-timing.html" >"$SCRATCH/$project-debug-top.txt" || true
  rm -rf "$target"
}

# top_units HTML: the ten longest compilation units of a `cargo build
# --timings` report (seconds, crate, version, target).
top_units() {
  python3 - "$1" <<'PY'
import json, re, sys
html = open(sys.argv[1]).read()
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S).group(1))
units.sort(key=lambda u: -u["duration"])
total = sum(u["duration"] for u in units)
print(f"{total:.1f}\tall {len(units)} units (sum of their durations)")
for u in units[:10]:
    print(f"{u['duration']:.1f}\t{u['name']} {u['version']} {u['target'].strip()}")
PY
}

# image PROJECT STEP TARGET [ENV...]: `cargo opkit image --release`, timed.
image() {
  local project="$1" step="$2" target="$3" before sizes
  shift 3
  before="$(load1)"
  (cd "$SCRATCH/$project" && env CARGO_TARGET_DIR="$target" "$@" \
    /usr/bin/time -o "$SCRATCH/time" -f '%e %U %S' nice -n "$NICE" \
    "$CARGO_OPKIT" opkit image --release --output "$SCRATCH/$project-oci" \
    >"$SCRATCH/$project-$step.out" 2>"$SCRATCH/$project-$step.log")
  # "digest sha256:...  size N bytes (manager M bytes)"
  sizes="$(sed -n 's/^digest .* size \([0-9]*\) bytes (manager \([0-9]*\) bytes)$/image=\1 binary=\2/p' "$SCRATCH/$project-$step.out")"
  record "$project" "$step" "$sizes units=$(grep -c ' Compiling ' "$SCRATCH/$project-$step.log")" "$SCRATCH/time" "$before"
}

# One line added to the project's own code: cargo recompiles the crate and links again.
edit() {
  echo "// build-figures: edit $(date +%s%N)" >>"$SCRATCH/$1/src/main.rs"
}

step_release() {
  local target="$SCRATCH/target-release"
  rm -rf "$target"
  image plain-operator release-cold "$target"
  edit plain-operator
  image plain-operator release-edit "$target"
  image webhook-operator release-after-plain "$target"
  rm -rf "$target"
}

step_profiles() {
  local pair lto cgu target
  for pair in $PROFILES; do
    lto="${pair%%:*}"
    cgu="${pair##*:}"
    target="${RELEASE_TARGET:-$SCRATCH/target-release-$lto-$cgu}"
    [[ -n "${RELEASE_TARGET:-}" ]] || rm -rf "$target"
    image plain-operator "release-cold-lto=$lto-cgu=$cgu" "$target" \
      CARGO_PROFILE_RELEASE_LTO="$lto" CARGO_PROFILE_RELEASE_CODEGEN_UNITS="$cgu"
    edit plain-operator
    image plain-operator "release-edit-lto=$lto-cgu=$cgu" "$target" \
      CARGO_PROFILE_RELEASE_LTO="$lto" CARGO_PROFILE_RELEASE_CODEGEN_UNITS="$cgu"
    [[ -n "${RELEASE_TARGET:-}" ]] || rm -rf "$target"
  done
}

# Sizes under the profile the environment gives (CARGO_PROFILE_RELEASE_*).
step_sizes() {
  local target="${RELEASE_TARGET:-$SCRATCH/target-release}"
  image plain-operator "sizes-lto=${CARGO_PROFILE_RELEASE_LTO:-project}" "$target"
  image webhook-operator "sizes-lto=${CARGO_PROFILE_RELEASE_LTO:-project}" "$target"
}

generate plain-operator
generate webhook-operator
for step in "${steps[@]}"; do
  case "$step" in
    deps) step_deps plain-operator; step_deps webhook-operator ;;
    debug) step_debug plain-operator; step_debug webhook-operator ;;
    release) step_release ;;
    profiles) step_profiles ;;
    sizes) step_sizes ;;
    *) echo "unknown step: $step (deps, debug, release, profiles, sizes)" >&2; exit 2 ;;
  esac
done
