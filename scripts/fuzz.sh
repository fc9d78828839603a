#!/usr/bin/env bash
# Runs tnt's libFuzzer targets (fuzz/README.md) for a chosen time each, one after the other.
#
#   scripts/fuzz.sh [--build-dir DIR] [--seconds N] [--json] [TARGET[=SECONDS]...]
#
# DIR (default build-asan, as scripts/sanitize.sh builds it; any build configured with
# TNT_FUZZ=ON) holds the targets in DIR/fuzz. Each TARGET (default: every one built), e.g.
# `hostfile`, first replays its seeds (fuzz/corpus/TARGET) and past crashes
# (fuzz/regressions/TARGET), then mutates them for N seconds (default 60; TARGET=SECONDS gives
# one target its own time), keeping what it finds in DIR/fuzz/work/TARGET. A crash is saved to
# DIR/fuzz/crashes/TARGET/ and fails the script. Prints a table of executions per target and
# their total (JSON with --json). For a long run beside other work, one target at a time:
# nice -n 19 scripts/fuzz.sh --seconds 600
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build-asan seconds=60 json=0 targets=()
while (($#)); do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --json) json=1; shift ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz: --seconds needs a whole number > 0" >&2; exit 2; }
bin_dir=$build_dir/fuzz
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(find "$bin_dir" -maxdepth 1 -type f -name 'tnt-fuzz-*' -perm -u+x 2>/dev/null |
    sed 's|.*/tnt-fuzz-||' | sort)
  ((${#targets[@]})) || { echo "fuzz: no fuzz targets in $bin_dir (configure with clang and -DTNT_FUZZ=ON)" >&2; exit 2; }
fi

rows=() failed=0
for arg in "${targets[@]}"; do
  t=${arg%%=*} run_seconds=$seconds
  if [[ $arg == *=* ]]; then
    run_seconds=${arg#*=}
    [[ $run_seconds =~ ^[0-9]+$ && $run_seconds -gt 0 ]] || { echo "fuzz: $arg: seconds must be a whole number > 0" >&2; exit 2; }
  fi
  program=$bin_dir/tnt-fuzz-$t
  [[ -x $program ]] || { echo "fuzz: $program not built" >&2; exit 2; }
  # One log per run: two runs of a target at once must not read each other's statistics.
  work=$build_dir/fuzz/work/$t crashes=$build_dir/fuzz/crashes/$t log=$build_dir/fuzz/logs/$t.$$.log
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  inputs=("$work")
  for dir in fuzz/corpus/$t fuzz/regressions/$t; do [[ -d $dir ]] && inputs+=("$dir"); done
  status=0
  # Inputs as long as the parser's size bound and a little more, where libFuzzer's default (the
  # largest seed) stops short of it: a model file's 1 MiB (compute/README.md), and 1 MiB of
  # hostfile, past its name and host-count bounds (its 8 MiB file bound has a unit test).
  max_len=()
  case $t in
    model_toml) max_len=(-max_len=$(((1 << 20) + 64))) ;;
    hostfile) max_len=(-max_len=$((1 << 20))) ;;
  esac
  # -timeout: an input that takes 10 s is a hang, a finding like a crash.
  "$program" -max_total_time="$run_seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${max_len[@]}" \
    -artifact_prefix="$crashes/" "${inputs[@]}" >"$log" 2>&1 || status=$?
  execs=$(awk '/^stat::number_of_executed_units:/ {print $2}' "$log")
  rate=$(awk '/^stat::average_exec_per_sec:/ {print $2}' "$log")
  corpus=$(find "$work" -type f | wc -l)
  found=$(find "$crashes" -type f | wc -l)
  if ((status != 0)); then
    failed=1
    echo "fuzz: $t failed (exit $status); its log, $log, ends:" >&2
    tail -n 40 "$log" >&2
  fi
  rows+=("$t $run_seconds ${execs:-0} ${rate:-0} $corpus $found $status")
done

if ((json)); then
  printf '['
  sep=''
  for r in "${rows[@]}"; do
    read -r t s e x c f st <<<"$r"
    printf '%s{"target":"%s","seconds":%s,"executions":%s,"exec_per_s":%s,"corpus":%s,"crashes":%s,"exit":%s}' \
      "$sep" "$t" "$s" "$e" "$x" "$c" "$f" "$st"
    sep=','
  done
  printf ']\n'
else
  printf '%-16s %8s %12s %10s %8s %8s\n' target seconds executions exec/s corpus crashes
  total=0
  for r in "${rows[@]}"; do
    read -r t s e x c f st <<<"$r"
    printf '%-16s %8s %12s %10s %8s %8s\n' "$t" "$s" "$e" "$x" "$c" "$f"
    total=$((total + e))
  done
  printf '%-16s %8s %12s\n' total '' "$total"
fi
exit $failed
