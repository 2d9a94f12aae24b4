#!/usr/bin/env bash
# Configures and builds Magnetar into build/ (or $BUILD_DIR). Extra args go to cmake configure.
# Warnings are errors here (MAGNETAR_WERROR=ON, also set on an existing build directory).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DMAGNETAR_WERROR=ON "$@"
elif ! grep -q '^MAGNETAR_WERROR:BOOL=ON$' "$BUILD_DIR/CMakeCache.txt"; then
  cmake -S . -B "$BUILD_DIR" -DMAGNETAR_WERROR=ON "$@"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
