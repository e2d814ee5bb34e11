#!/usr/bin/env bash
# Scale benchmark (issue 13): the same Pod controller written with opkit and
# controller-runtime v0.25.2, each its own process, watching 10k Pods on
# kwok's simulated Nodes through churn, against ONE real control plane
# (opkit-envtest: kube-apiserver + etcd; kwok plays the kubelets). Each
# controller watches every Pod cluster-wide and, per Pod, reads it from its
# cache and tallies Running+Ready (no writes). Reports, per peer: time to
# reconcile all Pods after start, RSS with 0 Pods and after sync, memory per
# Pod, peak RSS, and CPU per watch event during a delete+recreate churn —
# medians of interleaved runs, with ratios against controller-runtime (see
# tests/peers/scale/src/bin/bench_scale.rs).
#
#   tests/peers/bench-scale.sh                              # 10000 Pods, REPS=3
#   PODS=1000 REPS=1 CHURN_SECS=10 tests/peers/bench-scale.sh   # a quick look
#   PODS=10000 NODES=20 WORKERS=4 CHURN=20 CHURN_SECS=20 tests/peers/bench-scale.sh
#   PROJECTED=1 tests/peers/bench-scale.sh   # + opkit caching Pods as a
#                                            #   projection (PodView, issue 27),
#                                            #   and controller-runtime trimming
#                                            #   to the same fields (issue 39)
#
# Peers and tools (never built by `make test`):
#   tests/peers/scale                     opkit peer + this driver (Rust workspace)
#   tests/peers/scale-controller-runtime  controller-runtime v0.25.2 (Go); run
#                                         twice: its defaults, and with its cache
#                                         stripping managedFields (opkit's default)
#   tests/peers/scale/build-kwok.sh       kwok v0.8.0 from the Go module proxy
#   tests/peers/scale/kwok/stages.yaml    the Node and Pod lifecycles kwok plays
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}/peers

# The control plane binaries and kwok (built once into ~/.cache/opkit).
"$repo/tests/controlplane/build.sh" >/dev/null
kwok=$("$here/scale/build-kwok.sh")

go=$("$repo/tests/controlplane/ensure-go.sh")
mkdir -p "$target"
echo "bench-scale: building the controller-runtime peer" >&2
(cd "$here/scale-controller-runtime" && GOTOOLCHAIN=${GOTOOLCHAIN:-auto} GOFLAGS=-mod=mod \
  "$go" build -trimpath -o "$target/scale-controller-runtime" .)

# Shares its target directory with tests/peers/e2e (common dependencies are
# built once).
echo "bench-scale: building the opkit peer and the driver (release)" >&2
CARGO_TARGET_DIR="$target" cargo build --quiet --release --manifest-path "$here/scale/Cargo.toml" --bins

projected=()
if [ "${PROJECTED:-0}" = 1 ]; then
  # The projection, and controller-runtime trimming each Pod to the same
  # fields with a cache transform (issue 39: projections against like).
  projected=(--peer "opkit, projected (PodView)=$target/release/scale-opkit --projected"
    --peer "controller-runtime (trim to PodView's fields)=$target/scale-controller-runtime --trim-to-projection")
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$target/release/bench-scale" \
  --kwok "$kwok" --kwok-config "$here/scale/kwok/stages.yaml" \
  --peer "opkit=$target/release/scale-opkit" \
  "${projected[@]}" \
  --peer "controller-runtime=$target/scale-controller-runtime" \
  --peer "controller-runtime (strip managedFields)=$target/scale-controller-runtime --strip-managed-fields" \
  --pods "${PODS:-10000}" --nodes "${NODES:-20}" --reps "${REPS:-3}" --workers "${WORKERS:-4}" \
  --churn "${CHURN:-20}" --churn-secs "${CHURN_SECS:-20}"
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "machine: $(nproc) cores, ${cpu_model:-unknown CPU}, $(uname -sr); $("$go" env GOVERSION), $(rustc --version | cut -d' ' -f1-2), kwok $(basename "$(dirname "$(dirname "$kwok")")")"
echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
