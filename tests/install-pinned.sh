#!/usr/bin/env bash
# Installs a tool from crates.io, pinned, into a cache outside the clone,
# once, and prints the binary's path:
#
#   tests/install-pinned.sh CRATE VERSION [BINARY [ARGS...]]
#
# BINARY defaults to CRATE; ARGS go to `cargo install` (e.g. features).
# `cargo install --locked --root $OPKIT_CACHE/<crate>/<version>`, under a
# lock, built in a target directory of its own (never the workspace's: its
# fingerprints differ) and moved into place whole; a warm run returns at
# once. book/build.sh (mdbook), tests/kopium/install.sh (kopium),
# tests/features/check.sh (cargo-hack) and tests/nextest.sh (cargo-nextest)
# install their tools with it.
set -euo pipefail
crate=$1
version=$2
binary=${3:-$1}
shift $(($# < 3 ? $# : 3))
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
root="$cache/$crate/$version"
exe="$root/bin/$binary"
if [ ! -x "$exe" ]; then
  mkdir -p "$cache/$crate"
  exec 9>"$cache/$crate/.build.lock"
  flock 9
  if [ ! -x "$exe" ]; then
    tmp=$(mktemp -d "$cache/$crate/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    echo "install-pinned.sh: installing $crate $version into $root (once)" >&2
    # At opt-level 1: these tools run for seconds, and a new machine builds
    # them all (cargo-nextest took 378 s of CPU so, 885 s at release's
    # opt-level 3, 408 s as a debug build; book/src/reference/make.md).
    CARGO_TARGET_DIR="$tmp/target" CARGO_PROFILE_RELEASE_OPT_LEVEL=1 "${CARGO:-cargo}" install "$crate" --version "$version" \
      --locked --root "$tmp/root" --quiet "$@" >&2
    rm -rf "$root"
    mv "$tmp/root" "$root"
    rm -rf "$tmp"
    trap - EXIT
  fi
  exec 9>&-
fi
echo "$exe"
