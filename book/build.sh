#!/usr/bin/env bash
# Builds the opkit book (book/) into HTML with mdBook, pinned below and
# installed from crates.io into a cache outside the clone:
#
#   book/build.sh            # install mdbook if missing, build book/book/
#   book/build.sh --bin      # install mdbook if missing, print its path only
#
# mdbook lands in $OPKIT_CACHE/mdbook/<version>/bin (`cargo install --locked
# --root`, by tests/install-pinned.sh), built under a lock and moved into
# place whole; a warm run returns at once. `make book` runs this; the book tests in
# templates/tests/it/book.rs do too, so `make test` builds the book.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=0.5.4
mdbook=$("$here/../tests/install-pinned.sh" mdbook "$version")

if [ "${1:-}" = "--bin" ]; then
  echo "$mdbook"
  exit 0
fi
"$mdbook" build "$here" >&2
echo "$here/book"
