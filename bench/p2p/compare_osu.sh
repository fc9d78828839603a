#!/usr/bin/env bash
# tnt's point-to-point beside OpenMPI's, alternating in one run, measured the OSU Micro-Benchmarks
# 5.3 way: OpenMPI runs OSU's own osu_latency, osu_bw, osu_bibw and osu_multi_lat (built from the
# tarball with mpicc by bench/mpi/build_osu.sh), tnt runs tnt-bench-p2p, which does exactly what
# they do.
#   bench/p2p/compare_osu.sh [--osu TARBALL] [--build DIR] [--rounds N] [--tests "latency bw ..."]
#                            [--tcp | --netns] [--realtime] [--json]
#   --osu TARBALL  OSU 5.3's sources (omb-5.3.tar.gz; or env TNT_OSU_TARBALL). Without it the
#                  script says so and exits 0: tnt carries no copy of them.
#   --rounds N     alternating rounds (default 3); the table shows each size's median
#   --tcp          tnt with TNT_SHM=0 against OpenMPI's tcp btl (--mca pml ob1 --mca btl tcp,self)
#                  instead of shared memory against OpenMPI's defaults (vader)
#   --netns        across 2 hosts made of network namespaces (root; bench/netns_hosts.sh), 1 rank
#                  each: tnt's TCP against OpenMPI's tcp btl over a veth and a bridge (no multi_lat)
#   --realtime     both sides under `chrt -f 10` (root), so that other work on a shared machine
#                  does not preempt the ranks: small-message latency is otherwise mostly that load
#   --json         one JSON document on stdout
# 2 ranks per job (multi_lat: 4), on this host unless --netns. Without --realtime the machine's other load is not controlled:
# quote ratios of one run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
osu=${TNT_OSU_TARBALL:-}
rounds=3 json=0 tcp=0 netns=0
tests="latency bw bibw multi_lat"
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
realtime=()
while (($#)); do
  case $1 in
    --osu) osu=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --tcp) tcp=1; shift ;;
    --netns) netns=1; shift ;;
    --realtime) realtime=(chrt -f 10); shift ;;
    --json) json=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "compare_osu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "compare_osu.sh: --rounds '$rounds' is not a positive whole number" >&2; exit 2; }
if ((netns)); then
  ((tcp == 0)) || { echo "compare_osu.sh: --tcp and --netns exclude each other (--netns is TCP already)" >&2; exit 2; }
  tests=${tests//multi_lat/}
  [[ -n ${tests// /} ]] || { echo "compare_osu.sh: --netns runs latency, bw and bibw only" >&2; exit 2; }
fi
if [[ -z $osu ]]; then
  echo "compare_osu.sh: skipped: no OSU 5.3 tarball given (--osu or TNT_OSU_TARBALL)" >&2
  exit 0
fi
[[ -f $osu ]] || { echo "compare_osu.sh: '$osu' does not exist" >&2; exit 2; }
command -v mpicc > /dev/null && command -v mpirun > /dev/null ||
  { echo "compare_osu.sh: mpicc or mpirun missing: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 2; }
bin=$build/bin
for program in tnt-launch tnt-bench-p2p; do
  [[ -x $bin/$program ]] || { echo "compare_osu.sh: $bin/$program is missing (build first)" >&2; exit 2; }
done

work=$(mktemp -d)
source "$here/../netns_hosts.sh"
trap 'netns_down; rm -rf "$work"' EXIT
trap 'exit 130' INT
programs=()
for t in $tests; do programs+=("osu_$t"); done
bash "$here/../mpi/build_osu.sh" "$osu" "$work/osu" mpicc "${programs[@]}" > /dev/null
for p in "${programs[@]}"; do
  [[ -x $work/osu/bin/$p ]] || { echo "compare_osu.sh: $p did not build: $(cat "$work/osu/not_built")" >&2; exit 2; }
done

mpi=(mpirun --allow-run-as-root --oversubscribe)
tnt_env=()
if ((tcp)); then
  mpi+=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
  tnt_env=(env TNT_SHM=0)
fi
((netns == 0)) || netns_up "$work" || exit 2
for round in $(seq 1 "$rounds"); do
  for t in $tests; do
    ranks=2
    [[ $t == multi_lat ]] && ranks=4
    ((json)) || printf 'round %d/%d: %s\n' "$round" "$rounds" "$t" >&2
    if ((netns)); then
      # Ranks started through ssh do not inherit the launcher's scheduling class: each runs under chrt itself.
      "$bin/tnt-launch" "${tnt_on_hosts[@]}" -- "${realtime[@]}" "$bin/tnt-bench-p2p" "$t" > "$work/tnt.$t.$round"
      "${mpi_on_hosts[@]}" -n 2 "${realtime[@]}" "$work/osu/bin/osu_$t" > "$work/mpi.$t.$round"
    else
      "${realtime[@]}" "${tnt_env[@]}" "$bin/tnt-launch" -n "$ranks" -- "$bin/tnt-bench-p2p" "$t" > "$work/tnt.$t.$round"
      "${realtime[@]}" "${mpi[@]}" -n "$ranks" "$work/osu/bin/osu_$t" > "$work/mpi.$t.$round"
    fi
  done
done

path="shared memory vs OpenMPI defaults"
((tcp)) && path="TNT_SHM=0 vs btl tcp"
((netns)) && path="2 namespace hosts x 1 rank, TCP vs btl tcp"
/usr/bin/python3 - "$work" "$rounds" "$json" "$path" "${#realtime[@]}" $tests << 'PY'
import json, os, statistics, sys, time
work, rounds, want_json, path, realtime, tests = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5] != "0", sys.argv[6:]

def table(path):
    values = {}
    for line in open(path):
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            values[int(parts[0])] = float(parts[1])
    return values

report = {"benchmark": "point-to-point, tnt-bench-p2p vs OSU 5.3 on OpenMPI", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
          "host": os.uname().nodename, "cores": os.cpu_count(), "path": path,
          "rounds": rounds, "realtime": realtime, "tests": []}
for t in tests:
    runs = {side: [table(f"{work}/{side}.{t}.{r}") for r in range(1, rounds + 1)] for side in ("tnt", "mpi")}
    rows = []
    for size in sorted(runs["tnt"][0]):
        if not all(size in run for side in runs for run in runs[side]):
            continue
        row = {"bytes": size}
        for side in runs:
            row[side] = statistics.median(run[size] for run in runs[side])
            row[f"{side}_rounds"] = [run[size] for run in runs[side]]
        row["ratio_tnt_mpi"] = row["tnt"] / row["mpi"] if row["mpi"] else float("inf")
        rows.append(row)
    unit = "MB/s" if t in ("bw", "bibw") else "us"
    report["tests"].append({"test": t, "unit": unit, "rows": rows})
if want_json:
    print(json.dumps(report, indent=1))
    sys.exit(0)
for test in report["tests"]:
    better = "higher" if test["unit"] == "MB/s" else "lower"
    print(f"\n{test['test']} ({test['unit']}, {better} is better), {report['path']}, medians of {rounds} alternating rounds")
    print(f"{'size':>9} | {'tnt':>10} | {'OpenMPI':>10} | {'tnt/OpenMPI':>11}")
    for r in test["rows"]:
        print(f"{r['bytes']:>9} | {r['tnt']:10.2f} | {r['mpi']:10.2f} | {r['ratio_tnt_mpi']:11.2f}")
PY
