#!/usr/bin/env bash
# What managedFields cost a cached object (issue 27): the informer
# benchmark's ConfigMap and the scale benchmark's Pod, as a real apiserver
# serves them, decoded into k8s-openapi's types under a counting allocator
# (whole, stripped, stripped + the entries as raw JSON bytes) and into
# client-go's types (whole, where FieldsV1 is raw bytes, and stripped).
# Prints a Markdown table (see tests/peers/scale/src/bin/managed_fields.rs).
#
#   tests/peers/bench-managed-fields.sh          # 10000 copies of each
#   COPIES=2000 tests/peers/bench-managed-fields.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}/peers

"$repo/tests/controlplane/build.sh" >/dev/null
go=$("$repo/tests/controlplane/ensure-go.sh")
mkdir -p "$target"
echo "bench-managed-fields: building the Go side" >&2
(cd "$here/scale-controller-runtime" && GOTOOLCHAIN=${GOTOOLCHAIN:-auto} GOFLAGS=-mod=mod CGO_ENABLED=0 \
  "$go" build -trimpath -o "$target/managed-fields-go" ./memory)
echo "bench-managed-fields: building the Rust side (release)" >&2
CARGO_TARGET_DIR="$target" cargo build --quiet --release --manifest-path "$here/scale/Cargo.toml" --bin managed-fields

"$target/release/managed-fields" --copies "${COPIES:-10000}" --go "$target/managed-fields-go"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "$("$go" env GOVERSION), $(rustc --version | cut -d' ' -f1-2), glibc malloc; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
