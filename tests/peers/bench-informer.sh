#!/usr/bin/env bash
# Side-by-side informer benchmark (issue 4): initial sync time, client CPU
# and RSS after sync for 10k and 50k ConfigMaps (~1 KiB each) and Pods
# (bench-scale's, Running) — opkit informer vs client-go informer (whole,
# managedFields stripped, trimmed to opkit's projection by a TransformFunc)
# vs kube-runtime reflector vs a raw paginated LIST (the floor), all against
# one real control plane. Prints Markdown tables with ratios.
#
#   tests/peers/bench-informer.sh                 # sizes 10000,50000, 3 runs
#   SIZES=2000 RUNS=1 KINDS=pods tests/peers/bench-informer.sh
#   PEERS=opkit,opkit-no-ryow tests/peers/bench-informer.sh
#       # only those (and the raw LIST floor and the client-go peers): here,
#       # what read-your-own-writes costs the informer (issue 27)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
sizes=${SIZES:-10000,50000}
runs=${RUNS:-3}
target=${CARGO_TARGET_DIR:-$repo/target}/peers

# The control plane binaries (built once into ~/.cache/opkit).
"$repo/tests/controlplane/build.sh" >/dev/null

# client-go peer
go=$("$repo/tests/controlplane/ensure-go.sh")
mkdir -p "$target"
echo "bench-informer: building the client-go peer" >&2
(cd "$here/go-informer" && GOTOOLCHAIN=${GOTOOLCHAIN:-auto} GOFLAGS=-mod=mod CGO_ENABLED=0 \
  "$go" build -trimpath -o "$target/go-informer" .)

# Rust peers (opkit, kube-runtime, raw LIST) and the driver: a workspace of
# their own so kube's `runtime` feature stays out of the opkit library.
echo "bench-informer: building the Rust peers (release)" >&2
CARGO_TARGET_DIR="$target" cargo build --quiet --release \
  --manifest-path "$here/rust-informers/Cargo.toml" --bins

only=()
if [ -n "${PEERS:-}" ]; then
  only=(--peers "$PEERS")
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$target/release/bench_informer" --go-peer "$target/go-informer" --sizes "$sizes" --runs "$runs" \
  --kinds "${KINDS:-configmaps,pods}" "${only[@]}"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
