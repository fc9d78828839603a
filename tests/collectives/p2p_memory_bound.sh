#!/usr/bin/env bash
# Rank 0 sends 4 GiB to rank 1, which receives only after 10 s: rank 1's resident memory may grow
# by the point-to-point protocol's bound, TNT_P2P_CREDIT_KB (256 KiB) of eager data and a few
# hundred bytes per announced message (4096 here), never by the data. 8 MiB leaves room for the
# allocator; the data would be 4 GiB.
set -euo pipefail
launch=$1 worker=$2
out=$("$launch" --output-on-all-devices -n 2 -- "$worker" p2p-flood --seconds 10 2>&1) || { echo "$out"; exit 1; }
echo "$out"
grew=$(sed -n 's/.*resident memory grew by \([0-9]*\) bytes.*/\1/p' <<< "$out")
[[ -n $grew ]] || { echo "p2p_memory_bound: no memory figure in the output"; exit 1; }
grep -q "rank 1: p2p flood, 1 checks, 0 failures" <<< "$out" || { echo "p2p_memory_bound: rank 1 failed"; exit 1; }
if ((grew > 8 * 1024 * 1024)); then
  echo "p2p_memory_bound: rank 1 grew by $grew bytes, more than the 8 MiB allowed"
  exit 1
fi
echo "p2p_memory_bound: rank 1 grew by $grew bytes (at most 8 MiB allowed)"
