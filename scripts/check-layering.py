#!/usr/bin/env python3
"""Checks every library's #includes against the table in docs/ARCHITECTURE.md.

Usage: scripts/check-layering.py [--root DIR] [--architecture FILE] [--direct]

The table's rows read `| \`lib/\` | owns | may include |` (a row may name several libraries,
as `sim/`, `loadgen/` do). A library may be a folder inside another's (`aggregator/capture/`, a
room of `aggregator/`): its files are its own, not the outer library's, and an include belongs to
the longest library its path starts with. In the "may include" column:
  * each backticked `x/` is a project library the row's libraries may include;
  * `x/` followed by a parenthesis that names some of the row's own libraries, as in
    "`export/` (`sim/`)", is allowed to those only;
  * "and below" (the aggregator's row) adds every library of the rows above it;
  * the rest (Abseil, gRPC, SQLite...) is prose about external libraries and is not checked.
The sentence "no library includes `cli/`, `agent/` or `aggregator/`" under the table is read too:
those (and the libraries inside them) are never allowed, "and below" or not, except among
themselves: inside `aggregator/`, the rows of its rooms decide.

The reading is transitive: a library may include what its row lists and, with those, whatever
they may include (the table lists direct dependencies, CMake links them PUBLIC; the direct
reading would fail stream/, ingest/, fleet/ and export/ for using common/'s status macros). A
library may always include itself, and libraries that share a row may include each other.

Every .cc and .h under each library's folder (node_modules and build* folders skipped) is
scanned for `#include "x/..."` where x is a library, `tests` or `bench`. tests/ and bench/ are
not libraries and may include anything, except that bench/ must not include tests/util/.

Prints each violation as `path:line: #include "..." : why` and exits 1 if there is any, else
prints a one-line summary and exits 0. A folder with C++ sources and no row is a failure too,
since nothing would check it.
"""

import argparse
import os
import re
import sys

UNCONSTRAINED = ("tests", "bench")  # not libraries: checked only for bench/ -> tests/util/
_LIB = re.compile(r"`(\w+(?:/\w+)*)/`")
_INCLUDE = re.compile(r'^\s*#\s*include\s*"((\w+)/[^"]*)"')
_NEVER = re.compile(r"no library includes ((?:`\w+/`(?:,\s*|\s+or\s+|\s+and\s+)?)+)")


class Row:
    def __init__(self, libs, cell):
        self.libs = libs  # the row's own libraries, e.g. ["sim", "loadgen"]
        self.cell = cell  # the "may include" text
        self.allowed = {lib: set() for lib in libs}  # library -> what it may include

    def text(self):
        return f"| {', '.join('`%s/`' % lib for lib in self.libs)} | ... | {self.cell} |"


def parse_architecture(text, transitive=True):
    """The table's rows, in order, with `allowed` filled in, and the never-included set."""
    rows = []
    for line in text.split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not line.lstrip().startswith("|"):
            continue
        libs = _LIB.findall(cells[0])
        if not libs or _LIB.sub("", cells[0]).strip(" ,"):
            continue  # the header, the |---| line, or a row that is not a library
        rows.append(Row(libs, cells[2]))

    never = set()
    m = _NEVER.search(text)
    if m:
        never = set(_LIB.findall(m.group(1)))

    for index, row in enumerate(rows):
        # Each backticked library outside parentheses, with the parenthesis that follows it.
        # (The match takes the parenthesis with it, so "(`sim/`)" is never read as a library
        # allowed: it names who, not what.)
        for m in re.finditer(r"`(\w+(?:/\w+)*)/`(\s*\(([^)]*)\))?", row.cell):
            if row.cell[:m.start()].count("(") > row.cell[:m.start()].count(")"):
                continue  # inside some other parenthesis
            # "`export/` (`sim/`)": a parenthesis naming the row's own libraries restricts it.
            only = [lib for lib in _LIB.findall(m.group(3) or "") if lib in row.libs]
            for lib in only or row.libs:
                row.allowed[lib].add(m.group(1))
        if re.search(r"\band below\b", row.cell):
            below = {lib for earlier in rows[:index] for lib in earlier.libs} - never
            for lib in row.libs:
                row.allowed[lib] |= below

    # Transitive: the table lists each library's direct dependencies, and what they may include
    # is included with them (CMake links them PUBLIC, so their headers are there). `stream/`
    # lists `trace/`, `trace/` lists `common/`, so `stream/` may include `common/`. The direct
    # reading fails the tree on such includes everywhere (stream/, ingest/, fleet/, export/
    # using common/'s status macros; agent/, sim/, loadgen/ using proto/ through stream/).
    changed = transitive
    while changed:
        changed = False
        for row in rows:
            for lib, allowed in row.allowed.items():
                more = set()
                for dep in allowed:
                    for other in rows:
                        more |= other.allowed.get(dep, set())
                more = (more - never - {lib}) - allowed
                if more:
                    allowed |= more
                    changed = True

    # Libraries that share a row are one layer and may include each other (`loadgen/` builds
    # its emulated hosts' captures from `sim/`'s pod model). Added after the closure, so a
    # row-mate does not lend its own allowances: `loadgen/` still may not include `export/`,
    # which the row allows to `sim/` only.
    for row in rows:
        for lib in row.libs:
            row.allowed[lib] |= set(row.libs) - {lib}
    return rows, never


def cxx_files(folder, skip=()):
    """The .cc and .h files under `folder`, except under the folders in `skip`."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith("build") and d != "node_modules"
                             and os.path.join(dirpath, d) not in skip)
        for name in sorted(filenames):
            if name.endswith((".cc", ".h")):
                yield os.path.join(dirpath, name)


def includes(path):
    """(line number, included path, its first folder) for each quoted #include."""
    with open(path, errors="replace") as f:
        for number, line in enumerate(f, start=1):
            m = _INCLUDE.match(line)
            if m:
                yield number, m.group(1), m.group(2)


def top(lib):
    """The top-level folder of a library: `aggregator` for `aggregator/capture`."""
    return lib.split("/", 1)[0]


def library_of(included, libraries):
    """The longest library (or unconstrained folder) `included` starts with, or None."""
    parts = included.split("/")[:-1]
    for n in range(len(parts), 0, -1):
        if "/".join(parts[:n]) in libraries:
            return "/".join(parts[:n])
    return parts[0] if parts and parts[0] in UNCONSTRAINED else None


def check(root, architecture, transitive=True):
    """The list of violation lines for the tree at `root`, and the count of files checked."""
    with open(architecture) as f:
        rows, never = parse_architecture(f.read(), transitive)
    row_of = {lib: row for row in rows for lib in row.libs}
    project = {top(lib) for lib in row_of} | set(UNCONSTRAINED)
    rel = lambda p: os.path.relpath(p, root)
    problems, checked = [], 0

    for lib, row in row_of.items():
        folder = os.path.join(root, lib)
        if not os.path.isdir(folder):
            problems.append(f"{os.path.relpath(architecture, root)}: `{lib}/` has a row but no "
                            f"folder")
            continue
        # The libraries inside this one check their own files.
        inner = {os.path.join(root, other) for other in row_of if other.startswith(lib + "/")}
        for path in cxx_files(folder, inner):
            checked += 1
            for number, included, _ in includes(path):
                target = library_of(included, row_of)
                if target is None or target == lib:
                    continue
                if top(target) in never and top(target) != top(lib):
                    why = f"no library includes {top(target)}/ (\"Nothing includes upwards\")"
                elif target in row.allowed[lib]:
                    continue
                else:
                    allowed = ", ".join(sorted(f"{a}/" for a in row.allowed[lib])) or "nothing"
                    why = (f"{lib}/ may include {allowed}; row: {row.text()}")
                problems.append(f"{rel(path)}:{number}: #include \"{included}\": {why}")

    bench = os.path.join(root, "bench")
    for path in cxx_files(bench) if os.path.isdir(bench) else ():
        checked += 1
        for number, included, _ in includes(path):
            if included.startswith("tests/util/"):
                problems.append(f"{rel(path)}:{number}: #include \"{included}\": bench/ must not "
                                f"include tests/util/")

    # A folder with C++ sources that the table does not name would go unchecked.
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if (os.path.isdir(folder) and name not in project and not name.startswith((".", "build"))
                and next(cxx_files(folder), None) is not None):
            problems.append(f"{name}/: holds C++ sources but has no row in "
                            f"{os.path.relpath(architecture, root)}")
    return problems, checked


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(here), help="the source tree")
    parser.add_argument("--architecture", help="default: ROOT/docs/ARCHITECTURE.md")
    parser.add_argument("--direct", action="store_true",
                        help="only what each row lists itself (not the default, see above)")
    opts = parser.parse_args(argv)
    architecture = opts.architecture or os.path.join(opts.root, "docs", "ARCHITECTURE.md")
    problems, checked = check(opts.root, architecture, transitive=not opts.direct)
    for line in problems:
        print(line)
    if problems:
        print(f"layering: {len(problems)} violation(s) in {checked} files", file=sys.stderr)
        return 1
    print(f"layering: {checked} files follow {os.path.relpath(architecture, opts.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
