#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite:
#   1. the main build (GCC): unit, malformed-input, CLI, integration, browser, hostile-request
#      and deployment tests (ctest labels unit, malformed, cli, integration, clickhouse, browser,
#      hostile, deploy), clang's thread-safety analysis over every source file of that build
#      (scripts/check-thread-safety.py; ctest label lint, run here beside ctest), and
#      podprof against the real peers: a JAX job, XProf, tpu-info, a current ClickHouse engine
#      (label realpeers, from .venv: scripts/install-venv.sh), and the Python client (python/,
#      label python, the same venv);
#   2. the sanitizer build (clang, AddressSanitizer + UBSan) of common/, trace/ and http/'s core
#      with the malformed-input tests and bounded libFuzzer runs (labels malformed, fuzz);
#   3. the ThreadSanitizer build (clang, build-tsan/, -DPODPROF_TSAN=ON) of the storage, agent and
#      aggregator unit tests (target tsan-tests, label tsan; the list is PODPROF_TSAN_TESTS in
#      CMakeLists.txt): Debian's Abseil is not built with TSan, so tests/tsan/absl_sync.cc
#      annotates absl::Mutex for it, and tsan_sync_test / tsan_reports_real_race prove both
#      halves (hand-overs not reported, real races reported). A cold build is about 7 minutes of
#      CPU (3.5 on two idle cores), the tests about 20 s (docs/TESTING.md);
#   4. the systemd units (verify and the security exposure gate) and, as root, the .deb
#      installed with dpkg -i and removed again;
#   5. the relocatable bundle (scripts/bundle.sh) proven with the system's libraries hidden
#      (scripts/check-bundle.sh), and scripts/device-check.sh against podprof-simhost and, its
#      CPU twin, against JAX on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
# The thread-safety check runs after the build, which generated the protobuf headers it reads,
# beside the ctest run, in the idle scheduling class: ctest leaves a core idle for much of its
# run (its pod tests hold the pod lock one at a time, its SERIAL ones run alone), and a
# SCHED_IDLE process only ever gets a core nothing else wants; any test process that wakes
# takes the core back at once, so the SERIAL tests' wake-up instants do not move as they
# would beside a unit test. ctest's lint label is this same check, so the run leaves it out.
mkdir -p build/test-artifacts
idle=()
if chrt --idle 0 true 2>/dev/null; then idle=(chrt --idle 0); fi
"${idle[@]}" python3 scripts/check-thread-safety.py build -j "$jobs" \
  >build/test-artifacts/thread-safety.log 2>&1 &
thread_safety=$!
ctest_rc=0
(cd build && ctest --output-on-failure -j "$jobs" -LE "soak|long|lint") || ctest_rc=$?
thread_safety_rc=0
wait "$thread_safety" || thread_safety_rc=$?
cat build/test-artifacts/thread-safety.log
if [ "$ctest_rc" -ne 0 ] || [ "$thread_safety_rc" -ne 0 ]; then exit 1; fi

if [ ! -f build-asan/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DPODPROF_MINIMAL=ON -DPODPROF_SANITIZE=ON
fi
cmake --build build-asan -j "$jobs"
(cd build-asan && ctest --output-on-failure -j "$jobs")

# Every TSan report fails its test (halt_on_error; the options and suppressions are the tests'
# ENVIRONMENT, set in CMakeLists.txt, so a bare ctest there runs the same).
if [ ! -f build-tsan/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPODPROF_TSAN=ON
fi
# clang 14's TSan cannot lay out its shadow memory under more than 28 bits of mmap randomisation
# (some newer kernels default to 32), and the build runs the tests too (to list them): there,
# both run with ASLR off.
tsan_run=()
if [ "$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)" -gt 28 ] &&
  setarch "$(uname -m)" -R true 2>/dev/null; then
  tsan_run=(setarch "$(uname -m)" -R)
fi
"${tsan_run[@]}" cmake --build build-tsan --target tsan-tests -j "$jobs"
(cd build-tsan && "${tsan_run[@]}" ctest --output-on-failure -j "$jobs" -L tsan)

bash scripts/check-units.sh build
bash scripts/check-deb.sh build

# The relocatable bundle, run with the system's libraries hidden, and the device check's
# non-GPU half (against podprof-simhost) from it.
bash scripts/bundle.sh build
bash scripts/check-bundle.sh
OUT=build/test-artifacts/device-check bash scripts/device-check.sh --against simhost
# Its CPU twin: every step, the JAX-only ones included, against JAX on CPU from the peers' venv.
PYTHON=.venv/bin/python3 OUT=build/test-artifacts/device-check-cpu \
  bash scripts/device-check.sh --against jax
