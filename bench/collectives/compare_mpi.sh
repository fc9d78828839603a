#!/usr/bin/env bash
# Runs tnt's and OpenMPI's allreduce benchmarks one after the other in one go, on the same
# ranks and sizes, and prints the ratios:
#   bench/collectives/compare_mpi.sh [build-dir] [ranks] [extra benchmark options...]
# OpenMPI runs twice: restricted to TCP (--mca btl tcp,self, the like-for-like comparison)
# and with its default transports (shared memory between local ranks). Each run is repeated
# ${TNT_BENCH_REPEATS:-3} times, interleaved, and the median of the runs' medians is compared.
set -euo pipefail
build=${1:-build}; ranks=${2:-2}; shift $(( $# > 2 ? 2 : $# )) || true
bin=$build/bin
for program in tnt-launch tnt-bench-allreduce tnt-bench-mpi-allreduce; do
  [[ -x $bin/$program ]] || { echo "compare_mpi.sh: $bin/$program is missing (is OpenMPI installed? build first)" >&2; exit 2; }
done
command -v mpirun > /dev/null || { echo "compare_mpi.sh: mpirun not found: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe -n "$ranks" --bind-to none)
for repeat in $(seq 1 "${TNT_BENCH_REPEATS:-3}"); do
  "$bin/tnt-launch" -n "$ranks" -- "$bin/tnt-bench-allreduce" --json "$@" > "$out/tnt.$repeat.json"
  "${mpi[@]}" --mca btl tcp,self --mca btl_tcp_if_include lo "$bin/tnt-bench-mpi-allreduce" --json "$@" > "$out/mpi_tcp.$repeat.json"
  "${mpi[@]}" "$bin/tnt-bench-mpi-allreduce" --json "$@" > "$out/mpi_default.$repeat.json"
done
python3 - "$out" "${JSON:-}" <<'PY'
import glob, json, statistics, sys
out, want_json = sys.argv[1], sys.argv[2] == "1"
def load(name):
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{name}.*.json"))]
    table = {}
    for run in runs:
        for r in run["results"]:
            table.setdefault(r["bytes"], []).append(r)
    return {b: {"median_us": statistics.median(x["median_us"] for x in rs),
                "busbw": statistics.median(x["bus_bandwidth_GBps"] for x in rs)} for b, rs in table.items()}, len(runs)
tnt, n = load("tnt"); tcp, _ = load("mpi_tcp"); shm, _ = load("mpi_default")
def human(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
rows = []
for b in sorted(tnt):
    rows.append(dict(bytes=b, tnt_us=tnt[b]["median_us"], tnt_busbw=tnt[b]["busbw"],
                     mpi_tcp_us=tcp[b]["median_us"], mpi_tcp_busbw=tcp[b]["busbw"],
                     mpi_shm_us=shm[b]["median_us"], mpi_shm_busbw=shm[b]["busbw"],
                     busbw_ratio_vs_tcp=tnt[b]["busbw"] / tcp[b]["busbw"],
                     time_ratio_vs_tcp=tnt[b]["median_us"] / tcp[b]["median_us"],
                     busbw_ratio_vs_default=tnt[b]["busbw"] / shm[b]["busbw"]))
if want_json:
    print(json.dumps({"repeats": n, "rows": rows}, indent=1)); sys.exit(0)
print(f"allreduce float32 sum; medians of {n} interleaved runs; busbw in GB/s, time in us")
print(f"{'size':>8} | {'tnt us':>9} {'busbw':>6} | {'mpi-tcp us':>10} {'busbw':>6} | {'mpi-shm us':>10} {'busbw':>6} |"
      f" {'busbw tnt/tcp':>13} {'time tnt/tcp':>12} {'busbw tnt/shm':>13}")
for r in rows:
    print(f"{human(r['bytes']):>8} | {r['tnt_us']:9.1f} {r['tnt_busbw']:6.3f} | {r['mpi_tcp_us']:10.1f} {r['mpi_tcp_busbw']:6.3f} |"
          f" {r['mpi_shm_us']:10.1f} {r['mpi_shm_busbw']:6.3f} | {r['busbw_ratio_vs_tcp']:13.2f} {r['time_ratio_vs_tcp']:12.2f}"
          f" {r['busbw_ratio_vs_default']:13.2f}")
PY
