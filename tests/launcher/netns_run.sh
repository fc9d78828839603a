#!/usr/bin/env bash
# Runs tnt jobs across hosts made of network namespaces (netns_hosts.sh: each its own address
# and sshd), as tnt-launch runs them on a cluster, then removes the hosts.
#   netns_run.sh TNT_LAUNCH SLOTS PROGRAM [ARG...] [--- PROGRAM [ARG...]]...
# SLOTS lists the ranks of each host ("1,1": two hosts of one rank; "4,3": seven ranks on two
# hosts). Each program runs as one job over all of them; the first that fails fails the script,
# naming it. Exit 77 (skipped) where namespaces cannot be made: not root, or no `ip netns`.
set -euo pipefail
launch=$1 slots=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
if [[ $(id -u) != 0 ]]; then
  echo "skipped: needs root to create network namespaces and run sshd"
  exit 77
fi
if [[ ! -x /usr/sbin/sshd ]] || ! command -v ssh > /dev/null || ! command -v ssh-keygen > /dev/null; then
  echo "skipped: needs /usr/sbin/sshd, ssh and ssh-keygen (Debian: openssh-server, openssh-client)"
  exit 77
fi
tag=$(($$ % 100000))
if ! ip netns add "tprobe$tag" 2> /dev/null; then
  echo "skipped: cannot create network namespaces here (ip netns add failed)"
  exit 77
fi
ip netns del "tprobe$tag"

IFS=, read -r -a per_host <<< "$slots"
hosts=${#per_host[@]}
work=$(mktemp -d "${TMPDIR:-/tmp}/tnt-netns-run.XXXXXX")
cleanup() {
  "$here/netns_hosts.sh" down "$work/h" "$tag" "$hosts" || true
  rm -rf "$work"
}
trap cleanup EXIT
if ! "$here/netns_hosts.sh" up "$work/h" "$tag" "$hosts" > "$work/hosts.txt" 2>&1; then
  echo "FAILED: setting up $hosts namespace hosts:"
  cat "$work/hosts.txt"
  exit 1
fi
i=0
while read -r kind name addr _; do
  [[ $kind == host ]] || continue
  echo "$addr slots=${per_host[$i]}" >> "$work/hostfile"
  echo "host $name at $addr: ${per_host[$i]} rank(s)"
  i=$((i + 1))
done < "$work/hosts.txt"

# Each host runs its own ranks: the jobs' traffic between hosts crosses the namespaces' network.
placed=$("$launch" --hostfile "$work/hostfile" --ssh-command "ssh -F $work/h/ssh_config" --output-on-all-devices \
  -- hostname 2>&1 | sed 's/^\[[0-9]*\] //' | sort | uniq -c | awk '{print $1}' | tr '\n' , | sed 's/,$//')
if [[ $(tr , '\n' <<< "$placed" | sort -n | tr '\n' , | sed 's/,$//') != $(tr , '\n' <<< "$slots" | sort -n | tr '\n' , | sed 's/,$//') ]]; then
  echo "FAILED: ranks per host $placed, want $slots"
  exit 1
fi

run_job() {
  echo "=== $* (ranks ${slots//,/ + } on $hosts hosts)"
  local started=$SECONDS
  if ! "$launch" --hostfile "$work/hostfile" --ssh-command "ssh -F $work/h/ssh_config" --output-on-all-devices -- "$@"; then
    echo "FAILED: $* across $hosts namespace hosts"
    exit 1
  fi
  echo "=== passed in $((SECONDS - started)) s: $*"
}
job=()
for argument in "$@"; do
  if [[ $argument == --- ]]; then
    ((${#job[@]})) && run_job "${job[@]}"
    job=()
  else
    job+=("$argument")
  fi
done
((${#job[@]})) && run_job "${job[@]}"
echo PASS
