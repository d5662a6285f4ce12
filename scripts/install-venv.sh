#!/usr/bin/env bash
# The real peers' virtual environment: .venv at the top of the checkout, holding exactly
# tests/peers/requirements.txt (pip --require-hashes: every wheel's sha256 is pinned). The
# `realpeers` tests (tests/jax, tests/peers) run with .venv/bin/python3 and download nothing.
# Idempotent: a venv whose stamp matches the requirements file is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
req=tests/peers/requirements.txt
venv=${PODPROF_VENV:-.venv}
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python3" ] && [ "$(cat "$venv/.podprof-requirements" 2>/dev/null)" = "$want" ]; then
  echo "install-venv: $venv matches $req"
  exit 0
fi
# The system's Python 3.11 (Debian 12's); jax 0.10 is the last release for 3.11.
python=$(command -v python3)
"$python" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' || {
  echo "install-venv: $req is pinned for CPython 3.11; $python is $("$python" --version 2>&1)" >&2
  exit 1
}
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python3" -m pip install --quiet --disable-pip-version-check --no-deps \
  --require-hashes --only-binary=:all: -r "$req"
"$venv/bin/python3" -m pip check
echo "$want" > "$venv/.podprof-requirements"
echo "install-venv: installed $(grep -c '==' "$req") packages into $venv"
