#!/usr/bin/env bash
# Installs every Debian 12 package podprof needs to build, test and run.
# Idempotent; run as root. Debian packages with apt-get; then the real peers the `realpeers` tests
# run against (JAX, XProf, tpu-info, chdb: tests/peers/requirements.txt, exact versions with
# hashes) with pip into .venv. Nothing else is downloaded, and no test downloads anything.
#
#   install-deps.sh          everything: what scripts/test.sh needs
#   install-deps.sh --demo   only what building podprof and running `podprof demo` need
#                            (scripts/demo.sh): no clang, ClickHouse, Prometheus, Chromium or
#                            the peers' 1.7 GB virtual environment
set -euo pipefail

demo=0
case "${1:-}" in
  "") ;;
  --demo) demo=1 ;;
  *) echo "usage: install-deps.sh [--demo]" >&2; exit 2 ;;
esac

# What the build needs (CMake finds the test and benchmark libraries too, and web/ runs `npm ci`
# at configure time for web/package-lock.json: uPlot, and the browser tests' playwright-core and
# web/check.sh's prettier and eslint), and so the demo.
packages=(
  # Toolchain and build.
  build-essential cmake ninja-build ccache pkg-config
  # RPC and serialisation.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # Status/StatusOr and friends (the Abseil that gRPC links).
  libabsl-dev
  # Storage, compression, HTTP, service integration.
  libssl-dev libsqlite3-dev libzstd-dev zlib1g-dev libboost-dev libsystemd-dev
  # Config, CLI, JSON, logging.
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libspdlog-dev
  # User-supplied regular expressions (common/pattern.h).
  libre2-dev
  # Test and benchmark libraries (CMake requires them).
  libgtest-dev libgmock-dev libbenchmark-dev
  # The web pages: Node.js runs npm (web/package-lock.json: uPlot, bundled at build time, and
  # the web tests' tools).
  nodejs
)
# What only the tests need.
test_packages=(
  clang clang-format
  # clang's sanitizer and libFuzzer runtimes (the sanitizer build; a recommends, not a depends).
  libclang-rt-14-dev
  # time(1): peak memory in scripts/bench-exports.sh.
  time
  # Unit checks (systemd-analyze), kill(1) for ExecReload, test certificates, packaging.
  systemd procps openssl dpkg-dev
  # The fleet store's tests and bench_fleet start their own ClickHouse servers.
  clickhouse-server clickhouse-client
  # promtool (in prometheus) checks both daemons' /metrics; curl fetches pages in tests.
  prometheus curl
  # The browser tests drive Debian's headless Chromium.
  chromium
  # The real peers' virtual environment (.venv, below).
  python3 python3-venv
)
if [ "$demo" -eq 0 ]; then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

# npm comes with some Node.js builds and is Debian's own package with others.
need_npm=0
command -v npm >/dev/null 2>&1 || need_npm=1

install_venv() {
  if [ "$demo" -eq 1 ]; then return 0; fi
  bash "$(dirname "$0")/install-venv.sh"
}

if [ "${#missing[@]}" -eq 0 ] && [ "$need_npm" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  install_venv
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! command -v npm >/dev/null 2>&1; then
  apt-get install -y -qq --no-install-recommends npm
  missing+=(npm)
fi
echo "install-deps: installed ${missing[*]}"
install_venv
