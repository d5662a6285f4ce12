#!/usr/bin/env bash
# Proves the bundle (scripts/bundle.sh) stands alone: unpacked into another folder, run with
# an empty environment (env -i) in a mount namespace where every library the bundle carries
# is hidden from the system's folders (bound over by /dev/null), `podprof --version` answers
# and `podprof demo` captures a simulated host end to end. The unbundled binary must fail
# there: the check proves the hiding too. Needs root (unshare -m).
#
#   bash scripts/check-bundle.sh [dist/podprof-<version>-linux-x86_64.tar.zst]
set -euo pipefail
cd "$(dirname "$0")/.."
archive=${1:-$(ls -t dist/podprof-*-linux-x86_64.tar.zst | head -1)}
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
  echo "check-bundle: SKIP: needs root and mount namespaces (unshare -m) to hide the system's libraries"
  exit 0
fi
size=$(stat -c %s "$archive")
if [ "$size" -gt $((40 * 1024 * 1024)) ]; then
  echo "check-bundle: FAIL: $archive is $((size / 1024 / 1024)) MiB, over 40 MiB" >&2
  exit 1
fi
where=$(mktemp -d /tmp/podprof-bundle-XXXXXX)
trap 'rm -rf "$where"' EXIT
tar -C "$where" --use-compress-program=unzstd -xf "$archive"
root=$(echo "$where"/podprof-*)
demo_dir="$where/demo"

# Inside the namespace: hide, then run. Output to the terminal; exit status says.
unshare -m bash -s "$root" "$demo_dir" "$PWD/build/bin/podprof" <<'INSIDE'
set -euo pipefail
root=$1 demo_dir=$2 unbundled=$3
hidden=0
for lib in "$root"/lib/*; do
  for dir in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/local/lib; do
    f="$dir/$(basename "$lib")"
    if [ -e "$f" ]; then mount --bind /dev/null "$(readlink -f "$f")"; hidden=$((hidden + 1)); fi
  done
done
echo "check-bundle: $hidden system libraries hidden"
if env -i "$unbundled" --version >/dev/null 2>&1; then
  echo "check-bundle: FAIL: the unbundled podprof still runs: nothing was hidden" >&2
  exit 1
fi
cd /
env -i PATH=/usr/bin:/bin "$root/bin/podprof" --version
env -i PATH=/usr/bin:/bin HOME="$demo_dir" "$root/bin/podprof" demo --hosts 1 --duration 500ms \
  --format json --dir "$demo_dir" > "$demo_dir.json"
state=$(grep -oP '"state": *"\K[a-z]+' "$demo_dir.json" | head -1)
if [ "$state" != "complete" ]; then
  echo "check-bundle: FAIL: the bundle's demo capture ended '$state'" >&2
  cat "$demo_dir.json" >&2
  exit 1
fi
echo "check-bundle: ok: podprof --version and a simulated capture ($state) from $root"
INSIDE
