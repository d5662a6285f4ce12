#!/usr/bin/env bash
# Installs dependencies, builds, and runs podprof's main job: the kernel statistics of a real
# TPU v6e capture (4 chips), printed as a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
fixtures="${PODPROF_FIXTURES_DIR:-$(pwd)/../shared/fixtures/xspace}"
./build/bin/podprof inspect "$fixtures/tpu_v6e_4chip_host_offload.xplane.pb" --top 15
