#!/usr/bin/env bash
# Installs tnt into a temporary prefix, builds examples/embed-dot against it with
# find_package(tnt) (outside tnt's own build), and runs it on 3 ranks under tnt-launch.
set -euo pipefail
# A sanitizer build's libraries need the example built with the same compiler and sanitizers.
build_dir=$1 source_dir=$2 launcher=$3 compiler=${4:-c++} sanitize_flags=${5:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$source_dir/tests/package/build_example.sh" "$build_dir" "$source_dir" embed-dot "$work" \
  -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_CXX_FLAGS="$sanitize_flags" -DCMAKE_EXE_LINKER_FLAGS="$sanitize_flags"
# The example links only the collectives (and, through them, the transport).
if ldd "$work/build/tnt-embed-dot" | grep -E "dnnl|tnt_compute|tnt_dataset"; then
  echo "the embedded example pulled in trainer libraries"; exit 1
fi
"$launcher" -n 3 -- "$work/build/tnt-embed-dot" 100000 | tee "$work/run.log"
grep -q "dot product over 3 ranks: 9999900000 (expected 9999900000) OK" "$work/run.log"
grep -q "jacobi: .* OK" "$work/run.log"
