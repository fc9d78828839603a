#!/usr/bin/env bash
# The README's main job: installs what is needed, builds, and runs a 2-rank job on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
build=${TNT_BUILD_DIR:-build}
exec "$build/bin/tnt-launch" -n 2 -- "$build/bin/tnt-bench-allreduce" --max 64M
