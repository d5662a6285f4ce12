#!/usr/bin/env python3
"""Unit tests for scripts/check-thread-safety.py: a wrongly locked access fails the check wherever
it is written (a source file, the tree's own header, a generated header), with the precompiled
headers and without them, and what goes wrong with a PCH costs time, not the verdict."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check-thread-safety.py")
CLANG = shutil.which("clang++") or shutil.which("clang++-14")

# A class of the tree whose counter is guarded, with both a right and a wrong inline reader.
COUNTER_H = """#pragma once
#include <string>
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
class Counter {
 public:
  void Add() { absl::MutexLock lock(&mu_); ++n_; }
  int Get() const { absl::MutexLock lock(&mu_); return n_; }
  int GetUnlocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return n_; }
 private:
  mutable absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};
"""
GOOD_CC = """#include "lib/counter.h"
#include "gen/names.h"
#include <vector>
int Total(Counter& c) { c.Add(); return c.Get() + kGenerated; }
"""
# Reads the counter without its lock: clang's "requires holding mutex 'mu_'".
BAD_CC = """#include "lib/counter.h"
#include "gen/names.h"
int Peek(const Counter& c) { return c.GetUnlocked(); }
"""
GENERATED_H = "#pragma once\nconstexpr int kGenerated = 1;\n"


def run(files, generated=None, extra=()):
    """Exit code and output of the check over a tree of `files` {path: text}, each .cc compiled
    by a compile_commands.json in build/, which also holds `generated` {path: text}."""
    with tempfile.TemporaryDirectory() as root:
        build = os.path.join(root, "build")
        generated = dict({"gen/names.h": GENERATED_H}, **(generated or {}))
        for base, tree in ((root, files), (build, generated)):
            for path, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(base, path)), exist_ok=True)
                with open(os.path.join(base, path), "w") as f:
                    f.write(text)
        entries = [{"directory": build, "file": os.path.join(root, p),
                    "command": f"/usr/bin/c++ -I{root} -I{build} -DNDEBUG -pthread -std=c++17 "
                               f"-Wall -o {p}.o -c {os.path.join(root, p)}"}
                   for p in sorted(files) if p.endswith(".cc")]
        with open(os.path.join(build, "compile_commands.json"), "w") as f:
            json.dump(entries, f)
        r = subprocess.run([sys.executable, SCRIPT, build, "--root", root, "-j", "2", *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return r.returncode, r.stdout


@unittest.skipUnless(CLANG, "clang++ not found (scripts/install-deps.sh installs it)")
class CheckThreadSafetyTest(unittest.TestCase):
    def test_right_locking_passes_and_the_files_load_a_pch(self):
        code, out = run({"lib/counter.h": COUNTER_H, "a.cc": GOOD_CC, "b.cc": GOOD_CC})
        self.assertEqual(code, 0, out)
        self.assertIn("1 PCHs for 2 files", out)

    def test_an_unlocked_read_in_a_source_file_fails_with_and_without_the_pch(self):
        for extra in ((), ("--no-pch",)):
            code, out = run({"lib/counter.h": COUNTER_H, "a.cc": GOOD_CC, "b.cc": BAD_CC}, None,
                            extra)
            self.assertEqual(code, 1, (extra, out))
            self.assertIn("b.cc:3:", out)
            self.assertIn("requires holding mutex 'c.mu_'", out)
            self.assertNotIn("a.cc:", out)

    def test_an_unlocked_read_in_the_trees_own_header_fails(self):
        # The tree's headers are parsed by each file, never taken from a PCH.
        bad_h = COUNTER_H.replace("int GetUnlocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {",
                                  "int GetUnlocked() const {")
        code, out = run({"lib/counter.h": bad_h, "a.cc": GOOD_CC, "b.cc": GOOD_CC})
        self.assertEqual(code, 1, out)
        self.assertIn("lib/counter.h:9:", out)
        self.assertIn("requires holding mutex 'mu_'", out)

    def test_an_unlocked_read_in_a_generated_header_fails(self):
        # A generated header goes into the PCH, which is built with the check's flags: it fails
        # to build, and the files parsed whole then fail on it.
        generated = {"gen/names.h": GENERATED_H + '#include "lib/counter.h"\n'
                                    "inline int Sneak(const Counter& c) {\n"
                                    "  return c.GetUnlocked();\n}\n"}
        code, out = run({"lib/counter.h": COUNTER_H, "a.cc": GOOD_CC, "b.cc": GOOD_CC},
                        generated)
        self.assertEqual(code, 1, out)
        self.assertIn("gen/names.h:5:", out)
        self.assertIn("requires holding mutex 'c.mu_'", out)

    def test_a_pch_that_does_not_build_costs_time_not_the_verdict(self):
        # The header scan reads #include lines without their conditions: an #if 0'd generated
        # header that does not compile breaks the PCH, not the files, which are parsed whole.
        cc = GOOD_CC + '#if 0\n#include "gen/broken.h"\n#endif\n'
        code, out = run({"lib/counter.h": COUNTER_H, "a.cc": cc, "b.cc": cc},
                        {"gen/broken.h": "this is not C++\n"})
        self.assertEqual(code, 0, out)
        self.assertIn("no PCH for 2 files", out)
        self.assertIn("0 PCHs for 0 files", out)


if __name__ == "__main__":
    unittest.main()
