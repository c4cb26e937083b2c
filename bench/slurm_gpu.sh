#!/usr/bin/env bash
# deploy/slurm/kiln.sbatch on a GPU machine that has no Slurm and no package registry (the lent
# GPU machine, docs/gpu.md): Debian's Slurm and munge travel as a kit made here.
#   bench/slurm_gpu.sh kit KIT.tar.gz
#       packs munged, slurmctld, slurmd, slurmstepd, the client commands, Slurm's plugins and every
#       non-glibc library they load, from this machine's packages (scripts/bootstrap installs them)
#   bench/slurm_gpu.sh run BUNDLE.tar.gz KIT.tar.gz OUTDIR
#       as root on the GPU machine: installs the kit (slurmd runs slurmstepd from /usr/sbin and
#       loads plugins from Debian's folder, so they go there; the libraries go last on the loader's
#       path, after the system's own), starts deploy/slurm/local-cluster.sh on the machine's real
#       GPUs and submits kiln.sbatch on the cuda backend: one evaluator step per GPU
#       (--gpus-per-task=1), the coordinator and an agent as steps without GPUs. Env:
#       SLURM_GPU_TARGETS (default rmsnorm,softmax), SLURM_GPU_BUDGET (default 60s).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:?usage: bench/slurm_gpu.sh kit KIT.tar.gz | run BUNDLE.tar.gz KIT.tar.gz OUTDIR}
plugins=/usr/lib/x86_64-linux-gnu/slurm-wlm

if [[ $mode == kit ]]; then
  kit=${2:?kit: the output .tar.gz}
  tmp=$(mktemp -d)
  mkdir -p "$tmp"/kit/{sbin,bin,lib,plugins}
  cp /usr/sbin/{munged,slurmctld,slurmd,slurmstepd} "$tmp/kit/sbin/" || exit 1
  cp /usr/bin/{sbatch,srun,squeue,scontrol,sinfo,scancel} "$tmp/kit/bin/" || exit 1
  cp -a "$plugins"/. "$tmp/kit/plugins/"
  for f in "$tmp"/kit/sbin/* "$tmp"/kit/bin/* "$tmp"/kit/plugins/*.so; do
    ldd "$f" 2> /dev/null | awk '/=> \//{print $3}'
  done | sort -u | grep -v -E "/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*)\.so" |
    grep -v "$plugins" | xargs -r -I{} cp -L {} "$tmp/kit/lib/"
  tar -C "$tmp" -czf "$kit" kit && rm -rf "$tmp"
  echo "slurm_gpu: $kit ($(du -h "$kit" | cut -f1))"
  exit 0
fi

bundle=${2:?run: the bundle}
kit=${3:?run: the kit}
out=${4:?run: OUTDIR}
mkdir -p "$out"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/progress.log" >&2; }
[[ $(id -u) -eq 0 ]] || { log "needs root"; exit 3; }
work=$(mktemp -d /tmp/kiln-slurm-gpu.XXXXXX) && chmod 755 "$work"
tar -C "$work" -xzf "$kit" && tar -C "$work" -xzf "$bundle" || { log "cannot unpack"; exit 2; }
kiln=$(ls -d "$work"/kiln-*/ | head -1)bin/kiln
for f in "$work"/kit/sbin/*; do [[ -e /usr/sbin/$(basename "$f") ]] || cp "$f" /usr/sbin/; done
for f in "$work"/kit/bin/*; do [[ -e /usr/local/bin/$(basename "$f") ]] || cp "$f" /usr/local/bin/; done
mkdir -p "$plugins" /opt/kiln-slurm/lib
cp -a --update=none "$work"/kit/plugins/. "$plugins/"
cp -a --update=none "$work"/kit/lib/. /opt/kiln-slurm/lib/
echo /opt/kiln-slurm/lib > /etc/ld.so.conf.d/zz-kiln-slurm.conf && ldconfig
for tool in munged slurmctld slurmd slurmstepd sbatch; do
  missing=$(ldd "$(command -v "$tool")" | grep "not found")
  [[ -z "$missing" ]] || { log "$tool: $missing"; exit 2; }
done
log "slurm: $(slurmd -V)"
nvidia-smi -L >> "$out/progress.log" 2>&1

cluster=$work/cluster
if ! bash "$repo/deploy/slurm/local-cluster.sh" start "$cluster" 16817 16818 real 16 >> "$out/progress.log" 2>&1; then
  log "the cluster did not start"
  cp -r "$cluster/log" "$out/cluster-log" 2> /dev/null
  exit 1
fi
export SLURM_CONF=$cluster/slurm.conf
sinfo -N -o '%N %G %c' >> "$out/progress.log" 2>&1
gpus=$(ls /dev | grep -c '^nvidia[0-9][0-9]*$')
mkdir -p "$work/job"
job=$(cd "$work/job" && KILN=$kiln KILN_BACKEND=cuda KILN_TARGETS=${SLURM_GPU_TARGETS:-rmsnorm,softmax} \
  KILN_BUDGET=${SLURM_GPU_BUDGET:-60s} KILN_EVAL_ARGS="--cache-dir $work/cache" \
  sbatch --parsable --job-name=kiln-gpu -n $((gpus + 2)) --gres=gpu:$gpus "$repo/deploy/slurm/kiln.sbatch" 2>&1)
log "submitted job $job ($gpus GPU(s))"
for _ in $(seq 1 400); do
  squeue -h -j "$job" 2> /dev/null | grep -q . || break
  sleep 1
done
squeue -h -j "$job" 2> /dev/null | grep -q . && { log "the job did not end in 400 s"; scancel "$job"; }
cp -r "$work/job/kiln-gpu/logs" "$out/logs" 2> /dev/null
cp "$work/job/kiln-gpu.out" "$work/job/kiln-gpu/run/summary.json" "$out/" 2> /dev/null
cp "$work/job/kiln-gpu/run/results.jsonl" "$out/" 2> /dev/null
log "batch: $(tail -1 "$work/job/kiln-gpu.out" 2> /dev/null)"
log "evaluator steps: $(head -qn1 "$out"/logs/evaluator-*.out 2> /dev/null | tr '\n' ';')"
python3 - "$out" <<'PY' 2>&1 | tee -a "$out/progress.log"
import json, sys
out = sys.argv[1]
for t in json.load(open(out + "/summary.json")):
    print(f"{t['target']}: {t['evaluations']} evaluations, seed {t['seed_us']:.2f} us, best {t['best_us']:.2f} us, "
          f"gpu_model {t['gpu_model']!r}, {t['state']}")
PY
bash "$repo/deploy/slurm/local-cluster.sh" stop "$cluster"
log DONE
