#!/usr/bin/env bash
# Runs a command against a single-machine Slurm of its own: munged with its own key and socket,
# slurmctld and slurmd, all started in a fresh temporary folder, and all stopped when the command
# ends, whatever its outcome (also on SIGINT/SIGTERM). The command sees SLURM_CONF and
# TNT_TEST_SLURM_DIR; its exit status is the script's.
#
#   slurm_cluster.sh [--cpus N] -- COMMAND [ARGS...]
#
# Exit status 77 (ctest's SKIP_RETURN_CODE) with the reason on stderr when the daemons are not
# installed or cannot start here; the README's install step brings them (slurm-wlm, munge).
set -uo pipefail

cpus=8
while (($#)); do
  case "$1" in
    --cpus) cpus=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "slurm_cluster.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "slurm_cluster.sh: no command given" >&2; exit 2; }

skip() { echo "SKIPPED: $*" >&2; exit 77; }
for tool in munged slurmctld slurmd srun scontrol; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || skip "'$tool' is not installed (scripts/install-deps.sh installs slurm-wlm and munge)"
done
PATH=$PATH:/usr/sbin

dir=$(mktemp -d "${TMPDIR:-/tmp}/tnt-slurm.XXXXXX")
chmod 700 "$dir"
pids=()
stop_all() {
  local pid
  # Jobs first, so that slurmstepd ends its tasks; then any task pid slurmd still knows.
  if [[ -n "${SLURM_CONF:-}" ]] && kill -0 "${pids[1]:-0}" 2>/dev/null; then
    scancel --full --user="$(id -un)" 2>/dev/null
    for _ in $(seq 100); do [[ -z "$(squeue -h 2>/dev/null)" ]] && break; sleep 0.1; done
    for pid in $(scontrol listpids 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ {print $1}'); do
      kill -KILL "$pid" 2>/dev/null
    done
  fi
  # Daemons first politely, then whatever is left, each by the pid this script started.
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  [[ -n "${KEEP_SLURM_DIR:-}" ]] || rm -rf "$dir"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

host=$(hostname -s)
user=$(id -un)
mkdir -p "$dir"/{munge,ctld,spool,log}
head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
chmod 700 "$dir/munge"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/munged.seed" -F 2>>"$dir/log/munged.err" &
pids+=($!)

ctld_port=$(free_port)
slurmd_port=$(free_port)
cat >"$dir/slurm.conf" <<CONF
ClusterName=tnt-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=2
InactiveLimit=0
MinJobAge=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$dir/slurm.conf
export TNT_TEST_SLURM_DIR=$dir

# Wait until munged answers.
for _ in $(seq 50); do [[ -S "$dir/munge/munge.sock" ]] && break; sleep 0.1; done
[[ -S "$dir/munge/munge.sock" ]] || { cat "$dir/log/munged.log" >&2; skip "munged did not start"; }

slurmctld -D -c -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" >"$dir/log/slurmd.out" 2>&1 &
pids+=($!)

up=0
for _ in $(seq 150); do
  if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then up=1; break; fi
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || break 2; done
  sleep 0.2
done
if ((!up)); then
  tail -n 20 "$dir"/log/*.log "$dir"/log/*.out >&2
  skip "the test Slurm did not come up (slurmctld or slurmd failed to start; their logs are above)"
fi

"$@"
