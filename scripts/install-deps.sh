#!/usr/bin/env bash
# Installs every Debian 12 package podprof needs to build, test and run.
# Idempotent; run as root. Debian packages with apt-get; then the real peers the `realpeers` tests
# run against (JAX, XProf, tpu-info, chdb: tests/peers/requirements.txt, exact versions with
# hashes) with pip into .venv. Nothing else is downloaded, and no test downloads anything.
set -euo pipefail

packages=(
  # Toolchain and build.
  build-essential cmake ninja-build ccache pkg-config clang clang-format
  # clang's sanitizer and libFuzzer runtimes (the sanitizer build; a recommends, not a depends).
  libclang-rt-14-dev
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
  # Tests and benchmarks (time(1): peak memory in scripts/bench-exports.sh).
  libgtest-dev libgmock-dev libbenchmark-dev time
  # Unit checks (systemd-analyze), kill(1) for ExecReload, test certificates, packaging.
  systemd procps openssl dpkg-dev
  # The fleet store's tests and bench_fleet start their own ClickHouse servers.
  clickhouse-server clickhouse-client
  # promtool (in prometheus) checks both daemons' /metrics; curl fetches pages in tests.
  prometheus curl
  # The web pages: Node.js runs npm (uPlot, bundled at build time; web/package-lock.json) and
  # the browser tests, which drive Debian's headless Chromium.
  nodejs chromium
  # The real peers' virtual environment (.venv, below).
  python3 python3-venv
)

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
