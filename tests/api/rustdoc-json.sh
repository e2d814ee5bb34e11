# Sourced by count-public-api.sh and feature-items-used.sh:
#
#   rustdoc_json OUT [CARGO FEATURE ARGS...]
#
# writes opkit's rustdoc JSON for those features to OUT, built in
# $api_target (default $CARGO_TARGET_DIR/api-count) from the checkout in
# $api_dir (default .). rustdoc writes one `doc/opkit.json` per target
# directory, so cargo documents opkit again for each feature set on every
# call; the JSON is kept instead in $api_json (default $OPKIT_CACHE/api-json,
# outside the clone, so a fresh clone of a commit already counted on this
# machine, as CI's is, documents nothing), by the feature set and a hash of
# what it is made from (sdk/, macros/, Cargo.lock and the compiler: the
# JSON's paths are relative to the checkout), and a call whose inputs did
# not change copies it (one target directory for every set keeps the
# dependencies built once, which a fresh clone's first count needs). rustdoc's JSON output is unstable;
# RUSTC_BOOTSTRAP lets the stable toolchain emit it (here only, never for
# builds: it reruns some build scripts, which is why these builds stay out
# of the shared target directory).
api_target=${api_target:-${CARGO_TARGET_DIR:-$PWD/target}/api-count}
api_json=${api_json:-${OPKIT_CACHE:-$HOME/.cache/opkit}/api-json}
rustdoc_json() {
  local out=$1
  shift
  local features inputs kept
  features=$(printf '%s' "${*:-default}" | tr -c 'A-Za-z0-9' '_')
  inputs=$(cd "${api_dir:-.}" && {
    rustc -vV
    find sdk macros -type f -not -path '*/target/*' -print0 | sort -z | xargs -0 sha256sum
    sha256sum Cargo.lock
  } | sha256sum | cut -c1-16)
  kept="$api_json/$features-$inputs.json"
  if [ ! -f "$kept" ]; then
    (cd "${api_dir:-.}" && RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$api_target" cargo rustdoc -q -p opkit "$@" -- \
      -Z unstable-options --output-format json) >&2
    mkdir -p "$api_json"
    cp "$api_target/doc/opkit.json" "$kept.tmp.$$"
    mv "$kept.tmp.$$" "$kept"
    # the 40 newest (five commits' worth of feature sets) stay; another
    # clone counting at the same time never loses the one it just made
    ls -t "$api_json"/*.json | tail -n +41 | xargs -r rm -f
  fi
  cp "$kept" "$out"
}
