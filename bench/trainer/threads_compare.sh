#!/usr/bin/env bash
# Threads per rank (issue 26): tnt-train's default (threads = 0: one thread per core of the rank's
# affinity mask, Note [Threads follow the cores] in actors/trainer/src/trainer.cpp) against fixed
# --threads, and what one checkpoint costs, alternating in one run on this host:
#   bench/trainer/threads_compare.sh [--build DIR] [--rounds R] [--model-rounds R] [--parts LIST] [--json]
#   --build DIR         tnt's build folder (default build/): its tnt-launch and tnt-train are used
#   --rounds R          rounds of parts a and b (default 5)
#   --model-rounds R    rounds of parts c and d (default 3)
#   --parts LIST        which parts, e.g. ab or cd (default abcd):
#     a  the main job (conf/lenet5_fashion_mnist.toml) on 1 rank: defaults, --threads 1, --threads 2
#     b  the same on 2 ranks (tnt-launch -n 2, its default binding: a core per rank)
#     c  1 rank x 2 threads against 2 ranks x 1 thread for LeNet-5, ResNet-20
#        (conf/resnet20_synthetic.toml) and the Transformer (conf/transformer_en_de.toml)
#     d  a checkpoint's cost: LeNet-5 and ResNet-20 on 2 ranks with defaults and
#        --checkpoint-every-steps, from the pause it makes between two steps in --timeline
#   --json              one JSON document on stdout, every round's value included
# Each run trains a fixed number of steps (LeNet-5 1000, ResNet-20 16, Transformer 100) with no
# validation, CSV or checkpoint (but in d); the figure is tnt-train's own "trained N steps in S s:
# X samples/s" line (sentence pairs/s for the Transformer), which times the training loop alone,
# so start-up and the data set's loading do not count. Every round runs each case of a part
# once, in order, so a disturbance hits the cases alike; tables give the medians of the rounds.
# The machine's other load is not controlled: the script prints the load average before and
# after; quote ratios of one run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
build=$source_dir/build
rounds=5 model_rounds=3 parts=abcd json=0
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --model-rounds) model_rounds=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --json) json=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "threads_compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for value in "$rounds" "$model_rounds"; do
  [[ $value =~ ^[1-9][0-9]*$ ]] || { echo "threads_compare.sh: '$value' is not a positive whole number" >&2; exit 2; }
done
[[ $parts =~ ^[abcd]+$ ]] || { echo "threads_compare.sh: --parts '$parts' is not made of the letters a, b, c, d" >&2; exit 2; }
build=$(cd "$build" && pwd)
[[ -x $build/bin/tnt-launch && -x $build/bin/tnt-train ]] || {
  echo "threads_compare.sh: $build/bin/tnt-launch or tnt-train is missing: build tnt first" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
conf=$source_dir/conf
quiet=(--no-progress --validation-frequency 0 --csv "")
# Per model: run file and options for a short run with no test split work worth mentioning.
declare -A model_args=(
  [lenet5]="$conf/lenet5_fashion_mnist.toml --max-steps 1000 --test-size 1"
  [resnet20]="$conf/resnet20_synthetic.toml --max-steps 16 --epochs 100 --test-size 0"
  [transformer]="$conf/transformer_en_de.toml --max-steps 100 --translate-sentences 0"
)
declare -A model_label=([lenet5]="LeNet-5" [resnet20]="ResNet-20" [transformer]="Transformer")
checkpoint_every=(lenet5 100 resnet20 4)  # steps between checkpoints in part d

# run_case NAME RANKS THREADS(default|N) MODEL [more tnt-train options...]: prints "SECONDS RATE".
run_case() {
  local name=$1 ranks=$2 threads=$3 model=$4
  shift 4
  local log=$out/$name.log opts=()
  [[ $threads == default ]] || opts=(--threads "$threads")
  # shellcheck disable=SC2086  # model_args holds words on purpose
  (cd "$out" && "$build/bin/tnt-launch" -n "$ranks" -- "$build/bin/tnt-train" ${model_args[$model]} \
    "${quiet[@]}" "${opts[@]}" "$@") > "$log" 2>&1 ||
    { echo "threads_compare.sh: the run $name failed:" >&2; cat "$log" >&2; exit 1; }
  local line
  line=$(grep -m1 '^trained [0-9]* steps in ' "$log") ||
    { echo "threads_compare.sh: no 'trained ...' line in the run $name:" >&2; cat "$log" >&2; exit 1; }
  sed 's/^trained [0-9]* steps in \([0-9.]*\) s: \([0-9.]*\) .*/\1 \2/' <<< "$line"
}

# The master writes a checkpoint between two steps while every rank waits: its cost is the gap
# between the end of a step that a checkpoint follows and the next step's start on rank 0, less
# the median gap between other steps. Timing the gap, not whole runs with and without
# checkpoints, keeps the steps' own spread (large on a shared host) out of it. Prints
# milliseconds, the median over the run's checkpoints.
checkpoint_pause_ms() {  # TIMELINE EVERY
  python3 - "$1" "$2" << 'EOF'
import json, statistics, sys
every = int(sys.argv[2])
steps = sorted((e["args"]["step"], e["ts"], e["dur"]) for e in json.load(open(sys.argv[1]))["traceEvents"]
               if e.get("ph") == "X" and e["name"] == "step" and e["pid"] == 0)
gaps = {a[0]: b[1] - a[1] - a[2] for a, b in zip(steps, steps[1:])}
after = [g for s, g in gaps.items() if (s + 1) % every == 0]
others = [g for s, g in gaps.items() if (s + 1) % every != 0]
print(f"{(statistics.median(after) - statistics.median(others)) / 1e3:.1f}")
EOF
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

declare -A rate seconds cost sizes
cases=()   # "part|key|label", in order
add_case() { cases+=("$1|$2|$3"); }
measure() {  # KEY RUN_CASE_ARGUMENTS...: runs the case, adds its seconds and rate to KEY's rounds
  local key=$1 figures
  shift
  figures=$(run_case "$@")
  seconds[$key]+="${figures% *} " rate[$key]+="${figures#* } "
}

load_before=$(load)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
for part in a b; do
  [[ $parts == *$part* ]] || continue
  n=1
  [[ $part == b ]] && n=2
  for t in default 1 2; do add_case $part "$part-$t" "$n rank(s), threads $t"; done
  for ((round = 1; round <= rounds; ++round)); do
    for t in default 1 2; do
      ((json)) || echo "$(date -u +%T) part $part round $round/$rounds: $n rank(s), threads $t" >&2
      measure "$part-$t" "$part-$t-$round" $n $t lenet5
    done
  done
done
if [[ $parts == *c* ]]; then
  for model in lenet5 resnet20 transformer; do
    add_case c "c-$model-1x2" "${model_label[$model]}: 1 rank x 2 threads"
    add_case c "c-$model-2x1" "${model_label[$model]}: 2 ranks x 1 thread"
  done
  for ((round = 1; round <= model_rounds; ++round)); do
    for model in lenet5 resnet20 transformer; do
      ((json)) || echo "$(date -u +%T) part c round $round/$model_rounds: $model" >&2
      measure "c-$model-1x2" "c-$model-1x2-$round" 1 2 $model
      measure "c-$model-2x1" "c-$model-2x1-$round" 2 1 $model
    done
  done
fi
if [[ $parts == *d* ]]; then
  for ((i = 0; i < ${#checkpoint_every[@]}; i += 2)); do
    model=${checkpoint_every[i]} every=${checkpoint_every[i + 1]}
    add_case d "d-$model" "${model_label[$model]}: 2 ranks, checkpoint every $every steps"
  done
  for ((round = 1; round <= model_rounds; ++round)); do
    for ((i = 0; i < ${#checkpoint_every[@]}; i += 2)); do
      model=${checkpoint_every[i]} every=${checkpoint_every[i + 1]}
      ((json)) || echo "$(date -u +%T) part d round $round/$model_rounds: $model" >&2
      ckpt=$out/d-$model.ckpt timeline=$out/d-$model.json
      measure "d-$model" "d-$model-$round" 2 default "$model" --checkpoint "$ckpt" --checkpoint-every-epochs 0 \
        --checkpoint-every-steps "$every" --timeline "$timeline"
      cost[$model]+="$(checkpoint_pause_ms "$timeline" "$every") "
      sizes[$model]=$(stat -c %s "$ckpt")
      rm -f "$ckpt" "$timeline"
    done
  done
fi
load_after=$(load)

if ((json)); then
  printf '{"benchmark": "threads_compare", "started": "%s", "load_before": "%s", "load_after": "%s", "rounds": %d, "model_rounds": %d, "rows": [' \
    "$started" "$load_before" "$load_after" "$rounds" "$model_rounds"
  sep=
  for c in "${cases[@]}"; do
    IFS='|' read -r part key label <<< "$c"
    printf '%s{"part": "%s", "case": "%s", "rate": %s, "seconds": %s, "rate_rounds": [%s], "seconds_rounds": [%s]}' \
      "$sep" "$part" "$label" "$(median <<< "${rate[$key]}")" "$(median <<< "${seconds[$key]}")" \
      "$(echo ${rate[$key]} | tr ' ' ',')" "$(echo ${seconds[$key]} | tr ' ' ',')"
    sep=", "
  done
  printf ']'
  if [[ $parts == *d* ]]; then
    printf ', "checkpoint": ['
    sep=
    for ((i = 0; i < ${#checkpoint_every[@]}; i += 2)); do
      model=${checkpoint_every[i]} every=${checkpoint_every[i + 1]}
      printf '%s{"model": "%s", "every_steps": %d, "bytes": %d, "ms_per_checkpoint": %s, "ms_rounds": [%s]}' "$sep" \
        "$model" "$every" "${sizes[$model]}" "$(median <<< "${cost[$model]}")" "$(echo ${cost[$model]} | tr ' ' ',')"
      sep=", "
    done
    printf ']'
  fi
  printf '}\n'
  exit 0
fi
echo "threads_compare.sh, started $started; load average before $load_before, after $load_after"
echo "medians of $rounds (parts a, b) or $model_rounds (c, d) alternating rounds; rate in samples/s (Transformer: sentence pairs/s)"
printf '%-4s %-52s %10s %8s   %s\n' part case rate 'loop s' 'rounds (rate)'
for c in "${cases[@]}"; do
  IFS='|' read -r part key label <<< "$c"
  printf '%-4s %-52s %10.1f %8.2f   [%s]\n' "$part" "$label" "$(median <<< "${rate[$key]}")" \
    "$(median <<< "${seconds[$key]}")" "$(echo ${rate[$key]} | sed 's/ /, /g')"
done
for part in a b; do
  [[ $parts == *$part* ]] || continue
  d=$(median <<< "${rate[$part-default]}") t1=$(median <<< "${rate[$part-1]}") t2=$(median <<< "${rate[$part-2]}")
  awk -v p="$part" -v d="$d" -v a="$t1" -v b="$t2" 'BEGIN {best = (a > b) ? a : b;
    printf "part %s: defaults / best of --threads 1 and 2 = %.3f (%s the 0.95 of issue 26)\n", p, d / best,
      (d >= 0.95 * best) ? "meets" : "MISSES"}'
done
if [[ $parts == *d* ]]; then
  for ((i = 0; i < ${#checkpoint_every[@]}; i += 2)); do
    model=${checkpoint_every[i]} every=${checkpoint_every[i + 1]}
    echo "${model_label[$model]}: a checkpoint of ${sizes[$model]} bytes every $every steps pauses the 2 ranks" \
      "$(median <<< "${cost[$model]}") ms (rounds: ${cost[$model]% })"
  done
fi
