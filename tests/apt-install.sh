#!/usr/bin/env bash
# Installs Debian packages for opkit's builds and tests: only the packages
# named (no recommended ones), quietly, and one line saying what was
# installed. apt's output goes to a log that is shown only if it fails.
#   tests/apt-install.sh PACKAGE...
set -euo pipefail
[ "$#" -gt 0 ] || exit 0
log=$(mktemp "${TMPDIR:-/tmp}/opkit-apt.XXXXXX")
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
# One at a time: `make test` builds its prerequisites in parallel, and
# apt-get update does not wait for another's lock on the package lists.
# One file for every caller, whatever its TMPDIR.
exec 8>/tmp/opkit-apt-install.lock
flock 8
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "$@"; } >"$log" 2>&1; then
  echo "error: could not install Debian packages: $*" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
echo "installed Debian packages: $*" >&2
