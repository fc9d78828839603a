#!/bin/sh
# Peak resident memory of gradient accumulation (issue 26, item 1): ResNet-50 on one rank,
# --accumulate 4 at global batch 64 against the plain run at 16 (the same 16 samples per
# forward/backward), each for a few steps on synthetic data, max RSS from GNU time.
#   bench/trainer/accumulation_memory.sh [BUILD_DIR] [STEPS]     (defaults: build, 2)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build} steps=${2:-2}
[ -x /usr/bin/time ] || { echo "accumulation_memory.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }
[ -x "$build/bin/tnt-train" ] || { echo "accumulation_memory.sh: $build/bin/tnt-train missing: build first" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
peak() {  # peak RSS in KiB of tnt-train with the given options
  /usr/bin/time -v "$build/bin/tnt-train" "$root/conf/resnet50_synthetic.toml" --max-steps "$steps" \
    --threads 1 --no-progress --checkpoint "" --csv "" "$@" >"$log" 2>&1 ||
    { cat "$log" >&2; echo "accumulation_memory.sh: tnt-train $* failed" >&2; exit 1; }
  sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$log"
}
plain=$(peak --global-batch 16)
accumulated=$(peak --global-batch 64 --accumulate 4)
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), ResNet-50, 1 rank x 1 thread, $steps steps"
echo "plain, global batch 16:                 max RSS $plain KiB"
echo "--accumulate 4, global batch 64:        max RSS $accumulated KiB"
awk -v a="$accumulated" -v p="$plain" 'BEGIN { printf "accumulated / plain: %.3f\n", a / p }'
