#!/usr/bin/env bash
# Is every public item an optional feature adds used on a user's path?
# For each optional feature of opkit (sdk/Cargo.toml), the functions,
# methods, types and traits it adds over the default features (from
# rustdoc's JSON, as tests/api/count-public-api.sh counts them) are looked
# up by name in what users read and run: the examples, the book, the
# templates of generated projects, and the journeys and tests outside the
# crate (tests/, envtest/, templates/tests/). An item none of them names
# is printed; the exit status is 1 if there is one.
#
#   tests/api/feature-items-used.sh            # every optional feature
#   tests/api/feature-items-used.sh webhook    # one
#
# A method counts as used when `.name`, `::name` or `fn name` (a trait's
# method implemented) appears (names such as
# `new` are common, so the check is generous: a miss is certain, a hit is
# likely). rustdoc's JSON output is unstable; RUSTC_BOOTSTRAP lets the
# stable toolchain emit it (for this check only, never for builds).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/api/rustdoc-json.sh
. tests/api/rustdoc-json.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ $# -gt 0 ]; then
  features="$*"
else
  features=$(python3 -c '
import sys, tomllib
for name in tomllib.load(open(sys.argv[1], "rb"))["features"]:
    if name != "default":
        print(name)
' sdk/Cargo.toml)
fi
rustdoc_json "$tmp/default.json"
for feature in $features; do
  rustdoc_json "$tmp/$feature.json" --features "$feature"
done

python3 - "$tmp" $features <<'PY'
import pathlib, re, sys
sys.path.insert(0, "tests/api")
from public_items import walk

tmp, features = pathlib.Path(sys.argv[1]), sys.argv[2:]

def items(path):
    """(kind, owner, name) of every public fn, method, type and trait."""
    found = walk(path)
    out = {("fn" if owner == "" else "method", owner, name)
           for owner, name in found["fns"].values()}
    out |= {("type", "", name) for _, name in found["types"].values()}
    out |= {("type", "", name) for _, name in found["traits"].values()}
    return out

roots = ["examples", "book/src", "templates/templates", "templates/project",
         "templates/tests", "tests", "envtest"]
texts = []
for root in roots:
    for path in pathlib.Path(root).rglob("*"):
        if path.is_file() and path.suffix in (".rs", ".md", ".tmpl", ".toml", ".yaml"):
            if "target" in path.parts:
                continue
            texts.append(path.read_text(errors="replace"))
corpus = "\n".join(texts)

def used(entry):
    kind, owner, name = entry
    if kind == "method":
        # called, named by path, or implemented (a trait's method)
        return re.search(rf"(\.|::|\bfn ){re.escape(name)}\b", corpus) is not None
    return re.search(rf"\b{re.escape(name)}\b", corpus) is not None

base = items(tmp / "default.json")
missing = 0
for feature in features:
    added = sorted(items(tmp / f"{feature}.json") - base)
    unused = [e for e in added if not used(e)]
    print(f"{feature}: {len(added)} items added, {len(added) - len(unused)} used")
    for kind, owner, name in unused:
        print(f"  not used: {owner + '::' if owner else ''}{name} ({kind})")
    missing += len(unused)
sys.exit(1 if missing else 0)
PY
