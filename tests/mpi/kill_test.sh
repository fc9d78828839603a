#!/usr/bin/env bash
# A rank SIGKILLed in the middle of an MPI program: every other rank must end within 5 s with
# tnt's error naming the lost rank (MPI_ERRORS_ARE_FATAL), and no process may be left.
#   kill_test.sh ENDLESS_PROGRAM
#   kill_test.sh --after SECONDS PROGRAM [ARG...]
# ENDLESS_PROGRAM (tests/mpi/endless.c) kills its rank 2 itself at a known place; with --after,
# the script SIGKILLs rank 2 of PROGRAM (an OSU benchmark with many iterations, say) SECONDS
# after the start. The ranks are started by hand with tnt's variables (as tnt-launch would, but
# without a launcher that stops the job itself when a rank dies), so that what ends them is tnt's
# own failure detection.
set -uo pipefail
size=3 victim=2 after=
if [[ $1 == --after ]]; then
  after=$2
  shift 2
fi
program=$1
shift
work=$(mktemp -d "${TMPDIR:-/tmp}/tnt-mpi-kill.XXXXXX")
arguments=("$@")
[[ -n $after ]] || arguments=("$victim" "$work/killed_at")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2> /dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
for ((r = 0; r < size; r++)); do
  TNT_RANK=$r TNT_SIZE=$size TNT_LOCAL_RANK=$r TNT_LOCAL_SIZE=$size TNT_MASTER_ADDR=127.0.0.1 TNT_MASTER_PORT=$port \
    TNT_JOB_TOKEN=$token "$program" "${arguments[@]}" > "$work/rank$r.log" 2>&1 &
  pids+=($!)
done
# Each survivor's end, polled every 50 ms, at most 60 s.
declare -A ended=()
kill_tick=-1
[[ -n $after ]] && kill_tick=$(python3 -c "print(int($after / 0.05))")
for ((tick = 0; tick < 1200; tick++)); do
  if ((tick == kill_tick)); then
    kill -9 "${pids[$victim]}" && date +%s.%N > "$work/killed_at"
  fi
  for ((r = 0; r < size; r++)); do
    [[ -n "${ended[$r]:-}" ]] && continue
    kill -0 "${pids[$r]}" 2> /dev/null || ended[$r]=$(date +%s.%N)
  done
  ((${#ended[@]} == size)) && break
  sleep 0.05
done
failures=0
[[ -f "$work/killed_at" ]] || { echo "FAILED: rank $victim never reached its kill"; cat "$work"/rank*.log; exit 1; }
killed_at=$(cat "$work/killed_at")
for ((r = 0; r < size; r++)); do
  ((r == victim)) && continue
  if [[ -z "${ended[$r]:-}" ]]; then
    echo "FAILED: rank $r still runs 60 s after rank $victim was killed"
    failures=$((failures + 1))
    continue
  fi
  wait "${pids[$r]}"
  status=$?
  after=$(python3 -c "print(f'{${ended[$r]} - $killed_at:.2f}')")
  echo "rank $r ended with status $status, $after s after the kill: $(grep -m 1 'tnt MPI' "$work/rank$r.log")"
  if ((status == 0)) || ! python3 -c "import sys; sys.exit(0 if $after <= 5 else 1)"; then
    echo "FAILED: rank $r: status $status, $after s after the kill (at most 5 s, non-zero)"
    failures=$((failures + 1))
  fi
  if ! grep -qE "tnt MPI: rank $r: MPI_[A-Za-z]+: .*rank $victim" "$work/rank$r.log"; then
    echo "FAILED: rank $r does not name rank $victim in an MPI call's error:"
    cat "$work/rank$r.log"
    failures=$((failures + 1))
  fi
done
for pid in "${pids[@]}"; do
  kill -0 "$pid" 2> /dev/null && { echo "FAILED: process $pid is left"; failures=$((failures + 1)); }
done
((failures == 0)) || exit 1
echo PASS
