#!/usr/bin/env python3
"""The layer check of `make lint`: no circles, nothing running back up.

Reads the layers file (tests/layers/layers.txt unless another is given),
which names, for each crate, its module folders from the bottom layer to
the top, then reads every non-test `.rs` file of those crates and the
crate-internal paths they use (`use crate::..`, `use super::..`,
`crate::x::f()`, `child::f()`, ...). Each path is followed to the file that
defines the name it ends at (through re-exports), so a file depends on the
files whose items it names; a path that goes through another module's
re-export (its front door) also ties the importer to that module.

It fails on
  * a circle between files (a file that, through others, imports itself),
  * a circle between the declared modules (the folders of the picture),
  * an import from a lower layer to a higher one,
  * a module of a crate that the layers file does not place.

Test code (`#[cfg(test)]` items and the files they declare) is not read:
tests may reach anywhere. Comments, doc comments and strings are not read.
What it cannot see: a method called on a value (`x.f()`: the value's type
was imported, and that import is seen), names a glob import (`use a::*`)
brings in and later code uses bare, and code macros generate.

    tests/layers/check_layers.py [--root DIR] [LAYERS_FILE]

`--root` is the directory the layers file's crate paths are relative to
(default: the repository). Prints what ties each circle (file -> file: the
names taken) and exits 1 when the check fails. Its own tests:
tests/layers/test_check_layers.py (small trees under fixtures/).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ITEM_KINDS = ("fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod")


# ---------------------------------------------------------------- lexing


def strip(text: str) -> str:
    """The code with comments, strings and char literals blanked out
    (newlines kept, so positions and line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", raw_prefix(text, i)):
            m = re.match(r'r(#*)"', text[i:])
            hashes = m.group(1)
            end = text.find('"' + hashes, i + len(m.group(0)))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2 : j]))
            i = j
        elif c == "b" and nxt == '"' and not re.match(r"\w", text[i - 1 : i] or " "):
            out.append(" ")
            i += 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2 : j]))
            i = j
        elif c == "'":
            # a char literal ('x', '\n', '\u{1F600}') or a lifetime ('a)
            m = re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def raw_prefix(text: str, i: int) -> str:
    """What stands before the `r` of a raw string at `i` (` ` when nothing
    does): a `b` of `br".."` counts as nothing when it starts a token."""
    before = text[max(0, i - 2) : i]
    if before.endswith("b") and not re.match(r"\w", before[:-1] or " "):
        return " "
    return before[-1:] or " "


def matching(code: str, start: int, open_: str, close: str) -> int:
    """The index just after the bracket that closes the one at `start`."""
    depth = 0
    for j in range(start, len(code)):
        if code[j] == open_:
            depth += 1
        elif code[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def item_end(code: str, start: int) -> int:
    """The end of the item starting at `start`: its `;` or its `{ .. }`
    (brackets and parentheses skipped)."""
    j = start
    while j < len(code):
        c = code[j]
        if c in "([":
            j = matching(code, j, c, ")" if c == "(" else "]")
            continue
        if c == ";":
            return j + 1
        if c == "{":
            end = matching(code, j, "{", "}")
            # `struct S { .. }` and `fn f() { .. }` end here; `where` clauses
            # and return types came before the brace.
            return end
        j += 1
    return len(code)


TEST_ATTR = re.compile(r"#\[cfg\((?:test|all\(\s*test\b[^\]]*)\)\]")


def drop_test_items(code: str) -> str:
    """The code without its `#[cfg(test)]` items (so the test files they
    declare are not read either)."""
    while True:
        m = TEST_ATTR.search(code)
        if not m:
            return code
        j = m.end()
        # further attributes of the same item
        while True:
            k = re.match(r"\s*#\[", code[j:])
            if not k:
                break
            j = matching(code, j + k.end() - 1, "[", "]")
        end = item_end(code, j)
        code = code[: m.start()] + re.sub(r"[^\n]", " ", code[m.start() : end]) + code[end:]


def depth_map(code: str) -> list[int]:
    """The `{}` depth at each position of `code`."""
    depths, d = [], 0
    for c in code:
        if c == "{":
            d += 1
            depths.append(d)
            continue
        if c == "}":
            d -= 1
        depths.append(d)
    return depths


# ---------------------------------------------------------------- use trees


def parse_use_tree(tree: str) -> list[tuple[list[str], str | None]]:
    """`a::{b, c::d as e, f::*}` -> [(path, alias)], `*` ending a glob."""
    tree = re.sub(r"\s+", " ", tree).strip()
    tree = re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", tree)
    results: list[tuple[list[str], str | None]] = []

    def walk(prefix: list[str], s: str) -> None:
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        for part in parts:
            if not part:
                continue
            brace = part.find("{")
            if brace >= 0:
                head = [x for x in part[:brace].split("::") if x]
                walk(prefix + head, part[brace + 1 : part.rfind("}")])
                continue
            alias = None
            m = re.fullmatch(r"(.*) as (" + IDENT + r")", part)
            if m:
                part, alias = m.group(1), m.group(2)
            results.append((prefix + [x for x in part.split("::") if x], alias))

    walk([], tree)
    return results


USE_DECL = re.compile(r"(?:\bpub(?:\s*\([^)]*\))?\s+)?\buse\s+([^;]*);")


# ---------------------------------------------------------------- model


@dataclass
class Module:
    path: tuple[str, ...]  # module path from the crate root
    file: str  # the file holding it (relative to the repository)
    children: dict[str, tuple[str, ...]] = field(default_factory=dict)
    items: set[str] = field(default_factory=set)  # names defined here
    # name -> the path its `use` names, as written
    imports: dict[str, list[str]] = field(default_factory=dict)
    globs: list[list[str]] = field(default_factory=list)
    code: str = ""


class Crate:
    def __init__(self, src: str, repo: str):
        self.repo = repo
        self.src = src  # e.g. sdk/src
        self.modules: dict[tuple[str, ...], Module] = {}
        root = None
        for name in ("lib.rs", "main.rs"):
            if os.path.exists(os.path.join(repo, src, name)):
                root = os.path.join(src, name)
                break
        if root is None:
            raise SystemExit(f"{src}: no lib.rs or main.rs")
        self.load((), root)

    def load(self, path: tuple[str, ...], file: str) -> None:
        with open(os.path.join(self.repo, file), encoding="utf-8") as f:
            text = f.read()
        code = drop_test_items(strip(text))
        module = Module(path, file, code=code)
        self.modules[path] = module
        depths = depth_map(code)
        here = os.path.dirname(file)
        base = os.path.basename(file)
        child_dir = here if base in ("lib.rs", "main.rs", "mod.rs") else os.path.join(here, base[:-3])
        for m in re.finditer(
            r"(?:\bpub(?:\s*\([^)]*\))?\s+)?\bmod\s+(" + IDENT + r")\s*([;{])", code
        ):
            if depths[m.start()] != 0:
                continue
            name = m.group(1)
            if m.group(2) == "{":
                # an inline module: its items count as this file's
                self.modules[path + (name,)] = Module(path + (name,), file, code="")
                module.children[name] = path + (name,)
                continue
            for candidate in (os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")):
                if os.path.exists(os.path.join(self.repo, candidate)):
                    module.children[name] = path + (name,)
                    self.load(path + (name,), candidate)
                    break
        for m in re.finditer(
            r"(?:\bpub(?:\s*\([^)]*\))?\s+)?(?:(?:async|unsafe|const|extern\s+\"[^\"]*\")\s+)*\b("
            + "|".join(ITEM_KINDS)
            + r")\s+("
            + IDENT
            + r")",
            code,
        ):
            if depths[m.start()] == 0 and m.group(1) != "mod":
                module.items.add(m.group(2))
        for m in re.finditer(r"\bmacro_rules!\s*(" + IDENT + ")", code):
            module.items.add(m.group(1))
        for m in USE_DECL.finditer(code):
            if depths[m.start()] != 0:
                continue
            for segs, alias in parse_use_tree(m.group(1)):
                if not segs:
                    continue
                if segs[-1] == "*":
                    module.globs.append(segs[:-1])
                    continue
                if segs[-1] == "self":
                    segs = segs[:-1]
                    if not segs:
                        continue
                name = alias or segs[-1]
                if name != "_":
                    module.imports[name] = segs

    # ------------------------------------------------------------ resolving

    def absolute(self, at: tuple[str, ...], segs: list[str], seen: frozenset = frozenset()) -> list[str] | None:
        """`segs` as a path from the crate root, or None if it leaves the
        crate (an external crate or a name this crate does not define)."""
        segs = list(segs)
        if not segs:
            return None
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("self", "Self"):
            return list(at) + segs[1:]
        if segs[0] == "super":
            cur = list(at)
            while segs and segs[0] == "super":
                if not cur:
                    return None
                cur.pop()
                segs.pop(0)
            return cur + segs
        module = self.modules.get(at)
        if module is None:
            return None
        if segs[0] in module.children or segs[0] in module.items:
            return list(at) + segs
        if segs[0] in module.imports and (at, segs[0]) not in seen:
            target = self.absolute(at, module.imports[segs[0]], seen | {(at, segs[0])})
            return None if target is None else target + segs[1:]
        return None

    def resolve(
        self, segs: list[str], seen: frozenset = frozenset(), via: tuple[str, ...] = ()
    ) -> tuple[str, bool, tuple[str, ...]] | None:
        """The file defining the item a path from the root names, whether
        the path ends at a module, and the files whose `use` (a re-export)
        the path went through on the way."""
        cur: tuple[str, ...] = ()
        for i, seg in enumerate(segs):
            module = self.modules[cur]
            if seg in module.children:
                cur = module.children[seg]
                continue
            if seg in module.items:
                return module.file, False, via
            if seg in module.imports:
                key = (cur, seg)
                if key in seen:
                    return module.file, False, via
                target = self.absolute(cur, module.imports[seg])
                if target is None:
                    return None  # an external item re-exported
                return self.resolve(target + segs[i + 1 :], seen | {key}, via + (module.file,))
            for glob in module.globs:
                base = self.absolute(cur, glob)
                if base is None:
                    continue
                key = (cur, "*", tuple(glob))
                if key in seen:
                    continue
                found = self.resolve(base + segs[i:], seen | {key}, via + (module.file,))
                if found is not None:
                    return found
            # a method, variant or name we cannot see: the module's file
            return module.file, False, via
        return self.modules[cur].file, True, via

    # ------------------------------------------------------------ edges

    def edges(self) -> tuple[dict[tuple[str, str], set[str]], dict[tuple[str, str], set[str]]]:
        """file -> file: the names the first takes from the second (where
        each is defined); and file -> file: the names the first takes
        through a re-export in the second (its path goes through that
        module's front door)."""
        found: dict[tuple[str, str], set[str]] = {}
        through: dict[tuple[str, str], set[str]] = {}

        def add(module: Module, segs: list[str]) -> None:
            target = self.absolute(module.path, segs)
            if target is None:
                return
            resolved = self.resolve(target)
            if resolved is None:
                return
            file, is_module, via = resolved
            for door in via:
                if door != module.file:
                    through.setdefault((module.file, door), set()).add(segs[-1])
            if is_module or file == module.file:
                return
            found.setdefault((module.file, file), set()).add(segs[-1])

        for module in self.modules.values():
            if not module.code:
                continue
            for segs in module.imports.values():
                add(module, segs)
            for glob in module.globs:
                target = self.absolute(module.path, glob)
                if target is not None:
                    resolved = self.resolve(target)
                    if resolved and resolved[0] != module.file:
                        found.setdefault((module.file, resolved[0]), set()).add("*")
            code = USE_DECL.sub(lambda m: " " * len(m.group(0)), module.code)
            local = set(module.children) | set(module.imports)
            for m in re.finditer(r"(?<![\w:$])(" + IDENT + r"(?:\s*::\s*" + IDENT + r")+)", code):
                segs = [s.strip() for s in m.group(1).split("::")]
                if segs[0] in ("crate", "super", "self", "Self") or segs[0] in local:
                    if segs[0] == "Self":
                        continue
                    add(module, segs)
        return found, through


# ---------------------------------------------------------------- layers file


@dataclass
class CrateLayers:
    src: str
    layers: list[tuple[str, list[str]]] = field(default_factory=list)
    allowed_circles: list[set[str]] = field(default_factory=list)


def read_layers(path: str) -> list[CrateLayers]:
    crates: list[CrateLayers] = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"\[([^\]]+)\]", line)
        if m:
            crates.append(CrateLayers(m.group(1).strip()))
            continue
        if not crates:
            raise SystemExit(f"{path}:{number}: a line before the first [crate/src]")
        m = re.fullmatch(r"layer\s+([\w-]+)\s*:(.*)", line)
        if m:
            crates[-1].layers.append((m.group(1), m.group(2).split()))
            continue
        m = re.fullmatch(r"allow-circle\s*:(.*)", line)
        if m:
            crates[-1].allowed_circles.append(
                {os.path.join(crates[-1].src, f) for f in m.group(1).split()}
            )
            continue
        raise SystemExit(f"{path}:{number}: not `[src]`, `layer NAME: modules` or `allow-circle: files`")
    return crates


# ---------------------------------------------------------------- graphs


def circles(nodes: set[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    graph: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def check(layers_path: str, repo: str) -> list[str]:
    """Every failure of the check, as lines to print."""
    failures: list[str] = []
    for spec in read_layers(layers_path):
        crate = Crate(spec.src, repo)
        file_edges, through_edges = crate.edges()

        # which declared module (folder) each file belongs to
        declared: dict[tuple[str, ...], tuple[int, str, str]] = {}
        for rank, (layer, names) in enumerate(spec.layers):
            for name in names:
                key = tuple(x for x in name.split("/") if x) if name != "(root)" else ()
                if key in declared:
                    failures.append(f"{spec.src}: `{name}` is placed twice in {layers_path}")
                declared[key] = (rank, layer, name)

        def unit_of(path: tuple[str, ...]) -> tuple[int, str, str] | None:
            # `(root)` is the crate root's file alone, not its modules
            for cut in range(len(path), 0, -1):
                if path[:cut] in declared:
                    return declared[path[:cut]]
            return declared.get(()) if not path else None

        unit_of_file: dict[str, tuple[int, str, str]] = {}
        for path, module in sorted(crate.modules.items()):
            unit = unit_of(path)
            if unit is None:
                failures.append(
                    f"{spec.src}: module `{'::'.join(path) or '(root)'}` ({module.file}) has no layer "
                    f"in {layers_path}: add it (or a folder above it) to a layer"
                )
                continue
            unit_of_file.setdefault(module.file, unit)
        for key, (_, _, name) in declared.items():
            if key not in crate.modules:
                failures.append(f"{spec.src}: `{name}` in {layers_path} is no module of the crate")

        # circles between files
        for comp in circles(set(unit_of_file), set(file_edges)):
            if set(comp) in spec.allowed_circles:
                continue
            failures.append(f"circle of {len(comp)} files:")
            members = set(comp)
            for (a, b), names in sorted(file_edges.items()):
                if a in members and b in members:
                    failures.append(f"  {a} -> {b}: {', '.join(sorted(names))}")
        for allowed in spec.allowed_circles:
            if not any(set(c) == allowed for c in circles(set(unit_of_file), set(file_edges))):
                failures.append(
                    f"{spec.src}: the allowed circle {' '.join(sorted(allowed))} is gone: "
                    f"remove its allow-circle line from {layers_path}"
                )

        # circles between declared modules, and imports that run back up
        # A path through another module's front door (its re-export) ties
        # the importer to that module too, whatever file defines the name.
        unit_edges: dict[tuple[str, str], list[str]] = {}
        tied = [(edge, names, "") for edge, names in sorted(file_edges.items())]
        tied += [(edge, names, " (through its re-export)") for edge, names in sorted(through_edges.items())]
        for (a, b), names, how in tied:
            ua, ub = unit_of_file.get(a), unit_of_file.get(b)
            if ua is None or ub is None or ua[2] == ub[2]:
                continue
            line = f"{a} -> {b}{how}: {', '.join(sorted(names))}"
            unit_edges.setdefault((ua[2], ub[2]), []).append(line)
            if ub[0] > ua[0]:
                failures.append(
                    f"upward import: `{ua[2]}` (layer {ua[1]}) imports `{ub[2]}` (layer {ub[1]}): {line}"
                )
        units = {name for (_, _, name) in declared.values()}
        for comp in circles(units, set(unit_edges)):
            failures.append(f"circle of {len(comp)} modules: {', '.join(comp)}")
            members = set(comp)
            for (a, b), lines in sorted(unit_edges.items()):
                if a in members and b in members:
                    for line in lines:
                        failures.append(f"  {line}")
    return failures


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    args = sys.argv[1:]
    repo = os.path.dirname(os.path.dirname(here))
    if args[:1] == ["--root"] and len(args) >= 2:
        repo, args = args[1], args[2:]
    layers = args[0] if args else os.path.join(here, "layers.txt")
    failures = check(layers, repo)
    for line in failures:
        print(line)
    if failures:
        print(f"layer check failed ({layers})", file=sys.stderr)
        return 1
    print(f"layers: no circles, no upward imports ({os.path.relpath(layers, repo)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
