#!/usr/bin/env bash
# tnt's Python package on ranks that srun or mpirun started (no tnt-launch):
#
#   launchers.sh srun   BUILD_DIR SOURCE_DIR PYTHON   (run by tests/slurm/slurm_cluster.sh)
#   launchers.sh mpirun BUILD_DIR SOURCE_DIR PYTHON
#
# Both run tests/python/comm_test.py on 2 ranks: each rank finds its place in the job from the
# launcher's variables, and comm_world's collectives are checked against their sums. Exit 77
# (skipped) with the reason where mpirun is not installed.
set -uo pipefail
check=$1 build=$(cd "$2" && pwd) src=$(cd "$3" && pwd) python=$4
fail() { echo "FAILED: $*" >&2; tail -n 40 ./*.out >&2; exit 1; }
export PYTHONPATH=$build/python TNT_WAIT_POLL_US=0

case $check in
  srun)
    mkdir -p "$TNT_TEST_SLURM_DIR/work" && cd "$TNT_TEST_SLURM_DIR/work" || exit 1
    # The job's secret reaches every task through srun's environment (README, "Clusters"); under
    # mpirun rank 0 makes one and shares it through PMIx.
    TNT_JOB_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
    export TNT_JOB_TOKEN
    timeout 120 srun -n 2 --label "$python" "$src/tests/python/comm_test.py" >python.out 2>&1 ||
      fail "srun -n 2 python3 comm_test.py"
    (($(grep -oE '[01]: rank [01] of 2: comm_world ok' python.out | wc -l) == 2)) || fail "not every rank passed"
    ;;
  mpirun)
    command -v mpirun >/dev/null || { echo "SKIPPED: mpirun is not installed (openmpi-bin)" >&2; exit 77; }
    work=$(mktemp -d "${TMPDIR:-/tmp}/tnt-python-mpirun.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    cd "$work" || exit 1
    timeout 120 mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp -x PYTHONPATH -x TNT_WAIT_POLL_US \
      -np 2 "$python" "$src/tests/python/comm_test.py" >python.out 2>&1 || fail "mpirun -np 2 python3 comm_test.py"
    # mpirun may join the ranks' lines into one: count the reports, not the lines.
    (($(grep -oE 'rank [01] of 2: comm_world ok' python.out | wc -l) == 2)) || fail "not every rank passed"
    ;;
  *) echo "launchers.sh: unknown check '$check'" >&2; exit 2 ;;
esac
grep -E 'comm_world ok' python.out
echo PASS
