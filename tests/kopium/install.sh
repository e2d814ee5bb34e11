#!/usr/bin/env bash
# Installs kopium (Rust types from a CRD's OpenAPI schema), pinned below,
# from crates.io into a cache outside the clone, and prints its path:
#
#   tests/kopium/install.sh          # install if missing, print the binary
#
# `cargo install --locked --root $OPKIT_CACHE/kopium/<version>`, by
# tests/install-pinned.sh; a warm run returns at once. The book's "Kinds
# you don't own" chapter uses it, and so does its test.
set -euo pipefail
exec "$(dirname "$0")/../install-pinned.sh" kopium 0.24.1
