#!/usr/bin/env bash
# The real-profiler check: podprof (the bundle from scripts/bundle.sh) against a live profiler
# server, as one command well inside 10 minutes. On the lent GPU machine the workload is JAX
# (scripts/device_workload.py: a jitted model with jax.profiler.start_server); elsewhere it is
# podprof-simhost, which checks everything but the JAX-only steps (marked SKIP). Its CPU twin,
# `--against jax` with JAX on CPU (PYTHON=.venv/bin/python3, scripts/install-venv.sh), runs every
# step on any machine; scripts/test.sh runs it.
#
#   [PYTHON=python3] OUT=/tmp/out bash scripts/device-check.sh [--against jax|simhost] [--bundle DIR]
#
# Checks, each recorded PASS/FAIL/SKIP in $OUT/summary.txt with the exports beside it:
#   capture   `podprof capture --duration 2s` is complete, with kernels and events
#   stats     `podprof stats` lists kernels with counts; `podprof kernel` on the busiest
#   exports   the Perfetto trace and the XProf session are written and read back
#   facade    JAX's own client (`python3 -m jax.collect_profile`) captures through the agent's
#             XProf facade, and `podprof inspect` reads what it wrote          (JAX only)
#   compare   a trace JAX wrote itself (jax.profiler.trace) against what the capture stored
#             for the same program: kernels in both, mean durations side by side (JAX only)
# Exit status: 0 when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/podprof-device-check}
PYTHON=${PYTHON:-python3}  # the one with JAX
against=auto bundle=""
while [ $# -gt 0 ]; do
  case "$1" in
    --against) against=$2; shift 2 ;;
    --bundle) bundle=$2; shift 2 ;;
    *) echo "device-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
# Absolute: the facade step's --log_dir goes to the workload profiler, which refuses a relative
# repository root (and so does the facade).
OUT=$(cd "$OUT" && pwd)
exec > >(tee "$OUT/device-check.log") 2>&1
if [ "$against" = auto ]; then
  if "$PYTHON" -c 'import jax, sys; sys.exit(0 if any(d.platform == "gpu" for d in jax.devices()) else 1)' 2>/dev/null; then
    against=jax
  else
    against=simhost
  fi
fi
if [ -z "$bundle" ]; then bundle=$(ls -td dist/podprof-*-linux-x86_64 2>/dev/null | head -1); fi
if [ -z "$bundle" ]; then echo "device-check: no bundle: run scripts/bundle.sh first" >&2; exit 2; fi
B="$bundle/bin"
summary="$OUT/summary.txt"
failed=0
record() {  # record CHECK PASS|FAIL|SKIP DETAIL
  printf '%-8s %-5s %s\n' "$1" "$2" "$3" | tee -a "$summary"
  [ "$2" = FAIL ] && failed=$((failed + 1))
  return 0
}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait "${pids[@]}" 2>/dev/null  # not a bare wait: that would wait for the log's tee too
}
trap cleanup EXIT
wait_file() {  # wait_file PATH SECONDS
  for _ in $(seq $(($2 * 10))); do [ -s "$1" ] && return 0; sleep 0.1; done
  return 1
}
json() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

{
  echo "podprof device check, $(date -u +%FT%TZ), against $against"
  echo "bundle: $bundle ($("$B/podprof" --version 2>&1))"
  echo "kernel: $(uname -r); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  [ "$against" = jax ] && "$PYTHON" -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices())'
  echo
} > "$summary"
cat "$summary"

# The workload, then the aggregator and an agent on loopback (insecure).
rm -rf "$OUT/workload.json" "$OUT/aggregator.json" "$OUT/agent.json" "$OUT/sys" "$OUT/tmp"
mkdir -p "$OUT/sys" "$OUT/tmp"
if [ "$against" = jax ]; then
  "$PYTHON" scripts/device_workload.py --port 9999 --seconds 240 --trace-dir "$OUT/jax-trace" \
    --ready-file "$OUT/workload.json" > "$OUT/workload.log" 2>&1 &
  metrics=none
else
  "$B/podprof-simhost" --profiler-port=9999 --metrics-port=8431 --generation=v5p --counters \
    --host-name=device --ready-file="$OUT/workload.json" > "$OUT/workload.log" 2>&1 &
  metrics=127.0.0.1:8431
fi
pids+=($!)
wait_file "$OUT/workload.json" 180 || { record workload FAIL "not ready in 180 s; see workload.log"; exit 1; }
"$B/podprof-aggregator" --insecure --listen=127.0.0.1:0 --http-listen=127.0.0.1:0 \
  --db="$OUT/podprof.db" --ready-file="$OUT/aggregator.json" > "$OUT/aggregator.log" 2>&1 &
pids+=($!)
wait_file "$OUT/aggregator.json" 30 || { record start FAIL "aggregator not ready; see aggregator.log"; exit 1; }
A="127.0.0.1:$(json "$OUT/aggregator.json" "d['port']")"
"$B/podprof-agent" --insecure --listen=127.0.0.1:0 --advertise=127.0.0.1:0 \
  --profiler-service-listen=127.0.0.1:7102 --host-name=device --sysfs-root="$OUT/sys" \
  --temp-dir="$OUT/tmp" --workload-profiler=127.0.0.1:9999 --workload-metrics=$metrics \
  --aggregator="$A" --ready-file="$OUT/agent.json" > "$OUT/agent.log" 2>&1 &
pids+=($!)
wait_file "$OUT/agent.json" 30 || { record start FAIL "agent not ready; see agent.log"; exit 1; }
for _ in $(seq 100); do
  "$B/podprof" agents --aggregator "$A" --format json > "$OUT/agents.json" 2>/dev/null &&
    grep -q '"online"' "$OUT/agents.json" && break
  sleep 0.3
done

# capture
"$B/podprof" capture --duration 2s --aggregator "$A" --format json > "$OUT/capture.json" 2> "$OUT/capture.err"
state=$(json "$OUT/capture.json" "d.get('state', '')" 2>/dev/null)
id=$(json "$OUT/capture.json" "d.get('capture_id', '')" 2>/dev/null)
events=$(json "$OUT/capture.json" "sum(h.get('events', 0) for h in d.get('hosts', []))" 2>/dev/null)
if [ "$state" = complete ] && [ "${events:-0}" -gt 0 ]; then
  record capture PASS "$id complete, $events events"
else
  record capture FAIL "state '$state', events '${events:-}': $(head -c 400 "$OUT/capture.err")"
fi

# stats, and the busiest kernel described
if [ -n "$id" ] && "$B/podprof" stats "$id" --by kernel --aggregator "$A" --format json > "$OUT/stats.json" 2> "$OUT/stats.err" &&
   "$B/podprof" stats "$id" --aggregator "$A" > "$OUT/stats.txt" 2>&1; then
  kernels=$(json "$OUT/stats.json" "len(d['rows'])")
  busiest=$(json "$OUT/stats.json" "max(d['rows'], key=lambda r: r['total_ps'])['kernel']")
  counted=$(json "$OUT/stats.json" "sum(1 for r in d['rows'] if r['count'] > 0)")
  if [ "$kernels" -gt 0 ] && [ "$counted" = "$kernels" ] &&
     "$B/podprof" kernel "$busiest" --capture "$id" --aggregator "$A" > "$OUT/kernel.txt" 2>&1; then
    record stats PASS "$kernels kernels with counts; busiest $busiest (kernel.txt)"
  else
    record stats FAIL "$kernels kernels, $counted counted; podprof kernel $busiest: $(tail -c 300 "$OUT/kernel.txt")"
  fi
else
  record stats FAIL "$(head -c 400 "$OUT/stats.err")"
fi

# exports, read back
if [ -n "$id" ] && "$B/podprof" export "$id" -o "$OUT/$id.pftrace" --aggregator "$A" > "$OUT/export.log" 2>&1 &&
   "$B/podprof" export "$id" --format xprof -o "$OUT/xprof" --aggregator "$A" >> "$OUT/export.log" 2>&1; then
  xplane=$(find "$OUT/xprof" -name '*.xplane.pb' | head -1)
  if [ -s "$OUT/$id.pftrace" ] && [ -n "$xplane" ] &&
     "$B/podprof" inspect "$xplane" > "$OUT/xprof-inspect.txt" 2>&1; then
    record exports PASS "$(stat -c %s "$OUT/$id.pftrace") byte .pftrace; XProf session read back ($xplane)"
  else
    record exports FAIL "$(tail -c 300 "$OUT/export.log") $(tail -c 300 "$OUT/xprof-inspect.txt" 2>/dev/null)"
  fi
else
  record exports FAIL "$(tail -c 400 "$OUT/export.log")"
fi

if [ "$against" != jax ]; then
  record facade SKIP "needs JAX's own client (the GPU machine)"
  record compare SKIP "needs a trace JAX wrote itself (the GPU machine)"
else
  # JAX's client through the agent's XProf facade.
  # Under the agent's spool (--temp-dir): the facade writes nowhere else.
  rm -rf "$OUT/tmp/xprof/facade"
  if timeout 120 "$PYTHON" -m jax.collect_profile 7102 2000 --log_dir="$OUT/tmp/xprof/facade" --no_perfetto_link \
       > "$OUT/facade.log" 2>&1; then
    got=$(find "$OUT/tmp/xprof/facade" -name '*.xplane.pb' | head -1)
    if [ -n "$got" ] && "$B/podprof" inspect "$got" > "$OUT/facade-inspect.txt" 2>&1; then
      record facade PASS "jax.collect_profile wrote $got; podprof inspect reads it"
    else
      record facade FAIL "no readable .xplane.pb: $(tail -c 300 "$OUT/facade.log")"
    fi
  else
    record facade FAIL "jax.collect_profile: $(tail -c 400 "$OUT/facade.log")"
  fi
  # JAX's own trace against the capture, kernel by kernel.
  own=$(find "$OUT/jax-trace" -name '*.xplane.pb' | head -1)
  if [ -n "$own" ] && "$B/podprof" inspect "$own" --by kernel --format json > "$OUT/jax-inspect.json" 2> "$OUT/jax-inspect.err"; then
    python3 - "$OUT/jax-inspect.json" "$OUT/stats.json" > "$OUT/compare.txt" 2>&1 <<'PY'
import json, statistics, sys
trace = json.load(open(sys.argv[1]))
own = {r["kernel"]: r for r in trace["kernels"]}
on_cpu = all(c.get("device_type") == "CPU" for c in trace["chips"])
cap = {r["kernel"]: r for r in json.load(open(sys.argv[2]))["rows"]}
both = sorted(set(own) & set(cap), key=lambda k: -cap[k]["total_ps"])
print(f"kernels: {len(own)} in JAX's trace, {len(cap)} in the capture, {len(both)} in both")
print(f"{'kernel':40} {'jax mean':>12} {'podprof mean':>12} {'ratio':>7}")
ratios = []
for k in both[:20]:
    a, b = own[k]["mean_ps"], cap[k]["mean_ps"]
    ratios.append(b / a if a else 0)
    print(f"{k[:40]:40} {a / 1e6:10.2f}us {b / 1e6:10.2f}us {ratios[-1]:7.3f}")
# A GPU's kernel times are the device's: each of the five within 2x. JAX on CPU traced itself
# first, alone, and was captured later beside the agent, the aggregator and the stream on the
# same cores, which slows some ops several-fold (dot.1 3.7x in one clean-clone run, 1.07x in
# the next): there the five's median ratio must be within 2x, which a misread unit (ns for ps,
# 1000x) or a wrong op still fails.
close = (lambda r: 0.5 < r < 2)
timed = close(statistics.median(ratios[:5])) if on_cpu else all(close(r) for r in ratios[:5])
ok = len(both) >= max(1, min(len(own), len(cap)) // 2) and bool(ratios) and timed
print(f"timing: {'median of the top 5 (JAX on CPU)' if on_cpu else 'each of the top 5'} within 2x")
print("MATCH" if ok else "DIFFER")
PY
    verdict=$(tail -1 "$OUT/compare.txt")
    record compare "$([ "$verdict" = MATCH ] && echo PASS || echo FAIL)" "$(head -1 "$OUT/compare.txt") (compare.txt)"
  else
    record compare FAIL "JAX's own trace unreadable: $(head -c 300 "$OUT/jax-inspect.err" 2>/dev/null)"
  fi
fi

echo
echo "device-check: $failed failed; summary in $summary"
[ "$failed" -eq 0 ]
