#!/usr/bin/env python3
"""Holds every product file to the threads docs/ARCHITECTURE.md lists.

Usage: scripts/check-threads.py [--root DIR] [--architecture FILE]

A thread is started in few places on purpose: periodic work is a `PeriodicThread`
(common/periodic.h), fork-join loops go through `ParallelFor` (common/parallel.h), and every other
thread of a daemon is a row of ARCHITECTURE.md's threads table. The paragraph under that table
that begins "Files that start threads" names, in backticks, the only product files that may
write `std::thread`, `std::jthread`, `std::async` or `.detach()`. This script scans every .cc and
.h of the product's folders (tests, bench, build folders and node_modules left out) and prints
each use elsewhere as `path:line: text`, and each listed file that no longer starts a thread
(the list must stay true), exiting 1 if there is any; else a one-line summary and exit 0.
`std::thread::hardware_concurrency` and `std::this_thread` start nothing and are not counted.
"""

import argparse
import os
import re
import sys

PRODUCT = ("agent", "aggregator", "analysis", "cli", "common", "export", "fleet", "harness",
           "http", "ingest", "insight", "kernelprof", "launch", "loadgen", "metrics", "proto",
           "report", "security", "sim", "storage", "stream", "trace", "web")
START = re.compile(r"std::(?:j?thread)\b(?!::(?:hardware_concurrency|id))|std::async\b|"
                   r"\.detach\(\)")
LISTED = re.compile(r"Files that start threads[^\n]*(?:\n(?!\n)[^\n]*)*")
PATH = re.compile(r"`([\w./-]+\.(?:cc|h))`")


def listed_files(architecture_text):
    """The backticked files of the paragraph that begins "Files that start threads"."""
    m = LISTED.search(architecture_text)
    if not m:
        return None
    return set(PATH.findall(m.group(0)))


def uses(path):
    """(line number, text) of each thread start in `path`, comments left out."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            code = line.split("//", 1)[0]
            if START.search(code):
                out.append((n, line.strip()))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description="Threads only where ARCHITECTURE.md lists them.")
    ap.add_argument("--root", default=".")
    ap.add_argument("--architecture", default=None)
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    arch = args.architecture or os.path.join(root, "docs", "ARCHITECTURE.md")
    with open(arch, encoding="utf-8") as f:
        allowed = listed_files(f.read())
    if allowed is None:
        print(f"{arch}: no paragraph beginning \"Files that start threads\"")
        return 1
    problems, starting = [], set()
    for top in PRODUCT:
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d != "node_modules" and not d.startswith("build")]
            for name in sorted(files):
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                found = uses(path)
                if found:
                    starting.add(rel)
                if found and rel not in allowed:
                    problems += [f"{rel}:{n}: {text} : a thread started where ARCHITECTURE.md's "
                                 "threads table does not list it (use PeriodicThread or "
                                 "ParallelFor, or add the thread to the table and the file to "
                                 "the list under it)" for n, text in found]
    for rel in sorted(allowed - starting):
        problems.append(f"{rel}: listed under ARCHITECTURE.md's threads table but starts no "
                        "thread")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"threads: {len(starting)} files start threads, each listed in {os.path.relpath(arch, root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
