#!/usr/bin/env bash
# tnt ranks started by OpenMPI's mpirun (no tnt-launch, no TNT_* variables):
#
#   mpirun_checks.sh collectives BUILD_DIR     the collectives check on 3 ranks (--oversubscribe)
#   mpirun_checks.sh train BUILD_DIR SRC_DIR   tnt-train on 2 ranks: same step losses as tnt-launch -n 2
#
# Exit 77 (skipped) with the reason when mpirun is not installed.
set -uo pipefail
check=$1 build=$(cd "$2" && pwd) src=$(cd "${3:-.}" && pwd)
command -v mpirun >/dev/null || { echo "SKIPPED: mpirun is not installed (openmpi-bin)" >&2; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tnt-mpirun.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp -x TNT_WAIT_POLL_US=0)
fail() { echo "FAILED: $*" >&2; tail -n 40 ./*.out >&2; exit 1; }

case $check in
  collectives)
    timeout 60 "${mpi[@]}" -np 3 "$build/tests/collectives/tnt-test-worker" print-job >print.out 2>&1 ||
      fail "print-job under mpirun"
    grep -q 'source: OpenMPI' print.out || fail "source not OpenMPI"
    grep -q 'shared through PMIx' print.out || fail "master not shared through PMIx"
    grep -E 'rank 0 of 3|master:|token:' print.out | head -3
    timeout 240 "${mpi[@]}" -np 3 "$build/tests/collectives/tnt-test-worker" check >check.out 2>&1 ||
      fail "mpirun -np 3 tnt-test-worker check"
    (($(grep -cE '^rank [0-2]: [0-9]+ checks, 0 failures' check.out) == 3)) || fail "not every rank passed"
    grep -E 'checks, 0 failures' check.out
    ;;
  train)
    args=("$src/conf/lenet5_fashion_mnist.toml" --epochs 1 --max-steps 40 --print-steps --no-progress
      --validation-frequency 0)
    timeout 240 "${mpi[@]}" -np 2 "$build/bin/tnt-train" "${args[@]}" --checkpoint mpirun.ckpt >mpirun.out 2>&1 ||
      fail "mpirun -np 2 tnt-train"
    timeout 240 "$build/bin/tnt-launch" -n 2 -- "$build/bin/tnt-train" "${args[@]}" --checkpoint launch.ckpt \
      >launch.out 2>&1 || fail "tnt-launch -n 2 tnt-train"
    diff <(grep -E '^epoch .* loss ' mpirun.out) <(grep -E '^epoch .* loss ' launch.out) || fail "step losses differ"
    (($(grep -cE '^epoch .* loss ' launch.out) == 40)) || fail "expected 40 step losses"
    grep -E '^epoch 1 step 40 ' mpirun.out
    "$build/compute/tnt-ckpt" diff mpirun.ckpt launch.ckpt --rtol 0 --atol 0 || fail "the weights differ"
    ;;
  *) echo "mpirun_checks.sh: unknown check '$check'" >&2; exit 2 ;;
esac
echo PASS
