#!/usr/bin/env bash
# Builds one of examples/ as a user would: tnt installed from BUILD_DIR into WORK/prefix, the
# example configured against it with find_package(tnt) (outside tnt's own build) into WORK/build
# and built there. Extra arguments go to the example's cmake configure (compilers, sanitizer
# flags). On a failure the step's log is printed and the status is non-zero.
#   build_example.sh BUILD_DIR SOURCE_DIR EXAMPLE WORK [CMAKE_ARG...]
set -euo pipefail
build_dir=$1 source_dir=$2 example=$3 work=$4
shift 4
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
cmake -S "$source_dir/examples/$example" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" "$@" \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
