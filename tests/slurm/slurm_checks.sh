#!/usr/bin/env bash
# One check of tnt under the test Slurm (tests/slurm/slurm_cluster.sh starts it and runs this):
#
#   slurm_checks.sh CHECK BUILD_DIR SOURCE_DIR
#
# CHECK is one of srun_collectives, srun_sigkill, salloc_launch, srun_train, srun_scancel, srun_conflict, srun_mpi (the must-hold points
# of docs/design.md, "Ranks and the environment"). Each bounds every wait and ends every process it
# started; it prints what it measured and "PASS", or "FAILED: why" and exits 1.
set -uo pipefail
check=$1 build=$(cd "$2" && pwd) src=$(cd "$3" && pwd)
worker=$build/tests/collectives/tnt-test-worker
probe=$build/tests/launcher/launch_probe
work=$TNT_TEST_SLURM_DIR/work
mkdir -p "$work"
cd "$work" || exit 1
# The job's secret reaches every task through srun's environment (README, "Clusters").
TNT_JOB_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export TNT_JOB_TOKEN TNT_WAIT_POLL_US=0 TNT_CONNECT_TIMEOUT_S=60

fail() {
  echo "FAILED: $*" >&2
  for f in "$work"/*.out; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}
now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$(now) - $1:.2f}')"; }

# Waits (at most $2 s) until file $1 has $3 lines matching $4.
wait_lines() {
  local end=$((SECONDS + $2))
  while ((SECONDS < end)); do
    local n
    n=$(grep -cE "$4" "$1" 2>/dev/null)
    ((${n:-0} >= $3)) && return 0
    sleep 0.1
  done
  return 1
}

srun_collectives() {
  timeout 60 srun -n 3 --label "$worker" print-job >print.out 2>&1 || fail "print-job under srun"
  for r in 0 1 2; do
    grep -q "^$r: rank $r of 3, local rank $r of 3" print.out || fail "rank $r does not know its place"
  done
  grep -q "source: Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID of step" print.out || fail "source not Slurm"
  grep -q "master: 127.0.0.1:" print.out || fail "master not on the step's one node"
  sed -n '/^0:/p' print.out
  timeout 240 srun -n 3 --label "$worker" check >check.out 2>&1 || fail "srun -n 3 tnt-test-worker check failed"
  (($(grep -cE '^[0-2]: rank [0-2]: [0-9]+ checks, 0 failures' check.out) == 3)) || fail "not every rank passed"
  grep -E 'checks, 0 failures' check.out
}

# Programs built against tnt's mpi.h (tests/mpi) run under srun as under tnt-launch: each checks
# its MPI family against a serial reference and ends the step non-zero through MPI_Abort if not
# (start_end is left out: it checks the size against tnt-launch's TNT_SIZE).
srun_mpi() {
  local program n
  for program in communicators collectives data_movement point_to_point; do
    for n in 2 4; do
      timeout 120 srun -n "$n" --label "$build/tests/mpi/tnt-mpi-test-$program" >"mpi.$program.$n.out" 2>&1 ||
        fail "srun -n $n tnt-mpi-test-$program (exit $?)"
    done
  done
  echo "4 MPI-layer programs, each on 2 and 4 tasks of srun: every step exited 0"
}

srun_sigkill() {
  srun -n 3 --label "$worker" loop >kill.out 2>&1 &
  local srun_pid=$!
  wait_lines kill.out 60 3 '^[0-2]: running rank=' || { kill -INT "$srun_pid"; fail "the ranks did not start"; }
  local -a pids
  for r in 0 1 2; do pids[r]=$(sed -n "s/^$r: running rank=$r pid=\([0-9]*\) .*$/\1/p" kill.out); done
  local t0
  t0=$(now)
  kill -KILL "${pids[1]}"
  local end=$((SECONDS + 10))
  while ((SECONDS < end)) && { kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[2]}" 2>/dev/null; }; do sleep 0.05; done
  local took
  took=$(elapsed "$t0")
  echo "ranks 0 and 2 ended ${took} s after SIGKILL of rank 1"
  for r in 0 2; do kill -0 "${pids[r]}" 2>/dev/null && { kill -KILL "${pids[r]}"; fail "rank $r still runs 10 s after"; }; done
  python3 -c "import sys; sys.exit(0 if $took <= 5 else 1)" || fail "the other ranks took ${took} s (bound 5 s)"
  timeout 10 tail --pid="$srun_pid" -f /dev/null || fail "srun still runs"
  for r in 0 2; do
    grep -E "^$r: tnt-test-worker: error: .*rank 1\b" kill.out || fail "rank $r's error does not name rank 1"
  done
  [[ -z "$(squeue -h -s 2>/dev/null)" ]] || fail "a step is left: $(squeue -s)"
  echo "nothing left running: no step in squeue, no rank alive"
}

salloc_launch() {
  timeout 90 salloc -n 2 "$build/bin/tnt-launch" --dry-run -- "$probe" >dry.out 2>&1 || fail "--dry-run"
  grep -q '^srun .*--ntasks=2 .*--srun-task' dry.out || fail "tnt-launch would not start its ranks through srun"
  timeout 90 salloc -n 2 "$build/bin/tnt-launch" --output-on-all-devices -x TNT_TEST_X=from-x -x TNT_LOCAL_SIZE=7 \
    --pin-to-socket --numa-topology '0@0;1@0' -- "$probe" --var TNT_TEST_X --var SLURM_STEP_ID >launch.out 2>&1 ||
    fail "salloc -n 2 tnt-launch failed"
  cat launch.out
  for r in 0 1; do
    local line
    line=$(grep "^\[$r\] probe rank=$r size=2 local_rank=$r local_size=7 " launch.out) ||
      fail "rank $r: wrong rank, size, local rank or -x override"
    [[ $line == *" token_len=64 "* && $line == *" TNT_TEST_X=from-x"* && $line == *" pin_socket=$r "* &&
      $line == *" cpus=$r "* && $line != *"SLURM_STEP_ID=<unset>"* ]] || fail "rank $r: $line"
  done
  # Ctrl-C (SIGINT to tnt-launch) cancels the whole step.
  salloc -n 2 bash -c 'echo $$ >launcher.pid; exec "$0" "$@"' "$build/bin/tnt-launch" --output-on-all-devices \
    -- "$probe" --wait >wait.out 2>&1 &
  local salloc_pid=$!
  wait_lines wait.out 60 2 '^\[[01]\] ready rank=' || fail "ranks did not start"
  local -a pids
  for r in 0 1; do pids[r]=$(sed -n "s/^\[$r\] probe rank=$r .* pid=\([0-9]*\).*/\1/p" wait.out); done
  local t0
  t0=$(now)
  kill -INT "$(cat launcher.pid)"
  timeout 15 tail --pid="$salloc_pid" -f /dev/null || fail "salloc still runs 15 s after Ctrl-C"
  wait "$salloc_pid"
  local status=$? took
  took=$(elapsed "$t0")
  echo "Ctrl-C: salloc and tnt-launch ended after ${took} s with status $status"
  for r in 0 1; do kill -0 "${pids[r]}" 2>/dev/null && fail "rank $r survived Ctrl-C"; done
  ((status == 130)) || fail "status $status after Ctrl-C, expected 130"
}

srun_train() {
  local args=("$src/conf/lenet5_fashion_mnist.toml" --epochs 1 --max-steps 40 --print-steps --no-progress
    --validation-frequency 0)
  timeout 240 srun -N1 -n 2 --label "$build/bin/tnt-train" "${args[@]}" --checkpoint srun.ckpt >srun.out 2>&1 ||
    fail "srun tnt-train failed"
  timeout 240 "$build/bin/tnt-launch" -n 2 -- "$build/bin/tnt-train" "${args[@]}" --checkpoint launch.ckpt \
    >launch.out 2>&1 || fail "tnt-launch -n 2 tnt-train failed"
  diff <(sed -n 's/^0: \(epoch .* loss .*\)$/\1/p' srun.out) <(grep -E '^epoch .* loss ' launch.out) ||
    fail "the step losses differ"
  (($(grep -cE '^epoch .* loss ' launch.out) == 40)) || fail "expected 40 step losses"
  grep -E '^epoch 1 step 40 ' launch.out
  "$build/compute/tnt-ckpt" diff srun.ckpt launch.ckpt --rtol 0 --atol 0 || fail "the weights differ"
}

# scancel of a running training step: Slurm sends SIGTERM to every task, the ranks agree on one
# step boundary, the master writes the checkpoint, and every rank ends within 5 s (Note
# [Preemption] in actors/trainer/src/run_control.h); nothing is left.
srun_scancel() {
  srun -n 2 --label "$build/bin/tnt-train" "$src/conf/lenet5_fashion_mnist.toml" --epochs 1 --print-steps \
    --no-progress --validation-frequency 0 --checkpoint scancel.ckpt >scancel.out 2>&1 &
  local srun_pid=$!
  wait_lines scancel.out 120 1 '^0: epoch 1 step 5 ' || { kill -INT "$srun_pid"; fail "training did not start"; }
  local step
  step=$(squeue -h -s -o %i | grep -E '^[0-9]+\.[0-9]+$' | head -n 1)
  [[ -n $step ]] || { kill -INT "$srun_pid"; fail "no step in squeue"; }
  local t0
  t0=$(now)
  # The job srun made for the step: Slurm sends SIGTERM first (KillWait before SIGKILL), where
  # scancel of the step alone would send SIGKILL.
  scancel "${step%%.*}" || fail "scancel ${step%%.*}"
  timeout 10 tail --pid="$srun_pid" -f /dev/null || { kill -KILL "$srun_pid"; fail "srun still runs 10 s after scancel"; }
  local took
  took=$(elapsed "$t0")
  echo "scancel ${step%%.*} (step $step): every rank ended ${took} s later"
  python3 -c "import sys; sys.exit(0 if $took <= 5 else 1)" || fail "the ranks took ${took} s (bound 5 s)"
  for r in 0 1; do
    grep -E "^$r: .*tnt-train stopped: preempted" scancel.out || fail "rank $r does not say it was preempted"
  done
  "$build/compute/tnt-ckpt" info scancel.ckpt | head -n 3 || fail "the preemption checkpoint does not load"
  [[ -z "$(squeue -h -s 2>/dev/null)" ]] || fail "a step is left: $(squeue -s)"
  pgrep -f "[s]cancel.ckpt" >/dev/null && fail "a rank is left"
  echo "nothing left running: no step in squeue, no rank alive"
}

# Note [Placement conflicts] (transport/src/environment.cpp): a TNT_SIZE set by hand beside
# srun's SLURM_NTASKS is refused naming both; the ranks tnt-launch starts inside a step of one
# task (they inherit the step's SLURM_* but are not its tasks) still train.
srun_conflict() {
  local args=(--model mlp --dataset synthetic --shape 1 8 8 --train-size 32 --num-classes 2 --global-batch 8
    --epochs 1 --no-progress)
  TNT_SIZE=1 timeout 60 srun -N1 -n 2 --label "$build/bin/tnt-train" "${args[@]}" >conflict.out 2>&1 &&
    fail "TNT_SIZE=1 under srun -n 2 was not refused"
  grep -q "TNT_SIZE=1 but srun started this process as one of 2 ranks (SLURM_NTASKS=2)" conflict.out ||
    fail "the refusal does not name both sizes"
  grep -m1 "TNT_SIZE=1 but" conflict.out
  timeout 120 srun -N1 -n 1 "$build/bin/tnt-launch" -n 2 -- "$build/bin/tnt-train" "${args[@]}" \
    >nested.out 2>&1 || fail "tnt-launch -n 2 inside an srun step of one task failed"
  grep -E "trained [0-9]+ steps" nested.out || fail "tnt-launch -n 2 inside an srun step did not train"
}

case $check in
  srun_collectives | srun_sigkill | salloc_launch | srun_train | srun_scancel | srun_conflict | srun_mpi) "$check" ;;
  *) echo "slurm_checks.sh: unknown check '$check'" >&2; exit 2 ;;
esac
echo PASS
