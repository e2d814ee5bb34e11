#!/usr/bin/env bash
# Builds the Helm CLI (helm.sh/helm/v4, its `helm` command) from the Go module
# proxy into a cache outside the clone, and prints the directory that holds it:
#
#   tests/helm/build.sh              # build if missing, print the bin dir
#   OPKIT_CACHE=/some/dir tests/helm/build.sh
#
# The version comes from this directory's go.mod. The tests of the chart
# `cargo opkit chart` renders install, upgrade and uninstall it with this
# helm against the local cluster; a generated project's `make helm-deploy`
# uses it too when it is there ($OPKIT_CACHE/helm/<version>/bin/helm).
# The build is atomic and runs under a lock; a warm run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
planedir=$(cd "$here/../controlplane" && pwd)
cd "$here"

version=$(awk '{ if ($1 == "require") { $1 = ""; $0 = $0 } }
  $1 == "helm.sh/helm/v4" && $2 ~ /^v4\./ {print $2; exit}' go.mod)
[ -n "$version" ] || { echo "build.sh: no helm.sh/helm/v4 requirement in go.mod" >&2; exit 1; }
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
out="$cache/helm/$version/bin"

if [ -x "$out/helm" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache/helm"
exec 9>"$cache/helm/.build.lock"
flock 9
# Another build may have finished while we waited for the lock.
if [ -x "$out/helm" ]; then
  echo "$out"
  exit 0
fi

go=$("$planedir/ensure-go.sh")
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
tmp=$(mktemp -d "$cache/helm/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "build.sh: building helm $version into $out" >&2
export CGO_ENABLED=0 GOFLAGS=-mod=mod
"$go" build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
  -o "$tmp/helm" helm.sh/helm/v4/cmd/helm
"$tmp/helm" version --short >&2
chmod 755 "$tmp"   # mktemp made it 0700
mkdir -p "$(dirname "$out")"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
