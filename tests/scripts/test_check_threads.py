#!/usr/bin/env python3
"""Unit tests for scripts/check-threads.py: threads only in the files ARCHITECTURE.md lists."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check-threads.py")


def run(files, listed):
    """Exit code and output of the check over a tree of `files` {path: text}, with `listed`."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        os.makedirs(os.path.join(root, "docs"), exist_ok=True)
        with open(os.path.join(root, "docs", "ARCHITECTURE.md"), "w") as f:
            f.write("| a | b | c |\n\nFiles that start threads (the check):\n"
                    + ", ".join(f"`{p}`" for p in listed) + ".\n\nNext paragraph `agent/y.cc`.\n")
        r = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True,
                           text=True)
        return r.returncode, r.stdout


class CheckThreadsTest(unittest.TestCase):
    def test_a_listed_file_may_start_threads(self):
        code, out = run({"agent/a.cc": "std::thread t([] {});\n"}, ["agent/a.cc"])
        self.assertEqual(code, 0, out)

    def test_an_unlisted_thread_async_or_detach_fails_naming_the_line(self):
        for text in ("auto t = std::thread(f);\n", "auto f = std::async(g);\n",
                     "t.detach();\n", "std::jthread t(f);\n"):
            code, out = run({"common/b.cc": "int x;\n" + text}, [])
            self.assertEqual(code, 1, text)
            self.assertIn("common/b.cc:2:", out)

    def test_what_starts_nothing_is_not_counted(self):
        code, out = run({"cli/c.cc": "int n = std::thread::hardware_concurrency();\n"
                                     "std::this_thread::yield();\n// std::thread in a comment\n"},
                        [])
        self.assertEqual(code, 0, out)

    def test_a_listed_file_that_starts_no_thread_fails(self):
        code, out = run({"http/d.cc": "int y;\n"}, ["http/d.cc"])
        self.assertEqual(code, 1)
        self.assertIn("http/d.cc: listed", out)

    def test_only_the_paragraph_under_the_heading_lists(self):
        code, out = run({"agent/y.cc": "std::thread t;\n"}, [])
        self.assertEqual(code, 1, "a path in the next paragraph is not listed")

    def test_tests_and_bench_are_not_product(self):
        code, out = run({"tests/t.cc": "std::thread t;\n", "bench/b.cc": "std::thread t;\n"}, [])
        self.assertEqual(code, 0, out)


if __name__ == "__main__":
    unittest.main()
