#!/bin/sh
# Test hosts for the launcher: network namespaces on a private bridge, each with its own sshd,
# hostname (UTS namespace) and address; key-based root login with keys made here.
#   netns_hosts.sh up DIR TAG N [NOBIN_INDEX]  -> prints "host <name> <addr> <IPv6 addr>" lines;
#                                                writes DIR/ssh_config
#   netns_hosts.sh down DIR TAG N
# Host NOBIN_INDEX sees an empty DIR/bin (tmpfs in its own mount namespace): a host where the
# program is missing. Everything lives in DIR and in names carrying TAG; `down` removes it all.
set -eu
cmd=$1 dir=$2 tag=$3 n=$4 nobin=${5:-0}
br="tb$tag"
# A subnet derived from the tag, so that concurrent runs do not collide.
o2=$(( 100 + $(printf '%s' "$tag" | cksum | cut -d' ' -f1) % 100 ))
o3=$(( $(printf '%s' "$tag" | cksum | cut -d' ' -f1) / 100 % 250 ))
net="10.$o2.$o3"
net6="fd00:$o2:$o3:"

down() {
  for i in $(seq 1 "$n"); do
    if [ -f "$dir/sshd$i.pid" ]; then kill "$(cat "$dir/sshd$i.pid")" 2>/dev/null || true; fi
    for p in $(ip netns pids "t${tag}h$i" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "t${tag}h$i" 2>/dev/null || true
  done
  ip link del "$br" 2>/dev/null || true
  if [ -f "$dir/created_run_sshd" ]; then rmdir /run/sshd 2>/dev/null || true; fi
  rm -rf "$dir"
}

if [ "$cmd" = down ]; then down; exit 0; fi

mkdir -p "$dir/bin"
if [ ! -d /run/sshd ]; then mkdir -p /run/sshd && touch "$dir/created_run_sshd"; fi
ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key" >/dev/null
ssh-keygen -q -t ed25519 -N '' -f "$dir/id" >/dev/null
cp "$dir/id.pub" "$dir/authorized_keys"
cat > "$dir/ssh_config" <<EOC
Host *
  User root
  IdentityFile $dir/id
  IdentitiesOnly yes
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  LogLevel ERROR
EOC

ip link add "$br" type bridge
ip addr add "$net.1/24" dev "$br"
ip addr add "${net6}:1/64" dev "$br" nodad
ip link set "$br" up
for i in $(seq 1 "$n"); do
  ns="t${tag}h$i"
  addr="$net.$((10 + i))"
  ip netns add "$ns"
  ip link add "t${tag}v$i" type veth peer name eth0 netns "$ns"
  ip link set "t${tag}v$i" master "$br" up
  addr6="${net6}:$((10 + i))"
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" addr add "$addr6/64" dev eth0 nodad
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  cat > "$dir/sshd$i.conf" <<EOC
ListenAddress $addr
ListenAddress $addr6
HostKey $dir/host_key
PidFile $dir/sshd$i.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
LogLevel ERROR
EOC
  hostname="t${tag}h$i"
  if [ "$i" = "$nobin" ]; then
    ip netns exec "$ns" unshare --uts --mount sh -c \
      "mount -t tmpfs none '$dir/bin' && hostname '$hostname' && exec /usr/sbin/sshd -f '$dir/sshd$i.conf'"
  else
    ip netns exec "$ns" unshare --uts sh -c \
      "hostname '$hostname' && exec /usr/sbin/sshd -f '$dir/sshd$i.conf'"
  fi
  echo "host $hostname $addr $addr6"
done
echo "unreachable $net.99"
