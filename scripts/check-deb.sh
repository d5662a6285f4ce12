#!/usr/bin/env bash
# Builds the .deb with CPack, installs it on this machine with dpkg -i, checks the installed
# units with `systemd-analyze verify`, then removes the package again. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
if [ "$(id -u)" -ne 0 ]; then
  echo "check-deb: skipped (needs root for dpkg -i)"
  exit 0
fi
(cd "$build" && cpack -G DEB >/dev/null)
deb="$(ls -t "$build"/podprof_*.deb | head -1)"
echo "check-deb: built $deb ($(du -h "$deb" | cut -f1))"
cleanup() { dpkg --purge podprof >/dev/null 2>&1 || true; }
trap cleanup EXIT
dpkg -i "$deb" >/dev/null
for f in /usr/bin/podprof /usr/bin/podprof-agent /usr/bin/podprof-aggregator \
  /usr/lib/systemd/system/podprof-agent.service /usr/lib/systemd/system/podprof-aggregator.service \
  /etc/podprof/agent.toml /etc/podprof/aggregator.toml; do
  [ -e "$f" ] || { echo "check-deb: $f missing after dpkg -i" >&2; exit 1; }
done
getent passwd podprof >/dev/null || { echo "check-deb: no podprof user after dpkg -i" >&2; exit 1; }
systemd-analyze verify /usr/lib/systemd/system/podprof-agent.service \
  /usr/lib/systemd/system/podprof-aggregator.service
/usr/bin/podprof --help >/dev/null
echo "check-deb: dpkg -i ok, installed units verify, podprof runs"
