#!/usr/bin/env bash
# Configures and builds tnt into ${TNT_BUILD_DIR:-build} (Release, Ninja).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${TNT_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${TNT_BUILD_TYPE:-Release}" "$@"
cmake --build "$build_dir" -j "$(nproc)"
