#!/usr/bin/env bash
# Builds the images the local cluster imports into its node's containerd, into
# a cache of their own outside the clone (apart from the node's components, so
# changing an image never rebuilds kubelet & co.), and prints the directory:
#
#   pause.tar      the static Go program tests/node/pause (from build-node.sh)
#   memcached.tar  Debian's memcached binary and the libraries it links
#   busybox.tar    Debian's static busybox, every applet linked on PATH
#   refs           one "file reference" line per archive
#
#   tests/node/build-images.sh              # build if missing, print the dir
#   OPKIT_CACHE=/some/dir tests/node/build-images.sh
#
# Nothing is installed on the host: the Debian packages are fetched with
# `apt-get download` and unpacked into the build directory. The build is
# atomic and runs under a lock; a warm run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# Bump when an image recipe changes; envtest's DEFAULT_IMAGES names the
# directory (a unit test keeps the two in step).
recipe=2
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
out="$cache/images/r$recipe"

complete() { [ -f "$out/.complete" ]; }
if complete; then
  echo "$out"
  exit 0
fi

# pause comes from the node's build (a warm build-node.sh returns at once).
node=$("$here/build-node.sh")

mkdir -p "$cache/images"
exec 9>"$cache/images/.build.lock"
flock 9
if complete; then
  echo "$out"
  exit 0
fi

tmp=$(mktemp -d "$cache/images/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "build-images.sh: building the cluster's images into $out" >&2

# download PACKAGE...: fetches Debian packages into the current directory
# (the package lists are fetched once if they are missing or stale). The
# build directory is private to root, so apt does not drop to its `_apt` user.
download() {
  local apt=(apt-get -qq -o APT::Sandbox::User=root download "$@")
  "${apt[@]}" >&2 || { apt-get update -qq >&2 && "${apt[@]}" >&2; }
}

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
  echo "$(basename "$archive") $reference" >> "$tmp/refs"
}

# pause: the static Go program build-node.sh built.
rootfs=$(mktemp -d "$tmp/rootfs.XXXXXX")
cp "$node/bin/pause" "$rootfs/pause"
pack_image "$tmp/pause.tar" "opkit.local/pause:1" "$rootfs" \
  '{"Entrypoint":["/pause"],"User":"65535:65535"}'

# memcached: Debian's binary and every library it links. The package and the
# libraries' packages (lib* dependencies, transitively; libc6 is the host's)
# are downloaded and unpacked, not installed; `ldd` resolves the binary
# against the unpacked libraries first, then the host's libc.
mkdir -p "$tmp/debs" "$tmp/unpacked"
(cd "$tmp/debs" && download memcached)
deb=$(ls "$tmp"/debs/memcached_*.deb)
memcached_version=$(dpkg-deb -f "$deb" Version | sed 's/[^A-Za-z0-9._-]/_/g')
dpkg-deb -x "$deb" "$tmp/unpacked"
lib_deps() { dpkg-deb -f "$1" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/:any//; s/ //g' | grep '^lib' | grep -vx 'libc6' || true; }
queue=$(lib_deps "$deb")
seen=" "
while [ -n "$queue" ]; do
  next=""
  for pkg in $queue; do
    case "$seen" in *" $pkg "*) continue ;; esac
    seen+="$pkg "
    (cd "$tmp/debs" && download "$pkg")
    pdeb=$(ls "$tmp"/debs/"${pkg}"_*.deb)
    dpkg-deb -x "$pdeb" "$tmp/unpacked"
    next+=" $(lib_deps "$pdeb")"
  done
  queue=$(echo "$next" | xargs)
done
echo "build-images.sh: memcached $memcached_version with the libraries of:$seen" >&2
libpath=$(find "$tmp/unpacked" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)
rootfs=$(mktemp -d "$tmp/rootfs.XXXXXX")
mkdir -p "$rootfs/usr/bin" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
cp "$tmp/unpacked/usr/bin/memcached" "$rootfs/usr/bin/memcached"
resolved=$(LD_LIBRARY_PATH=$libpath ldd "$tmp/unpacked/usr/bin/memcached")
if grep -q 'not found' <<<"$resolved"; then
  echo "build-images.sh: memcached links libraries found nowhere:" >&2
  echo "$resolved" >&2
  exit 1
fi
for lib in $(grep -o '/[^ ]*' <<<"$resolved"); do
  # A library from the unpacked packages keeps its path inside the package.
  dest=${lib#"$tmp/unpacked"}
  mkdir -p "$rootfs$(dirname "$dest")"
  cp -L "$lib" "$rootfs$dest"
done
# Debian's layout: /lib and /lib64 are links into /usr on merged-/usr systems;
# the image keeps the real paths ldd printed, so both resolve.
pack_image "$tmp/memcached.tar" "opkit.local/memcached:$memcached_version" "$rootfs" \
  '{"Entrypoint":["memcached"],"Env":["PATH=/usr/bin:/bin"],"User":"11211:11211","ExposedPorts":{"11211/tcp":{}}}'
rm -rf "$tmp/debs" "$tmp/unpacked"

# busybox: Debian's statically linked busybox, with a link on PATH for every
# applet it has (`httpd`, `wget`, `nslookup`, ... run by their bare names).
rootfs=$(mktemp -d "$tmp/rootfs.XXXXXX")
mkdir -p "$rootfs/bin" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
(cd "$tmp" && download busybox-static)
deb=$(ls "$tmp"/busybox-static_*.deb)
busybox_version=$(dpkg-deb -f "$deb" Version | sed 's/[^A-Za-z0-9._-]/_/g')
dpkg-deb -x "$deb" "$tmp/busybox-deb"
cp "$tmp/busybox-deb/bin/busybox" "$rootfs/bin/busybox"
applets=$("$rootfs/bin/busybox" --list)
[ -n "$applets" ] || { echo "build-images.sh: busybox --list printed nothing" >&2; exit 1; }
for applet in $applets; do
  [ "$applet" = busybox ] || ln -s busybox "$rootfs/bin/$applet"
done
rm -rf "$tmp/busybox-deb" "$deb"
pack_image "$tmp/busybox.tar" "opkit.local/busybox:$busybox_version-r$recipe" "$rootfs" \
  '{"Cmd":["sh"],"Env":["PATH=/bin"]}'
rm -rf "$tmp"/rootfs.*
cat "$tmp/refs" >&2

chmod 755 "$tmp"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
