#!/usr/bin/env bash
# Configures and builds podprof into build/ (Ninja, ccache). Extra arguments go to CMake: on a
# fresh build/ with the defaults below, on an existing one as a reconfigure (so that, say,
# -DPODPROF_SANITIZE=ON takes effect there too; what the cache holds stays unless given).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [ "$#" -gt 0 ]; then
  cmake -S . -B build "$@"
fi
cmake --build build -j "$jobs"
