#!/usr/bin/env python3
"""Checks every translation unit of the main build with clang's thread-safety analysis.

The tree is built with GCC, which ignores ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED and
the rest of absl/base/thread_annotations.h; clang checks them in its semantic pass. So this
runs `clang++ -fsyntax-only -Wthread-safety -Werror` over each source file of the build's
compile_commands.json (the product folders, tests/, bench/; generated protobuf code aside),
with the build's own include paths and defines: the cost of a parse, not of a second build.

    scripts/check-thread-safety.py [BUILD_DIR] [-j N] [--clang PATH] [--only REGEX]

BUILD_DIR (default: build) must have been built: the generated protobuf and gRPC headers are
read from it. Prints each failing file's diagnostics and exits 1 if any file fails, 2 if the
check cannot run.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
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


def check(rel, entry, clang):
    """(rel, returncode, diagnostics, seconds) for one file."""
    began = time.monotonic()
    run = subprocess.run(clang_command(entry, clang), cwd=entry["directory"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return rel, run.returncode, run.stdout, time.monotonic() - began


def find_clang(asked):
    for name in [asked] if asked else ["clang++", "clang++-14"]:
        found = shutil.which(name)
        if found:
            return found
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", nargs="?", default="build")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--clang", default=os.environ.get("CLANGXX"))
    parser.add_argument("--root", help="the source tree (default: this script's checkout)")
    parser.add_argument("--only", help="check only the files whose path (from the root) matches")
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
    began = time.monotonic()
    failed = []
    cpu = {}  # seconds of clang for tests/ and for the rest: what the tests add
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for rel, rc, diagnostics, took in pool.map(lambda kv: check(kv[0], kv[1], clang), files):
            group = "tests" if rel.startswith("tests" + os.sep) else "product"
            cpu[group] = cpu.get(group, 0) + took
            if rc != 0:
                failed.append(rel)
                sys.stdout.write(diagnostics)
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
    print(f"check-thread-safety: {len(files)} files pass -Wthread-safety ({version}, -j "
          f"{args.jobs}, {took:.0f} s; clang time: {split})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
