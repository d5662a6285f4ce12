#!/usr/bin/env bash
# Runs one `realpeers` test file with the pinned peers' Python (.venv, scripts/install-venv.sh).
# A missing venv or package fails the test with the command that installs it: never a skip.
#   tests/peers/run.sh BIN_DIR OUT_DIR TEST_FILE [pytest args...]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath -m "$1") out=$(realpath -m "$2") file=$(realpath -m "$3")
shift 3
venv=${PODPROF_VENV:-$root/.venv}
if [ ! -x "$venv/bin/python3" ]; then
  echo "realpeers: no virtual environment at $venv; install it with: bash scripts/install-venv.sh" >&2
  exit 1
fi
want=$(sha256sum "$root/tests/peers/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$venv/.podprof-requirements" 2>/dev/null)" != "$want" ]; then
  echo "realpeers: $venv does not hold tests/peers/requirements.txt as it is now;" \
       "reinstall it with: bash scripts/install-venv.sh" >&2
  exit 1
fi
mkdir -p "$out"
export PODPROF_BIN="$bin" PODPROF_TEST_OUT="$out" PODPROF_SOURCE="$root"
export PODPROF_FIXTURES="${PODPROF_FIXTURES:-$root/../shared/fixtures/xspace}"
# The peers must not reach anything beyond loopback, nor read a user's JAX/XLA settings.
unset XLA_FLAGS JAX_PLATFORMS TF_CPP_MIN_LOG_LEVEL
export JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=1 NO_PROXY='*' no_proxy='*'
export PYTHONDONTWRITEBYTECODE=1
# A test killed by ctest's timeout must still say where it hung: output unbuffered, each test's
# name printed as it ends (-v), and every thread's stack dumped when one passes
# faulthandler_timeout. (A CI run killed python.client at 300 s; -q had left no trace of which
# of its tests was running.)
export PYTHONUNBUFFERED=1
cd "$root/tests"
exec "$venv/bin/python3" -m pytest -v -p no:cacheprovider -o faulthandler_timeout=${PODPROF_PYTEST_HANG_S:-120} --basetemp="$out/tmp" "$file" "$@"
