#!/usr/bin/env bash
# Every cargo feature set a user can pick builds and passes clippy (`make
# lint` runs this): cargo-hack's --each-feature checks opkit and
# opkit-envtest with their default features (none) and with each feature
# alone (`make lint`'s workspace clippy covers all features together);
# opkit's tests, benches and examples are checked with its default
# features too.
#
#   tests/features/check.sh           # install cargo-hack if missing, check
#   tests/features/check.sh --bin     # install cargo-hack if missing, print its path
#
# cargo-hack (pinned below) lands in $OPKIT_CACHE/cargo-hack/<version>/bin
# (`cargo install --locked --root`, by tests/install-pinned.sh, as
# book/build.sh installs mdbook).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=0.6.46
cargo=${CARGO:-cargo}
hack=$(CARGO=$cargo "$here/../install-pinned.sh" cargo-hack "$version")

if [ "${1:-}" = "--bin" ]; then
  echo "$hack"
  exit 0
fi
cd "$here/../.."
# cargo-hack runs as a cargo subcommand: put it first on PATH.
export PATH="$(dirname "$hack"):$PATH"
# Both crates' default sets are empty, so --no-default-features would
# repeat the default run; all features: make lint's workspace clippy.
"$cargo" hack clippy -p opkit -p opkit-envtest --each-feature \
  --exclude-no-default-features --exclude-all-features -- -D warnings
"$cargo" clippy -p opkit --all-targets -- -D warnings
