#!/usr/bin/env bash
# Builds the local cluster's DNS server, CoreDNS (github.com/coredns/coredns,
# the version of this directory's go.mod, with only the plugins main.go
# imports), from the Go module proxy into a cache outside the clone, packs it
# into an image, and prints the directory that holds it:
#
#   bin/coredns
#   images/coredns.tar   an OCI image archive (the binary alone, user 65532)
#   images/refs          "coredns.tar <reference>"
#
#   tests/coredns/build.sh              # build if missing, print the dir
#   OPKIT_CACHE=/some/dir tests/coredns/build.sh
#
# Its cache key is its own (${OPKIT_CACHE}/coredns/<version>-r<recipe>), so
# changing it never rebuilds the node's components (../node/build-node.sh).
# The build is atomic and runs under a lock; a warm run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
planedir=$(cd "$here/../controlplane" && pwd)
cd "$here"

# Bump when main.go's plugins or the image recipe change.
recipe=1
version=$(awk '{ if ($1 == "require") { $1 = ""; $0 = $0 } }
  $1 == "github.com/coredns/coredns" && $2 ~ /^v1\./ {print $2; exit}' go.mod)
[ -n "$version" ] || { echo "build.sh: no github.com/coredns/coredns requirement in go.mod" >&2; exit 1; }
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
out="$cache/coredns/$version-r$recipe"

complete() { [ -f "$out/.complete" ]; }
if complete; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache/coredns"
exec 9>"$cache/coredns/.build.lock"
flock 9
# Another build may have finished while we waited for the lock.
if complete; then
  echo "$out"
  exit 0
fi

go=$("$planedir/ensure-go.sh")
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
tmp=$(mktemp -d "$cache/coredns/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/images" "$tmp/rootfs"
echo "build.sh: building CoreDNS $version into $out" >&2
export CGO_ENABLED=0 GOFLAGS=-mod=mod
"$go" build -trimpath \
  -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$version" \
  -o "$tmp/bin/coredns" .
"$tmp/bin/coredns" -version >&2

cp "$tmp/bin/coredns" "$tmp/rootfs/coredns"
reference="opkit.local/coredns:${version#v}-r$recipe"
"$here/pack-image.sh" "$tmp/images/coredns.tar" "$reference" "$tmp/rootfs" \
  '{"Entrypoint":["/coredns"],"Cmd":["-conf","/etc/coredns/Corefile"],"User":"65532:65532","ExposedPorts":{"53/udp":{},"53/tcp":{}}}'
rm -rf "$tmp/rootfs"
echo "coredns.tar $reference" > "$tmp/images/refs"

chmod 755 "$tmp"   # mktemp made it 0700
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
