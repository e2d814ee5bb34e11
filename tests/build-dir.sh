#!/usr/bin/env bash
# Keeps cargo's build directory in the cache ($CARGO_BUILD_BUILD_DIR, which
# the Makefile sets to $OPKIT_CACHE/cargo-build) from growing without end.
# Dependencies from crates.io are built there once for every clone, but a
# clone at a new path, and every test that builds a project in a temporary
# directory, adds builds of its own path crates that nothing reuses. When
# the directory holds more than OPKIT_BUILD_DIR_MAX_GB (default 30) GiB it
# is emptied, and the next build is a cold one. `make test` and
# `make test-fast` run this before they build; don't run it while another
# clone's tests use the directory.
#
#   tests/build-dir.sh        # prints what it does only when it empties
set -euo pipefail
dir=${CARGO_BUILD_BUILD_DIR:-}
max_gb=${OPKIT_BUILD_DIR_MAX_GB:-30}
[[ "$max_gb" =~ ^[0-9]+$ ]] || { echo "error: OPKIT_BUILD_DIR_MAX_GB must be a whole number of GiB, not '$max_gb'" >&2; exit 2; }
[ -n "$dir" ] && [ -d "$dir" ] || exit 0
used_gb=$(du -s --block-size=1G "$dir" | cut -f1)
if [ "$used_gb" -gt "$max_gb" ]; then
  echo "build-dir.sh: $dir holds $used_gb GiB (more than OPKIT_BUILD_DIR_MAX_GB=$max_gb); emptying it, this build is a cold one" >&2
  rm -rf "$dir"
fi
