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
#   images/  pause.tar, memcached.tar, busybox.tar: OCI image archives built
#            here without a registry (memcached from Debian's binary and the
#            libraries it links, busybox from Debian's static busybox)
#   images/refs  one "file reference" line per archive
#
#   tests/node/build-node.sh              # build if missing, print the dir
#   OPKIT_CACHE=/some/dir tests/node/build-node.sh
#
# Debian packages it needs (runc, memcached, iptables, nftables, conntrack,
# iproute2, util-linux)
# are installed with apt-get when missing. The build is atomic and runs under
# a lock; a warm run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
planedir=$(cd "$here/../controlplane" && pwd)

# Bump when the layout or the image recipes change.
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
  [ -x /usr/bin/memcached ] || missing+=(memcached)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v nft >/dev/null || missing+=(nftables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v nsenter >/dev/null || missing+=(util-linux)
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "build-node.sh: installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >&2
}
ensure_packages

go=$("$planedir/ensure-go.sh")
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
tmp=$(mktemp -d "$cache/cluster/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/cni" "$tmp/images"
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

# --- images -----------------------------------------------------------------
# pack_image ARCHIVE REFERENCE ROOTFS CONFIG_JSON: writes an OCI image layout
# archive holding one uncompressed layer (ROOTFS) and the given runtime config.
pack_image() {
  local archive=$1 reference=$2 rootfs=$3 config=$4
  local layout
  layout=$(mktemp -d "$tmp/layout.XXXXXX")
  chmod 755 "$rootfs"   # mktemp made it 0700; the image's / must be traversable
  mkdir -p "$layout/blobs/sha256"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$layout/layer.tar" .
  local layer_digest layer_size
  layer_digest=$(sha256sum "$layout/layer.tar" | cut -d' ' -f1)
  layer_size=$(stat -c %s "$layout/layer.tar")
  mv "$layout/layer.tar" "$layout/blobs/sha256/$layer_digest"
  printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$config" "$layer_digest" > "$layout/config.json"
  local config_digest config_size
  config_digest=$(sha256sum "$layout/config.json" | cut -d' ' -f1)
  config_size=$(stat -c %s "$layout/config.json")
  mv "$layout/config.json" "$layout/blobs/sha256/$config_digest"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config_digest" "$config_size" "$layer_digest" "$layer_size" > "$layout/manifest.json"
  local manifest_digest manifest_size
  manifest_digest=$(sha256sum "$layout/manifest.json" | cut -d' ' -f1)
  manifest_size=$(stat -c %s "$layout/manifest.json")
  mv "$layout/manifest.json" "$layout/blobs/sha256/$manifest_digest"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest_digest" "$manifest_size" "$reference" "${reference##*:}" > "$layout/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$archive" oci-layout index.json blobs
  rm -rf "$layout"
  echo "$(basename "$archive") $reference" >> "$tmp/images/refs"
}

# pause: the static Go program above.
rootfs=$(mktemp -d "$tmp/rootfs.XXXXXX")
cp "$tmp/bin/pause" "$rootfs/pause"
pack_image "$tmp/images/pause.tar" "opkit.local/pause:$recipe" "$rootfs" \
  '{"Entrypoint":["/pause"],"User":"65535:65535"}'

# memcached: Debian's binary plus every library `ldd` lists, at the same paths.
memcached_version=$(dpkg-query -W -f '${Version}' memcached | sed 's/[^A-Za-z0-9._-]/_/g')
rootfs=$(mktemp -d "$tmp/rootfs.XXXXXX")
mkdir -p "$rootfs/usr/bin" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
cp /usr/bin/memcached "$rootfs/usr/bin/memcached"
for lib in $(ldd /usr/bin/memcached | grep -o '/[^ ]*'); do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
# Debian's layout: /lib and /lib64 are links into /usr on merged-/usr systems;
# the image keeps the real paths ldd printed, so both resolve.
pack_image "$tmp/images/memcached.tar" "opkit.local/memcached:$memcached_version" "$rootfs" \
  '{"Entrypoint":["memcached"],"Env":["PATH=/usr/bin:/bin"],"User":"11211:11211","ExposedPorts":{"11211/tcp":{}}}'

# busybox: Debian's statically linked busybox, for test client pods.
rootfs=$(mktemp -d "$tmp/rootfs.XXXXXX")
mkdir -p "$rootfs/bin" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
# apt-get download needs the package lists; fetch them once if it fails.
(cd "$tmp" && { apt-get download -qq busybox-static >&2 ||
  { apt-get update -qq >&2 && apt-get download -qq busybox-static >&2; }; })
deb=$(ls "$tmp"/busybox-static_*.deb)
busybox_version=$(dpkg-deb -f "$deb" Version | sed 's/[^A-Za-z0-9._-]/_/g')
dpkg-deb -x "$deb" "$tmp/busybox-deb"
cp "$tmp/busybox-deb/bin/busybox" "$rootfs/bin/busybox"
for applet in sh nc wget cat echo sleep printf ls; do ln -s busybox "$rootfs/bin/$applet"; done
rm -rf "$tmp/busybox-deb" "$deb"
pack_image "$tmp/images/busybox.tar" "opkit.local/busybox:$busybox_version" "$rootfs" \
  '{"Cmd":["sh"],"Env":["PATH=/bin"]}'
rm -rf "$tmp"/rootfs.*
cat "$tmp/images/refs" >&2

chmod 755 "$tmp"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
