#!/usr/bin/env bash
# The README's test command: installs what is needed, builds, and runs every test; then again
# under sanitizers (scripts/sanitize.sh: ASan/UBSan with the fuzz targets' short runs, and TSan
# for the collectives, transport and actors). TNT_SANITIZE_TESTS=0 skips the second part.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/check-format.sh
bash scripts/build.sh
start=$(date +%s)
ctest --test-dir "${TNT_BUILD_DIR:-build}" --output-on-failure --timeout 600 -j "$(nproc)"
echo "test: the Release build's tests took $(($(date +%s) - start)) s"
if [[ "${TNT_SANITIZE_TESTS:-1}" != 0 ]]; then
  bash scripts/sanitize.sh
fi
