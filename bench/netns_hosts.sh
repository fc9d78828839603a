# shellcheck shell=bash
# Sourced by the compare scripts for --netns: two hosts made of network namespaces on one bridge
# (tests/launcher/netns_hosts.sh: each its own address, hostname and sshd), one rank on each, so
# that tnt's and OpenMPI's traffic crosses a network (veth and bridge) instead of loopback.
#   netns_up WORK   makes the hosts under WORK/hosts and sets two arrays:
#                   tnt_on_hosts  tnt-launch's options for them (--hostfile, --ssh-command)
#                   mpi_on_hosts  a command that runs mpirun from the first host, with its options
#   netns_down      removes them (the caller's EXIT trap calls it)
# Needs root, `ip netns`, sshd and ssh; netns_up says what is missing and returns 1.
#
# OpenMPI runs with --bind-to none: each namespace host looks like a whole machine to it, so it
# binds the one rank of each to core 0, and both ranks then share one core, each spinning through
# its time slice while the other waits (4 ms a message, the kernel's tick). tnt-launch leaves a
# host's only rank unbound, so both sides are unbound alike. OpenMPI runs its TCP path (pml ob1,
# btl tcp) over the namespaces' own interface (eth0), for its data and for its launch (oob).

netns_tag=
netns_dir=
netns_hosts_script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../tests/launcher/netns_hosts.sh

netns_up() {
  local work=$1
  if [[ $(id -u) != 0 ]]; then echo "--netns needs root (network namespaces, sshd)" >&2; return 1; fi
  if [[ ! -x /usr/sbin/sshd ]] || ! command -v ssh > /dev/null; then
    echo "--netns needs /usr/sbin/sshd and ssh (Debian: openssh-server, openssh-client)" >&2
    return 1
  fi
  netns_tag=$(($$ % 100000))
  netns_dir=$work/hosts
  local hosts
  if ! hosts=$("$netns_hosts_script" up "$netns_dir" "$netns_tag" 2 2>&1); then
    echo "--netns: making the namespace hosts failed: $hosts" >&2
    return 1
  fi
  local addresses=()
  while read -r kind _ address _; do
    [[ $kind == host ]] && addresses+=("$address")
  done <<< "$hosts"
  printf '%s slots=1\n' "${addresses[@]}" > "$netns_dir/hostfile"
  printf '#!/bin/sh\nexec ssh -F %s "$@"\n' "$netns_dir/ssh_config" > "$netns_dir/rsh"
  chmod +x "$netns_dir/rsh"
  # shellcheck disable=SC2034  # both arrays are read by the scripts that source this one
  tnt_on_hosts=(--hostfile "$netns_dir/hostfile" --ssh-command "ssh -F $netns_dir/ssh_config")
  # shellcheck disable=SC2034,SC2054  # (the commas are mpirun's host list)
  mpi_on_hosts=(ip netns exec "t${netns_tag}h1" mpirun --allow-run-as-root --bind-to none
    --host "${addresses[0]}:1,${addresses[1]}:1" --mca plm_rsh_agent "$netns_dir/rsh"
    --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0)
}

netns_down() {
  [[ -n $netns_tag ]] || return 0
  "$netns_hosts_script" down "$netns_dir" "$netns_tag" 2 || true
  netns_tag=
}
