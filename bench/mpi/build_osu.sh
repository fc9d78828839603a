#!/usr/bin/env bash
# Builds the OSU Micro-Benchmarks 5.3 programs of issue 25 from their tarball, unchanged, with an
# MPI compiler wrapper, as OSU's own Makefiles would (each program with its folder's util file):
#   bench/mpi/build_osu.sh TARBALL OUT_DIR COMPILER [PROGRAM...]
# TARBALL is omb-5.3.tar.gz (OSU's sources are not part of tnt: give its path, e.g. through
# TNT_OSU_TARBALL); COMPILER is tnt-mpicc or OpenMPI's mpicc. The programs go to OUT_DIR/bin;
# OUT_DIR/built lists those that built, OUT_DIR/not_built those that did not, each with the
# compiler's first error, and OUT_DIR/log/PROGRAM.log holds the compiler's output. Exits 0 once
# every program was tried, 2 on a usage error, 77 (skipped) where TARBALL is not a file.
set -euo pipefail
tarball=${1:-} out=${2:-} compiler=${3:-}
if [[ -z "$tarball" || -z "$out" || -z "$compiler" ]]; then
  echo "usage: build_osu.sh TARBALL OUT_DIR COMPILER [PROGRAM...]" >&2
  exit 2
fi
shift 3
if [[ ! -f "$tarball" ]]; then
  echo "SKIPPED: the OSU Micro-Benchmarks 5.3 tarball '$tarball' is not a file (set TNT_OSU_TARBALL to omb-5.3.tar.gz)" >&2
  exit 77
fi
# The issue's 15 programs, each with the folder its sources are in.
declare -A folder_of=(
  [osu_latency]=pt2pt [osu_bw]=pt2pt [osu_bibw]=pt2pt [osu_multi_lat]=pt2pt
  [osu_allreduce]=collective [osu_bcast]=collective [osu_alltoall]=collective [osu_alltoallv]=collective
  [osu_allgather]=collective [osu_allgatherv]=collective [osu_barrier]=collective [osu_reduce]=collective
  [osu_gather]=collective [osu_scatter]=collective [osu_reduce_scatter]=collective
)
programs=("$@")
((${#programs[@]})) || programs=(osu_latency osu_bw osu_bibw osu_multi_lat osu_allreduce osu_bcast osu_alltoall
  osu_alltoallv osu_allgather osu_allgatherv osu_barrier osu_reduce osu_gather osu_scatter osu_reduce_scatter)
mkdir -p "$out/src" "$out/bin" "$out/log"
tar -xzf "$tarball" -C "$out/src"
top=$(find "$out/src" -mindepth 1 -maxdepth 1 -type d | head -n 1)
[[ -d "$top/mpi/pt2pt" && -d "$top/mpi/collective" ]] ||
  { echo "build_osu.sh: $tarball has no mpi/pt2pt and mpi/collective: not OSU Micro-Benchmarks 5.3?" >&2; exit 2; }
: > "$out/built"
: > "$out/not_built"
for program in "${programs[@]}"; do
  folder=${folder_of[$program]:-}
  [[ -n "$folder" ]] || { echo "build_osu.sh: $program is not one of the 15 programs" >&2; exit 2; }
  dir=$top/mpi/$folder
  util=$dir/osu_pt2pt.c
  [[ $folder == collective ]] && util=$dir/osu_coll.c
  # OSU's configure would define PACKAGE_VERSION; nothing else is needed on a CPU build.
  if $compiler -O2 -DPACKAGE_VERSION='"5.3"' -I"$dir" "$dir/$program.c" "$util" -o "$out/bin/$program" -lm \
    > "$out/log/$program.log" 2>&1; then
    echo "$program" >> "$out/built"
  else
    first=$(grep -m 1 -E 'error|undefined reference' "$out/log/$program.log" || head -n 1 "$out/log/$program.log")
    echo "$program: ${first//$top\//}" >> "$out/not_built"
  fi
done
echo "built with $compiler: $(wc -l < "$out/built") of ${#programs[@]}"
