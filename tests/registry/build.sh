#!/usr/bin/env bash
# Builds the OCI registry (github.com/distribution/distribution/v3, its
# `registry` command) from the Go module proxy into a cache outside the
# clone, and prints the directory that holds it:
#
#   tests/registry/build.sh              # build if missing, print the bin dir
#   OPKIT_CACHE=/some/dir tests/registry/build.sh
#
# The version comes from this directory's go.mod. `opkit_envtest::Registry`
# starts it on loopback (or on a cluster's host address) for image tests.
# The build is atomic and runs under a lock; a warm run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
planedir=$(cd "$here/../controlplane" && pwd)
cd "$here"

version=$(awk '{ if ($1 == "require") { $1 = ""; $0 = $0 } }
  $1 == "github.com/distribution/distribution/v3" && $2 ~ /^v3\./ {print $2; exit}' go.mod)
[ -n "$version" ] || { echo "build.sh: no github.com/distribution/distribution/v3 requirement in go.mod" >&2; exit 1; }
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
out="$cache/registry/$version/bin"

if [ -x "$out/registry" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache/registry"
exec 9>"$cache/registry/.build.lock"
flock 9
# Another build may have finished while we waited for the lock.
if [ -x "$out/registry" ]; then
  echo "$out"
  exit 0
fi

go=$("$planedir/ensure-go.sh")
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
tmp=$(mktemp -d "$cache/registry/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "build.sh: building the registry (distribution $version) into $out" >&2
export CGO_ENABLED=0 GOFLAGS=-mod=mod
"$go" build -trimpath \
  -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$version" \
  -o "$tmp/registry" github.com/distribution/distribution/v3/cmd/registry
"$tmp/registry" --version >&2
chmod 755 "$tmp"   # mktemp made it 0700
mkdir -p "$(dirname "$out")"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
