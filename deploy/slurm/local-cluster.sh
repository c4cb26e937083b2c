#!/bin/bash
# A one-node Slurm cluster in a folder, for trying deploy/slurm/kiln.sbatch on one machine and for
# kiln's tests (tests/integration/slurm_test.cc): munged, slurmctld and slurmd in the foreground,
# in a PID namespace of their own that `stop` ends with every job in it (no systemd), proctrack/linuxproc and task/none (no cgroups), and GPUS fake
# GPUs as character devices in DIR/dev, so that --gpus-per-task gives each step its own
# CUDA_VISIBLE_DEVICES. Needs root and Debian's slurmctld, slurmd, slurm-client and munge.
#   local-cluster.sh start DIR CTLD_PORT SLURMD_PORT [GPUS] [CPUS] [NODES]
#       then: export SLURM_CONF=DIR/slurm.conf
#   local-cluster.sh stop DIR
# GPUS and CPUS are per node; GPUS=real: the machine's own GPUs (/dev/nvidia0, 1, ...). NODES > 1:
# nodes node1..nodeN, each slurmd in a network namespace of its own (iproute2), joined by a bridge
# on which slurmctld listens, so that steps on different nodes talk over real TCP.
set -u
cmd=${1:?start or stop}
dir=${2:?folder}
dir=$(cd "$(dirname "$dir")" && pwd)/$(basename "$dir")

# Every process of the cluster -- the daemons, slurmstepd and the jobs' steps -- lives in one PID
# namespace, so stopping it leaves nothing behind (a step's slurmstepd outlives slurmd otherwise).
stop() {
  if [[ -f "$dir/cluster.pid" ]]; then
    local pid
    pid=$(cat "$dir/cluster.pid")
    if [[ -f "$dir/cluster.session" ]]; then
      # Without a PID namespace: the daemons' session, then the daemons by their pid files.
      kill -9 -- "-$pid" 2> /dev/null
      for p in slurmd slurmctld munged; do
        [[ -f "$dir/$p.pid" ]] && kill -9 "$(cat "$dir/$p.pid")" 2> /dev/null
      done
    fi
    kill -9 "$pid" 2> /dev/null  # unshare: its child, the namespace's first process, goes too
    rm -f "$dir/cluster.pid" "$dir/cluster.session" "$dir"/{slurmd,slurmctld,munged}.pid
  fi
  if [[ -f "$dir/cluster.net" ]]; then  # the bridge and the nodes' namespaces
    local what name
    while read -r what name; do
      if [[ $what == ns ]]; then ip netns del "$name" 2> /dev/null; else ip link del "$name" 2> /dev/null; fi
    done < "$dir/cluster.net"
    rm -f "$dir/cluster.net"
  fi
  return 0
}

if [[ $cmd == stop ]]; then stop; exit 0; fi
ctld_port=${3:?slurmctld port}
slurmd_port=${4:?slurmd port}
gpus=${5:-4}
cpus=${6:-16}
nodes=${7:-1}
for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" > /dev/null || { echo "local-cluster: $tool is missing (scripts/bootstrap installs it)" >&2; exit 3; }
done
[[ $(id -u) -eq 0 ]] || { echo "local-cluster: needs root (slurmd, fake GPU devices)" >&2; exit 3; }
host=$(hostname -s)
mkdir -p "$dir"/{state,spool,dev,log} || exit 1
head -c 1024 /dev/urandom > "$dir/munge.key" && chmod 400 "$dir/munge.key"
names=("$host") addrs=(127.0.0.1) netns=("") ctld_addr=127.0.0.1
if ((nodes > 1)); then
  command -v ip > /dev/null || { echo "local-cluster: NODES > 1 needs iproute2" >&2; exit 3; }
  tag=kc$ctld_port net=10.78.$((ctld_port % 250))
  ctld_addr=$net.1 names=() addrs=() netns=()
  : > "$dir/cluster.net"
  ip link add "$tag" type bridge && echo "link $tag" >> "$dir/cluster.net" || exit 3
  ip addr add "$ctld_addr/24" dev "$tag" && ip link set "$tag" up || exit 3
  for ((n = 1; n <= nodes; n++)); do
    names+=("node$n") addrs+=("$net.$((10 + n))") netns+=("$tag-n$n")
    ip netns add "$tag-n$n" && echo "ns $tag-n$n" >> "$dir/cluster.net" || exit 3
    ip link add "$tag-v$n" type veth peer name eth0 netns "$tag-n$n" && echo "link $tag-v$n" >> "$dir/cluster.net" || exit 3
    ip link set "$tag-v$n" master "$tag" up
    ip -n "$tag-n$n" addr add "$net.$((10 + n))/24" dev eth0
    ip -n "$tag-n$n" link set eth0 up
    ip -n "$tag-n$n" link set lo up
  done
fi
kind="fake GPUs"
[[ $gpus == real ]] && kind="real GPUs"
: > "$dir/gres.conf"
for name in "${names[@]}"; do
  mkdir -p "$dir/spool/$name"
  gpu_dev=$dir/dev/$name/nvidia
  if [[ $kind == "real GPUs" ]]; then
    gpus=$(ls /dev | grep -c '^nvidia[0-9][0-9]*$')
    gpu_dev=/dev/nvidia
  else
    mkdir -p "$dir/dev/$name"
    for ((i = 0; i < gpus; i++)); do [[ -e "$gpu_dev$i" ]] || mknod "$gpu_dev$i" c 195 "$i"; done
  fi
  ((gpus > 0)) && echo "NodeName=$name Name=gpu File=$gpu_dev[0-$((gpus - 1))]" >> "$dir/gres.conf"
done
cat > "$dir/slurm.conf" <<CONF
ClusterName=kiln-local
SlurmctldHost=$host($ctld_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=10
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
for ((n = 0; n < ${#names[@]}; n++)); do
  echo "NodeName=${names[n]} NodeAddr=${addrs[n]} CPUs=$cpus RealMemory=4000 Gres=gpu:$gpus State=UNKNOWN" >> "$dir/slurm.conf"
done
# slurmd loads a cgroup plugin even with proctrack/linuxproc and task/none, and the cgroup/v2 one
# wants a writable cgroup tree and systemd's D-Bus (a container has neither). The cgroup/v1 plugin
# touches nothing until a cgroup-based plugin asks, and none does here.
printf 'CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n' > "$dir/cgroup.conf"
export SLURM_CONF=$dir/slurm.conf
# The namespace's first process starts the daemons and waits; --kill-child ends it (and with it
# the namespace) when unshare is killed. Where PID namespaces are not allowed (an unprivileged
# container), the daemons run without one and `stop` ends them one by one.
ns=(unshare --pid --fork --mount-proc --kill-child)
if ! unshare --pid --fork --mount-proc true 2> /dev/null; then
  echo "local-cluster: no PID namespace here; steps may outlive 'stop'" >&2
  ns=(setsid)
  : > "$dir/cluster.session"
fi
"${ns[@]}" bash -c '
  dir=$1
  munged --foreground --force --key-file="$dir/munge.key" --socket="$dir/munge.sock" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed" \
    > "$dir/log/munged.out" 2>&1 &
  for _ in $(seq 1 50); do [[ -S "$dir/munge.sock" ]] && break; sleep 0.1; done
  slurmctld -D -i -f "$dir/slurm.conf" > "$dir/log/slurmctld.out" 2>&1 &
  sleep 1
  shift
  while (($#)); do  # NODE NETNS pairs; NETNS "-" for the root network namespace
    in=()
    [[ $2 != - ]] && in=(ip netns exec "$2")
    "${in[@]}" slurmd -D -N "$1" -f "$dir/slurm.conf" > "$dir/log/slurmd-$1.out" 2>&1 &
    shift 2
  done
  wait' cluster "$dir" $(for ((n = 0; n < ${#names[@]}; n++)); do echo "${names[n]} ${netns[n]:--}"; done) \
  > "$dir/log/cluster.out" 2>&1 < /dev/null &
echo $! > "$dir/cluster.pid"
for _ in $(seq 1 100); do
  if (($(sinfo -h -N -o %t 2> /dev/null | grep -c idle) == ${#names[@]})); then
    echo "local-cluster: up in $dir (${names[*]}: $cpus CPUs and $gpus $kind each)"
    exit 0
  fi
  sleep 0.2
done
echo "local-cluster: the nodes did not come up; logs in $dir/log" >&2
for f in "$dir"/log/*.out; do echo "== $f" >&2; tail -n 5 "$f" >&2; done
stop
exit 1
