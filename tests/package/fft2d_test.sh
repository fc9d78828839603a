#!/usr/bin/env bash
# Installs tnt into a temporary prefix, builds examples/fft2d against it with find_package(tnt)
# and FFTW (libfftw3-dev), and runs it on 1, 2 and 4 ranks: each run checks the distributed
# transform against FFTW's serial one (max|delta| / max|X| <= 1e-12).
set -euo pipefail
build_dir=$1 source_dir=$2 launcher=$3 compiler=${4:-c++} sanitize_flags=${5:-}
if ! pkg-config --exists fftw3; then
  echo "fft2d: skipped: FFTW is not installed (apt-get install libfftw3-dev; scripts/install-deps.sh does)"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$source_dir/tests/package/build_example.sh" "$build_dir" "$source_dir" fft2d "$work" \
  -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_CXX_FLAGS="$sanitize_flags" -DCMAKE_EXE_LINKER_FLAGS="$sanitize_flags"
for ranks in 1 2 4; do
  "$launcher" -n "$ranks" -- "$work/build/tnt-fft2d" 128 | tee "$work/run.$ranks.log"
  grep -q "fft2d N=128 on $ranks ranks: .* OK" "$work/run.$ranks.log"
done
