#!/bin/bash
# A one-node Slurm cluster in a folder, for trying deploy/slurm/kiln.sbatch on one machine and for
# kiln's tests (tests/integration/slurm_test.cc): munged, slurmctld and slurmd in the foreground,
# in a PID namespace of their own that `stop` ends with every job in it (no systemd), proctrack/linuxproc and task/none (no cgroups), and GPUS fake
# GPUs as character devices in DIR/dev, so that --gpus-per-task gives each step its own
# CUDA_VISIBLE_DEVICES. Needs root and Debian's slurmctld, slurmd, slurm-client and munge.
#   local-cluster.sh start DIR CTLD_PORT SLURMD_PORT [GPUS] [CPUS]  then: export SLURM_CONF=DIR/slurm.conf
#   local-cluster.sh stop DIR
# GPUS=real: the machine's own GPUs (/dev/nvidia0, 1, ...) instead of fake ones.
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
  return 0
}

if [[ $cmd == stop ]]; then stop; exit 0; fi
ctld_port=${3:?slurmctld port}
slurmd_port=${4:?slurmd port}
gpus=${5:-4}
cpus=${6:-16}
for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" > /dev/null || { echo "local-cluster: $tool is missing (scripts/bootstrap installs it)" >&2; exit 3; }
done
[[ $(id -u) -eq 0 ]] || { echo "local-cluster: needs root (slurmd, fake GPU devices)" >&2; exit 3; }
host=$(hostname -s)
mkdir -p "$dir"/{state,spool,dev,log} || exit 1
head -c 1024 /dev/urandom > "$dir/munge.key" && chmod 400 "$dir/munge.key"
gpu_dev=$dir/dev/nvidia
if [[ $gpus == real ]]; then
  gpus=$(ls /dev | grep -c '^nvidia[0-9][0-9]*$')
  gpu_dev=/dev/nvidia
  kind="real GPUs"
else
  kind="fake GPUs"
  for ((i = 0; i < gpus; i++)); do [[ -e "$dir/dev/nvidia$i" ]] || mknod "$dir/dev/nvidia$i" c 195 "$i"; done
fi
cat > "$dir/slurm.conf" <<CONF
ClusterName=kiln-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=4000 Gres=gpu:$gpus State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
# slurmd loads a cgroup plugin even with proctrack/linuxproc and task/none, and the cgroup/v2 one
# wants a writable cgroup tree and systemd's D-Bus (a container has neither). The cgroup/v1 plugin
# touches nothing until a cgroup-based plugin asks, and none does here.
printf 'CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n' > "$dir/cgroup.conf"
if ((gpus > 0)); then
  echo "NodeName=$host Name=gpu File=$gpu_dev[0-$((gpus - 1))]" > "$dir/gres.conf"
else
  : > "$dir/gres.conf"
fi
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
  dir=$1 host=$2
  munged --foreground --force --key-file="$dir/munge.key" --socket="$dir/munge.sock" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed" \
    > "$dir/log/munged.out" 2>&1 &
  for _ in $(seq 1 50); do [[ -S "$dir/munge.sock" ]] && break; sleep 0.1; done
  slurmctld -D -i -f "$dir/slurm.conf" > "$dir/log/slurmctld.out" 2>&1 &
  sleep 1
  slurmd -D -N "$host" -f "$dir/slurm.conf" > "$dir/log/slurmd.out" 2>&1 &
  wait' cluster "$dir" "$host" > "$dir/log/cluster.out" 2>&1 < /dev/null &
echo $! > "$dir/cluster.pid"
for _ in $(seq 1 100); do
  if sinfo -h -N -o %t 2>/dev/null | grep -q idle; then
    echo "local-cluster: up in $dir (node $host, $cpus CPUs, $gpus $kind)"
    exit 0
  fi
  sleep 0.2
done
echo "local-cluster: the node did not come up; logs in $dir/log" >&2
tail -5 "$dir"/log/*.out >&2
stop
exit 1
