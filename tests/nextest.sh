#!/usr/bin/env bash
# Installs cargo-nextest (pinned below) into $OPKIT_CACHE/cargo-nextest/<version>
# once, by tests/install-pinned.sh, and prints the binary's path. Without
# nextest's self-update (the default-no-update feature set): `make test`
# pins the version here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=0.9.151
exec "$here/install-pinned.sh" cargo-nextest "$version" cargo-nextest \
  --no-default-features --features default-no-update
