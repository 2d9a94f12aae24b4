#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running broker: installs the build dependencies
# (Debian packages), builds, and starts `magnetar standalone` in the foreground on the embedded
# default storage (data/ under the repository), ports 6650 (binary protocol) and 8080 (HTTP).
# Extra arguments go to `magnetar standalone` (e.g. --set numIOThreads=4).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
exec build/src/app/magnetar standalone "$@"
