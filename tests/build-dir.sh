#!/usr/bin/env bash
# Keeps cargo's build directories in the cache from growing without end.
# The Makefile gives each clone path one ($CARGO_BUILD_BUILD_DIR, under
# $OPKIT_CACHE/cargo-build/); every clone at a new path, and every test
# that builds a project in a temporary directory, adds builds there. This
# marks the current one as used and, while all of them together hold more
# than OPKIT_BUILD_DIR_MAX_GB (default 30) GiB, removes the least recently
# used other one; if the current one alone is over, it is emptied and the
# next build is a cold one. `make test` and `make test-fast` run it before
# they build; don't run it while another clone's tests are running.
#
#   tests/build-dir.sh        # prints what it removes, nothing otherwise
set -euo pipefail
dir=${CARGO_BUILD_BUILD_DIR:-}
max_gb=${OPKIT_BUILD_DIR_MAX_GB:-30}
[[ "$max_gb" =~ ^[0-9]+$ ]] || {
  echo "error: OPKIT_BUILD_DIR_MAX_GB must be a whole number of GiB, not '$max_gb'" >&2
  exit 2
}
[ -n "$dir" ] || exit 0
mkdir -p "$dir"
touch "$dir"
parent=$(dirname "$dir")
used_gb() { du -s --block-size=1G "$@" | awk '{ s += $1 } END { print s + 0 }'; }
while [ "$(used_gb "$parent")" -gt "$max_gb" ]; do
  # The least recently used build directory other than this clone's.
  oldest=$(find "$parent" -mindepth 1 -maxdepth 1 -type d ! -path "$dir" -printf '%T@ %p\n' |
    sort -n | head -n 1 | cut -d' ' -f2-)
  if [ -z "$oldest" ]; then
    echo "build-dir.sh: $dir holds more than OPKIT_BUILD_DIR_MAX_GB=$max_gb GiB; emptying it, this build is a cold one" >&2
    rm -rf "$dir"
    mkdir -p "$dir"
    break
  fi
  echo "build-dir.sh: the build directories hold more than OPKIT_BUILD_DIR_MAX_GB=$max_gb GiB; removing the least recently used, $oldest" >&2
  rm -rf "$oldest"
done
