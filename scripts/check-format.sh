#!/usr/bin/env bash
# Checks that every tracked .cc and .h file (build* folders aside) is as clang-format would
# write it under the repository's .clang-format; formats nothing. Prints each file that is not,
# with clang-format's first complaint, and exits 1 if there is any.
#   scripts/check-format.sh [SOURCE_DIR]       (CLANG_FORMAT=clang-format-14 to pick a binary)
# The file list is `git ls-files`; outside a git checkout (a source tarball) it is every .cc
# and .h under SOURCE_DIR except build*, node_modules and .venv folders.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null; then
  echo "check-format: $clang_format not found (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
[ -f .clang-format ] || { echo "check-format: no .clang-format in $(pwd)" >&2; exit 2; }

if listed=$(git ls-files -- '*.cc' '*.h' 2>/dev/null); then
  mapfile -t files < <(printf '%s\n' "$listed" | grep -Ev '(^|/)build[^/]*/' || true)
else
  mapfile -t files < <(find . \( -name 'build*' -o -name node_modules -o -name .venv \) -prune \
    -o \( -name '*.cc' -o -name '*.h' \) -type f -print | sed 's|^\./||' | sort)
fi
existing=()
for f in "${files[@]}"; do
  [ -f "$f" ] && existing+=("$f")  # a file deleted in the work tree is not checked
done

# clang-format in parallel; each complaint starts `path:line:col: error:`, so the files that
# fail are read back from those lines.
complaints=$(printf '%s\0' "${existing[@]}" |
  xargs -0 -n 16 -P "$(nproc 2>/dev/null || echo 2)" "$clang_format" --dry-run --Werror 2>&1 |
  grep -E '^[^ ]+:[0-9]+:[0-9]+: (error|warning):' || true)
mapfile -t failed < <(printf '%s\n' "$complaints" | sed -nE 's/^([^ :]+):[0-9]+:[0-9]+: .*/\1/p' |
  sort -u)

version=$("$clang_format" --version | head -n 1)
if [ "${#failed[@]}" -gt 0 ]; then
  for f in "${failed[@]}"; do
    printf '%s\n' "$complaints" | grep -F -m 1 "$f:"
  done
  echo "check-format: ${#failed[@]} of ${#existing[@]} files need clang-format ($version):" >&2
  printf '  %s\n' "${failed[@]}" >&2
  echo "  fix with: $clang_format -i ${failed[*]}" >&2
  exit 1
fi
echo "check-format: ${#existing[@]} files clang-formatted ($version)"
