#!/usr/bin/env bash
# examples/jacobi2d's time per iteration on tnt (jacobi2d-tnt, the C API) and on OpenMPI (its
# twin jacobi2d-mpi), alternating in one run on this host:
#   bench/jacobi2d/compare.sh [--build DIR] [-n RANKS | --netns] [--grid N]... [--iterations I] [--rounds R] [--json]
#   --build DIR      tnt's build folder (default build/): its libtnt_c and tnt-launch are used
#   -n RANKS         ranks of each job (default 2), cut RANKS x 1
#   --netns          2 ranks on 2 hosts made of network namespaces (root; bench/netns_hosts.sh), 1
#                    each: tnt's TCP against OpenMPI's tcp btl over a veth and a bridge
#   --grid N         N x N points (repeatable; default 256 and 1024)
#   --iterations I   iterations a run times (default 500; each program times its loop only)
#   --rounds R       rounds (default 3); each runs tnt then OpenMPI per grid, so a disturbance hits
#                    both alike; the table gives the medians of the rounds, their ratio, and the
#                    median of the rounds' own ratios (each round's tnt over its OpenMPI: the
#                    machine's slow and fast spells, which both sides of a round share, cancel)
#   --json           one JSON document on stdout, every round's value included
# Both programs are compiled here with the same compiler flags (-O3, C11): the twin by mpicc. Both
# sides use their defaults (tnt-launch: shared memory between local ranks; mpirun: vader). The
# machine's other load is not controlled: quote the ratio of one run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$here/../..
build=$source_dir/build
ranks=2 iterations=500 rounds=3 json=0 netns=0
grids=()
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    --netns) netns=1; shift ;;
    --grid) grids+=("$2"); shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --json) json=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
((${#grids[@]})) || grids=(256 1024)
for value in "$ranks" "$iterations" "$rounds" "${grids[@]}"; do
  [[ $value =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: '$value' is not a positive whole number" >&2; exit 2; }
done
[[ -x $build/bin/tnt-launch && -e $build/c/libtnt_c.so ]] || {
  echo "compare.sh: $build/bin/tnt-launch or $build/c/libtnt_c.so is missing: build tnt first" >&2; exit 2; }
for tool in mpicc mpirun; do
  command -v $tool > /dev/null || { echo "compare.sh: $tool not found: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 2; }
done

((netns == 0 || ranks == 2)) || { echo "compare.sh: --netns runs 2 ranks, one per host (-n $ranks given)" >&2; exit 2; }
out=$(mktemp -d)
source "$here/../netns_hosts.sh"
trap 'netns_down; rm -rf "$out"' EXIT
tnt_run=("$build/bin/tnt-launch" -n "$ranks")
mpi_run=(mpirun --oversubscribe --allow-run-as-root)
if ((netns)); then
  netns_up "$out" || exit 2
  tnt_run=("$build/bin/tnt-launch" "${tnt_on_hosts[@]}")
  mpi_run=("${mpi_on_hosts[@]}")
fi
example=$source_dir/examples/jacobi2d
cc=${CC:-cc}
"$cc" -O3 -std=c11 -I"$source_dir/c/include" "$example/jacobi2d_tnt.c" -o "$out/jacobi2d-tnt" \
  -L"$build/c" -ltnt_c -Wl,-rpath,"$(cd "$build/c" && pwd)"
mpicc -O3 -std=c11 "$example/jacobi2d_mpi.c" -o "$out/jacobi2d-mpi"

# Prints the microseconds per iteration that a run reports.
per_iteration() { sed -n 's/^jacobi2d [a-z]*: \([0-9.]*\) us per iteration$/\1/p' "$1"; }
run_side() {  # SIDE GRID ROUND
  local log=$out/$1-$2-$3.log
  if [[ $1 == tnt ]]; then
    "${tnt_run[@]}" -- "$out/jacobi2d-tnt" "$2" "$ranks" 1 "$iterations" > "$log" 2>&1
  else
    "${mpi_run[@]}" -n "$ranks" "$out/jacobi2d-mpi" "$2" "$ranks" 1 "$iterations" > "$log" 2>&1
  fi || { echo "compare.sh: the $1 run failed:" >&2; cat "$log" >&2; exit 1; }
  local value
  value=$(per_iteration "$log")
  [[ -n $value ]] || { echo "compare.sh: no time in the $1 run's output:" >&2; cat "$log" >&2; exit 1; }
  echo "$value"
}

declare -A values
for ((round = 1; round <= rounds; ++round)); do
  for grid in "${grids[@]}"; do
    for side in tnt mpi; do
      values[$side,$grid]+="$(run_side $side "$grid" $round) "
    done
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# Each round's tnt time over its OpenMPI time, for GRID.
round_ratios() {
  paste <(tr ' ' '\n' <<< "${values[tnt,$1]}" | grep .) <(tr ' ' '\n' <<< "${values[mpi,$1]}" | grep .) |
    awk '{printf "%.4f ", $1 / $2}'
}
if ((json)); then
  printf '{"benchmark": "jacobi2d", "ranks": %d, "namespace_hosts": %s, "iterations": %d, "rounds": %d, "unit": "us per iteration", "rows": [' \
    "$ranks" "$( ((netns)) && echo true || echo false)" "$iterations" "$rounds"
  sep=
  for grid in "${grids[@]}"; do
    tnt=$(median <<< "${values[tnt,$grid]}") mpi=$(median <<< "${values[mpi,$grid]}")
    printf '%s{"grid": %d, "tnt": %s, "openmpi": %s, "ratio": %s, "median_round_ratio": %.3f, "tnt_rounds": [%s], "openmpi_rounds": [%s]}' \
      "$sep" "$grid" "$tnt" "$mpi" "$(awk -v a="$tnt" -v b="$mpi" 'BEGIN {printf "%.3f", a / b}')" \
      "$(median <<< "$(round_ratios "$grid")")" \
      "$(echo ${values[tnt,$grid]} | tr ' ' ',')" "$(echo ${values[mpi,$grid]} | tr ' ' ',')"
    sep=", "
  done
  printf ']}\n'
else
  where="on this host"
  ((netns)) && where="on 2 namespace hosts x 1 rank"
  echo "jacobi2d, $ranks ranks ($ranks x 1) $where, $iterations iterations, medians of $rounds alternating rounds (us per iteration)"
  printf '%-12s %12s %12s %10s %14s\n' grid tnt OpenMPI tnt/MPI "rounds' ratio"
  for grid in "${grids[@]}"; do
    tnt=$(median <<< "${values[tnt,$grid]}") mpi=$(median <<< "${values[mpi,$grid]}")
    printf '%-12s %12.2f %12.2f %10.3f %14.3f\n' "${grid}x${grid}" "$tnt" "$mpi" \
      "$(awk -v a="$tnt" -v b="$mpi" 'BEGIN {print a / b}')" "$(median <<< "$(round_ratios "$grid")")"
  done
fi
