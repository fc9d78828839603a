#!/usr/bin/env bash
# The OSU Micro-Benchmarks 5.3 programs of issue 25, built unchanged with tnt-mpicc and run under
# tnt-launch at short settings:
#   osu_test.sh BUILD_DIR SOURCE_DIR
# The tarball comes from TNT_OSU_TARBALL (OSU's sources are not part of tnt); without it the test
# is skipped (exit 77) and says why. A program must build exactly when every MPI function it calls
# (the table below: the undefined MPI symbols of its objects and its folder's util file) is
# declared in tnt's mpi.h, so the test follows the layer as it grows; each one built must complete
# on 2 and 4 ranks (osu_latency, osu_bw and osu_bibw, which need exactly 2, on 2), and on 2
# network-namespace hosts of one rank each; a rank SIGKILLed in osu_allreduce must end the job.
set -uo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tarball=${TNT_OSU_TARBALL:-}
if [[ -z "$tarball" ]]; then
  echo "SKIPPED: TNT_OSU_TARBALL is not set (the path of the OSU Micro-Benchmarks 5.3 tarball, omb-5.3.tar.gz)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tnt-osu.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$src/bench/mpi/build_osu.sh" "$tarball" "$work" "$build/bin/tnt-mpicc" || exit $?

coll="MPI_Init MPI_Comm_rank MPI_Comm_size MPI_Barrier MPI_Reduce MPI_Test MPI_Wtime MPI_Abort MPI_Finalize"
declare -A calls=(
  [osu_latency]="MPI_Init MPI_Comm_rank MPI_Comm_size MPI_Barrier MPI_Send MPI_Recv MPI_Wtime MPI_Finalize"
  [osu_bw]="MPI_Init MPI_Comm_rank MPI_Comm_size MPI_Send MPI_Recv MPI_Isend MPI_Irecv MPI_Waitall MPI_Wtime MPI_Finalize"
  [osu_bibw]="MPI_Init MPI_Comm_rank MPI_Comm_size MPI_Isend MPI_Irecv MPI_Waitall MPI_Wtime MPI_Finalize"
  [osu_multi_lat]="MPI_Init MPI_Comm_rank MPI_Comm_size MPI_Barrier MPI_Send MPI_Recv MPI_Reduce MPI_Wtime MPI_Finalize"
  [osu_allreduce]="$coll MPI_Allreduce" [osu_bcast]="$coll MPI_Bcast" [osu_alltoall]="$coll MPI_Alltoall"
  [osu_alltoallv]="$coll MPI_Alltoallv" [osu_allgather]="$coll MPI_Allgather" [osu_allgatherv]="$coll MPI_Allgatherv"
  [osu_barrier]="$coll" [osu_reduce]="$coll" [osu_gather]="$coll MPI_Gather" [osu_scatter]="$coll MPI_Scatter"
  [osu_reduce_scatter]="$coll MPI_Reduce_scatter"
)
header=$src/mpi/include/tnt/mpi/mpi.h
failures=0
printf '%-20s %-10s %-8s %-8s %s\n' program builds 2-ranks 4-ranks "missing from mpi.h"
for program in osu_latency osu_bw osu_bibw osu_multi_lat osu_allreduce osu_bcast osu_alltoall osu_alltoallv \
  osu_allgather osu_allgatherv osu_barrier osu_reduce osu_gather osu_scatter osu_reduce_scatter; do
  missing=()
  for function in ${calls[$program]}; do
    grep -qE "^(int|double) $function\(" "$header" || missing+=("$function")
  done
  built=no
  grep -qx "$program" "$work/built" && built=yes
  expected=yes
  ((${#missing[@]})) && expected=no
  results=()
  if [[ $built != "$expected" ]]; then
    echo "FAILED: $program built: $built, expected $expected (missing: ${missing[*]:-none}); compiler said:"
    tail -n 5 "$work/log/$program.log"
    failures=$((failures + 1))
  elif [[ $built == yes ]]; then
    ranks_list=(2 4)
    args=(-i 10 -x 5)
    case $program in
      osu_latency | osu_bw | osu_bibw) ranks_list=(2) args=(-i 10 -x 2) ;;
      osu_multi_lat) args=(-i 10 -x 2) ;;
      *) args+=(-m 1:4096) ;;
    esac
    for ranks in 2 4; do
      if [[ " ${ranks_list[*]} " != *" $ranks "* ]]; then results+=(-); continue; fi
      log=$work/log/$program.n$ranks.run
      if timeout 120 "$build/bin/tnt-launch" -n "$ranks" -- "$work/bin/$program" "${args[@]}" > "$log" 2>&1 &&
        tail -n 1 "$log" | grep -qE '^[0-9]+ +[0-9.]+$|^ +[0-9.]+$'; then
        results+=(ok)
      else
        results+=(FAILED)
        echo "FAILED: $program on $ranks ranks:"
        tail -n 20 "$log"
        failures=$((failures + 1))
      fi
    done
  fi
  printf '%-20s %-10s %-8s %-8s %s\n' "$program" "$built" "${results[0]:--}" "${results[1]:--}" "${missing[*]:-}"
done

# Every program that built, again with one rank on each of 2 network-namespace hosts (TCP between
# them; tests/launcher/netns_run.sh, which skips where namespaces cannot be made).
jobs=()
while read -r program; do
  args=(-i 10 -x 2)
  case $program in osu_latency | osu_bw | osu_bibw | osu_multi_lat) ;; *) args+=(-m 1:4096) ;; esac
  jobs+=("$work/bin/$program" "${args[@]}" ---)
done < "$work/built"
"$src/tests/launcher/netns_run.sh" "$build/bin/tnt-launch" 1,1 "${jobs[@]}" > "$work/log/netns.run" 2>&1
case $? in
  0) echo "$(wc -l < "$work/built") programs on 2 namespace hosts x 1 rank: ok" ;;
  77) echo "on namespace hosts: $(tail -n 1 "$work/log/netns.run")" ;;
  *)
    echo "FAILED: across 2 namespace hosts:"
    tail -n 20 "$work/log/netns.run"
    failures=$((failures + 1))
    ;;
esac
# A rank SIGKILLed in the middle of an OSU run (tests/mpi/kill_test.sh): the others end within 5 s
# with tnt's error naming it, and nothing is left.
if grep -qx osu_allreduce "$work/built"; then
  if "$src/tests/mpi/kill_test.sh" --after 2 "$work/bin/osu_allreduce" -m 1:4096 -i 100000000 -x 10 \
    > "$work/log/kill.run" 2>&1; then
    echo "osu_allreduce, rank 2 of 3 SIGKILLed after 2 s: $(grep -c 'ended with status' "$work/log/kill.run") ranks ended, named it"
  else
    echo "FAILED: a rank SIGKILLed in osu_allreduce:"
    tail -n 20 "$work/log/kill.run"
    failures=$((failures + 1))
  fi
fi
((failures == 0)) || { echo "$failures failures"; exit 1; }
echo PASS
