#!/usr/bin/env bash
# Installs what the demo needs (install-deps.sh --demo: the build toolchain and libraries, none
# of the test-only peers), builds the four binaries it runs, and runs podprof's main job: a
# capture of the built-in simulated pod (an aggregator, 4 simulated TPU v5p hosts and their
# agents, all on this machine), printing each host's clock correction, the top kernels pod-wide
# and the path of the merged Perfetto trace. Extra arguments go to `podprof demo` (e.g. --hosts
# 8 --generation v6e). scripts/test.sh installs and builds everything else.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --demo
jobs=$(nproc 2>/dev/null || echo 2)
# Configured as scripts/build.sh configures it; only the demo's targets are built.
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build build -j "$jobs" --target podprof podprof-aggregator podprof-agent podprof-simhost
./build/bin/podprof demo "$@"
