#!/usr/bin/env bash
# Checks the systemd units without a running systemd: installs the build into a staging root
# (as the .deb would lay it out), runs `systemd-analyze verify` on the staged units, and gates
# on `systemd-analyze security --offline=yes` with an exposure threshold, printing the scores.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
threshold="${PODPROF_EXPOSURE_THRESHOLD:-2.0}"
stage="$(mktemp -d /tmp/podprof-stage.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
DESTDIR="$stage" cmake --install "$build" --prefix /usr >/dev/null
# What verify looks up inside the root besides our files: the standard targets and kill(1).
mkdir -p "$stage/usr/lib/systemd/system" "$stage/usr/bin"
cp /usr/lib/systemd/system/*.target "$stage/usr/lib/systemd/system/" 2>/dev/null ||
  cp /lib/systemd/system/*.target "$stage/usr/lib/systemd/system/"
cp /usr/bin/kill "$stage/usr/bin/kill"
units=(podprof-agent.service podprof-aggregator.service)
paths=()
for u in "${units[@]}"; do paths+=("$stage/usr/lib/systemd/system/$u"); done
systemd-analyze verify --root="$stage" "${paths[@]}"
echo "check-units: systemd-analyze verify: ok"
for u in "${units[@]}"; do
  score="$(systemd-analyze security --offline=yes --root="$stage" "$u" 2>&1 |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
  echo "check-units: $u exposure $score (threshold $threshold)"
  systemd-analyze security --offline=yes --root="$stage" --threshold="$(awk "BEGIN{print int($threshold*10)}")" "$u" >/dev/null
done
