#!/usr/bin/env bash
# Programs built against tnt's MPI layer, started by OpenMPI's mpirun instead of tnt-launch (tnt's
# bootstrap reads mpirun's variables): each PROGRAM on 2 ranks, every rank must report ok.
#   mpirun_test.sh PROGRAM...
# Exit 77 (skipped), saying why, where mpirun is not installed.
set -uo pipefail
command -v mpirun > /dev/null || { echo "SKIPPED: mpirun is not installed (openmpi-bin)"; exit 77; }
for program in "$@"; do
  out=$(timeout 120 mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp -np 2 "$program" 2>&1)
  status=$?
  echo "$out"
  ((status == 0)) || { echo "FAILED: mpirun -np 2 $program exited with $status"; exit 1; }
  (($(grep -cE '^rank [01] of 2: [a-z_]+ ok$' <<< "$out") == 2)) || { echo "FAILED: not every rank of $program reported ok"; exit 1; }
done
echo PASS
