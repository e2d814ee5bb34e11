#!/usr/bin/env bash
# Builds everything opkit's local cluster runs besides etcd and kube-apiserver
# (which ../controlplane/build.sh builds), into a cache outside the clone, and
# prints the directory that holds it:
#
#   bin/     kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
#            (k8s.io/kubernetes, the version of ../controlplane/go.mod),
#            containerd containerd-shim-runc-v2 ctr (this directory's go.mod),
#            runc (Debian's package, copied), pause (./pause)
#   cni/     bridge host-local loopback portmap (this directory's go.mod)
#
# The images the node imports (pause, memcached, busybox) are built apart, by
# ./build-images.sh into a cache of their own, so changing one never rebuilds
# these binaries.
#
#   tests/node/build-node.sh              # build if missing, print the dir
#   OPKIT_CACHE=/some/dir tests/node/build-node.sh
#
# Debian packages the node needs on the host (runc, iptables, nftables,
# conntrack, iproute2, util-linux) are installed with apt-get when missing.
# The build is atomic and runs under a lock; a warm run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
planedir=$(cd "$here/../controlplane" && pwd)

# Bump when the layout or a component's build changes (not for images:
# build-images.sh has its own recipe number).
recipe=1
k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ {print $2; exit}' "$planedir/go.mod")
containerd_version=$(awk '$1 == "github.com/containerd/containerd/v2" {print $2; exit}' "$here/go.mod")
cni_version=$(awk '$1 == "github.com/containernetworking/plugins" {print $2; exit}' "$here/go.mod")
[ -n "$k8s_version" ] && [ -n "$containerd_version" ] && [ -n "$cni_version" ] ||
  { echo "build-node.sh: could not read the versions from the go.mod files" >&2; exit 1; }
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
key="$k8s_version-containerd-$containerd_version-cni-$cni_version-r$recipe"
out="$cache/cluster/$key"

complete() { [ -f "$out/.complete" ]; }
if complete; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache/cluster"
exec 9>"$cache/cluster/.build.lock"
flock 9
if complete; then
  echo "$out"
  exit 0
fi

ensure_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v nft >/dev/null || missing+=(nftables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v nsenter >/dev/null || missing+=(util-linux)
  [ "${#missing[@]}" -eq 0 ] && return 0
  "$planedir/../apt-install.sh" "${missing[@]}"
}
ensure_packages

go=$("$planedir/ensure-go.sh")
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
tmp=$(mktemp -d "$cache/cluster/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/cni"
echo "build-node.sh: building the cluster's components into $out (a cold build takes many minutes)" >&2

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
export CGO_ENABLED=0 GOFLAGS=-mod=mod
(cd "$planedir" && "$go" build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" \
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl)

cd_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version"
cd_ldflags+=" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
(cd "$here" && "$go" build -trimpath -ldflags "$cd_ldflags" -o "$tmp/bin/" \
  github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  github.com/containerd/containerd/v2/cmd/ctr)
(cd "$here" && "$go" build -trimpath -ldflags "-s -w" -o "$tmp/cni/" \
  github.com/containernetworking/plugins/plugins/main/bridge \
  github.com/containernetworking/plugins/plugins/ipam/host-local \
  github.com/containernetworking/plugins/plugins/main/loopback \
  github.com/containernetworking/plugins/plugins/meta/portmap)
(cd "$here" && "$go" build -trimpath -ldflags "-s -w" -o "$tmp/bin/pause" ./pause)
cp "$(command -v runc)" "$tmp/bin/runc"

"$tmp/bin/kubelet" --version >&2
"$tmp/bin/containerd" --version >&2
"$tmp/bin/runc" --version | head -n 1 >&2

chmod 755 "$tmp"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
