#!/usr/bin/env bash
# Counts opkit's public API (functions and methods, types, traits) from
# rustdoc's JSON output: items reachable from the crate root, inherent and
# trait-provided methods of public types, without trait impls of foreign
# traits (Debug, Clone, ...).
#
#   tests/api/count-public-api.sh               # all features: the three counts
#   tests/api/count-public-api.sh --per-feature # per cargo feature set, below
#   REV=<commit> tests/api/count-public-api.sh  # counts for another commit
#
# --per-feature counts opkit with its default features (none), then what
# each optional feature adds to them (counted with the feature and the
# features it turns on, e.g. dev-cert with webhook, less the default set),
# then all features; each line also counts public fields (of structs and
# of struct-like variants), enum variants and constants (module-level and
# associated).
#
# rustdoc's JSON output is unstable; RUSTC_BOOTSTRAP lets the stable
# toolchain emit it (for this count only, never for builds).
set -euo pipefail
cd "$(dirname "$0")/../.."
per_feature=0
case "${1:-}" in
  --per-feature) per_feature=1 ;;
  "") ;;
  *) echo "usage: $0 [--per-feature]" >&2; exit 2 ;;
esac
dir=.
if [ -n "${REV:-}" ]; then
  dir=$(mktemp -d)
  trap 'git worktree remove --force "$dir" >/dev/null 2>&1 || true' EXIT
  git worktree add -q --detach "$dir" "$REV"
fi
api_dir=$dir
# shellcheck source=tests/api/rustdoc-json.sh
. tests/api/rustdoc-json.sh

count() {
  python3 - "$@" <<'PY'
import sys
sys.path.insert(0, "tests/api")
from public_items import walk

def counts(path):
    return {kind: len(ids) for kind, ids in walk(path).items()}

args = sys.argv[1:]
if args[0] == "--all":
    c = counts(args[1])
    print(f"public functions and methods: {c['fns']}")
    print(f"public types (structs, enums, aliases): {c['types']}")
    print(f"public traits: {c['traits']}")
    sys.exit(0)

def line(label, c, sign=""):
    return (f"{label}: {sign}{c['fns']} functions and methods, {sign}{c['types']} types, "
            f"{sign}{c['traits']} traits, {sign}{c['fields']} fields, "
            f"{sign}{c['variants']} variants, {sign}{c['consts']} constants")

base = counts(args[0])
print(line("default features", base))
for spec in args[1:-1]:
    name, path = spec.split("=", 1)
    name, *implied = name.split(",")
    if implied:
        name = f"{name} (with {', '.join(implied)})"
    c = counts(path)
    print(line(f"+ {name}", {k: c[k] - base[k] for k in c}, "+"))
print(line("all features", counts(args[-1])))
PY
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -z "${REV:-}" ] || git worktree remove --force "$dir" >/dev/null 2>&1 || true' EXIT
if [ "$per_feature" = 0 ]; then
  rustdoc_json "$tmp/all.json" --all-features
  count --all "$tmp/all.json"
  exit 0
fi
# The optional features, in sdk/Cargo.toml's order, each as
# `name[,the other optional features it turns on]`.
features=$(python3 -c '
import sys, tomllib
features = tomllib.load(open(sys.argv[1], "rb"))["features"]
for name, enables in features.items():
    if name != "default":
        print(",".join([name] + [f for f in enables if f in features]))
' "$dir/sdk/Cargo.toml")
rustdoc_json "$tmp/default.json"
specs=()
for spec in $features; do
  feature=${spec%%,*}
  rustdoc_json "$tmp/$feature.json" --features "$feature"
  specs+=("$spec=$tmp/$feature.json")
done
rustdoc_json "$tmp/all.json" --all-features
count "$tmp/default.json" "${specs[@]}" "$tmp/all.json"
