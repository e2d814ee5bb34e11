#!/usr/bin/env python3
"""Tests of the layer check on small trees under fixtures/: each must pass
or fail as its name says, with the failure it names.

    tests/layers/test_check_layers.py
"""

import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import check_layers  # noqa: E402


def failures(fixture: str) -> list[str]:
    root = os.path.join(HERE, "fixtures", fixture)
    return check_layers.check(os.path.join(root, "layers.txt"), root)


class LayerCheck(unittest.TestCase):
    def test_every_form_of_path_in_a_clean_tree_passes(self):
        self.assertEqual(failures("clean"), [])

    def test_two_files_importing_each_other_fail(self):
        found = failures("circle")
        self.assertIn("circle of 2 files:", found)
        self.assertIn("  src/a.rs -> src/b.rs: Bee", found)
        self.assertIn("  src/b.rs -> src/a.rs: Ay", found)

    def test_an_import_from_a_lower_layer_fails(self):
        found = failures("upward")
        self.assertEqual(len(found), 1, found)
        self.assertIn("upward import: `low` (layer low) imports `high` (layer high)", found[0])
        self.assertIn("src/low.rs -> src/high.rs: HIGH", found[0])

    def test_a_path_through_a_higher_front_door_fails(self):
        found = failures("through_door")
        self.assertNotIn("circle of 2 files:", found)
        self.assertTrue(
            any(
                "upward import: `low` (layer low) imports `(root)` (layer top): "
                "src/low/user.rs -> src/lib.rs (through its re-export): Kind" in line
                for line in found
            ),
            found,
        )

    def test_folders_in_a_circle_fail_even_when_no_two_files_are(self):
        found = failures("module_circle")
        self.assertNotIn("circle of 2 files:", found)
        self.assertIn("circle of 2 modules: a, b", found)

    def test_an_entrance_that_is_also_the_source_of_its_rooms_types_fails(self):
        found = failures("front_door")
        self.assertIn("circle of 2 files:", found)
        self.assertIn("  src/shop/mod.rs -> src/shop/till.rs: Till", found)
        self.assertIn("  src/shop/till.rs -> src/shop/mod.rs: Price", found)

    def test_a_module_without_a_layer_fails(self):
        found = failures("unplaced")
        self.assertEqual(len(found), 1, found)
        self.assertIn("module `b` (src/b.rs) has no layer", found[0])

    def test_an_allowed_circle_passes_and_a_stale_allowance_fails(self):
        self.assertEqual(failures("allowed"), [])
        root = os.path.join(HERE, "fixtures", "allowed")
        stale = os.path.join(root, "stale-layers.txt")
        self.addCleanup(lambda: os.path.exists(stale) and os.remove(stale))
        with open(stale, "w", encoding="utf-8") as f:
            f.write("[src]\nlayer all: m\nlayer top: (root)\nallow-circle: m/a.rs\n")
        found = check_layers.check(stale, root)
        self.assertIn("circle of 2 files:", found)
        self.assertTrue(any("the allowed circle src/m/a.rs is gone" in line for line in found), found)

    def test_design_draws_the_layers_the_check_enforces(self):
        repo = os.path.dirname(os.path.dirname(HERE))
        with open(os.path.join(repo, "DESIGN.md"), encoding="utf-8") as f:
            design = f.read()
        picture = design.split("## Layers", 1)[1].split("```", 2)[1]
        for spec in check_layers.read_layers(os.path.join(HERE, "layers.txt")):
            block = picture.split(f"({spec.src}", 1)[1].split("\ncrate ", 1)[0]
            # each drawn row: its layer's name, then its modules (continued
            # on the indented lines below it)
            rows, name = {}, None
            for line in block.splitlines()[1:]:
                first = line.split()[0] if line.split() else ""
                if first in dict(spec.layers):
                    name = first
                    rows[name] = line
                elif name and line.startswith(" " * 5):
                    rows[name] += line
            for layer, modules in spec.layers:
                for module in modules:
                    drawn = "lib.rs" if module == "(root)" else module
                    self.assertRegex(block, rf"(?<![\w/]){re.escape(drawn)}(?![\w/])", f"{spec.src}: {module}")
                    if layer in rows:
                        self.assertRegex(
                            rows[layer], rf"(?<![\w/]){re.escape(drawn)}(?![\w/])", f"{spec.src}: {module} not in row {layer}"
                        )
            if spec.src == "sdk/src":
                self.assertEqual(set(rows), set(dict(spec.layers)), "every layer of the runtime is a row")

    def test_the_repository_passes(self):
        self.assertEqual(
            check_layers.check(os.path.join(HERE, "layers.txt"), os.path.dirname(os.path.dirname(HERE))),
            [],
        )


if __name__ == "__main__":
    unittest.main()
