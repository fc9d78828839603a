#!/usr/bin/env bash
# examples/jacobi2d's OpenMPI twin (jacobi2d_mpi.c), built unchanged with tnt-mpicc, gives after
# 500 iterations bitwise the field of a serial run: on 2 (2x1) and 4 (2x2) ranks on this host,
# and on 2 network-namespace hosts of one rank each where they can be made (tests/launcher/
# netns_run.sh; skipped, saying why, where not); and the same field as its OpenMPI build where
# mpicc and mpirun exist (not in a sanitizer build: OpenMPI's own leaks would be reported).
#   jacobi2d_twin_test.sh BUILD_DIR SOURCE_DIR TNT_LAUNCH [C_COMPILER [SANITIZE_FLAGS]]
set -euo pipefail
build_dir=$1 source_dir=$2 launcher=$3 c_compiler=${4:-cc} sanitize_flags=${5:-}
export TNT_MPICC="$c_compiler $sanitize_flags"
work=$(mktemp -d "${TMPDIR:-/tmp}/tnt-jacobi2d-twin.XXXXXX")
trap 'rm -rf "$work"' EXIT
example=$source_dir/examples/jacobi2d
"$build_dir/bin/tnt-mpicc" -O2 -std=c11 "$example/jacobi2d_mpi.c" -o "$work/jacobi2d-tnt-mpi" -lm

n=61 iterations=500  # 61 points split unevenly over 2 ranks
same_as_serial() {  # NAME DUMP
  if ! cmp -s "$work/serial.bin" "$2"; then
    echo "FAIL: $1 differs from the serial run: $(cmp "$work/serial.bin" "$2" 2>&1 | head -1)"
    exit 1
  fi
  echo "$1: bitwise the serial field"
}
"$launcher" -n 1 -- "$work/jacobi2d-tnt-mpi" $n 1 1 $iterations "$work/serial.bin"
[[ -s $work/serial.bin ]] || { echo "FAIL: the serial run wrote no field"; exit 1; }
"$launcher" -n 2 -- "$work/jacobi2d-tnt-mpi" $n 2 1 $iterations "$work/tnt2.bin"
same_as_serial "tnt-mpicc twin, 2x1 ranks on one host" "$work/tnt2.bin"
"$launcher" -n 4 -- "$work/jacobi2d-tnt-mpi" $n 2 2 $iterations "$work/tnt4.bin"
same_as_serial "tnt-mpicc twin, 2x2 ranks on one host" "$work/tnt4.bin"

status=0
"$source_dir/tests/launcher/netns_run.sh" "$launcher" 1,1 "$work/jacobi2d-tnt-mpi" $n 2 1 $iterations \
  "$work/netns2.bin" || status=$?
case $status in
  0) same_as_serial "tnt-mpicc twin, 2 namespace hosts x 1 rank" "$work/netns2.bin" ;;
  77) echo "the run across namespace hosts is skipped (above: why)" ;;
  *) exit 1 ;;
esac

if [[ -z $sanitize_flags ]] && command -v mpicc > /dev/null && command -v mpirun > /dev/null; then
  mpicc -O2 -std=c11 "$example/jacobi2d_mpi.c" -o "$work/jacobi2d-openmpi" -lm
  mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp -n 2 "$work/jacobi2d-openmpi" $n 2 1 \
    $iterations "$work/openmpi2.bin" > "$work/openmpi.log" 2>&1 || { cat "$work/openmpi.log"; exit 1; }
  same_as_serial "OpenMPI build of the twin, 2x1 ranks" "$work/openmpi2.bin"
else
  echo "the OpenMPI build of the twin is not compared: no mpicc or mpirun here, or a sanitizer build"
fi
echo PASS
