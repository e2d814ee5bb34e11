#!/usr/bin/env bash
# The memory model of BENCHMARKS.md (issue 27): bytes per cached object, by
# component, for the ConfigMap of bench-informer and the Pod of bench-scale
# — the k8s-openapi objects alone (a counting global allocator), opkit's
# informer on top (its own overhead by difference; read-your-own-writes on
# and off; JSON; a projection), glibc's chunks and the RSS, and client-go's
# figure for the same objects (runtime.MemStats.HeapAlloc after a GC).
#
#   tests/peers/bench-memory.sh                    # 10000 of each, 3 processes per line
#   OBJECTS=2000 REPS=1 KINDS=configmap tests/peers/bench-memory.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}/peers

"$repo/tests/controlplane/build.sh" >/dev/null

go=$("$repo/tests/controlplane/ensure-go.sh")
mkdir -p "$target"
echo "bench-memory: building the client-go peer" >&2
(cd "$here/go-informer" && GOTOOLCHAIN=${GOTOOLCHAIN:-auto} GOFLAGS=-mod=mod CGO_ENABLED=0 \
  "$go" build -trimpath -o "$target/go-informer" .)

# Shares its target directory, dependencies and profile with
# rust-informers (bench-informer): built once for both.
echo "bench-memory: building the measuring program (release)" >&2
CARGO_TARGET_DIR="$target" cargo build --quiet --release \
  --manifest-path "$here/memory-model/Cargo.toml"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$target/release/memory-model" --go-peer "$target/go-informer" \
  --objects "${OBJECTS:-10000}" --reps "${REPS:-3}" --kinds "${KINDS:-configmap,pod}"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "machine: $(nproc) cores, $(uname -sr); $("$go" env GOVERSION), $(rustc --version | cut -d' ' -f1-2)"
echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
