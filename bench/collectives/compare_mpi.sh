#!/usr/bin/env bash
# tnt's allreduce side by side with OpenMPI's on this host, alternating in one run:
#   bench/collectives/compare_mpi.sh [--build DIR] [-n RANKS]... [--busy-core] [--bind | --unbound] [--rounds N]
#                                    [--min 4K] [--max 256M] [--seconds S] [--json]
# Three sides, each a job of RANKS ranks on this machine: tnt (tnt-launch, its defaults: shared
# memory between local ranks), OpenMPI with its defaults (shared memory, btl vader) and OpenMPI
# restricted to TCP over loopback (--mca pml ob1 --mca btl tcp,self). A round runs the three
# sides one after the other; --rounds rounds (default 3) alternate them, so that a disturbance
# hits all sides alike. Per size, each run reports the median over iterations of the slowest
# rank's time; the table shows the median of the rounds' values, and the ratios tnt/MPI.
#   -n RANKS      ranks per job (repeatable: -n 2 -n 4 runs both; default 2). More ranks than
#                 cores is allowed (OpenMPI gets --oversubscribe).
#   --busy-core   a busy loop pinned to the last core runs during every side's runs (started
#                 before the first round, killed after the last one, also on failure or Ctrl-C)
#   --bind        bind each rank to cores of its own on both sides (tnt-launch --bind-to core,
#                 mpirun --bind-to core) where ranks do not outnumber cores
#   --unbound     leave every rank unbound on both sides (--bind-to none)
#                 default: each side's own placement; both bind each rank to a core of its own
#                 where 2 ranks have 2 cores, and leave ranks that outnumber cores unbound
#   --json        one JSON document on stdout: every configuration's rows and every round's value
# Needs openmpi-bin and libopenmpi-dev at build time (tnt-bench-mpi-allreduce). The machine's
# other load is not controlled: quote the ratios of one run, not absolute times from several.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
ranks_list=()
busy=0 placement=defaults rounds=3 json=0
bench_args=()
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    -n) ranks_list+=("$2"); shift 2 ;;
    --busy-core) busy=1; shift ;;
    --bind) placement=bound; shift ;;
    --unbound) placement=unbound; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --json) json=1; shift ;;
    --min | --max | --seconds) bench_args+=("$1" "$2"); shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "compare_mpi.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
((${#ranks_list[@]})) || ranks_list=(2)
for r in "${ranks_list[@]}" "$rounds"; do
  [[ $r =~ ^[1-9][0-9]*$ ]] || { echo "compare_mpi.sh: '$r' is not a positive whole number" >&2; exit 2; }
done
bin=$build/bin
for program in tnt-launch tnt-bench-allreduce tnt-bench-mpi-allreduce; do
  [[ -x $bin/$program ]] || {
    echo "compare_mpi.sh: $bin/$program is missing (build first; the MPI side needs openmpi-bin and libopenmpi-dev)" >&2
    exit 2
  }
done
command -v mpirun > /dev/null || { echo "compare_mpi.sh: mpirun not found: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 2; }

out=$(mktemp -d)
busy_pid=
cleanup() {
  if [[ -n $busy_pid ]]; then kill "$busy_pid" 2> /dev/null || true; wait "$busy_pid" 2> /dev/null || true; fi
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

busy_cpu=
if ((busy)); then
  busy_cpu=$(($(nproc) - 1))
  taskset -c "$busy_cpu" bash -c 'while :; do :; done' &
  busy_pid=$!
fi

run_side() {  # side ranks round
  local side=$1 ranks=$2 round=$3 file="$out/$1.$2.$3.json"
  local mpi=(mpirun --allow-run-as-root -n "$ranks") tnt_bind=()
  ((ranks <= $(nproc))) || mpi+=(--oversubscribe)
  case $placement in
    bound) if ((ranks <= $(nproc))); then mpi+=(--bind-to core); tnt_bind=(--bind-to core); fi ;;
    unbound) mpi+=(--bind-to none); tnt_bind=(--bind-to none) ;;
  esac
  case $side in
    tnt) "$bin/tnt-launch" -n "$ranks" "${tnt_bind[@]}" -- "$bin/tnt-bench-allreduce" --json "${bench_args[@]}" > "$file" ;;
    mpi_default) "${mpi[@]}" "$bin/tnt-bench-mpi-allreduce" --json "${bench_args[@]}" > "$file" ;;
    mpi_tcp)
      "${mpi[@]}" --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
        "$bin/tnt-bench-mpi-allreduce" --json "${bench_args[@]}" > "$file" ;;
  esac
}

for round in $(seq 1 "$rounds"); do
  for ranks in "${ranks_list[@]}"; do
    for side in tnt mpi_default mpi_tcp; do
      ((json)) || printf 'round %d/%d: %s, %d ranks\n' "$round" "$rounds" "$side" "$ranks" >&2
      run_side "$side" "$ranks" "$round"
    done
  done
done

python3 - "$out" "$json" "$busy_cpu" "$(nproc)" "$placement" "${ranks_list[@]}" << 'PY'
import glob, json, os, statistics, sys, time
out, want_json, busy_cpu, cores, placement, ranks_list = (sys.argv[1], sys.argv[2] == "1", sys.argv[3],
                                                          int(sys.argv[4]), sys.argv[5], sys.argv[6:])
SIDES = ["tnt", "mpi_default", "mpi_tcp"]

def load(side, ranks):
    by_size = {}
    for f in sorted(glob.glob(f"{out}/{side}.{ranks}.*.json")):
        for r in json.load(open(f))["results"]:
            by_size.setdefault(r["bytes"], []).append(r)
    return by_size

def human(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1024 else f"{b} B"

configs = []
for ranks in dict.fromkeys(ranks_list):
    data = {side: load(side, ranks) for side in SIDES}
    rows = []
    for size in sorted(data["tnt"]):
        row = {"bytes": size}
        for side in SIDES:
            runs = data[side][size]
            row[f"{side}_us"] = statistics.median(r["median_us"] for r in runs)
            row[f"{side}_busbw_GBps"] = statistics.median(r["bus_bandwidth_GBps"] for r in runs)
            row[f"{side}_rounds_us"] = [r["median_us"] for r in runs]
        for side in SIDES[1:]:
            row[f"time_ratio_tnt_{side}"] = row["tnt_us"] / row[f"{side}_us"]
            row[f"busbw_ratio_tnt_{side}"] = row["tnt_busbw_GBps"] / row[f"{side}_busbw_GBps"]
        rows.append(row)
    configs.append({"ranks": int(ranks), "rounds": len(data["tnt"][min(data["tnt"])]), "rows": rows})

busy = f"a busy loop pinned to CPU {busy_cpu}" if busy_cpu else "none"
if want_json:
    print(json.dumps({"benchmark": "allreduce float32 sum, tnt vs OpenMPI", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                      "host": os.uname().nodename, "cores": cores, "busy_core": busy, "placement": placement,
                      "configurations": configs}, indent=1))
    sys.exit(0)
for c in configs:
    if placement == "unbound" or c["ranks"] > cores:
        bound = "unbound"
    elif placement == "bound":
        bound = "bound to cores"
    else:
        bound = "each side's defaults: bound to cores"
    print(f"\nallreduce float32 sum, {c['ranks']} ranks on this host ({cores} cores, ranks {bound}), extra load: {busy}; "
          f"medians of {c['rounds']} alternating rounds; time in us, busbw in GB/s")
    print(f"{'size':>8} | {'tnt':>9} {'busbw':>6} | {'mpi-shm':>9} {'busbw':>6} | {'mpi-tcp':>9} {'busbw':>6} |"
          f" {'time tnt/shm':>12} {'busbw tnt/shm':>13} | {'time tnt/tcp':>12} {'busbw tnt/tcp':>13}")
    for r in c["rows"]:
        print(f"{human(r['bytes']):>8} | {r['tnt_us']:9.1f} {r['tnt_busbw_GBps']:6.3f} |"
              f" {r['mpi_default_us']:9.1f} {r['mpi_default_busbw_GBps']:6.3f} |"
              f" {r['mpi_tcp_us']:9.1f} {r['mpi_tcp_busbw_GBps']:6.3f} |"
              f" {r['time_ratio_tnt_mpi_default']:12.2f} {r['busbw_ratio_tnt_mpi_default']:13.2f} |"
              f" {r['time_ratio_tnt_mpi_tcp']:12.2f} {r['busbw_ratio_tnt_mpi_tcp']:13.2f}")
print("\nmpi-shm: OpenMPI's defaults (shared memory); mpi-tcp: --mca pml ob1 --mca btl tcp,self over loopback;"
      " time ratio < 1 and busbw ratio > 1: tnt is faster")
PY
