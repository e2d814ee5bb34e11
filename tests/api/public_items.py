"""opkit's public API, read from rustdoc's JSON output: the items reachable
from the crate root, inherent and trait-provided methods of public types,
without trait impls of foreign traits (Debug, Clone, ...). Shared by
tests/api/count-public-api.sh (how many) and
tests/api/feature-items-used.sh (which ones, by name).

    from public_items import walk
    items = walk("target/api-count/doc/opkit.json")
    len(items["fns"])              # public functions and methods
    items["fns"][some_id]          # (owner type or trait, or "", name)
"""

import json

KINDS = ("fns", "types", "traits", "fields", "variants", "consts")


def walk(path):
    """Every public item of the crate documented in `path`, by category
    (KINDS): a dict from rustdoc item id to (owner, name), owner being the
    type or trait a method, field, variant or associated constant belongs
    to ("" for the others)."""
    doc = json.load(open(path))
    index = doc["index"]
    seen = set()
    out = {kind: {} for kind in KINDS}

    def kind(item):
        return next(iter(item["inner"])) if isinstance(item["inner"], dict) else item["inner"]

    def public(item):
        return item is not None and item.get("visibility") == "public"

    def named(id_, owner=""):
        item = index.get(str(id_)) or {}
        return (owner, item.get("name") or "")

    def struct_fields(shape):
        # a struct's or a variant's kind: "unit", {"tuple": [ids|null]},
        # {"plain"/"struct": {"fields": [ids]}}
        if not isinstance(shape, dict):
            return []
        if "tuple" in shape:
            return [f for f in shape["tuple"] if f is not None]
        body = shape.get("plain") or shape.get("struct") or {}
        return body.get("fields", [])

    def visit(id_):
        if id_ in seen or str(id_) not in index:
            return
        seen.add(id_)
        item = index[str(id_)]
        if item.get("visibility") not in ("public", None) and kind(item) != "use":
            return
        k = kind(item)
        inner = item["inner"][k]
        name = item.get("name") or ""
        if k == "module":
            for child in inner["items"]:
                visit(child)
        elif k == "use":
            if inner.get("id") is not None:
                visit(inner["id"])
        elif k == "function":
            out["fns"][id_] = ("", name)
        elif k in ("constant", "static"):
            out["consts"][id_] = ("", name)
        elif k in ("struct", "enum", "type_alias", "union"):
            out["types"][id_] = ("", name)
            if k == "struct":
                for f in struct_fields(inner["kind"]):
                    if public(index.get(str(f))):
                        out["fields"][f] = named(f, name)
            if k == "enum":
                for v in inner["variants"]:
                    vi = index.get(str(v))
                    if vi is None:
                        continue
                    out["variants"][v] = named(v, name)
                    # a variant's fields are as public as the enum
                    for f in struct_fields(vi["inner"]["variant"]["kind"]):
                        out["fields"][f] = named(f, name)
            for impl_id in inner.get("impls", []):
                impl = index.get(str(impl_id))
                if impl is None:
                    continue
                im = impl["inner"]["impl"]
                if im.get("trait") is not None or im.get("synthetic") or im.get("blanket_impl"):
                    continue
                for m in im["items"]:
                    mi = index.get(str(m))
                    if public(mi) and kind(mi) == "function":
                        out["fns"][m] = named(m, name)
                    elif public(mi) and kind(mi) == "assoc_const":
                        out["consts"][m] = named(m, name)
        elif k == "trait":
            out["traits"][id_] = ("", name)
            for m in inner["items"]:
                mi = index.get(str(m))
                if mi and kind(mi) == "function":
                    out["fns"][m] = named(m, name)
                elif mi and kind(mi) == "assoc_const":
                    out["consts"][m] = named(m, name)

    visit(doc["root"])
    return out
