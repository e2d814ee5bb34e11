#!/usr/bin/env bash
# Builds the opkit book (book/) into HTML with mdBook, pinned below and
# installed from crates.io into a cache outside the clone:
#
#   book/build.sh            # install mdbook if missing, build book/book/
#   book/build.sh --bin      # install mdbook if missing, print its path only
#
# mdbook lands in $OPKIT_CACHE/mdbook/<version>/bin (`cargo install --locked
# --root`), built under a lock and moved into place whole; a warm run
# returns at once. `make book` runs this; the book tests in
# templates/tests/it/book.rs do too, so `make test` builds the book.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=0.5.4
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
root="$cache/mdbook/$version"
mdbook="$root/bin/mdbook"

if [ ! -x "$mdbook" ]; then
  mkdir -p "$cache/mdbook"
  exec 9>"$cache/mdbook/.build.lock"
  flock 9
  if [ ! -x "$mdbook" ]; then
    tmp=$(mktemp -d "$cache/mdbook/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    echo "book/build.sh: installing mdbook $version into $root (once)" >&2
    # A target dir of its own: never the workspace's (its fingerprints differ).
    CARGO_TARGET_DIR="$tmp/target" cargo install mdbook --version "$version" --locked \
      --root "$tmp/root" --quiet >&2
    "$tmp/root/bin/mdbook" --version >&2
    rm -rf "$root"
    mv "$tmp/root" "$root"
    rm -rf "$tmp"
    trap - EXIT
  fi
  exec 9>&-
fi

if [ "${1:-}" = "--bin" ]; then
  echo "$mdbook"
  exit 0
fi
"$mdbook" build "$here" >&2
echo "$here/book"
