#!/usr/bin/env bash
# Configures and builds tnt into ${TNT_BUILD_DIR:-build} (Release, Ninja).
# ccache, where installed, caches compilations (shared between clones of the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${TNT_BUILD_DIR:-build}
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$PWD
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${TNT_BUILD_TYPE:-Release}" "${launcher[@]}" "$@"
cmake --build "$build_dir" -j "$(nproc)"
