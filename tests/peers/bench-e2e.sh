#!/usr/bin/env bash
# End-to-end benchmark (issue 13): the same small operator written with
# opkit, controller-runtime v0.25.2 and kube-runtime 4.2, each its own
# process, against ONE real control plane (opkit-envtest). For every
# ConfigMap labelled bench=src each keeps an owned ConfigMap <name>-derived
# and writes an annotation back on the source. Reports, per peer and size:
# time to converge after start, changes/s under an update stream,
# event->reconcile latency p50/p99 under background churn, client CPU, peak
# RSS, API requests per reconcile — medians of interleaved runs, with ratios
# against controller-runtime (see tests/peers/e2e/src/bin/bench_e2e.rs).
#
#   tests/peers/bench-e2e.sh                         # sizes 1000,10000, REPS=3
#   SIZES=200 REPS=1 tests/peers/bench-e2e.sh        # a quick look
#   WORKERS=4 UPDATES=2000 PROBES=100 CHURN=50 tests/peers/bench-e2e.sh
#   RYOW_OFF=1 tests/peers/bench-e2e.sh              # + opkit with read-your-
#                                                    #   own-writes off (its cost)
#   KR_LTO=1 tests/peers/bench-e2e.sh                # + kube-runtime built with
#                                                    #   opkit's release profile
#
# The opkit peer is built with the release profile `cargo opkit new`
# generates (fat LTO, one codegen unit); the kube-runtime peer with cargo's
# default release profile, as a kube-rs project starts out (KR_LTO=1 adds it
# built like opkit's, for a like-for-like line).
#
# Peers (each its own module/workspace, never built by `make test`):
#   tests/peers/e2e                    opkit peer + this driver
#   tests/peers/e2e-controller-runtime controller-runtime v0.25.2 (Go)
#   tests/peers/e2e-kube-runtime       kube-runtime 4.2 (kube, `runtime`)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}/peers

# The control plane binaries (built once into ~/.cache/opkit).
"$repo/tests/controlplane/build.sh" >/dev/null

go=$("$repo/tests/controlplane/ensure-go.sh")
mkdir -p "$target"
echo "bench-e2e: building the controller-runtime peer" >&2
(cd "$here/e2e-controller-runtime" && GOTOOLCHAIN=${GOTOOLCHAIN:-auto} GOFLAGS=-mod=mod \
  "$go" build -trimpath -o "$target/e2e-controller-runtime" .)

# The two Rust workspaces share one target directory (common dependencies
# are built once); features are not unified across workspaces.
echo "bench-e2e: building the opkit peer and the driver (release)" >&2
CARGO_TARGET_DIR="$target" cargo build --quiet --release --manifest-path "$here/e2e/Cargo.toml" --bins
echo "bench-e2e: building the kube-runtime peer (release)" >&2
CARGO_TARGET_DIR="$target" cargo build --quiet --release --manifest-path "$here/e2e-kube-runtime/Cargo.toml"
kr_lto=()
if [ "${KR_LTO:-0}" = 1 ]; then
  echo "bench-e2e: building the kube-runtime peer (opkit's release profile: fat LTO)" >&2
  CARGO_TARGET_DIR="$target" cargo build --quiet --profile release-lto --manifest-path "$here/e2e-kube-runtime/Cargo.toml"
  kr_lto=(--peer "kube-runtime-lto=$target/release-lto/e2e-kube-runtime")
fi

ryow_off=()
if [ "${RYOW_OFF:-0}" = 1 ]; then
  ryow_off=(--peer "opkit-ryow-off=$target/release/e2e-opkit --read-your-writes false")
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$target/release/bench-e2e" \
  --peer "opkit=$target/release/e2e-opkit" \
  "${ryow_off[@]}" \
  --peer "controller-runtime=$target/e2e-controller-runtime" \
  --peer "kube-runtime=$target/release/e2e-kube-runtime" \
  "${kr_lto[@]}" \
  --sizes "${SIZES:-1000,10000}" --reps "${REPS:-3}" --workers "${WORKERS:-4}" \
  --updates "${UPDATES:-2000}" --probes "${PROBES:-100}" --churn "${CHURN:-50}"
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "machine: $(nproc) cores, ${cpu_model:-unknown CPU}, $(uname -sr); $("$go" env GOVERSION), $(rustc --version | cut -d' ' -f1-2)"
echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
