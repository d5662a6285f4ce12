#!/usr/bin/env python3
"""Lists the functions (and, on request, the files) that have grown too long.

Usage:
  scripts/long-functions.py N DIR...
      prints `path:line: L lines: <the line the body opens on>` for every function definition
      whose body spans more than N lines (the opening `{` line to the closing `}` line, both
      counted);
  scripts/long-functions.py --max-file-lines M DIR...
      prints `path: L lines` for every file longer than M lines;
  scripts/long-functions.py --unexplained N DIR...
      prints, as the first form does, only the functions longer than N lines that no comment
      explains, and exits 1 when there is one. A function is explained by the comment right
      above its signature when a line of it says why it is long: it holds the word "long"
      (`// Long: one pass over the rows keeps ...`, `// One long switch: ...`).

The first two walk each DIR for .cc and .h files, skipping any `build*` directory, and only
report: their exit status is 0 whatever they find.

This is brace matching on the source text, not a C++ parser: it is good enough for
clang-formatted code (Google style, `{` at the end of the line that opens a body). Each file is
first cleaned: string literals (raw strings included) become `""`, character literals become
`''`, and `//` and `/* */` comments become blanks, newlines kept, so the braces that remain are
code. A `'` inside a number (C++14 digit separators, `1'000'000`) is part of the number and does
not start a character literal. Preprocessor lines are blanked too.

The cleaned text is then read one character at a time with a stack of scopes. Only at namespace
or class scope can a function be defined, so only a `{` met there is classified, from the text
since the last `;`, `{` or `}` (its "header"):
  * `namespace ...`, `extern "C"`      -> a namespace (functions may be defined inside);
  * `class`/`struct`/`union ...`       -> a class body (likewise);
  * a balanced `(...)` followed only by qualifiers (`const`, `override`, `noexcept`, `-> T`,
    a macro such as `ABSL_LOCKS_EXCLUDED(mu_)`), or a constructor's initializer list, and no
    `=` outside the parentheses       -> a function definition;
  * a `{` inside parentheses, or a member's brace initializer in a constructor's initializer
    list (`: a_{x}, b_(y) {`)            -> part of the header, which goes on past its `}`;
  * anything else (`enum`, `= {...}`, `= [] {...}`, `int x_{0}`) -> data.
Everything inside a function body is just counted: control statements, lambdas and local
blocks are part of the function that holds them, never functions of their own.
"""

import argparse
import os
import re
import sys

# ---------------------------------------------------------------------------------------------
# Cleaning: literals and comments out, newlines kept.

_IDENT_START = re.compile(r"[A-Za-z_]")
_IDENT = re.compile(r"[A-Za-z_]\w*")
# A preprocessing number: digits, letters, `.`, exponent signs, and digit separators (a `'`
# followed by a digit or letter, as in 1'000'000 or 0xFF'FF).
_PP_NUMBER = re.compile(r"\.?\d(?:[eEpP][+-]|'[0-9A-Za-z_]|[\w.])*")
_RAW_PREFIXES = {"R", "u8R", "uR", "UR", "LR"}


def _blank(text):
    """The same text with every character but newlines made a space."""
    return re.sub(r"[^\n]", " ", text)


def clean_source(text):
    """Returns `text` with literals and comments neutralised, line for line."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(_blank(text[i:end]))
            i = end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(_blank(text[i:end]))
            i = end
        elif _IDENT_START.match(c):
            ident = _IDENT.match(text, i).group(0)
            j = i + len(ident)
            if ident in _RAW_PREFIXES and text.startswith('"', j):
                # R"delim( ... )delim": everything up to the closing delimiter is the literal.
                open_paren = text.find("(", j)
                delim = text[j + 1:open_paren] if open_paren >= 0 else ""
                close = text.find(")" + delim + '"', open_paren + 1) if open_paren >= 0 else -1
                end = n if close < 0 else close + len(delim) + 2
                body = text[j:end]
                out.append(ident + '""' + "\n" * body.count("\n"))
                i = end
            else:
                # Prefixes such as u8"..." or L'x' simply stay; the literal follows.
                out.append(ident)
                i = j
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            number = _PP_NUMBER.match(text, i).group(0)
            out.append(number)
            i += len(number)
        elif c in "\"'":
            # An ordinary string or character literal: escapes skipped, ends at its quote (or,
            # malformed, at the end of the line).
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            end = min(j + 1, n) if j < n and text[j] == c else j
            out.append(c + c)
            i = end
        else:
            out.append(c)
            i += 1
    lines = "".join(out).split("\n")
    # Preprocessor lines (and their `\` continuations) hold no code braces we want to count.
    in_directive = False
    for k, line in enumerate(lines):
        if in_directive or line.lstrip().startswith("#"):
            in_directive = line.rstrip().endswith("\\")
            lines[k] = ""
    return lines


# ---------------------------------------------------------------------------------------------
# Classifying what a `{` at namespace or class scope opens.

NAMESPACE, CLASS, FUNCTION, BLOCK, DATA, INIT = "ns", "class", "fn", "block", "data", "init"

_ACCESS_LABEL = re.compile(r"\b(public|protected|private)\s*:(?!:)")
_ATTRIBUTE = re.compile(r"\[\[.*?\]\]")
_OPERATOR = re.compile(r"\boperator\s*(\(\)|\[\]|[^\s(\w]+|\w[\w\s:*&<>]*?(?=\())")
# What may follow a function's parameter list before its body.
_AFTER_PARAMS = re.compile(
    r"\)\s*(?:(?:const|volatile|noexcept|override|final|mutable|&&|&|->.*)\s*)*$")


def _strip_template_heads(h):
    """Removes every `template <...>` (nested angle brackets included)."""
    while True:
        m = re.search(r"\btemplate\s*<", h)
        if not m:
            return h
        depth, j = 1, m.end()
        while j < len(h) and depth:
            depth += {"<": 1, ">": -1}.get(h[j], 0)
            j += 1
        h = h[:m.start()] + h[j:]


def _top_level(h):
    """`h` with everything inside (), [] and {} removed, and whether its brackets balance."""
    depth, kept = 0, []
    for ch in h:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return "", False
        elif depth == 0:
            kept.append(ch)
    return "".join(kept), depth == 0


def _is_initializer_list(h):
    """True when `h` is a constructor's `Name(params) : member(x), ...` header."""
    return re.search(r"\)\s*(?:noexcept\s*)?:(?!:)", h) is not None


def classify(header):
    """What a `{` opens at namespace or class scope, given the text before it."""
    h = " ".join(header.split())
    h = _ACCESS_LABEL.sub(" ", h)
    h = _ATTRIBUTE.sub(" ", h)
    h = _strip_template_heads(h).strip()
    if re.match(r"(inline\s+)?namespace\b|extern\b", h):
        return NAMESPACE
    if re.match(r"(typedef\s+)?(class|struct|union)\b", h):
        return CLASS
    if "(" not in h:
        return DATA  # enum, `= {`, `int x{`...
    h = _OPERATOR.sub("operator_", h)
    if h.count("(") > h.count(")"):
        # Inside parentheses: `uint64_t{0}` in a constructor's initializer list, a lambda passed
        # to a registration macro. The header goes on past the matching `}`.
        return INIT
    top, balanced = _top_level(h)
    if not balanced or re.search(r"(?<![=!<>])=(?!=)", top):
        return DATA  # an initializer, a lambda assigned
    if _is_initializer_list(h):
        # `Foo() : a_{x}, b_(y) {`: a `{` right after a name initializes a member.
        return INIT if re.search(r"[\w>]$", h) else FUNCTION
    return FUNCTION if _AFTER_PARAMS.search(h) else DATA


# ---------------------------------------------------------------------------------------------
# Scanning a file.


def find_functions(text):
    """Yields (open_line, close_line) for every function body in `text`, 1-based."""
    lines = clean_source(text)
    stack = []  # [kind, line the scope opened on]
    header = []  # the text since the last boundary at namespace or class scope
    for line_no, line in enumerate(lines, start=1):
        for ch in line + "\n":
            top = stack[-1][0] if stack else NAMESPACE
            if top in (FUNCTION, BLOCK, DATA):
                if ch == "{":
                    stack.append([BLOCK if top != DATA else DATA, line_no])
                elif ch == "}":
                    kind, opened = stack.pop()
                    if kind == FUNCTION:
                        yield opened, line_no
                continue
            if top == INIT:
                header.append(ch)
                if ch == "{":
                    stack.append([INIT, line_no])
                elif ch == "}":
                    stack.pop()
                continue
            # Namespace or class scope.
            if ch == "{":
                kind = classify("".join(header))
                stack.append([kind, line_no])
                if kind == INIT:
                    header.append(ch)
                else:
                    header = []
            elif ch == "}":
                if stack:
                    stack.pop()
                header = []
            elif ch == ";":
                header = []
            else:
                header.append(ch)


def source_files(roots):
    """The .cc and .h files under `roots`, build* directories skipped, in a stable order."""
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("build"))
            for name in sorted(filenames):
                if name.endswith((".cc", ".h")):
                    yield os.path.join(dirpath, name)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def report_functions(limit, roots, out):
    for path in source_files(roots):
        text = read(path)
        raw = text.split("\n")
        for opened, closed in find_functions(text):
            length = closed - opened + 1
            if length > limit:
                out.write(f"{path}:{opened}: {length} lines: {raw[opened - 1].strip()[:90]}\n")


_SAYS_LONG = re.compile(r"\blong\b", re.IGNORECASE)


def explained(raw, opened):
    """Whether the comment above the function whose body opens on line `opened` (1-based) of
    `raw` (the file's lines) says why it is long. The signature is the run of code lines up to
    the body's `{`; the comment, the `//` lines right above it."""
    k = opened - 2  # the line above the `{` line, 0-based
    while k >= 0:
        line = raw[k].strip()
        if not line or line.startswith("//") or line.endswith((";", "}", "{")) or \
                line.startswith("#"):
            break
        k -= 1
    while k >= 0 and raw[k].strip().startswith("//"):
        if _SAYS_LONG.search(raw[k]):
            return True
        k -= 1
    return False


def report_unexplained(limit, roots, out):
    """Writes the long functions no comment explains; returns how many there are."""
    found = 0
    for path in source_files(roots):
        text = read(path)
        raw = text.split("\n")
        for opened, closed in find_functions(text):
            length = closed - opened + 1
            if length > limit and not explained(raw, opened):
                found += 1
                out.write(f"{path}:{opened}: {length} lines: {raw[opened - 1].strip()[:90]}\n")
    return found


def report_files(limit, roots, out):
    for path in source_files(roots):
        count = read(path).count("\n")
        if count > limit:
            out.write(f"{path}: {count} lines\n")


def main(argv):
    parser = argparse.ArgumentParser(
        usage="%(prog)s N DIR...\n       %(prog)s --max-file-lines M DIR...\n"
        "       %(prog)s --unexplained N DIR...",
        description="Lists functions longer than N lines, or files longer than M lines.")
    parser.add_argument("--max-file-lines", type=int, metavar="M",
                        help="list the files over M lines instead of the long functions")
    parser.add_argument("--unexplained", type=int, metavar="N",
                        help="list the functions over N lines that no comment explains, and "
                        "exit 1 when there are any")
    parser.add_argument("args", nargs="+", metavar="ARG", help="N (without the option), then DIRs")
    opts = parser.parse_args(argv)
    if opts.max_file_lines is not None:
        report_files(opts.max_file_lines, opts.args, sys.stdout)
        return 0
    if opts.unexplained is not None:
        found = report_unexplained(opts.unexplained, opts.args, sys.stdout)
        if found:
            sys.stderr.write(f"long-functions.py: {found} function(s) over {opts.unexplained} "
                             "lines with no comment above saying why they are long\n")
        return 1 if found else 0
    if len(opts.args) < 2 or not opts.args[0].isdigit():
        parser.error("expected N DIR...")
    report_functions(int(opts.args[0]), opts.args[1:], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
