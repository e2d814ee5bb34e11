#!/usr/bin/env bash
# Keeps the target directories in the cache from growing without end. The
# Makefile gives each clone path one ($CARGO_TARGET_DIR, under
# $OPKIT_CACHE/target-dirs/); a clone at a new path adds another. This
# marks the current one as used and, while all of them together hold more
# than OPKIT_TARGET_DIRS_MAX_GB (default 40) GiB, removes the least
# recently used other one; if the current one alone is over, it is emptied
# and the next build is a cold one. A CARGO_TARGET_DIR outside
# $OPKIT_CACHE/target-dirs is yours and left alone. `make test` and
# `make test-fast` run this before they build; don't run it while another
# clone's tests are running.
#
#   tests/target-dirs.sh        # prints what it removes, nothing otherwise
set -euo pipefail
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
parent="$cache/target-dirs"
dir=${CARGO_TARGET_DIR:-}
max_gb=${OPKIT_TARGET_DIRS_MAX_GB:-40}
[[ "$max_gb" =~ ^[0-9]+$ ]] || {
  echo "error: OPKIT_TARGET_DIRS_MAX_GB must be a whole number of GiB, not '$max_gb'" >&2
  exit 2
}
[ -n "$dir" ] && [ "$(dirname "$dir")" = "$parent" ] || exit 0
mkdir -p "$dir"
touch "$dir"
used_gb() { du -s --block-size=1G "$1" | cut -f1; }
while [ "$(used_gb "$parent")" -gt "$max_gb" ]; do
  # The least recently used target directory other than this clone's.
  oldest=$(find "$parent" -mindepth 1 -maxdepth 1 -type d ! -path "$dir" -printf '%T@ %p\n' |
    sort -n | head -n 1 | cut -d' ' -f2-)
  if [ -z "$oldest" ]; then
    echo "target-dirs.sh: $dir holds more than OPKIT_TARGET_DIRS_MAX_GB=$max_gb GiB; emptying it, this build is a cold one" >&2
    rm -rf "$dir"
    mkdir -p "$dir"
    break
  fi
  echo "target-dirs.sh: the target directories hold more than OPKIT_TARGET_DIRS_MAX_GB=$max_gb GiB; removing the least recently used, $oldest" >&2
  rm -rf "$oldest"
done
