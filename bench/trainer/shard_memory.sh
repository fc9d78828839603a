#!/bin/sh
# Peak resident memory of optimizer-state sharding (issue 26, item 8; Note [Optimizer-state
# sharding] in actors/trainer/src/optimizer_shard.h): ResNet-50 with Adam on 2 ranks, sharded
# and not, alternating ROUNDS times; each rank's max RSS from GNU time, and the optimizer state
# each rank counts in its log. Medians over rounds and ranks.
#   bench/trainer/shard_memory.sh [--json] [BUILD_DIR] [ROUNDS]     (defaults: build, 3)
set -eu
json=0
if [ "${1:-}" = "--json" ]; then json=1; shift; fi
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build} rounds=${2:-3}
[ -x /usr/bin/time ] || { echo "shard_memory.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }
[ -x "$build/bin/tnt-train" ] || { echo "shard_memory.sh: $build/bin/tnt-train missing: build first" >&2; exit 2; }
log=$(mktemp) rss=$(mktemp) state=$(mktemp)
trap 'rm -f "$log" "$rss" "$state"' EXIT
run() {  # appends "MODE KiB" per rank to $rss and "MODE bytes" per rank to $state
  mode=$1; shift
  "$build/bin/tnt-launch" -n 2 --log-on-all-devices -- /usr/bin/time -f "max RSS %M" "$build/bin/tnt-train" \
    "$root/conf/resnet50_synthetic.toml" --optimizer adam --global-batch 4 --max-steps 3 --threads 1 \
    --no-progress --checkpoint "" --csv "" "$@" >"$log" 2>&1 ||
    { cat "$log" >&2; echo "shard_memory.sh: tnt-train $* failed" >&2; exit 1; }
  sed -n "s/.*max RSS \([0-9]*\).*/$mode \1/p" "$log" >>"$rss"
  sed -n "s/.*optimizer state: \([0-9]*\) bytes.*/$mode \1/p" "$log" >>"$state"
}
i=0
while [ "$i" -lt "$rounds" ]; do
  run unsharded
  run sharded --shard-optimizer
  i=$((i + 1))
done
median() {  # of the values of mode $1 in file $2
  awk -v m="$1" '$1 == m { print $2 }' "$2" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ru=$(median unsharded "$rss") rs=$(median sharded "$rss")
su=$(median unsharded "$state") ss=$(median sharded "$state")
when="$(date -u '+%Y-%m-%d %H:%M UTC')" load="$(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$json" = 1 ]; then
  printf '{"date": "%s", "load": "%s", "rounds": %s, "unsharded": {"max_rss_kib": %s, "state_bytes": %s}, ' \
    "$when" "$load" "$rounds" "$ru" "$su"
  printf '"sharded": {"max_rss_kib": %s, "state_bytes": %s}}\n' "$rs" "$ss"
  exit 0
fi
echo "$when, load $load, ResNet-50 Adam, 2 ranks x 1 thread, global batch 4, 3 steps, $rounds alternating rounds"
echo "| | optimizer state per rank | max RSS per rank (median) |"
echo "|---|---|---|"
echo "| unsharded | $su B | $ru KiB |"
echo "| --shard-optimizer | $ss B | $rs KiB |"
awk -v ru="$ru" -v rs="$rs" -v su="$su" -v ss="$ss" 'BEGIN {
  printf "state saved: %d KiB; resident memory saved: %d KiB (%.2f of the state saved)\n",
         (su - ss) / 1024, ru - rs, (ru - rs) * 1024 / (su - ss) }'
