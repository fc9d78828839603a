#!/usr/bin/env bash
# The subset's collectives and point-to-point give the same outputs as OpenMPI's on the same
# inputs: tests/mpi/outputs.c built with OpenMPI's mpicc runs under mpirun, built with tnt-mpicc
# under tnt-launch, on 2 and 4 ranks; every rank's output file must be the same.
#   openmpi_outputs_test.sh SOURCE_DIR TNT_PROGRAM TNT_LAUNCH
# Exit 77 (skipped), saying why, where OpenMPI's mpicc or mpirun is not installed.
set -uo pipefail
src=$1 tnt_program=$2 launcher=$3
for tool in mpicc mpirun; do
  command -v $tool > /dev/null || { echo "SKIPPED: $tool is not installed (openmpi-bin, libopenmpi-dev)"; exit 77; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/tnt-mpi-outputs.XXXXXX")
trap 'rm -rf "$work"' EXIT
mpicc -O2 -std=c11 "$src/tests/mpi/outputs.c" -o "$work/outputs_openmpi" || { echo "FAILED: mpicc"; exit 1; }
for ranks in 2 4; do
  mkdir -p "$work/openmpi$ranks" "$work/tnt$ranks"
  timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$work/outputs_openmpi" "$work/openmpi$ranks" ||
    { echo "FAILED: the OpenMPI run on $ranks ranks"; exit 1; }
  timeout 120 "$launcher" -n "$ranks" -- "$tnt_program" "$work/tnt$ranks" ||
    { echo "FAILED: the tnt run on $ranks ranks"; exit 1; }
  lines=$(cat "$work/openmpi$ranks"/rank*.txt | wc -l)
  if ! diff -r "$work/openmpi$ranks" "$work/tnt$ranks" > "$work/diff"; then
    echo "FAILED: outputs differ on $ranks ranks (< OpenMPI, > tnt):"
    head -c 4000 "$work/diff"
    exit 1
  fi
  echo "$ranks ranks: $lines result lines, the same under OpenMPI and tnt"
done
echo PASS
