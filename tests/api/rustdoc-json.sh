# Sourced by count-public-api.sh and feature-items-used.sh:
#
#   rustdoc_json OUT [CARGO FEATURE ARGS...]
#
# writes opkit's rustdoc JSON for those features to OUT. Each feature set
# builds in a target directory of its own under $api_target (default
# $CARGO_TARGET_DIR/api-count): rustdoc writes one `doc/opkit.json` per
# target directory, so with one directory for every set cargo documented
# opkit again for each set on every run; with one each, a set whose code
# did not change is fresh and costs nothing. Run in $api_dir (default .).
# rustdoc's JSON output is unstable; RUSTC_BOOTSTRAP lets the stable
# toolchain emit it (here only, never for builds: it reruns some build
# scripts, which is why these builds stay out of the shared target).
api_target=${api_target:-${CARGO_TARGET_DIR:-$PWD/target}/api-count}
rustdoc_json() {
  local out=$1
  shift
  local key
  key=$(printf '%s' "${*:-default}" | tr -c 'A-Za-z0-9' '_')
  local target="$api_target/$key"
  (cd "${api_dir:-.}" && RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$target" cargo rustdoc -q -p opkit "$@" -- \
    -Z unstable-options --output-format json) >&2
  cp "$target/doc/opkit.json" "$out"
}
