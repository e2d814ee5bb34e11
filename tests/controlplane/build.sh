#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy into a cache outside
# the clone, and prints the directory that holds them.
#
#   tests/controlplane/build.sh            # build if missing, print the bin dir
#   OPKIT_CACHE=/some/dir tests/controlplane/build.sh
#
# The versions come from go.mod (see gen-gomod.sh). A warm run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"


k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ {print $2; exit}' go.mod)
[ -n "$k8s_version" ] || { echo "build.sh: no k8s.io/kubernetes requirement in go.mod" >&2; exit 1; }
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
out="$cache/controlplane/$k8s_version/bin"

if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache/controlplane"
go=$("$here/ensure-go.sh")
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
exec 9>"$cache/controlplane/.build.lock"
flock 9
# Another build may have finished while we waited for the lock.
if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ]; then
  echo "$out"
  exit 0
fi

ver=${k8s_version#v}
major=${ver%%.*}
minor_patch=${ver#*.}
minor=${minor_patch%%.*}
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

tmp=$(mktemp -d "$cache/controlplane/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "build.sh: building kube-apiserver $k8s_version and etcd into $out (cold builds take several minutes)" >&2
export CGO_ENABLED=0 GOFLAGS=-mod=mod
"$go" build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
"$go" build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
"$tmp/kube-apiserver" --version >&2
"$tmp/etcd" --version | head -n 1 >&2
mkdir -p "$(dirname "$out")"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
