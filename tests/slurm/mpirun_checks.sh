#!/usr/bin/env bash
# tnt ranks started by OpenMPI's mpirun (no tnt-launch, no TNT_* variables):
#
#   mpirun_checks.sh collectives BUILD_DIR     the collectives check on 3 ranks (--oversubscribe)
#   mpirun_checks.sh train BUILD_DIR SRC_DIR   tnt-train on 2 ranks: same step losses as tnt-launch -n 2
#   mpirun_checks.sh conflict BUILD_DIR        TNT_SIZE or TNT_RANK set by hand beside mpirun's: refused
#                                              naming both values (Note [Placement conflicts])
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
    # A token the user gives (mpirun -x) is used as it is; only the master's address goes
    # through PMIx, at once (it used to wait out TNT_CONNECT_TIMEOUT_S for a token never shared).
    TNT_JOB_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n') TNT_CONNECT_TIMEOUT_S=20 timeout 60 \
      "${mpi[@]}" -x TNT_JOB_TOKEN -x TNT_CONNECT_TIMEOUT_S -np 3 "$build/tests/collectives/tnt-test-worker" check \
      >given.out 2>&1 || fail "mpirun -np 3 with TNT_JOB_TOKEN given"
    (($(grep -cE '^rank [0-2]: [0-9]+ checks, 0 failures' given.out) == 3)) || fail "not every rank passed (token given)"
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
  conflict)
    args=(--model mlp --dataset synthetic --shape 1 8 8 --train-size 32 --num-classes 2 --global-batch 8 --epochs 1
      --no-progress --checkpoint conflict.ckpt)
    # Before: TNT_SIZE=1 made two silent jobs of one rank writing the same checkpoint, TNT_SIZE=3
    # ranks that met at the master's port ("Address already in use").
    for size in 1 3; do
      TNT_SIZE=$size timeout 60 "${mpi[@]}" -x TNT_SIZE -np 2 "$build/bin/tnt-train" "${args[@]}" \
        >"size$size.out" 2>&1 && fail "TNT_SIZE=$size under mpirun -np 2 was not refused"
      grep -q "TNT_SIZE=$size but OpenMPI's mpirun started this process as one of 2 ranks (OMPI_COMM_WORLD_SIZE=2)" \
        "size$size.out" || fail "TNT_SIZE=$size: the refusal does not name both sizes"
      [[ ! -e conflict.ckpt ]] || fail "TNT_SIZE=$size: a checkpoint was written"
      grep -m1 "TNT_SIZE=$size but" "size$size.out"
    done
    timeout 60 "${mpi[@]}" -x TNT_RANK=0 -np 2 "$build/bin/tnt-train" "${args[@]}" >rank.out 2>&1 &&
      fail "TNT_RANK=0 on both ranks was not refused"
    grep -q "TNT_RANK=0 but OpenMPI's mpirun started this process as rank 1 (OMPI_COMM_WORLD_RANK=1)" rank.out ||
      fail "TNT_RANK=0: the refusal does not name both ranks"
    grep -m1 "TNT_RANK=0 but" rank.out
    ;;
  *) echo "mpirun_checks.sh: unknown check '$check'" >&2; exit 2 ;;
esac
echo PASS
