#!/usr/bin/env bash
# Installs everything Magnetar needs to build and test on Debian 12, from Debian's packages only.
# Idempotent: packages already present are skipped by apt. Run as root (or with sudo available).
set -euo pipefail

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

PKGS=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libboost-json1.81-dev
  libprotobuf-dev protobuf-compiler
  librocksdb-dev
  libspdlog-dev libfmt-dev
  libcli11-dev libyaml-cpp-dev nlohmann-json3-dev
  libzookeeper-mt-dev zookeeper
  libisal-dev libzstd-dev liblz4-dev libsnappy-dev zlib1g-dev libssl-dev openssl libjwt-dev libcrypt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format-14 clang-tidy-14
  python3 python3-venv python3-pip python3-matplotlib python3-yaml
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi
