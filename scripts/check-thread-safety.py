#!/usr/bin/env python3
"""Checks every translation unit of the main build with clang's thread-safety analysis.

The tree is built with GCC, which ignores ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED and
the rest of absl/base/thread_annotations.h; clang checks them in its semantic pass. So this
runs `clang++ -fsyntax-only -Wthread-safety -Werror` over each source file of the build's
compile_commands.json (the product folders, tests/, bench/; generated protobuf code aside),
with the build's own include paths and defines: the cost of a parse, not of a second build.

Most of a parse is the libraries' headers (Abseil, gRPC, protobuf, GoogleTest: about 60% of
clang's time, measured with -ftime-trace), which this check has no business with: clang reports
nothing in a system header. So the files are grouped by the flags a header sees, and each group's
library and generated protobuf headers are parsed once, into a precompiled header that its files
then load (--no-pch parses every file whole, as before). The tree's own headers are never in a
PCH: each file parses them itself, and their functions are analysed there. The PCH is built with
the check's flags, and anything that goes wrong with one falls back to the whole parse: a PCH that
does not build, or a file that fails with it (which is then checked again without it, and only
that result counts).

    scripts/check-thread-safety.py [BUILD_DIR] [-j N] [--clang PATH] [--only REGEX] [--no-pch]

BUILD_DIR (default: build) must have been built: the generated protobuf and gRPC headers are
read from it. Prints each failing file's diagnostics and exits 1 if any file fails, 2 if the
check cannot run.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

# What the check adds: the analysis, its warnings as errors, and no code generation.
CHECK_FLAGS = ["-fsyntax-only", "-Wthread-safety", "-Werror"]
# GCC's flags that take the next argument as their value (and that the check drops).
DROPPED_WITH_VALUE = {"-o", "-MT", "-MQ", "-MF"}
# GCC-only flags clang refuses or warns about. The build's own warning flags go too (every
# -W...): which warnings GCC gives is the build's business; this check is about the analysis.
GCC_ONLY = {"-fno-gnu-unique", "-fconcepts", "-ffat-lto-objects", "-fno-var-tracking-assignments",
            "-fstack-clash-protection"}
GCC_ONLY_PREFIXES = ("-fconcepts-diagnostics-depth", "-flto=auto", "-flto-partition",
                     "-fdiagnostics-urls")

# The C++ libraries whose headers go into the precompiled headers, with the C++ standard
# library's (<string>, <vector>: no extension, no folder) and the build's generated headers. A
# library missing here is parsed by each file, as before: slower, not wrong. C headers
# (<unistd.h>, <sys/...>) stay out: they are cheap, and their macros should reach only the
# files that include them.
PCH_LIBRARIES = ("absl/", "google/protobuf/", "grpcpp/", "grpc/", "gtest/", "gmock/",
                 "nlohmann/", "CLI/", "boost/", "toml++/", "benchmark/", "re2/")
# The tests' own -D's (PODPROF_BIN_DIR and the like), which differ between test targets and no
# library header reads: a PCH is built without them, and each file's command line adds them.
PROJECT_MACRO_PREFIX = "-DPODPROF_"
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def clang_command(entry, clang):
    """The clang++ command checking `entry` (one compile_commands.json entry)."""
    if "arguments" in entry:
        args = list(entry["arguments"])
    else:
        args = shlex.split(entry["command"])
    if os.path.basename(args[0]) in ("ccache", "sccache"):
        args = args[1:]
    out = [clang]
    skip_next = False
    for arg in args[1:]:
        if skip_next:
            skip_next = False
            continue
        if arg in DROPPED_WITH_VALUE:
            skip_next = True
        elif arg in ("-c", "-MD", "-MMD", "-w") or arg.startswith("-g") or (
                arg.startswith("-W") and not arg.startswith("-Wp,")):
            continue
        elif arg in GCC_ONLY or arg.startswith(GCC_ONLY_PREFIXES):
            continue
        elif arg == entry["file"] or os.path.join(entry["directory"], arg) == entry["file"]:
            continue
        else:
            out.append(arg)
    return out + CHECK_FLAGS + [entry["file"]]


def sources(build_dir, root):
    """(file, entry) for each source file of the tree the build compiles, once each, largest
    first so that the longest parses start early."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    seen = {}
    for e in entries:
        path = os.path.normpath(os.path.join(e["directory"], e["file"]))
        rel = os.path.relpath(path, root)
        if rel.startswith("..") or rel.split(os.sep)[0].startswith("build"):
            continue  # outside the tree, or generated into a build folder
        if not os.path.isfile(path):
            continue  # removed since the build was configured: it is no longer compiled
        seen.setdefault(rel, dict(e, file=path))
    return sorted(seen.items(), key=lambda kv: -os.path.getsize(kv[1]["file"]))


def include_dirs(command, directory):
    """The -I folders of a clang command, in order, as absolute paths."""
    dirs = []
    for i, arg in enumerate(command):
        if arg == "-I" and i + 1 < len(command):
            dirs.append(command[i + 1])
        elif arg.startswith("-I") and arg != "-I":
            dirs.append(arg[2:])
    return [os.path.normpath(os.path.join(directory, d)) for d in dirs]


class HeaderScan:
    """Which library and generated headers each source file reaches through the tree's own
    headers: #include lines read as text (conditions ignored, so it may name more than a compile
    includes; what it names goes into a PCH, where a header nothing needs costs a little time)."""

    def __init__(self, build_dir):
        self.build_dir = build_dir
        self.lines = {}

    def _includes(self, path):
        if path not in self.lines:
            try:
                with open(path, errors="replace") as f:
                    self.lines[path] = INCLUDE.findall(f.read())
            except OSError:
                self.lines[path] = []
        return self.lines[path]

    def pch_headers(self, source, dirs):
        """The headers `source` reaches that belong in a PCH: '<absl/...>' spellings of library
        headers, and quoted absolute paths of headers generated into the build folder."""
        out, seen, todo = set(), set(), [source]
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            for kind, name in self._includes(path):
                here = [os.path.dirname(path)] if kind == '"' else []
                found = next((p for p in (os.path.normpath(os.path.join(d, name))
                                          for d in here + dirs) if os.path.isfile(p)), None)
                if found and found.startswith(self.build_dir + os.sep):
                    out.add(f'"{found}"')  # generated: protobuf and gRPC code, no locks
                elif found:
                    todo.append(found)  # the tree's own header: parsed by each file
                elif name.startswith(PCH_LIBRARIES) or ("." not in name and "/" not in name):
                    out.add(f"<{name}>")
        return out


def pch_key(command):
    """What a header sees of a file's command: everything but the file itself, its -I folders
    and the tests' own -D's."""
    key, skip_next = [], False
    for arg in command[1:-1]:
        if skip_next:
            skip_next = False
        elif arg == "-I":
            skip_next = True
        elif not arg.startswith(("-I", PROJECT_MACRO_PREFIX)):
            key.append(arg)
    return tuple(key)


def plan_pchs(files, commands, build_dir, workdir, clang):
    """[(pch_path, build_command, cwd, [rel...])]: one PCH for each group of files that share a
    pch_key and reach some generated header, or share one and reach none (a file without
    protobuf code should not load gRPC's). The header lists what the group's files include."""
    scan = HeaderScan(build_dir)
    groups = collections.defaultdict(lambda: ([], set(), []))
    for rel, entry in files:
        command = commands[rel]
        dirs = include_dirs(command, entry["directory"])
        headers = scan.pch_headers(entry["file"], dirs)
        generated = any(h.startswith('"') for h in headers)
        members, union, group_dirs = groups[(pch_key(command), generated)]
        members.append(rel)
        union.update(headers)
        group_dirs.extend(d for d in dirs if d not in group_dirs)
    plans = []
    for n, ((key, _), (members, headers, dirs)) in enumerate(sorted(groups.items())):
        if len(members) < 2 or not headers:
            continue  # one file gains nothing from a PCH of its own
        header = os.path.join(workdir, f"pch{n}.h")
        with open(header, "w") as f:
            f.writelines(f"#include {h}\n" for h in sorted(headers))
        flags = [a for a in key if a != "-fsyntax-only"]
        command = ([clang] + [f"-I{d}" for d in dirs] + flags +
                   ["-x", "c++-header", "-fpch-instantiate-templates", "-o", header + ".pch",
                    header])
        plans.append((header + ".pch", command, build_dir, members))
    return plans


def run_clang(command, cwd):
    """(returncode, diagnostics, seconds) of one clang run."""
    began = time.monotonic()
    run = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    return run.returncode, run.stdout, time.monotonic() - began


def check(rel, entry, command, pch):
    """(rel, returncode, diagnostics, seconds, note) for one file: with its group's PCH if it
    has one, and if it fails with it, again without (that result counts; note says so)."""
    if pch:
        rc, out, took = run_clang(command[:1] + ["-include-pch", pch] + command[1:],
                                  entry["directory"])
        if rc == 0:
            return rel, rc, out, took, None
        rc2, out2, took2 = run_clang(command, entry["directory"])
        note = None if rc2 else f"{rel}: failed with the PCH, passes without it:\n{out}"
        return rel, rc2, out2, took + took2, note
    return (rel,) + run_clang(command, entry["directory"]) + (None,)


def find_clang(asked):
    for name in [asked] if asked else ["clang++", "clang++-14"]:
        found = shutil.which(name)
        if found:
            return found
    return None


def build_pchs(pool, plans):
    """{rel: pch path} for the files whose group's PCH built, and the seconds it took. A PCH
    that fails to build is said on stderr and its files are parsed whole."""
    pch_of, took = {}, 0.0
    results = pool.map(lambda plan: run_clang(plan[1], plan[2]), plans)
    for (path, _, _, members), (rc, out, seconds) in zip(plans, results):
        took += seconds
        if rc == 0:
            pch_of.update((rel, path) for rel in members)
        else:
            print(f"check-thread-safety: no PCH for {len(members)} files (they are parsed "
                  f"whole):\n{out}", file=sys.stderr)
    return pch_of, took


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", nargs="?", default="build")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--clang", default=os.environ.get("CLANGXX"))
    parser.add_argument("--root", help="the source tree (default: this script's checkout)")
    parser.add_argument("--only", help="check only the files whose path (from the root) matches")
    parser.add_argument("--no-pch", action="store_true",
                        help="parse every file whole, with no precompiled headers")
    args = parser.parse_args()

    build_dir = os.path.abspath(args.build_dir)
    if not os.path.isfile(os.path.join(build_dir, "compile_commands.json")):
        print(f"check-thread-safety: no compile_commands.json in {build_dir}: configure and "
              "build it first (scripts/build.sh)", file=sys.stderr)
        return 2
    clang = find_clang(args.clang)
    if not clang:
        print("check-thread-safety: clang++ not found (scripts/install-deps.sh installs it)",
              file=sys.stderr)
        return 2
    root = os.path.abspath(args.root or os.path.join(os.path.dirname(__file__), ".."))

    files = sources(build_dir, root)
    if args.only:
        files = [kv for kv in files if re.search(args.only, kv[0])]
    commands = {rel: clang_command(entry, clang) for rel, entry in files}
    began = time.monotonic()
    failed, notes = [], []
    cpu = {}  # seconds of clang for tests/ and for the rest: what the tests add
    # The PCHs (tens of MB each) go beside the build, not into a /tmp that may be memory.
    with tempfile.TemporaryDirectory(prefix="thread-safety-pch-", dir=build_dir) as workdir, \
            concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        plans = [] if args.no_pch else plan_pchs(files, commands, build_dir, workdir, clang)
        pch_of, cpu["pch"] = build_pchs(pool, plans)
        for rel, rc, diagnostics, took, note in pool.map(
                lambda kv: check(kv[0], kv[1], commands[kv[0]], pch_of.get(kv[0])), files):
            group = "tests" if rel.startswith("tests" + os.sep) else "product"
            cpu[group] = cpu.get(group, 0) + took
            if note:
                notes.append(note)
            if rc != 0:
                failed.append(rel)
                sys.stdout.write(diagnostics)
    for note in notes:
        print(f"check-thread-safety: {note}", file=sys.stderr)
    took = time.monotonic() - began
    version = subprocess.run([clang, "--version"], stdout=subprocess.PIPE,
                             text=True).stdout.splitlines()[0]
    if failed:
        print(f"check-thread-safety: {len(failed)} of {len(files)} files fail ({version}, "
              f"{took:.0f} s):", file=sys.stderr)
        for rel in sorted(failed):
            print(f"  {rel}", file=sys.stderr)
        return 1
    split = ", ".join(f"{g} {t:.0f} s" for g, t in sorted(cpu.items()))
    pchs = len(set(pch_of.values()))
    print(f"check-thread-safety: {len(files)} files pass -Wthread-safety ({version}, -j "
          f"{args.jobs}, {pchs} PCHs for {len(pch_of)} files, {took:.0f} s; clang time: {split})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
