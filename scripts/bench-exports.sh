#!/usr/bin/env bash
# The exports of a large simulated capture (default 64 hosts x 2 s, as issue #22 asks): for
# each format its size, time and the peak memory of the aggregator and of the CLI while
# exporting, and the viewers' rules over the file (podprof-check-export, which decodes it with
# the published schemas). Memory is reported as a ratio to the aggregator's resident size
# before the exports (the baseline of the same run). Part of scripts/bench.sh.
#
#   scripts/bench-exports.sh [HOSTS] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
hosts=${1:-64}
duration=${2:-2s}
b=$PWD/build/bin
dir=$(mktemp -d /tmp/podprof-bench-exports.XXXXXX)
pids=""
# The pids the pod's daemons wrote in their ready files ({"port", ..., "pid"}) in the demo's
# folder: the processes this run started, also when the demo failed before naming them.
ready_pids() { cat "$dir"/demo/*.json 2>/dev/null | tr -d ' ' | grep -o '"pid":[0-9]*' | cut -d: -f2; }
cleanup() {
  local all
  all=$(echo $pids $(ready_pids) | tr ' ' '\n' | sort -u | tr '\n' ' ')
  [ -n "${all// /}" ] && kill $all 2>/dev/null || true
  sleep 1
  rm -rf "$dir"
}
trap cleanup EXIT

echo "bench-exports: podprof demo --hosts $hosts --duration $duration"
"$b/podprof" demo --hosts "$hosts" --duration "$duration" --keep --format json \
  --dir "$dir/demo" >"$dir/demo.json" 2>"$dir/demo.err"
tr -d ' \n' <"$dir/demo.json" >"$dir/demo.compact"
field() { grep -o "\"$1\":\"[^\"]*\"" "$dir/demo.compact" | head -1 | cut -d'"' -f4; }
capture=$(field capture_id)
aggregator=$(field aggregator)
pids=$(grep -o '"pids":\[[0-9,]*\]' "$dir/demo.compact" | grep -o '[0-9][0-9]*' | tr '\n' ' ')
agg_pid=$(tr -d ' ' <"$dir/demo/aggregator.json" | grep -o '"pid":[0-9]*' | cut -d: -f2)
kib() { awk -v k="$1" '/^(VmHWM|VmRSS):/ && $1 == k":" {print $2}' "/proc/$agg_pid/status"; }
baseline_kib=$(kib VmRSS)
echo "capture $capture, aggregator $aggregator (pid $agg_pid), resident ${baseline_kib} KiB"

peak_mib=0
run_export() {  # name, format, output, extra flags...
  local name=$1 format=$2 out=$3
  shift 3
  echo 5 >"/proc/$agg_pid/clear_refs"  # resets the aggregator's peak to its current size
  local start end rc=0
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$dir/cli_kib" "$b/podprof" export "$capture" --format "$format" \
    -o "$out" --aggregator "$aggregator" --timeout 10m "$@" >"$dir/export.out" 2>&1 || rc=$?
  end=$(date +%s.%N)
  local agg_kib cli_kib bytes
  agg_kib=$(kib VmHWM)
  cli_kib=$(tail -1 "$dir/cli_kib")
  bytes=$(du -sb "$out" 2>/dev/null | cut -f1 || echo 0)
  echo "export_${name}_exit=$rc"
  echo "export_${name}_bytes=${bytes:-0}"
  echo "export_${name}_seconds=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}')"
  echo "export_${name}_aggregator_peak_mib=$((agg_kib / 1024))" \
    "(x$(awk -v a="$agg_kib" -v b="$baseline_kib" 'BEGIN {printf "%.2f", a / b}') of its" \
    "resident size before)"
  echo "export_${name}_cli_peak_mib=$((cli_kib / 1024))"
  [ $((agg_kib / 1024)) -gt "$peak_mib" ] && peak_mib=$((agg_kib / 1024))
  [ $((cli_kib / 1024)) -gt "$peak_mib" ] && peak_mib=$((cli_kib / 1024))
  [ "$rc" -eq 0 ] || sed 's/^/  /' "$dir/export.out"
  return 0
}

run_export perfetto perfetto "$dir/pod.pftrace"
"$b/podprof-check-export" perfetto "$dir/pod.pftrace" | head -12 || true
rm -f "$dir/pod.pftrace"
run_export xprof xprof "$dir/xprof"
"$b/podprof-check-export" xprof "$dir/xprof" | head -12 || true
rm -rf "$dir/xprof"
# The whole pod as Chrome JSON is past what viewers load: expect a refusal, then a narrow one.
run_export chrome chrome "$dir/pod.json"
run_export chrome_narrow chrome "$dir/narrow.json" --from 0ms --to 200ms \
  --hosts host-0,host-1,host-2,host-3
[ -f "$dir/narrow.json" ] && { "$b/podprof-check-export" chrome "$dir/narrow.json" | head -12 || true; }
echo "export_${hosts}x${duration}_peak_rss_mib=$peak_mib"
