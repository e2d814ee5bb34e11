#!/usr/bin/env bash
# Packs a directory into an OCI image layout archive (one uncompressed layer,
# no registry involved), as containerd's `ctr images import` reads it:
#
#   tests/coredns/pack-image.sh ARCHIVE REFERENCE ROOTFS CONFIG_JSON
#
# CONFIG_JSON is the image's runtime config, e.g.
# '{"Entrypoint":["/coredns"],"User":"65532:65532"}'. The same recipe as
# tests/node/build-node.sh's pack_image; deterministic for a given ROOTFS.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 ARCHIVE REFERENCE ROOTFS CONFIG_JSON" >&2; exit 2; }
archive=$1 reference=$2 rootfs=$3 config=$4
layout=$(mktemp -d "$(dirname "$archive")/layout.XXXXXX")
trap 'rm -rf "$layout"' EXIT
chmod 755 "$rootfs"   # the image's / must be traversable
mkdir -p "$layout/blobs/sha256"

# blob FILE: moves FILE into the blob store, prints "digest size".
blob() {
  local digest size
  digest=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  mv "$1" "$layout/blobs/sha256/$digest"
  echo "$digest $size"
}

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$layout/layer.tar" .
read -r layer_digest layer_size < <(blob "$layout/layer.tar")
printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$config" "$layer_digest" > "$layout/config.json"
read -r config_digest config_size < <(blob "$layout/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config_digest" "$config_size" "$layer_digest" "$layer_size" > "$layout/manifest.json"
read -r manifest_digest manifest_size < <(blob "$layout/manifest.json")
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest_digest" "$manifest_size" "$reference" "${reference##*:}" > "$layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$archive" oci-layout index.json blobs
