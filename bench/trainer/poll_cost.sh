#!/usr/bin/env bash
# What polling costs a training rank: tnt-train on 2 ranks of this host with the collectives'
# default poll window (TNT_WAIT_POLL_US unset: 500 us, Note [Poll window]) against no polling
# (TNT_WAIT_POLL_US=0: a blocked caller yields, then sleeps), alternating in one run:
#   bench/trainer/poll_cost.sh [--build DIR] [--rounds R] [--models "lenet5 resnet20"] [--json]
#   --build DIR     tnt's build folder (default build/): its tnt-launch and tnt-train are used
#   --rounds R      rounds (default 5); each runs every model polling, then not polling
#   --models LIST   lenet5 (the main job, conf/lenet5_fashion_mnist.toml, 1000 steps) and/or
#                   resnet20 (conf/resnet20_synthetic.toml, 16 steps)
#   --json          one JSON document on stdout, every round's value included
# On one host the trainer's gradient buckets go through the host board, a blocking allreduce on
# the communication actor's thread (Note [Host board]), whose wait polls beside the compute
# thread that runs the next layers' backward; this prices that poll. tnt-launch's defaults (2
# ranks: a core each; threads: one per core of the rank's mask). The figure is tnt-train's own
# "trained N steps in S s: X samples/s" line. The machine's other load is not controlled: quote
# the ratio of one run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
build=$source_dir/build
rounds=5 json=0 models="lenet5 resnet20"
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --json) json=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "poll_cost.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "poll_cost.sh: --rounds '$rounds' is not a positive whole number" >&2; exit 2; }
build=$(cd "$build" && pwd)
[[ -x $build/bin/tnt-launch && -x $build/bin/tnt-train ]] || {
  echo "poll_cost.sh: $build/bin/tnt-launch or tnt-train is missing: build tnt first" >&2; exit 2; }
conf=$source_dir/conf
declare -A model_args=(
  [lenet5]="$conf/lenet5_fashion_mnist.toml --max-steps 1000 --test-size 1"
  [resnet20]="$conf/resnet20_synthetic.toml --max-steps 16 --epochs 100 --test-size 0"
)
for model in $models; do
  [[ -n ${model_args[$model]:-} ]] || { echo "poll_cost.sh: unknown model '$model' (lenet5, resnet20)" >&2; exit 2; }
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# run_case MODEL POLL_US(default|N): prints the run's samples/s.
run_case() {
  local model=$1 poll=$2 log=$out/run.log
  local env=()
  [[ $poll == default ]] || env=(TNT_WAIT_POLL_US="$poll")
  # shellcheck disable=SC2086  # model_args holds words on purpose
  (cd "$out" && env "${env[@]}" "$build/bin/tnt-launch" -n 2 -- "$build/bin/tnt-train" ${model_args[$model]} \
    --no-progress --validation-frequency 0 --csv "") > "$log" 2>&1 ||
    { echo "poll_cost.sh: $model with poll $poll failed:" >&2; cat "$log" >&2; exit 1; }
  grep -m1 '^trained [0-9]* steps in ' "$log" | sed 's/^trained [0-9]* steps in [0-9.]* s: \([0-9.]*\) .*/\1/' | grep . ||
    { echo "poll_cost.sh: no 'trained ...' line ($model, poll $poll):" >&2; cat "$log" >&2; exit 1; }
}

declare -A rates
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((round = 1; round <= rounds; ++round)); do
  for model in $models; do
    for poll in default 0; do
      ((json)) || printf 'round %d/%d: %s, poll %s\n' "$round" "$rounds" "$model" "$poll" >&2
      rates[$model,$poll]+="$(run_case "$model" "$poll") "
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
if ((json)); then
  printf '{"benchmark": "poll_cost", "ranks": 2, "rounds": %d, "load_before": "%s", "load_after": "%s", "rows": [' \
    "$rounds" "$load_before" "$load_after"
  sep=
  for model in $models; do
    polling=$(median <<< "${rates[$model,default]}") quiet=$(median <<< "${rates[$model,0]}")
    printf '%s{"model": "%s", "polling": %s, "not_polling": %s, "polling_over_not": %s, "polling_rounds": [%s], "not_polling_rounds": [%s]}' \
      "$sep" "$model" "$polling" "$quiet" "$(awk -v a="$polling" -v b="$quiet" 'BEGIN {printf "%.3f", a / b}')" \
      "$(echo ${rates[$model,default]} | tr ' ' ',')" "$(echo ${rates[$model,0]} | tr ' ' ',')"
    sep=", "
  done
  printf ']}\n'
else
  echo "tnt-train on 2 ranks, samples/s, medians of $rounds alternating rounds (load $load_before -> $load_after)"
  printf '%-10s %18s %18s %10s\n' model "polling (default)" "TNT_WAIT_POLL_US=0" ratio
  for model in $models; do
    polling=$(median <<< "${rates[$model,default]}") quiet=$(median <<< "${rates[$model,0]}")
    printf '%-10s %18.1f %18.1f %10.3f\n' "$model" "$polling" "$quiet" "$(awk -v a="$polling" -v b="$quiet" 'BEGIN {print a / b}')"
  done
fi
