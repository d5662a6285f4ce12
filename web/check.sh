#!/usr/bin/env bash
# Checks web/'s pages (src/) and its tool config: formatted as prettier writes them
# (.prettierrc.json: 100 columns, as the C++) and clean under eslint (eslint.config.mjs).
# Changes nothing and downloads nothing: both tools come from web/node_modules, which `npm ci`
# installs from package-lock.json (CMake runs it at configure time). Exits 1 on any finding,
# 2 when the tools are missing. ctest runs it as web.check (label unit); `npm run check` too.
#   fix formatting with: (cd web && npm run format)
set -euo pipefail
cd "$(dirname "$0")"
for tool in prettier eslint; do
  if [ ! -x "node_modules/.bin/$tool" ]; then
    echo "web/check.sh: web/node_modules/.bin/$tool is missing: run \`npm ci\` in web/" >&2
    exit 2
  fi
done
status=0
if ! node_modules/.bin/prettier --check src eslint.config.mjs .prettierrc.json; then
  echo "web/check.sh: not formatted as prettier writes it; fix with: (cd web && npm run format)" >&2
  status=1
fi
if ! node_modules/.bin/eslint --max-warnings 0 .; then
  echo "web/check.sh: eslint found problems (above)" >&2
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "web/check.sh: prettier $(node_modules/.bin/prettier --version)" \
    "and eslint $(node_modules/.bin/eslint --version) find nothing"
fi
exit "$status"
