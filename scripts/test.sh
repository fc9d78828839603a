#!/usr/bin/env bash
# The README's test command: installs what is needed, builds, and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/check-format.sh
bash scripts/build.sh
ctest --test-dir "${TNT_BUILD_DIR:-build}" --output-on-failure --timeout 600 -j "$(nproc)"
