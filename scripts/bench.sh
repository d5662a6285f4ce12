#!/usr/bin/env bash
# Builds and runs every benchmark (each prints ratios against a baseline measured in the same
# run) and the ten-minute soak test (ctest label soak). Takes about a quarter of an hour on two
# cores; not part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
b=build/bin
"$b/bench_xspace_reader"
"$b/bench_simhost_generate"
"$b/bench_agent_overhead"
"$b/bench_store"
"$b/bench_insight"
"$b/bench_insight" --kernel-profiling
"$b/bench_alignment" --hosts 8
"$b/bench_alignment" --hosts 64
"$b/bench_load" --hosts 256 --captures 4 --duration-ms 500
bash scripts/bench-exports.sh 64 2s
node bench/bench_web_page.mjs --bin "$b" --hosts 64 --loads 5
JAX_PLATFORMS=cpu .venv/bin/python3 bench/bench_python.py --bin "$b" --hosts 64 --chips 4
python3 bench/bench_sql.py --bin "$b" --hosts 64 --chips 4
(cd build && ctest --output-on-failure -L "soak|long")
