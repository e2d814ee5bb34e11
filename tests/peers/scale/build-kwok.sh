#!/usr/bin/env bash
# Builds kwok (sigs.k8s.io/kwok/cmd/kwok, simulated Nodes and Pods) from the
# Go module proxy into a cache outside the clone, and prints the path of the
# binary. The version is pinned here; the module's own go.mod and go.sum
# fix its dependencies (`go install pkg@version`).
#
#   tests/peers/scale/build-kwok.sh              # build if missing, print the path
#   OPKIT_CACHE=/some/dir tests/peers/scale/build-kwok.sh
#
# A warm run returns at once; concurrent runs wait on a lock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

kwok_version=v0.8.0   # `go list -m -versions sigs.k8s.io/kwok` on the proxy: v0.6.1 v0.7.0 v0.8.0
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
out="$cache/kwok/$kwok_version/bin"

if [ -x "$out/kwok" ]; then
  echo "$out/kwok"
  exit 0
fi

mkdir -p "$cache/kwok"
go=$("$repo/tests/controlplane/ensure-go.sh")
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
exec 9>"$cache/kwok/.build.lock"
flock 9
# Another build may have finished while we waited for the lock.
if [ -x "$out/kwok" ]; then
  echo "$out/kwok"
  exit 0
fi

tmp=$(mktemp -d "$cache/kwok/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "build-kwok.sh: building kwok $kwok_version into $out (a cold build takes a few minutes)" >&2
CGO_ENABLED=0 GOBIN="$tmp" "$go" install -trimpath \
  -ldflags "-s -w" \
  "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
"$tmp/kwok" --version >&2 || true
mkdir -p "$(dirname "$out")"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out/kwok"
