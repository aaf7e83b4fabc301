#!/usr/bin/env bash
# Installs the Debian 12 packages that pith's build, tests and demo need, and only those
# that are missing. Idempotent: when everything is present it does nothing (no apt-get update).
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake pkg-config ninja-build
  # host libraries
  libboost-dev libboost-context-dev libboost-system-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcurl4-openssl-dev libpcre2-dev libxxhash-dev libssl-dev libtomlplusplus-dev
  libhiredis-dev  # --state-store redis:// (shared inferlet state across replicas)
  duktape-dev  # agent_codeact compiles duktape.c into an inferlet
  # Wasm: wasm2c/interpreter for the runtime, clang + wasi sysroot for building inferlets
  wabt clang-14 lld-14
  wasi-libc libc++-14-dev-wasm32 libc++abi-14-dev-wasm32 libclang-rt-14-dev-wasm32
  # tests and clients
  python3 python3-pytest curl
  python3-venv  # scripts/setup-python.sh: the venv of the OpenAI SDK tests
  nginx redis-server  # the scale-out test: instance-affine proxy and shared state (e2e_scale_out)
  # style check (scripts/check-format.sh; .ci/run)
  clang-format
  # fuzzing (scripts/fuzz.sh; .ci/run): libFuzzer and clang's sanitizer runtimes
  libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
