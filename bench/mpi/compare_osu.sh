#!/usr/bin/env bash
# The OSU Micro-Benchmarks 5.3 programs built twice from their tarball, unchanged: with OpenMPI's
# mpicc and with tnt-mpicc, and run alternately on this host:
#   bench/mpi/compare_osu.sh [--build DIR] [--tarball PATH] [-n RANKS]... [--rounds N] [--tcp | --netns]
#                            [--programs "osu_latency osu_allreduce ..."] [--osu-args "-m 1:1048576 ..."] [--json]
#   --tarball     omb-5.3.tar.gz (default: $TNT_OSU_TARBALL; OSU's sources are not part of tnt).
#                 Without one the script exits 77 and says why.
#   -n RANKS      ranks per job (repeatable; default 2). The point-to-point programs run on 2
#                 ranks only (osu_multi_lat on any even number).
#   --rounds N    rounds (default 3): each round runs every program once with OpenMPI and once
#                 with tnt, one after the other, so that a disturbance hits both alike; the table
#                 shows the median over rounds per message size.
#   --tcp         TCP between local ranks on both sides: TNT_SHM=0 for tnt, --mca btl self,tcp for
#                 OpenMPI (default: each side's shared memory)
#   --netns       2 ranks on 2 hosts made of network namespaces (root; bench/netns_hosts.sh), 1
#                 each: tnt's TCP against OpenMPI's tcp btl over a veth and a bridge
#   --programs    a subset of the 15 (default: every one that both sides build)
#   --osu-args    arguments for the collective programs (default: OSU's own defaults); the
#                 point-to-point programs of OSU 5.3 take only -i and -x, given by --pt2pt-args
#   --json        one JSON document on stdout: every row and every round's value
# Columns: the median of OpenMPI's and tnt's values (latency in us, bandwidth in MB/s) and
# tnt/OpenMPI (below 1 is better for tnt for a latency, above 1 for a bandwidth); then, per program,
# the geometric mean over its sizes of tnt's time over OpenMPI's (for a bandwidth, OpenMPI's over
# tnt's) and the largest of them. A program that tnt-mpicc cannot build yet is listed with the
# compiler's first error.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
tarball=${TNT_OSU_TARBALL:-}
ranks_list=() rounds=3 tcp=0 netns=0 json=0 programs="" osu_args="" pt2pt_args=""
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --tarball) tarball=$2; shift 2 ;;
    -n) ranks_list+=("$2"); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --tcp) tcp=1; shift ;;
    --netns) netns=1; shift ;;
    --programs) programs=$2; shift 2 ;;
    --osu-args) osu_args=$2; shift 2 ;;
    --pt2pt-args) pt2pt_args=$2; shift 2 ;;
    --json) json=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "compare_osu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
((${#ranks_list[@]})) || ranks_list=(2)
if ((netns)); then
  ((tcp == 0)) || { echo "compare_osu.sh: --tcp and --netns exclude each other (--netns is TCP already)" >&2; exit 2; }
  [[ ${ranks_list[*]} == 2 ]] || { echo "compare_osu.sh: --netns runs 2 ranks, one per host" >&2; exit 2; }
fi
for r in "${ranks_list[@]}" "$rounds"; do
  [[ $r =~ ^[1-9][0-9]*$ ]] || { echo "compare_osu.sh: '$r' is not a positive whole number" >&2; exit 2; }
done
if [[ -z "$tarball" ]]; then
  echo "SKIPPED: no OSU Micro-Benchmarks 5.3 tarball: give --tarball PATH or set TNT_OSU_TARBALL" >&2
  exit 77
fi
for tool in tnt-launch tnt-mpicc; do
  [[ -x $build/bin/$tool ]] || { echo "compare_osu.sh: $build/bin/$tool is missing (build tnt first)" >&2; exit 2; }
done
for tool in mpicc mpirun; do
  command -v $tool > /dev/null || { echo "compare_osu.sh: $tool not found: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/tnt-compare-osu.XXXXXX")
source "$here/../netns_hosts.sh"
trap 'netns_down; rm -rf "$work"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe)
tnt_env=()
tnt_launch=("$build/bin/tnt-launch")
if ((tcp)); then
  mpi+=(--mca pml ob1 --mca btl self,tcp)
  tnt_env=(TNT_SHM=0)
fi
if ((netns)); then
  netns_up "$work" || exit 2
  mpi=("${mpi_on_hosts[@]}")
  tnt_launch+=("${tnt_on_hosts[@]}")
fi
# shellcheck disable=SC2086
"$here/build_osu.sh" "$tarball" "$work/openmpi" mpicc $programs > /dev/null
# shellcheck disable=SC2086
"$here/build_osu.sh" "$tarball" "$work/tnt" "$build/bin/tnt-mpicc" $programs > /dev/null
mapfile -t both < <(grep -xFf "$work/tnt/built" "$work/openmpi/built")

: > "$work/results"
run_side() {  # side ranks round program
  local side=$1 ranks=$2 round=$3 program=$4 args=() out=$work/run.out
  case $program in
    osu_latency | osu_bw | osu_bibw | osu_multi_lat) read -ra args <<< "$pt2pt_args" ;;
    *) read -ra args <<< "$osu_args" ;;
  esac
  if [[ $side == openmpi ]]; then
    timeout 900 "${mpi[@]}" -np "$ranks" "$work/openmpi/bin/$program" "${args[@]}" > "$out" 2>&1 || true
  else
    local placed=()  # a hostfile places the ranks itself
    ((netns)) || placed=(-n "$ranks")
    timeout 900 env "${tnt_env[@]}" "${tnt_launch[@]}" "${placed[@]}" -- "$work/tnt/bin/$program" "${args[@]}" \
      > "$out" 2>&1 || true
  fi
  # OSU prints "SIZE VALUE" rows (osu_barrier: "VALUE" alone); anything else is a header or noise.
  awk -v side="$side" -v ranks="$ranks" -v round="$round" -v program="$program" '
    /^[0-9]+[ \t]+[0-9.]+$/ { print program, ranks, side, round, $1, $2; found = 1 }
    /^[ \t]+[0-9.]+$/ { print program, ranks, side, round, 0, $1; found = 1 }
    END { if (!found) print program, ranks, side, round, "failed", 0 }' "$out" >> "$work/results"
  if ! grep -qE '^[0-9]+[ 	]+[0-9.]+$|^[ 	]+[0-9.]+$' "$out"; then
    echo "compare_osu.sh: $program on $ranks ranks ($side) printed no result:" >&2
    tail -n 5 "$out" >&2
  fi
}
for ranks in "${ranks_list[@]}"; do
  for ((round = 1; round <= rounds; round++)); do
    for program in "${both[@]}"; do
      case $program in
        osu_latency | osu_bw | osu_bibw) ((ranks == 2)) || continue ;;
        osu_multi_lat) ((ranks % 2 == 0)) || continue ;;
      esac
      echo "round $round/$rounds: $program on $ranks ranks" >&2
      run_side openmpi "$ranks" "$round" "$program"
      run_side tnt "$ranks" "$round" "$program"
    done
  done
done

transport=default
((tcp)) && transport=tcp
((netns)) && transport=netns
/usr/bin/python3 - "$work/results" "$json" "$transport" "$work/tnt/not_built" "$rounds" << 'PYTHON'
import json, math, statistics, sys
from collections import defaultdict
results, as_json, transport, not_built, rounds = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4], int(sys.argv[5])
values = defaultdict(lambda: defaultdict(list))
failed = set()
for line in open(results):
    program, ranks, side, round_, size, value = line.split()
    if size == "failed":
        failed.add((program, int(ranks), side))
        continue
    values[(program, int(ranks), int(size))][side].append(float(value))
bandwidth = {"osu_bw", "osu_bibw"}
rows = []
for (program, ranks, size), sides in sorted(values.items()):
    ompi = statistics.median(sides["openmpi"]) if sides.get("openmpi") else None
    tnt = statistics.median(sides["tnt"]) if sides.get("tnt") else None
    rows.append({"program": program, "ranks": ranks, "bytes": size,
                 "unit": "MB/s" if program in bandwidth else "us",
                 "openmpi": ompi, "tnt": tnt, "ratio": tnt / ompi if ompi and tnt is not None else None,
                 "openmpi_rounds": sides.get("openmpi", []), "tnt_rounds": sides.get("tnt", [])})
unbuilt = [line.rstrip("\n") for line in open(not_built) if line.strip()]
# Per program and rank count: tnt's time over OpenMPI's at each size (a bandwidth's inverse).
time_ratios = defaultdict(list)
for r in rows:
    if r["ratio"]:
        time_ratios[(r["program"], r["ranks"])].append(1 / r["ratio"] if r["unit"] == "MB/s" else r["ratio"])
summary = [{"program": p, "ranks": n, "geomean_time_ratio": math.exp(statistics.fmean(math.log(x) for x in xs)),
            "worst_time_ratio": max(xs), "sizes": len(xs)} for (p, n), xs in sorted(time_ratios.items())]
described = {"default": "each side default", "tcp": "TCP (TNT_SHM=0, btl self,tcp)",
             "netns": "2 namespace hosts x 1 rank, TCP against btl tcp"}[transport]
if as_json:
    json.dump({"transport": transport, "rounds": rounds, "rows": rows, "per_program": summary,
               "failed": [list(f) for f in sorted(failed)], "tnt_not_built": unbuilt}, sys.stdout, indent=1)
    print()
    sys.exit(0)
print(f"# OSU 5.3, OpenMPI's mpicc vs tnt-mpicc, {described}, "
      f"medians of {rounds} rounds")
print(f"{'program':<20}{'ranks':>6}{'bytes':>10}{'unit':>6}{'OpenMPI':>12}{'tnt':>12}{'tnt/OpenMPI':>13}")
fmt = lambda v: f"{v:12.2f}" if v is not None else f"{'-':>12}"
for r in rows:
    ratio = f"{r['ratio']:13.2f}" if r["ratio"] is not None else f"{'-':>13}"
    print(f"{r['program']:<20}{r['ranks']:>6}{r['bytes']:>10}{r['unit']:>6}{fmt(r['openmpi'])}{fmt(r['tnt'])}{ratio}")
print(f"\n{'program':<20}{'ranks':>6}{'sizes':>6}{'time ratio, geometric mean':>28}{'worst':>8}")
for s in summary:
    print(f"{s['program']:<20}{s['ranks']:>6}{s['sizes']:>6}{s['geomean_time_ratio']:28.2f}{s['worst_time_ratio']:8.2f}")
for program, ranks, side in sorted(failed):
    print(f"FAILED: {program} on {ranks} ranks ({side}) printed no result")
for line in unbuilt:
    print(f"not built with tnt-mpicc: {line}")
PYTHON
