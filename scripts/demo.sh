#!/usr/bin/env bash
# Installs dependencies, builds, and runs podprof's main job: a capture of the built-in simulated
# pod (an aggregator, 4 simulated TPU v5p hosts and their agents, all on this machine), printing
# each host's clock correction, the top kernels pod-wide and the path of the merged Perfetto
# trace. Extra arguments go to `podprof demo` (e.g. --hosts 8 --generation v6e).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/bin/podprof demo "$@"
