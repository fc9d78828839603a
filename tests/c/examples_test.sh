#!/usr/bin/env bash
# Builds the C API's examples as users would (tnt installed into a temporary prefix, the example
# configured against it with find_package(tnt)) and checks that their fields are bitwise those
# of a serial run.
#   examples_test.sh BUILD_DIR SOURCE_DIR TNT_LAUNCH jacobi2d|fortran-halo [CC CXX SANITIZE_FLAGS]
# jacobi2d: 500 iterations on 1 (1x1), 2 (2x1) and 4 (2x2) ranks, and its OpenMPI twin on 2 and
# 4 ranks where mpicc and mpirun exist. fortran-halo: 1, 2 and 4 ranks.
# A sanitizer build's library needs the example built with the same compilers and flags; there
# the OpenMPI twin (no tnt in it, and OpenMPI's own leaks would be reported) and the Fortran
# example (gfortran cannot link clang's sanitizer runtime) are left out: exit 77, skipped.
set -euo pipefail
build_dir=$1 source_dir=$2 launcher=$3 example=$4 c_compiler=${5:-cc} cxx_compiler=${6:-c++} sanitize_flags=${7:-}
if [[ -n $sanitize_flags && $example == fortran-halo ]]; then
  echo "skipped in a sanitizer build: gfortran cannot link the sanitizer runtime of tnt's libraries"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$source_dir/tests/package/build_example.sh" "$build_dir" "$source_dir" "$example" "$work" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$c_compiler" -DCMAKE_CXX_COMPILER="$cxx_compiler" \
  -DCMAKE_C_FLAGS="$sanitize_flags" -DCMAKE_EXE_LINKER_FLAGS="$sanitize_flags"

same_as_serial() {  # NAME DUMP
  if ! cmp -s "$work/serial.bin" "$2"; then
    echo "FAIL: $1 differs from the serial run: $(cmp "$work/serial.bin" "$2" 2>&1 | head -1)"
    exit 1
  fi
  echo "$1: bitwise the serial field"
}

case "$example" in
  jacobi2d)
    n=61 iterations=500  # 61 points split unevenly over 2 ranks
    "$launcher" -n 1 -- "$work/build/jacobi2d-tnt" $n 1 1 $iterations "$work/serial.bin"
    "$launcher" -n 2 -- "$work/build/jacobi2d-tnt" $n 2 1 $iterations "$work/tnt2.bin"
    same_as_serial "tnt, 2x1 ranks" "$work/tnt2.bin"
    "$launcher" -n 4 -- "$work/build/jacobi2d-tnt" $n 2 2 $iterations "$work/tnt4.bin"
    same_as_serial "tnt, 2x2 ranks" "$work/tnt4.bin"
    if [[ -n $sanitize_flags ]]; then
      echo "the OpenMPI twin is not checked in a sanitizer build"
      exit 0
    fi
    if [[ ! -x "$work/build/jacobi2d-mpi" ]] || ! command -v mpirun > /dev/null; then
      echo "the OpenMPI twin is not checked: no mpicc or mpirun here (Debian: libopenmpi-dev, openmpi-bin)"
      exit 0
    fi
    mpirun=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp)
    "${mpirun[@]}" -n 2 "$work/build/jacobi2d-mpi" $n 1 2 $iterations "$work/mpi2.bin"
    same_as_serial "OpenMPI, 1x2 ranks" "$work/mpi2.bin"
    "${mpirun[@]}" -n 4 "$work/build/jacobi2d-mpi" $n 2 2 $iterations "$work/mpi4.bin"
    same_as_serial "OpenMPI, 2x2 ranks" "$work/mpi4.bin"
    ;;
  fortran-halo)
    "$launcher" -n 1 -- "$work/build/tnt-fortran-halo" 1001 300 "$work/serial.bin"
    for ranks in 2 4; do
      "$launcher" -n $ranks -- "$work/build/tnt-fortran-halo" 1001 300 "$work/halo$ranks.bin"
      same_as_serial "Fortran, $ranks ranks" "$work/halo$ranks.bin"
    done
    ;;
  *) echo "examples_test.sh: unknown example '$example' (jacobi2d or fortran-halo)" >&2; exit 2 ;;
esac
