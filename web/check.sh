#!/usr/bin/env bash
# Checks web/'s pages (src/), its tool config and the pages' tests (tests/web/*.mjs): formatted
# as prettier writes them (.prettierrc.json: 100 columns, as the C++) and clean under eslint
# (eslint.config.mjs). Both run from the repository's root, with web/'s config named: tests/web
# lies outside web/, where neither tool would find it. Changes nothing and downloads nothing:
# both tools come from web/node_modules, which `npm ci` installs from package-lock.json (CMake
# runs it at configure time). Exits 1 on any finding, 2 when the tools are missing. ctest runs
# it as web.check (label unit); `npm run check` too.
#   fix formatting with: (cd web && npm run format)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=web/node_modules/.bin
for tool in prettier eslint; do
  if [ ! -x "$bin/$tool" ]; then
    echo "web/check.sh: $bin/$tool is missing: run \`npm ci\` in web/" >&2
    exit 2
  fi
done
status=0
if ! "$bin/prettier" --config web/.prettierrc.json --check \
  web/src web/eslint.config.mjs web/.prettierrc.json tests/web/*.mjs; then
  echo "web/check.sh: not formatted as prettier writes it; fix with: (cd web && npm run format)" >&2
  status=1
fi
if ! "$bin/eslint" --config web/eslint.config.mjs --max-warnings 0 web tests/web; then
  echo "web/check.sh: eslint found problems (above)" >&2
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "web/check.sh: prettier $("$bin/prettier" --version)" \
    "and eslint $("$bin/eslint" --version) find nothing"
fi
exit "$status"
