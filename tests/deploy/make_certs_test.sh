#!/usr/bin/env bash
# scripts/make-certs.sh's host directories (--out): each holds exactly the files its systemd unit
# loads (LoadCredential=), under those names, and never the CA's key; `browser` writes a
# PKCS#12 file that openssl and curl read back. Real openssl, real files.
#
#   tests/deploy/make_certs_test.sh [SOURCE_DIR]
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
make_certs="$src/scripts/make-certs.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/podprof-make-certs.XXXXXX")
trap 'rm -rf "$t"' EXIT
cd "$t"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
mc() { bash "$make_certs" --days 2 "$@"; }
# Refused: exit 2 and a message naming why.
refused() {
  local why=$1; shift
  if out=$(mc "$@" 2>&1); then fail "make-certs $* was not refused ($why)"; return; fi
  grep -q "$why" <<<"$out" && pass "refused: make-certs $* ($out)" ||
    fail "make-certs $* refused without saying '$why': $out"
}
files() { (cd "$1" && ls -A | sort | tr '\n' ' '); }
mode() { stat -c %a "$1"; }

mc --dir ca ca >/dev/null
mc --dir ca --out hosts/agg aggregator podprof-agg localhost 127.0.0.1 >/dev/null
mc --dir ca --out hosts/tpu-host-0 agent tpu-host-0 127.0.1.17 >/dev/null
mc --dir ca --out people/alice operator alice >/dev/null

# The names podprof-aggregator.service and podprof-agent.service load, and nothing else.
want_agg=$(sed -n 's#^LoadCredential=[^:]*:/etc/podprof/tls/##p' \
  "$src/deploy/systemd/podprof-aggregator.service" | sort | tr '\n' ' ')
want_agent=$(sed -n 's#^LoadCredential=[^:]*:/etc/podprof/tls/##p' \
  "$src/deploy/systemd/podprof-agent.service" | sort | tr '\n' ' ')
[[ $(files hosts/agg) == "$want_agg" ]] && pass "aggregator's directory: $want_agg" ||
  fail "aggregator's directory holds '$(files hosts/agg)', its unit loads '$want_agg'"
[[ $(files hosts/tpu-host-0) == "$want_agent" ]] && pass "agent's directory: $want_agent" ||
  fail "agent's directory holds '$(files hosts/tpu-host-0)', its unit loads '$want_agent'"
[[ $(files people/alice) == "alice.crt alice.key ca.crt " ]] && pass "operator's directory" ||
  fail "operator's directory holds '$(files people/alice)'"
# Beside the CA: only the CA and its serial file, no host's key.
[[ $(files ca) == "ca.crt ca.key ca.srl " ]] && pass "the CA's directory holds only the CA" ||
  fail "the CA's directory holds '$(files ca)'"

for d in hosts/agg:aggregator hosts/tpu-host-0:agent; do
  dir=${d%%:*} name=${d##*:}
  [[ $(mode "$dir/$name.key") == 600 && $(mode "$dir/$name.crt") == 644 && $(mode "$dir/ca.crt") == 644 ]] &&
    pass "$dir: key 600, certificates 644" || fail "$dir: modes $(stat -c '%n %a' "$dir"/*)"
  openssl verify -CAfile "$dir/ca.crt" "$dir/$name.crt" >/dev/null && pass "$dir/$name.crt chains to its ca.crt" ||
    fail "$dir/$name.crt does not verify against $dir/ca.crt"
  # The key is the certificate's.
  [[ $(openssl pkey -in "$dir/$name.key" -pubout) == $(openssl x509 -in "$dir/$name.crt" -noout -pubkey) ]] &&
    pass "$dir/$name.key is $name.crt's key" || fail "$dir/$name.key is not $name.crt's key"
done
agent_crt=$(openssl x509 -in hosts/tpu-host-0/agent.crt -noout -subject -ext subjectAltName,extendedKeyUsage)
grep -q "CN *= *tpu-host-0" <<<"$agent_crt" && grep -q "DNS:tpu-host-0, IP Address:127.0.1.17" <<<"$agent_crt" &&
  grep -q "TLS Web Server Authentication, TLS Web Client Authentication" <<<"$agent_crt" &&
  pass "agent.crt: CN and names of the host, both usages" || fail "agent.crt's names or usages: $agent_crt"

# Each kind's role, as a URI SAN (security/tls.h): a viewer, and a browser made --viewer, none.
mc --dir ca --out people/bob viewer bob >/dev/null
PODPROF_P12_PASSWORD=x mc --dir ca --out people/carol --viewer browser carol >/dev/null
for c in hosts/agg/aggregator.crt:aggregator hosts/tpu-host-0/agent.crt:agent \
  people/alice/alice.crt:operator people/bob/bob.crt: people/carol/carol.crt:; do
  crt=${c%%:*} role=${c##*:}
  uris=$(openssl x509 -in "$crt" -noout -ext subjectAltName | grep -o 'URI:[^,]*' || true)
  [[ $uris == "${role:+URI:urn:podprof:role:$role}" ]] && pass "$crt: role '${role:-none}'" ||
    fail "$crt carries '$uris', want role '${role:-none}'"
done
refused "is for browser" --dir ca --viewer operator dave

# The CA's key never goes where a host gets it.
refused "the CA is made with --dir only" --dir ca --out hosts/x ca
refused "is the CA's directory" --dir ca --out ca agent tpu-host-1
refused "is the CA's directory" --dir ca --out ./ca/../ca aggregator podprof-agg
cp ca/ca.key hosts/tpu-host-0/backup
refused "is the CA's key" --dir ca --out hosts/tpu-host-0 agent tpu-host-0
rm hosts/tpu-host-0/backup
refused "is the CA's file name" --dir ca --out people/x operator ca
refused "is the CA's file name" --dir ca operator ca
if out=$(mc --dir "$t/etc/podprof/tls" ca 2>&1) && grep -q "warning: .* is a host's podprof directory" <<<"$out"; then
  pass "a CA made in an /etc/podprof directory is warned about ($out)"
else
  fail "no warning for a CA in etc/podprof/tls: $out"
fi

# A ca.crt holding another CA (a rotation in progress) is kept, not overwritten.
mc --dir ca2 ca >/dev/null
cp ca2/ca.crt hosts/other-ca.crt && mkdir hosts/rotating && cp ca2/ca.crt hosts/rotating/ca.crt
refused "holds other CAs" --dir ca --out hosts/rotating agent tpu-host-1
cat ca/ca.crt >> hosts/rotating/ca.crt
mc --dir ca --out hosts/rotating agent tpu-host-1 >/dev/null &&
  [[ $(cat hosts/rotating/ca.crt) == "$(cat ca2/ca.crt ca/ca.crt)" ]] &&
  pass "a bundle with both CAs is used as it is" || fail "the two-CA bundle was changed or refused"

# Without --out, as before (the TLS tests' way): NAME.crt and NAME.key beside the CA.
mc --dir ca agent agent-0 localhost 127.0.0.1 >/dev/null
[[ -f ca/agent-0.crt && -f ca/agent-0.key ]] && pass "without --out: ca/agent-0.crt and .key" ||
  fail "without --out, ca/agent-0.* missing"

# A browser's PKCS#12: its certificate (clientAuth), its key and the CA, under the password.
PODPROF_P12_PASSWORD=s3cret mc --dir ca --out browser browser alice >/dev/null
[[ $(files browser) == "alice.crt alice.key alice.p12 ca.crt " && $(mode browser/alice.p12) == 600 ]] &&
  pass "browser's directory: alice.{crt,key,p12} and ca.crt, .p12 mode 600" ||
  fail "browser's directory holds '$(files browser)'"
p12=$(openssl pkcs12 -in browser/alice.p12 -passin pass:s3cret -nodes 2>/dev/null)
[[ $(grep -c 'BEGIN CERTIFICATE' <<<"$p12") == 2 && $(grep -c 'BEGIN PRIVATE KEY' <<<"$p12") == 1 ]] &&
  grep -q "subject=CN *= *alice" <<<"$p12" && pass "alice.p12 opens with its password: key, certificate, CA" ||
  fail "alice.p12 does not hold alice's key, certificate and the CA"
openssl pkcs12 -in browser/alice.p12 -passin pass:wrong -nodes >/dev/null 2>&1 &&
  fail "alice.p12 opened with a wrong password" || pass "alice.p12 refuses a wrong password"
openssl x509 -in browser/alice.crt -noout -ext extendedKeyUsage | grep -q "TLS Web Client Authentication" &&
  ! openssl x509 -in browser/alice.crt -noout -ext extendedKeyUsage | grep -q "Server" &&
  pass "the browser's certificate is clientAuth only" || fail "the browser's certificate usages"

if ((failures)); then echo "make_certs_test: $failures failures" >&2; exit 1; fi
echo "make_certs_test: all ok"
