#!/usr/bin/env bash
# Side-by-side multicluster benchmark (issue 41): what an engaged cluster
# costs and what disengaging gives back, opkit's multicluster Fleet
# (tests/peers/multicluster, `opkit_fleet_peer`) vs
# sigs.k8s.io/multicluster-runtime v0.23.1 (tests/peers/multicluster-runtime,
# its programmatic `providers/clusters` provider; run in two variants: with
# controller-runtime's default cache and with managedFields stripped, as
# opkit's cache does). One control plane holds OBJECTS ConfigMaps; each peer,
# its own release-built process, engages N = ROUNDS clusters in turn (N
# clients of their own to that control plane, a cache each), waits until all
# N × OBJECTS were reconciled, then removes every cluster. Prints Markdown
# tables per peer (engage time, RSS, memory per engaged cluster, CPU per
# event, RSS after disengaging and after the allocator gave back what it
# could) and opkit ÷ multicluster-runtime per N.
#
#   tests/peers/bench-multicluster-peers.sh                # 1000 objects, rounds 1,10,50,50, 1 run
#   ROUNDS=1,10,50 RUNS=3 tests/peers/bench-multicluster-peers.sh
#   OBJECTS=200 ROUNDS=1,5 tests/peers/bench-multicluster-peers.sh   # a quick check
#   TRIM_ENGAGED=1 tests/peers/bench-multicluster-peers.sh
#       # also the memory per engaged cluster once the allocator gave back
#       # what it could (malloc_trim / debug.FreeOSMemory while engaged):
#       # what the clusters hold live
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
objects=${OBJECTS:-1000}
rounds=${ROUNDS:-1,10,50,50}
runs=${RUNS:-1}
target=${CARGO_TARGET_DIR:-$repo/target}/peers

# The control plane binaries (built once into ~/.cache/opkit).
"$repo/tests/controlplane/build.sh" >/dev/null

# multicluster-runtime peer
go=$("$repo/tests/controlplane/ensure-go.sh")
mkdir -p "$target"
echo "bench-multicluster-peers: building the multicluster-runtime peer" >&2
(cd "$here/multicluster-runtime" && GOTOOLCHAIN=${GOTOOLCHAIN:-auto} GOFLAGS=-mod=mod CGO_ENABLED=0 \
  "$go" build -trimpath -o "$target/multicluster-runtime" .)

# The opkit peer and the driver: a workspace of their own, release profile
# as an operator's.
echo "bench-multicluster-peers: building the opkit peer and the driver (release)" >&2
CARGO_TARGET_DIR="$target" cargo build --quiet --release \
  --manifest-path "$here/multicluster/Cargo.toml" --bins

trim=()
if [ -n "${TRIM_ENGAGED:-}" ]; then
  trim=(--trim-engaged)
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$target/release/bench_multicluster" --go-peer "$target/multicluster-runtime" \
  --opkit-peer "$target/release/opkit_fleet_peer" \
  --objects "$objects" --rounds "$rounds" --runs "$runs" "${trim[@]}"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
