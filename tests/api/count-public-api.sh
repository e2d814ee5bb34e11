#!/usr/bin/env bash
# Counts opkit's public API (functions and methods, types, traits) from
# rustdoc's JSON output: items reachable from the crate root, inherent and
# trait-provided methods of public types, without trait impls of foreign
# traits (Debug, Clone, ...).
#
#   tests/api/count-public-api.sh            # counts for the checkout
#   REV=<commit> tests/api/count-public-api.sh  # counts for another commit
#
# rustdoc's JSON output is unstable; RUSTC_BOOTSTRAP lets the stable
# toolchain emit it (for this count only, never for builds).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=.
if [ -n "${REV:-}" ]; then
  dir=$(mktemp -d)
  trap 'git worktree remove --force "$dir" >/dev/null 2>&1 || true' EXIT
  git worktree add -q --detach "$dir" "$REV"
fi
target=${CARGO_TARGET_DIR:-$PWD/target}/api-count
(cd "$dir" && RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$target" cargo rustdoc -q -p opkit --all-features -- \
  -Z unstable-options --output-format json) >&2
python3 - "$target/doc/opkit.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
index = doc["index"]
root = doc["root"]
seen, fns, types, traits = set(), set(), set(), set()

def kind(item):
    return next(iter(item["inner"])) if isinstance(item["inner"], dict) else item["inner"]

def visit(id_):
    if id_ in seen or str(id_) not in index:
        return
    seen.add(id_)
    item = index[str(id_)]
    if item.get("visibility") not in ("public", None) and kind(item) != "use":
        return
    k = kind(item)
    inner = item["inner"][k]
    if k == "module":
        for child in inner["items"]:
            visit(child)
    elif k == "use":
        if inner.get("id") is not None:
            visit(inner["id"])
    elif k == "function":
        fns.add(id_)
    elif k in ("struct", "enum", "type_alias", "union"):
        types.add(id_)
        for impl_id in inner.get("impls", []):
            impl = index.get(str(impl_id))
            if impl is None:
                continue
            im = impl["inner"]["impl"]
            if im.get("trait") is not None or im.get("synthetic") or im.get("blanket_impl"):
                continue
            for m in im["items"]:
                mi = index.get(str(m))
                if mi and mi.get("visibility") == "public" and kind(mi) == "function":
                    fns.add(m)
    elif k == "trait":
        traits.add(id_)
        for m in inner["items"]:
            mi = index.get(str(m))
            if mi and kind(mi) == "function":
                fns.add(m)

visit(root)
print(f"public functions and methods: {len(fns)}")
print(f"public types (structs, enums, aliases): {len(types)}")
print(f"public traits: {len(traits)}")
PY
