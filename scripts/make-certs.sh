#!/usr/bin/env bash
# Makes the certificates of a podprof deployment with openssl: a CA, then one certificate per
# aggregator, per agent (one per host) and per operator or viewer. Each key is EC P-256, written
# unencrypted with mode 600 (a daemon cannot ask for a password; protect keys by permissions or
# systemd credentials).
#
#   scripts/make-certs.sh [--dir DIR] [--ca NAME] [--days N] ca
#   scripts/make-certs.sh [--dir DIR] [--ca NAME] [--days N] aggregator NAME [ADDRESS ...]
#   scripts/make-certs.sh [--dir DIR] [--ca NAME] [--days N] agent HOST [ADDRESS ...]
#   scripts/make-certs.sh [--dir DIR] [--ca NAME] [--days N] operator NAME
#
# The rules podprof applies:
# - The certificate's CN and subject alternative names are the caller's identity, matched
#   against tls.allowed_agents, tls.allowed_operators and tls.allowed_aggregators.
# - An agent may register only a host its certificate names: make each agent's certificate with
#   CN = its host_name (or list the host under [tls.agent_hosts] in aggregator.toml).
# - Daemons serve and dial with one certificate: aggregators and agents get both extended key
#   usages (serverAuth, clientAuth); operators and viewers only clientAuth.
# - A daemon's certificate must name every address it is dialled at (its DNS name or IP, the
#   agent's `advertise` address included): pass them as ADDRESS (IPs become IP SANs).
#
# Writes DIR/NAME.crt and DIR/NAME.key (DIR defaults to the current directory; the CA is
# DIR/CA.crt and DIR/CA.key, CA defaulting to "ca"). Rotation: make a new certificate with the
# same names, replace the files, and reload the daemon (SIGHUP): no restart.
set -euo pipefail

dir=. ca=ca days=365
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --ca) ca=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    *) echo "make-certs: unknown option $1" >&2; exit 2 ;;
  esac
done
kind=${1:-}
[[ -n $kind ]] || { sed -n '2,12p' "$0" >&2; exit 2; }
mkdir -p "$dir"
umask 077

if [[ $kind == ca ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
    -keyout "$dir/$ca.key" -out "$dir/$ca.crt" -subj "/CN=$ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
  chmod 644 "$dir/$ca.crt"
  echo "$dir/$ca.crt"
  exit 0
fi

name=${2:-}
[[ -n $name ]] || { echo "make-certs: $kind needs a name" >&2; exit 2; }
[[ -f $dir/$ca.crt && -f $dir/$ca.key ]] || { echo "make-certs: no CA $dir/$ca.crt (make it with: $0 --dir $dir ca)" >&2; exit 2; }
case $kind in
  aggregator|agent) usage=serverAuth,clientAuth ;;
  operator) usage=clientAuth ;;
  *) echo "make-certs: unknown kind $kind (ca, aggregator, agent, operator)" >&2; exit 2 ;;
esac
sans="DNS:$name"
for address in "${@:3}"; do
  if [[ $address =~ ^[0-9.]+$ || $address == *:* ]]; then sans+=",IP:$address"; else sans+=",DNS:$address"; fi
done
ext=$(mktemp)
trap 'rm -f "$ext" "$dir/$name.csr"' EXIT
cat > "$ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$usage
subjectAltName=$sans
EXT
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/$name.key" \
  -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.crt" -CAkey "$dir/$ca.key" -CAcreateserial \
  -days "$days" -out "$dir/$name.crt" -extfile "$ext" 2>/dev/null
chmod 644 "$dir/$name.crt"
echo "$dir/$name.crt $dir/$name.key ($usage; $sans)"
