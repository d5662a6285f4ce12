#!/usr/bin/env bash
# docs/OPERATING.md's "Running as services, with mutual TLS", run as written: the shell blocks marked
# `<!-- deploy-test: NAME -->` are extracted and run, so the steps cannot drift from what works.
#
# Two hosts, each a directory standing in for its root file system: podprof-agg (the
# aggregator's, also the admin machine where the CA and the operator's files are made: HOME is
# its /root) and tpu-host-0 (an agent's). Each documented address becomes a loopback address of
# its own (10.a.b.c -> 127.a.b.c), and `podprof-agg:7100` the aggregator's real address.
# Real tools do the work: cmake --install, systemd-sysusers and systemd-tmpfiles (--root=the
# host), systemctl enable (--root), systemd-analyze verify, openssl, the installed binaries.
# What needs a running systemd is done here the way it would do it, from the installed unit:
# `scp ... root@HOST:/path` copies into that host's directory, and `systemctl enable --now`
# sets up $CREDENTIALS_DIRECTORY from the unit's LoadCredential= lines (failing, as systemd
# does, when a source file is missing), the unit's state and runtime directories and
# NOTIFY_SOCKET, then runs its ExecStart= as the unit's User= (the uid systemd-sysusers gave
# it in that host's /etc/passwd) and waits for READY=1. The operator's and a browser's
# certificates then reach the running aggregator: `podprof agents` (the page's command), a
# pod capture through the agent, and the web API with the PKCS#12 file, as curl stands in for
# the browser at https://localhost (the ssh tunnel's end; no sshd is run).
#
#   tests/deploy/operating_services_test.sh SOURCE_DIR BUILD_DIR
# SOURCE_DIR gives docs/OPERATING.md and scripts/; the units and binaries are BUILD_DIR's install.
# Needs root (users and ownership inside the hosts' roots) and systemd's tools: exit 77 (skip)
# without them. PODPROF_KEEP_TEST_DIR=1 keeps the work directory.
set -euo pipefail
umask 022
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
doc=$src/docs/OPERATING.md
if [[ $(id -u) -ne 0 ]]; then echo "operating_services_test: skipped (needs root)"; exit 77; fi
for tool in systemd-analyze systemd-sysusers systemd-tmpfiles systemctl setpriv openssl curl; do
  command -v "$tool" >/dev/null || { echo "operating_services_test: skipped (no $tool)"; exit 77; }
done
py=$(command -v /usr/bin/python3 || command -v python3)

t=$(mktemp -d "${TMPDIR:-/tmp}/podprof-deploy.XXXXXX")
# The daemons run as the podprof user: it must be able to reach the hosts' binaries.
chmod 755 "$t"
roots=$t/hosts
agg_host=podprof-agg agent_host=tpu-host-0
RA=$roots/$agg_host RT=$roots/$agent_host
mkdir -p "$RA/root" "$RT" "$t/checkout" "$t/stage" "$t/logs" "$t/run" "$t/blocks"
chmod 700 "$RA/root"
# The page's commands run from the top of a checkout: its scripts, and `build`.
ln -s "$src/scripts" "$t/checkout/scripts"
ln -s "$build" "$t/checkout/build"
: > "$t/pids"

# Every process this test starts names $t on its command line: a pid that no longer does has
# exited and may be someone else's now.
ours() { tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | grep -qF "$t"; }
cleanup() {
  local pid
  while read -r pid; do ! ours "$pid" || kill "$pid" 2>/dev/null || true; done < "$t/pids"
  sleep 0.5
  while read -r pid; do ! ours "$pid" || kill -9 "$pid" 2>/dev/null || true; done < "$t/pids"
  if [[ -n ${PODPROF_KEEP_TEST_DIR:-} ]]; then echo "kept $t"; else rm -rf "$t"; fi
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
die() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
free_port() {
  "$py" -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$1"
}
agg_port=$(free_port 127.0.0.2) http_port=$(free_port 127.0.0.1) agent_port=$(free_port 127.0.1.17)
agg_addr=127.0.0.2:$agg_port

# The fenced block after `<!-- deploy-test: NAME -->`.
block() {
  awk -v marker="<!-- deploy-test: $1 -->" '
    $0 == marker { found = 1; next }
    found == 1 && /^```/ { found = 2; next }
    found == 2 && /^```/ { exit }
    found == 2 { print }' "$doc"
}

# The stand-ins for what needs other machines or a running systemd, sourced by every block.
cat > "$t/shims.sh" <<'SHIMS'
# cmake --install: into this host's root (DESTDIR), the files hard-linked from one staging copy
# so that two hosts do not copy the binaries twice.
cmake() {
  if [[ ${1:-} != --install ]]; then command cmake "$@"; return; fi
  [[ -d $stage/usr ]] || DESTDIR=$stage command cmake "$@" >/dev/null
  cp -a --link "$stage/usr" "$R/"
  mkdir -p "$R/etc" && cp -a "$stage/etc/." "$R/etc/"
}
systemd-sysusers() { command systemd-sysusers --root="$R" "$@"; }
systemd-tmpfiles() { command systemd-tmpfiles --root="$R" "$@"; }
# scp [-p...] FILE... [USER@]HOST:DIR/ -> that host's root.
scp() {
  local files=() a
  for a; do [[ $a == -* ]] || files+=("$a"); done
  local dest=${files[-1]}
  unset 'files[-1]'
  [[ $dest == *:* ]] || { cp -p "${files[@]}" "$dest"; return; }
  local host=${dest%%:*} path=${dest#*:}
  host=${host#*@}
  [[ -d $roots/$host ]] || { echo "scp: $host: no such host" >&2; return 1; }
  [[ -d $roots/$host$path ]] || { echo "scp: $path: no such directory on $host" >&2; return 1; }
  cp -p "${files[@]}" "$roots/$host$path"
}
unit_values() { sed -n "s/^$2=//p" "$1"; }
# What systemd does for `systemctl enable --now UNIT` on the unit's host.
start_unit() {
  local unit=${1%.service}.service host
  case $unit in
    podprof-aggregator.service) host=$agg_host ;;
    podprof-agent.service) host=$agent_host ;;
    *) echo "systemctl: unit $unit is not podprof's" >&2; return 1 ;;
  esac
  local R=$roots/$host
  local f=$R/usr/lib/systemd/system/$unit
  [[ -f $f ]] || { echo "systemctl: Unit $unit does not exist on $host" >&2; return 1; }
  # As scripts/check-units.sh: verify looks up the standard targets and kill(1) in the root.
  # (--remove-destination: never write through a hard link into the other host's files.)
  cp --remove-destination /usr/lib/systemd/system/*.target "$R/usr/lib/systemd/system/" 2>/dev/null ||
    cp --remove-destination /lib/systemd/system/*.target "$R/usr/lib/systemd/system/"
  cp --remove-destination /usr/bin/kill "$R/usr/bin/kill"
  command systemd-analyze verify --root="$R" "$f" || return 1
  command systemctl --root="$R" enable "$unit" 2>/dev/null || return 1

  local user ids uid gid
  user=$(unit_values "$f" User)
  ids=$(awk -F: -v u="$user" '$1 == u { print $3 ":" $4 }' "$R/etc/passwd")
  [[ -n $ids ]] || { echo "$unit: Failed to determine user credentials: User=$user not in $host's /etc/passwd" >&2; return 1; }
  uid=${ids%%:*} gid=${ids##*:}

  # LoadCredential=ID:PATH: PATH read as root when the unit starts, given to it as
  # $CREDENTIALS_DIRECTORY/ID, readable by its user only.
  local creds=$t/run/credentials/$unit line id path
  mkdir -p "$creds"
  while read -r line; do
    id=${line%%:*} path=${line#*:}
    if [[ ! -f $R$path ]]; then
      echo "$unit: Failed to set up credentials: $path: No such file or directory (LoadCredential=$line on $host)" >&2
      return 1
    fi
    cp "$R$path" "$creds/$id"
    chmod 400 "$creds/$id"
  done < <(unit_values "$f" LoadCredential)
  chown -R "$uid:$gid" "$creds"
  chmod 500 "$creds"

  local env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
             "USER=$user" "LOGNAME=$user" "HOME=$R/var/lib/$user" "CREDENTIALS_DIRECTORY=$creds")
  local d state=
  for d in $(unit_values "$f" StateDirectory); do
    state=$R/var/lib/$d
    mkdir -p "$state" && chown "$uid:$gid" "$state" && chmod 750 "$state"
    env+=("STATE_DIRECTORY=$state")
  done
  for d in $(unit_values "$f" RuntimeDirectory); do
    mkdir -p "$R/run/$d" && chown "$uid:$gid" "$R/run/$d" && chmod 750 "$R/run/$d"
    env+=("RUNTIME_DIRECTORY=$R/run/$d")
  done
  for d in $(unit_values "$f" ConfigurationDirectory); do env+=("CONFIGURATION_DIRECTORY=$R/etc/$d"); done

  # Type=notify: systemd listens on NOTIFY_SOCKET and calls the unit started at READY=1.
  local sock=$t/run/${unit%.service}.notify notes=$t/logs/${unit%.service}.notify
  : > "$notes"
  "$py" - "$sock" "$notes" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
with open(sys.argv[2], "a") as f:
    while True:
        f.write(s.recv(65536).decode(errors="replace").replace("\n", " ") + "\n")
        f.flush()
PY
  echo $! >> "$t/pids"
  local i
  for i in $(seq 100); do [[ -S $sock ]] && break; sleep 0.05; done
  env+=("NOTIFY_SOCKET=$sock")

  # ExecStart= as systemd expands it: ${STATE_DIRECTORY}, and the host's paths.
  local cmdline argv
  cmdline=$(unit_values "$f" ExecStart)
  cmdline=${cmdline//'${STATE_DIRECTORY}'/$state}
  cmdline=$(sed -E "s#(^|[ =])/(usr|etc)/#\\1$R/\\2/#g" <<<"$cmdline")
  read -ra argv <<<"$cmdline"
  local log=$t/logs/${unit%.service}.log
  (cd / && exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- env -i "${env[@]}" "${argv[@]}") \
    >> "$log" 2>&1 &
  local pid=$!
  echo "$pid" >> "$t/pids"
  echo "$pid" > "$t/run/${unit%.service}.pid"
  for i in $(seq 300); do
    grep -q READY=1 "$notes" && { echo "systemctl: started $unit on $host (READY=1, pid $pid)"; return 0; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "$unit: did not become ready; its log:" >&2
  tail -20 "$log" >&2
  return 1
}
systemctl() {
  case ${1:-} in
    daemon-reload) return 0 ;;   # nothing is running; units are read when they start
    enable)
      shift
      [[ ${1:-} == --now ]] || { echo "systemctl (test): only enable --now" >&2; return 2; }
      shift
      local u
      for u; do start_unit "$u" || return 1; done ;;
    *) echo "systemctl (test): $1 is not one of docs/OPERATING.md's steps" >&2; return 2 ;;
  esac
}
SHIMS

# Runs block NAME on host root R with HOME=$R/root. The block's addresses are mapped, and
# /etc/podprof where a path starts is the host's (scp's HOST:/etc/... is mapped by scp itself).
run_block() {
  local name=$1 R=$2 text
  text=$(block "$name")
  [[ -n $text ]] || die "docs/OPERATING.md has no block marked <!-- deploy-test: $name -->"
  text=$(sed -E -e 's/(^|[^0-9.])10\.([0-9]+\.[0-9]+\.[0-9]+)/\1127.\2/g' \
                -e "s#podprof-agg:7100#$agg_addr#g" \
                -e "s#(^|[[:space:]])/etc/podprof#\\1$R/etc/podprof#g" <<<"$text")
  { echo 'source "$t/shims.sh"'; echo 'set -euo pipefail'; echo "$text"; } > "$t/blocks/$name.sh"
  { echo "--- docs/OPERATING.md block '$name' on ${R##*/}:"; sed 's/^/    /' <<<"$text"; } >&2
  (cd "$t/checkout" && env t="$t" roots="$roots" stage="$t/stage" R="$R" HOME="$R/root" \
     agg_host="$agg_host" agent_host="$agent_host" py="$py" \
     PATH="$RA/usr/bin:$PATH" bash "$t/blocks/$name.sh")
}

# 1. Install on both hosts.
for R in "$RA" "$RT"; do run_block install "$R" || die "the install block failed on ${R##*/}"; done
for R in "$RA" "$RT"; do
  gid=$(awk -F: '$1 == "podprof" { print $3 }' "$R/etc/group")
  have=$(stat -c '%a %U %g' "$R/etc/podprof/tls" 2>&1)
  [[ -n $gid && $have == "750 root $gid" ]] && pass "install on ${R##*/}: /etc/podprof/tls 0750 root:podprof" ||
    fail "install on ${R##*/}: /etc/podprof/tls is '$have', the podprof group '$gid'"
done

# 2. Certificates, made on the admin machine and copied to the hosts.
run_block certificates "$RA" || die "the certificates block failed"

# 3. What an operator sets (docs/OPERATING.md: point every agent at the aggregator), and this test's
# ports; the agent's workload is a simulated TPU host on its loopback address.
toml_set() {  # FILE SECTION KEY VALUE: replaces the key's line in [SECTION] ("" = top level)
  awk -v sec="$2" -v key="$3" -v val="$4" '
    /^\[/ { cur = $0; gsub(/^\[|\]$/, "", cur) }
    cur == sec && !done && $0 ~ "^" key " *=" { print key " = " val; done = 1; next }
    { print }
    END { if (!done) exit 1 }' "$1" > "$1.new" && mv "$1.new" "$1" ||
    die "toml_set: no key $3 in [$2] of $1"
}
toml_set "$RA/etc/podprof/aggregator.toml" "" listen "\"$agg_addr\""
toml_set "$RA/etc/podprof/aggregator.toml" http listen "\"127.0.0.1:$http_port\""
"$RT/usr/bin/podprof-simhost" --bind 127.0.1.17 --profiler-port 0 --metrics-port 0 \
  --generation v5p --hosts 1 --host-index 0 --ready-file "$t/run/simhost.json" \
  > "$t/logs/simhost.log" 2>&1 &
echo $! >> "$t/pids"
for _ in $(seq 100); do [[ -s $t/run/simhost.json ]] && break; sleep 0.1; done
workload_port=$(sed -n 's/.*"profiler_port": *\([0-9]*\).*/\1/p' "$t/run/simhost.json")
metrics_port=$(sed -n 's/.*"metrics_port": *\([0-9]*\).*/\1/p' "$t/run/simhost.json")
[[ -n $workload_port && -n $metrics_port ]] || die "podprof-simhost did not start: $(cat "$t/logs/simhost.log")"
a=$RT/etc/podprof/agent.toml
toml_set "$a" "" listen "\"127.0.1.17:$agent_port\""
toml_set "$a" "" aggregator "\"$agg_addr\""
toml_set "$a" "" advertise "\"127.0.1.17:$agent_port\""
toml_set "$a" "" host_name "\"$agent_host\""
toml_set "$a" "" profiler_service_listen '"none"'
toml_set "$a" http listen '"off"'
toml_set "$a" workload profiler "[\"127.0.1.17:$workload_port\"]"
toml_set "$a" workload metrics "[\"127.0.1.17:$metrics_port\"]"

# 4. Start both units as docs/OPERATING.md says.
run_block start "$RA" || die "the start block failed (systemctl enable --now)"
for u in podprof-aggregator podprof-agent; do
  grep -q "mutual TLS" "$t/logs/$u.log" && pass "$u: $(grep -m1 -o 'mutual TLS.*' "$t/logs/$u.log" | cut -c1-160)" ||
    fail "$u logs no 'mutual TLS' line: $(tail -5 "$t/logs/$u.log")"
done
# Both run as the podprof user of their host, as User= says.
for u in podprof-aggregator podprof-agent; do
  R=$RA; [[ $u == podprof-agent ]] && R=$RT
  want=$(awk -F: '$1 == "podprof" { print $3 }' "$R/etc/passwd")
  have=$(awk '/^Uid:/ { print $2 }' "/proc/$(cat "$t/run/$u.pid")/status")
  [[ -n $want && $have == "$want" ]] && pass "$u runs as podprof (uid $have)" || fail "$u runs as uid $have, podprof is $want"
done
for _ in $(seq 100); do grep -q "agent $agent_host registered from" "$t/logs/podprof-aggregator.log" && break; sleep 0.1; done
grep -q "agent $agent_host registered from" "$t/logs/podprof-aggregator.log" &&
  pass "the aggregator logs: $(grep -m1 -o "agent $agent_host registered from.*" "$t/logs/podprof-aggregator.log")" ||
  fail "$agent_host never registered: $(tail -5 "$t/logs/podprof-agent.log")"

# 5. The operator's command from docs/OPERATING.md, with the files make-certs wrote for alice.
if out=$(run_block operator "$RA") && grep -q "$agent_host" <<<"$out"; then
  pass "podprof agents (docs/OPERATING.md, alice's certificate) lists $agent_host"
else
  fail "podprof agents (docs/OPERATING.md): $out"
fi
tls=(--aggregator "$agg_addr" --tls-cert "$RA/root/.config/podprof/tls/alice.crt"
     --tls-key "$RA/root/.config/podprof/tls/alice.key" --tls-ca "$RA/root/.config/podprof/tls/ca.crt")
status=0; out=$("$RA/usr/bin/podprof" --aggregator "$agg_addr" agents 2>&1) || status=$?
[[ $status == 3 ]] && pass "plaintext to the aggregator is refused (exit 3: $(head -1 <<<"$out"))" ||
  fail "plaintext podprof agents: exit $status: $out"
# The aggregator dials the agent at its advertised address under the agent's certificate.
if out=$("$RA/usr/bin/podprof" "${tls[@]}" capture --hosts "$agent_host" --duration 300ms 2>&1); then
  pass "a capture of $agent_host through both daemons completes"
else
  fail "podprof capture --hosts $agent_host: $out"
fi

# 6. The browser's PKCS#12 (docs/OPERATING.md) against the web API at https://localhost, where the ssh
# tunnel would deliver it.
export PODPROF_P12_PASSWORD=test-p12-password
run_block browser "$RA" >/dev/null || die "the browser block failed"
p12=$RA/root/podprof-browser/alice.p12 ca=$RA/root/podprof-browser/ca.crt
if out=$(curl -sS --fail --cacert "$ca" --cert-type P12 --cert "$p12:$PODPROF_P12_PASSWORD" \
           "https://localhost:$http_port/api/v1/agents" 2>&1) && grep -q "$agent_host" <<<"$out"; then
  pass "https://localhost:$http_port/api/v1/agents with alice.p12 lists $agent_host"
else
  fail "the web API with alice.p12: $out"
fi
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" --cert-type P12 \
         --cert "$p12:$PODPROF_P12_PASSWORD" "https://localhost:$http_port/") || true
[[ $code == 200 ]] && pass "the captures page over the tunnel's name: 200" || fail "GET / with alice.p12: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" "https://localhost:$http_port/api/v1/agents") || true
[[ $code != 200 ]] && pass "without a client certificate the web API answers nothing (${code})" ||
  fail "the web API answered 200 without a client certificate"

# 7. Each host's /etc/podprof/tls holds its unit's files and nothing else; no host holds the CA's key.
check_tls_dir() {
  local R=$1 want=$2 have
  have=$(cd "$R/etc/podprof/tls" && ls -A | sort | tr '\n' ' ')
  [[ $have == "$want" ]] && pass "${R##*/}:/etc/podprof/tls: $have" ||
    fail "${R##*/}:/etc/podprof/tls holds '$have', not '$want'"
}
check_tls_dir "$RA" "aggregator.crt aggregator.key ca.crt "
check_tls_dir "$RT" "agent.crt agent.key ca.crt "
ca_key=$RA/root/podprof-ca/ca.key
[[ -f $ca_key ]] || fail "no CA key at ~/podprof-ca/ca.key"
for R in "$RA" "$RT"; do
  while IFS= read -r -d '' f; do
    cmp -s "$f" "$ca_key" && fail "${R##*/}: ${f#"$R"} is the CA's key"
  done < <(find "$R/etc" -type f -print0)
done
pass "no host's /etc holds the CA's key"

# 8. SIGTERM, as systemctl stop sends it: STOPPING=1, and gone within TimeoutStopSec.
for u in podprof-agent podprof-aggregator; do
  pid=$(cat "$t/run/$u.pid")
  kill -TERM "$pid"
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then fail "$u still runs 30 s after SIGTERM"
  elif grep -q STOPPING=1 "$t/logs/$u.notify"; then pass "$u: STOPPING=1 and exited on SIGTERM"
  else fail "$u exited without STOPPING=1"; fi
done

if ((failures)); then echo "operating_services_test: $failures failures" >&2; exit 1; fi
echo "operating_services_test: all ok"
