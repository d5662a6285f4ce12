#!/usr/bin/env python3
"""Unit tests for scripts/check-layering.py, on a tiny tree and table of its own."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check-layering.py")

ARCHITECTURE = """\
# Architecture

| library | owns | may include |
|---|---|---|
| `base/` | the basics | Abseil |
| `model/` | the model | `base/` |
| `wire/` | the wire format | `model/`, zstd |
| `api/` | generated code | protobuf |
| `sim/`, `gen/` | simulators | `api/` (`sim/`), `wire/` |
| `app/core/` | the program's engine | `wire/` |
| `app/web/` | the program's API | `app/core/` and below |
| `app/` | the program | `sim/`, `api/` and below |

Nothing includes upwards: no library includes `app/`, and tests may include anything.
"""


class CheckLayeringTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        self.write("docs/ARCHITECTURE.md", ARCHITECTURE)
        for lib in ("base", "model", "wire", "api", "sim", "gen", "app", "app/core", "app/web",
                    "tests/util", "bench"):
            self.write(f"{lib}/x.h", "#pragma once\n")

    def tearDown(self):
        self.dir.cleanup()

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(textwrap.dedent(text))

    def run_check(self, *extra):
        r = subprocess.run([sys.executable, SCRIPT, "--root", self.root, *extra],
                           capture_output=True, text=True)
        return r.returncode, r.stdout

    def test_allowed_includes_pass(self):
        self.write("model/m.cc", '#include "model/x.h"\n#include "base/x.h"\n#include <vector>\n')
        self.write("wire/w.cc", '#include "model/x.h"\n#include "absl/strings/str_cat.h"\n')
        self.write("sim/s.cc", '#include "api/x.h"\n#include "gen/x.h"\n')
        self.write("app/main.cc", '#include "sim/x.h"\n#include "base/x.h"\n#include "wire/x.h"\n')
        self.write("tests/t.cc", '#include "app/x.h"\n#include "tests/util/x.h"\n')
        self.write("bench/b.cc", '#include "app/x.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 0, out)
        self.assertIn("files follow", out)

    def test_forbidden_include_fails_with_file_line_and_row(self):
        self.write("base/b.cc", '// base\n#include "base/x.h"\n#include "model/x.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn('base/b.cc:3: #include "model/x.h"', out)
        self.assertIn("| `base/` | ... | Abseil |", out)

    def test_parenthesis_restricts_to_the_libraries_it_names(self):
        self.write("gen/g.cc", '#include "api/x.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn('gen/g.cc:1: #include "api/x.h"', out)

    def test_transitive_by_default_direct_on_request(self):
        self.write("wire/w.cc", '#include "base/x.h"\n')  # wire -> model -> base
        self.assertEqual(self.run_check()[0], 0)
        code, out = self.run_check("--direct")
        self.assertEqual(code, 1)
        self.assertIn('wire/w.cc:1: #include "base/x.h"', out)

    def test_nothing_includes_upwards(self):
        self.write("sim/s.cc", '#include "app/x.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn("no library includes app/", out)

    def test_bench_must_not_include_tests_util(self):
        self.write("bench/b.cc", '#include "tests/util/x.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn('bench/b.cc:1: #include "tests/util/x.h": bench/ must not', out)

    def test_a_library_without_a_row_fails(self):
        self.write("extra/e.cc", '#include "base/x.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn("extra/: holds C++ sources but has no row", out)

    def test_a_room_inside_a_library_has_its_own_row(self):
        self.write("app/core/c.cc", '#include "wire/x.h"\n#include "app/core/x.h"\n')
        self.write("app/web/w.cc", '#include "app/core/x.h"\n#include "base/x.h"\n')
        self.write("app/main.cc", '#include "app/web/x.h"\n#include "app/core/x.h"\n')
        self.write("tests/t.cc", '#include "app/web/x.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 0, out)
        # The engine does not include the API; its files answer to its row, not app/'s.
        self.write("app/core/bad.cc", '#include "sim/x.h"\n#include "app/web/x.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn('app/core/bad.cc:1: #include "sim/x.h"', out)
        self.assertIn('app/core/bad.cc:2: #include "app/web/x.h": app/core/ may include', out)

    def test_nothing_outside_includes_a_room_of_a_library_never_included(self):
        self.write("sim/s.cc", '#include "app/core/x.h"\n')
        code, out = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn('sim/s.cc:1: #include "app/core/x.h": no library includes app/', out)


if __name__ == "__main__":
    unittest.main()
