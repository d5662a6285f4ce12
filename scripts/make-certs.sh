#!/usr/bin/env bash
# Makes the certificates of a podprof deployment with openssl: a CA, then one certificate per
# aggregator, per agent (one per host), per operator or viewer, and per browser. Each key is
# EC P-256, written unencrypted with mode 600 (a daemon cannot ask for a password; protect keys
# by permissions or systemd credentials).
#
#   scripts/make-certs.sh [--dir CA-DIR] [--ca NAME] [--days N] ca
#   scripts/make-certs.sh [--dir CA-DIR] [--out DIR] [--ca NAME] [--days N] aggregator NAME [ADDRESS ...]
#   scripts/make-certs.sh [--dir CA-DIR] [--out DIR] [--ca NAME] [--days N] agent HOST [ADDRESS ...]
#   scripts/make-certs.sh [--dir CA-DIR] [--out DIR] [--ca NAME] [--days N] operator NAME
#   scripts/make-certs.sh [--dir CA-DIR] [--out DIR] [--ca NAME] [--days N] viewer NAME
#   scripts/make-certs.sh [--dir CA-DIR] [--out DIR] [--ca NAME] [--days N] [--viewer] browser NAME
#
# Roles: `agent`, `aggregator` and `operator` certificates carry their role as a URI subject
# alternative name (urn:podprof:role:agent, urn:podprof:role:aggregator,
# urn:podprof:role:operator); a `viewer` carries none and may only read. `browser` carries the
# operator role, or none with --viewer.
#
# --out DIR writes one host's (or one person's) directory and nothing else: DIR/ca.crt, and
# the certificate and key under the names the systemd units load (LoadCredential=):
# aggregator.crt and aggregator.key, or agent.crt and agent.key; a person's (operator, viewer,
# browser) as NAME.crt and NAME.key. Copy a host's DIR to that host as /etc/podprof/tls. The
# CA's key never goes there: --out refuses the CA's directory and any directory holding it.
#
# The rules podprof applies:
# - A role is the deployment's word, never "any certificate of this CA": while an allow list
#   (tls.allowed_agents, tls.allowed_operators, an agent's tls.allowed_aggregators) is empty,
#   only certificates carrying that role's URI act in it; a non-empty list decides alone,
#   matching the certificate's CN or DNS/IP subject alternative names. Certificates made before
#   roles existed carry none: make them anew, or list their names.
# - An agent may register only a host its certificate names: make each agent's certificate with
#   CN = its host_name (or list the host under [tls.agent_hosts] in aggregator.toml).
# - Daemons serve and dial with one certificate: aggregators and agents get both extended key
#   usages (serverAuth, clientAuth); operators, viewers and browsers only clientAuth.
# - A daemon's certificate must name every address it is dialled at (its DNS name or IP, the
#   agent's `advertise` address included): pass them as ADDRESS (IPs become IP SANs).
#
# Without --out, writes CA-DIR/NAME.crt and CA-DIR/NAME.key (CA-DIR defaults to the current
# directory; the CA is CA-DIR/CA.crt and CA-DIR/CA.key, CA defaulting to "ca"). `browser` also
# writes NAME.p12 (certificate, key and CA) for importing into a web browser, protected by the
# password in $PODPROF_P12_PASSWORD, or asked for when that is unset. Rotation: make a new
# certificate with the same names and replace the files; a daemon reading them as systemd
# credentials needs `systemctl restart` (systemd copies credentials only when a unit starts),
# one reading them from [tls] cert/key/ca takes them on reload (SIGHUP).
set -euo pipefail

dir=. out= ca=ca days=365 viewer=
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ca) ca=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --viewer) viewer=1; shift ;;
    *) echo "make-certs: unknown option $1" >&2; exit 2 ;;
  esac
done
kind=${1:-}
[[ -n $kind ]] || { sed -n '2,23p' "$0" >&2; exit 2; }
umask 077
mkdir -p "$dir"

if [[ $kind == ca ]]; then
  # A host's bundle is what --out writes; the CA made into one would hand its key to a host.
  [[ -z $out ]] || { echo "make-certs: the CA is made with --dir only: its key never goes into a host's directory (--out)" >&2; exit 2; }
  case $(cd "$dir" && pwd -P)/ in
    */etc/podprof/*) echo "make-certs: warning: $dir is a host's podprof directory; keep the CA (its key signs every identity) where no host gets it" >&2 ;;
  esac
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
[[ -z $viewer || $kind == browser ]] || { echo "make-certs: --viewer is for browser (use the viewer kind: $0 viewer NAME)" >&2; exit 2; }
# The role each kind carries as a URI SAN (security/tls.h reads it); a viewer's is none.
case $kind in
  aggregator|agent) usage=serverAuth,clientAuth role=$kind ;;
  operator) usage=clientAuth role=operator ;;
  browser) usage=clientAuth role=operator; [[ -z $viewer ]] || role= ;;
  viewer) usage=clientAuth role= ;;
  *) echo "make-certs: unknown kind $kind (ca, aggregator, agent, operator, viewer, browser)" >&2; exit 2 ;;
esac
target=$dir file=$name
if [[ -n $out ]]; then
  mkdir -p "$out"
  if [[ $out -ef $dir ]]; then
    echo "make-certs: --out $out is the CA's directory: a host's directory must not hold the CA's key ($dir/$ca.key)" >&2
    exit 2
  fi
  for f in "$out"/*; do
    if [[ -f $f ]] && cmp -s "$f" "$dir/$ca.key"; then
      echo "make-certs: $f is the CA's key: remove it; a host's directory ($out) must never hold it" >&2
      exit 2
    fi
  done
  # ca.crt is the CA bundle the units load; one with other CAs (a CA rotation in progress) is
  # the operator's to merge, so it is kept, never overwritten.
  ca_body=$(sed '/^-----/d' "$dir/$ca.crt" | tr -d '\n')
  if [[ -f $out/ca.crt ]] && ! tr -d '\n' < "$out/ca.crt" | grep -qF "$ca_body"; then
    echo "make-certs: $out/ca.crt holds other CAs but not $dir/$ca.crt: append it (cat $dir/$ca.crt >> $out/ca.crt) or remove the file" >&2
    exit 2
  fi
  target=$out
  # The names the units' LoadCredential= lines load; people keep theirs under their own name.
  case $kind in aggregator|agent) file=$kind ;; esac
fi
# A certificate named like the CA would overwrite it (beside the CA) or the bundle's ca.crt.
reserved=$ca
[[ -z $out ]] || reserved=ca
if [[ $file == "$reserved" ]]; then
  echo "make-certs: $name is the CA's file name; choose another name" >&2
  exit 2
fi

sans="DNS:$name"
for address in "${@:3}"; do
  if [[ $address =~ ^[0-9.]+$ || $address == *:* ]]; then sans+=",IP:$address"; else sans+=",DNS:$address"; fi
done
[[ -z $role ]] || sans+=",URI:urn:podprof:role:$role"
ext=$(mktemp)
csr=$(mktemp)
trap 'rm -f "$ext" "$csr"' EXIT
cat > "$ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$usage
subjectAltName=$sans
EXT
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$target/$file.key" \
  -out "$csr" -subj "/CN=$name" 2>/dev/null
# The serial file stays with the CA, so the CA's directory alone says what it has issued.
openssl x509 -req -in "$csr" -CA "$dir/$ca.crt" -CAkey "$dir/$ca.key" -CAcreateserial \
  -CAserial "$dir/$ca.srl" -days "$days" -out "$target/$file.crt" -extfile "$ext" 2>/dev/null
chmod 644 "$target/$file.crt"
if [[ -n $out && ! -f $out/ca.crt ]]; then
  cp "$dir/$ca.crt" "$out/ca.crt"
  chmod 644 "$out/ca.crt"
fi
echo "$target/$file.crt $target/$file.key ($usage; $sans)"

if [[ $kind == browser ]]; then
  # Browsers import a client certificate as PKCS#12; the CA inside lets them show the chain
  # (trusting the CA for the server's certificate is a separate import of ca.crt).
  pass=(); [[ -n ${PODPROF_P12_PASSWORD:-} ]] && pass=(-passout env:PODPROF_P12_PASSWORD)
  openssl pkcs12 -export -in "$target/$file.crt" -inkey "$target/$file.key" \
    -certfile "$dir/$ca.crt" -name "$name" -out "$target/$file.p12" "${pass[@]}"
  echo "$target/$file.p12"
fi
