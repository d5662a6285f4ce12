#!/usr/bin/env python3
"""Unit tests for scripts/long-functions.py: which braces open a function, and how long it is."""

import importlib.util
import io
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "long-functions.py")
_spec = importlib.util.spec_from_file_location("long_functions", SCRIPT)
lf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lf)


def functions(source):
    """(open_line, length) of every function `source` defines."""
    return [(o, c - o + 1) for o, c in lf.find_functions(textwrap.dedent(source))]


class FindFunctionsTest(unittest.TestCase):
    def test_plain_function(self):
        self.assertEqual(functions("""\
            int Add(int a, int b) {
              int c = a + b;
              return c;
            }
            """), [(1, 4)])

    def test_signature_over_several_lines_opens_on_its_brace_line(self):
        self.assertEqual(functions("""\
            absl::Status Write(const std::string& path,
                               int mode) {
              return absl::OkStatus();
            }
            """), [(2, 3)])

    def test_method_with_const_override_and_one_liners(self):
        self.assertEqual(functions("""\
            class Sink final : public Base {
             public:
              explicit Sink(int n) : n_(n) {}
              int n() const override { return n_; }
              absl::Status Flush() const override {
                return absl::OkStatus();
              }
              bool operator==(const Sink& o) const {
                return n_ == o.n_;
              }
             private:
              int n_ = 0;
              std::function<void()> done_{[] {}};
            };
            """), [(3, 1), (4, 1), (5, 3), (8, 3)])

    def test_lambda_inside_is_part_of_its_function(self):
        self.assertEqual(functions("""\
            void Run(std::vector<int>& v) {
              auto twice = [&](int x) {
                return 2 * x;
              };
              std::sort(v.begin(), v.end(), [](int a, int b) {
                return a < b;
              });
              std::thread t([this] {
                Work();
              });
            }
            """), [(1, 11)])

    def test_lambda_at_namespace_scope_is_not_a_function(self):
        self.assertEqual(functions("""\
            const auto kTwice = [](int x) {
              return 2 * x;
            };
            static bool registered = Register("x", [](int y) {
              return y;
            });
            """), [])

    def test_digit_separators_are_not_char_literals(self):
        # The old script read `'000; const char kClose = '` as a character literal, counted the
        # `}` after it, and ended the function on its second line.
        self.assertEqual(functions("""\
            int64_t Limit(int64_t n) {
              const int64_t kMax = 1'000; const char kClose = '}';
              if (n > 0x7FFF'FFFF || n > 1'000'000) {
                return kMax;
              }
              const char c = '{';
              return n;
            }
            """), [(1, 8)])

    def test_braces_in_strings_and_raw_strings(self):
        self.assertEqual(functions("""\
            std::string Json() {
              std::string s = "{\\"a\\": {";
              s += R"json(
                }}} {
              )json";
              return s + "}";
            }
            """), [(1, 7)])

    def test_braces_in_comments(self):
        self.assertEqual(functions("""\
            /* A block comment { with braces
               over lines } } */
            void F() {  // a { here
              /* } */ G();
            }
            """), [(3, 3)])

    def test_class_namespace_struct_enum_are_not_functions(self):
        self.assertEqual(functions("""\
            namespace podprof::trace {
            namespace {
            enum class Kind : uint8_t {
              kA,
              kB,
            };
            struct Row {
              int a;
            };
            }  // namespace
            template <typename T>
            class Box {
             public:
              T get() const {
                return t_;
              }
              T t_;
            };
            extern "C" {
            int CEntry(void) {
              return 0;
            }
            }
            }  // namespace podprof::trace
            """), [(14, 3), (20, 3)])

    def test_if_and_other_control_statements_are_not_functions(self):
        self.assertEqual(functions("""\
            void F(int x) {
              if (x > 0 &&
                  x < 10) {
                G();
              } else if (x == 0) {
                H();
              }
              for (int i = 0; i < x; ++i) {
                switch (i) {
                  case 1: {
                    break;
                  }
                }
              }
            }
            """), [(1, 15)])

    def test_default_arguments_and_initializer_lists(self):
        self.assertEqual(functions("""\
            Foo::Foo(int a, int b)
                : a_(a),
                  mask_(b > 3 ? ~uint64_t{0} : 1),
                  b_{b} {
              Init();
            }
            void Log(const std::string& extra = "") {
              Write(extra);
            }
            const std::map<std::string, int> kTable = {
                {"a", F(1)},
            };
            """), [(4, 3), (7, 3)])

    def test_preprocessor_lines_are_ignored(self):
        self.assertEqual(functions("""\
            #define BLOCK(x) {
            void F() {
              G();
            }
            """), [(2, 3)])


class CommandLineTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        root = self.dir.name
        os.makedirs(os.path.join(root, "lib"))
        os.makedirs(os.path.join(root, "lib", "build-x"))
        body = "void Long() {\n" + "  G();\n" * 5 + "}\nvoid Short() {\n}\n"
        for path in ("lib/a.cc", "lib/build-x/skipped.cc"):
            with open(os.path.join(root, path), "w") as f:
                f.write(body)

    def tearDown(self):
        self.dir.cleanup()

    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], cwd=self.dir.name,
                              capture_output=True, text=True, check=True).stdout

    def test_prints_long_functions_and_skips_build_dirs(self):
        self.assertEqual(self.run_script("3", "lib"), "lib/a.cc:1: 7 lines: void Long() {\n")
        self.assertEqual(self.run_script("7", "lib"), "")

    def test_max_file_lines(self):
        self.assertEqual(self.run_script("--max-file-lines", "5", "lib"), "lib/a.cc: 9 lines\n")
        self.assertEqual(self.run_script("--max-file-lines", "9", "lib"), "")


class ExplainedTest(unittest.TestCase):
    """--unexplained: a long function passes only with a comment above saying why it is long."""

    def long_function(self, comment):
        body = "".join(f"  x += {i};\n" for i in range(6))
        return textwrap.dedent(comment) + "int Sum(int a,\n        int b) {\n  int x = 0;\n" + \
            body + "  return x;\n}\n"

    def unexplained(self, source):
        text = source
        raw = text.split("\n")
        return [o for o, c in lf.find_functions(text)
                if c - o + 1 > 3 and not lf.explained(raw, o)]

    def test_a_comment_saying_why_it_is_long_explains_it(self):
        self.assertEqual(self.unexplained(self.long_function("""\
            // Sums the rows.
            // Long: one pass keeps each row in cache; split, it reads them twice.
            """)), [])

    def test_a_comment_that_does_not_say_why_does_not(self):
        self.assertEqual(self.unexplained(self.long_function("// Sums the rows.\n")), [3])
        self.assertEqual(self.unexplained(self.long_function("")), [2])
        # "long" in a word of its own only: `int64_t` or "longest" say nothing of why.
        self.assertEqual(self.unexplained(self.long_function("// The longest rows first.\n")),
                         [3])

    def test_a_comment_above_the_previous_function_does_not_count(self):
        source = "// Long: on purpose.\nint One() { return 1; }\n" + self.long_function("")
        self.assertEqual(self.unexplained(source), [4])

    def test_the_command_exits_1_while_one_is_unexplained(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "a.cc"), "w") as f:
                f.write(self.long_function("// Sums.\n"))
            r = subprocess.run([sys.executable, SCRIPT, "--unexplained", "3", d],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("a.cc:3: 10 lines: int b) {", r.stdout)
            with open(os.path.join(d, "a.cc"), "w") as f:
                f.write(self.long_function("// Long: a table.\n"))
            r = subprocess.run([sys.executable, SCRIPT, "--unexplained", "3", d],
                               capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout), (0, ""))


if __name__ == "__main__":
    unittest.main()
