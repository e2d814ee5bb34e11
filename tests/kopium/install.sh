#!/usr/bin/env bash
# Installs kopium (Rust types from a CRD's OpenAPI schema), pinned below,
# from crates.io into a cache outside the clone, and prints its path:
#
#   tests/kopium/install.sh          # install if missing, print the binary
#
# `cargo install --locked --root $OPKIT_CACHE/kopium/<version>`, under a
# lock, moved into place whole; a warm run returns at once. The book's
# "Kinds you don't own" chapter uses it, and so does its test.
set -euo pipefail
version=0.24.1
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
root="$cache/kopium/$version"
kopium="$root/bin/kopium"
if [ ! -x "$kopium" ]; then
  mkdir -p "$cache/kopium"
  exec 9>"$cache/kopium/.build.lock"
  flock 9
  if [ ! -x "$kopium" ]; then
    tmp=$(mktemp -d "$cache/kopium/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    echo "install.sh: installing kopium $version into $root (once)" >&2
    CARGO_TARGET_DIR="$tmp/target" cargo install kopium --version "$version" --locked \
      --root "$tmp/root" --quiet >&2
    rm -rf "$root"
    mv "$tmp/root" "$root"
    rm -rf "$tmp"
    trap - EXIT
  fi
  exec 9>&-
fi
echo "$kopium"
