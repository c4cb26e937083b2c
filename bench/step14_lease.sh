#!/usr/bin/env bash
# One GPU-machine lease for steps 13 and 14, run as ONE background job so the figures come from
# one machine in one sitting (the device tool returns when a call ends: start this with setsid,
# then collect OUTDIR/progress.log in later calls):
#   setsid bench/step14_lease.sh .carry/kiln-0.1.0-x86_64.tar.gz /tmp/lease > /dev/null 2>&1 &
#   1. the Triton GPU tests first (the quickest sign that the triton launch path works), then
#      scripts/gpu_check: every GPU-labelled test, each in its own process;
#   2. kiln run --backend triton on the targets that have Triton kernels (LEASE_TRITON_TARGETS,
#      budget LEASE_TRITON_BUDGET), then each Triton seed, the Triton best and the CUDA best
#      (bench/best_configs.sh) through kiln eval at the same shape: the Triton/CUDA comparison;
#   3. bench/fused_mlp_compare.sh (PyTorch eager, torch.compile, cuBLAS on the two GEMMs, and
#      bench/cases/step13-fused-mlp.txt, or LEASE_MLP_CASES);
#   4. bench/attention_compare.sh: flash_attention's IMPL 1 and FA3 (IMPL 2) schedules in f16 and
#      bf16 against PyTorch's SDPA;
#   5. (only when asked) kiln run --backend cuda from the seeds of LEASE_SEARCH_TARGETS (default
#      flash_attention,fused_mlp,matmul) for LEASE_SEARCH_BUDGET (default 8m): how far the search
#      gets on the compute-bound targets, which issue #21 asks to reach their bests in 20 minutes.
# OUTDIR/DONE appears at the end. LEASE_STEPS picks steps: any of tests,check,triton,mlp,attn,
# search (comma-separated; default tests,check,triton,mlp,attn).
set -uo pipefail
tarball=${1:?usage: bench/step14_lease.sh KILN_TARBALL OUTDIR}
out=${2:?usage: bench/step14_lease.sh KILN_TARBALL OUTDIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
mkdir -p "$out"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/progress.log" >&2; }

unpacked=$(mktemp -d /tmp/kiln-lease.XXXXXX)
tar -C "$unpacked" -xzf "$tarball" || { log "cannot unpack $tarball"; exit 2; }
bundle=$(ls -d "$unpacked"/kiln-*/ | head -1)
kiln="$bundle/bin/kiln"
export KILN_CACHE_DIR=/tmp/kiln-lease-cache KILN_BIN="$kiln" KILN_SOURCE_DIR="$bundle/source"
log "bundle: $("$kiln" version 2>&1 | head -1)"
log "python: $(python3 -c 'import sys, torch, triton; print(sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)' 2>&1)"
nvidia-smi -L >> "$out/progress.log" 2>&1

steps=",${LEASE_STEPS:-tests,check,triton,mlp,attn},"
want() { [[ "$steps" == *",$1,"* ]]; }

if want tests; then
log "TritonGpu tests: start"
"$bundle/tests/kiln_gpu_tests" --gtest_filter='TritonGpu.*' > "$out/triton_gpu.txt" 2>&1
log "TritonGpu tests: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/triton_gpu.txt" | tr '\n' ' ')"
fi

if want check; then
  log "gpu_check: start"
  OUT="$out/gpu_check" "$repo/scripts/gpu_check" "$bundle" > "$out/gpu_check.log" 2>&1
  log "gpu_check: rc=$? $(tail -1 "$out/gpu_check.log"); failed: $(grep '^FAIL' "$out/gpu_check.log" | tr '\n' ' ')"
fi

if want triton; then
# shellcheck source=bench/best_configs.sh
source "$here/best_configs.sh"
targets=${LEASE_TRITON_TARGETS:-rmsnorm,softmax,cross_entropy,matmul}
log "kiln run --backend triton ($targets, ${LEASE_TRITON_BUDGET:-4m}): start"
"$kiln" run --backend triton --targets "$targets" --budget "${LEASE_TRITON_BUDGET:-4m}" \
  --out "$out/triton-run" --cache-dir "$KILN_CACHE_DIR" > "$out/triton-run.log" 2>&1
log "kiln run --backend triton: rc=$?"
IFS=',' read -ra tlist <<< "$targets"
: > "$out/compare.jsonl"
for t in "${tlist[@]}"; do
  tbest=$(python3 - "$out/triton-run/best" "$t" << 'PY'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    b = json.load(open(path))
    if b.get("target") == sys.argv[2] and b.get("params"):
        print(",".join("%s=%s" % kv for kv in sorted(b["params"].items())))
        break
PY
)
  for what in "triton seed|--backend triton" "triton best|--backend triton --params $tbest" \
              "cuda best|--backend cuda --params ${best[$t]}"; do
    label=${what%%|*} args=${what#*|}
    [[ "$label" == "triton best" && -z "$tbest" ]] && continue
    # shellcheck disable=SC2086
    "$kiln" eval "$t" $args --json --cache-dir "$KILN_CACHE_DIR" > "$out/eval.json" 2> "$out/eval.stderr"
    rc=$?
    python3 - "$out/eval.json" "$t" "$label" "$rc" >> "$out/compare.jsonl" << 'PY'
import json, sys
path, target, label, rc = sys.argv[1:]
row = {"target": target, "what": label, "rc": int(rc)}
try:
    r = json.load(open(path))
    row.update(outcome=r.get("outcome"), median_us=(r.get("timing") or {}).get("median_us"),
               params=r.get("params"), sm_mhz=(r.get("timing") or {}).get("sm_clock_mhz"))
except Exception as e:
    row["error"] = str(e)
print(json.dumps(row))
PY
    log "compare: $(tail -n 1 "$out/compare.jsonl" | cut -c1-220)"
  done
done
fi

if want mlp; then
  log "fused_mlp_compare: start"
  PYTORCH_ARGS="${PYTORCH_ARGS:---target-budget-s 150}" timeout 900 \
    "$here/fused_mlp_compare.sh" "$kiln" "${LEASE_MLP_CASES:-$here/cases/step13-fused-mlp.txt}" "$out/fused-mlp" \
    > "$out/fused-mlp.log" 2>&1
  log "fused_mlp_compare: rc=$?"
fi
if want attn; then
  log "attention_compare: start"
  timeout 500 "$here/attention_compare.sh" "$kiln" "$out/attention" > "$out/attention.log" 2>&1
  log "attention_compare: rc=$? $(grep -c '"verified"' "$out/attention/results.jsonl" 2> /dev/null) verified"
  rm -rf "$out/attention/cache"
fi

if want search; then
  targets=${LEASE_SEARCH_TARGETS:-flash_attention,fused_mlp,matmul}
  log "kiln run --backend cuda ($targets, ${LEASE_SEARCH_BUDGET:-8m}): start"
  "$kiln" run --backend cuda --targets "$targets" --budget "${LEASE_SEARCH_BUDGET:-8m}" \
    --out "$out/search-run" --cache-dir "$KILN_CACHE_DIR" > "$out/search-run.log" 2>&1
  log "kiln run --backend cuda: rc=$?"
  grep -A20 '^target ' "$out/search-run.log" | head -12 >> "$out/progress.log"
fi
log "DONE"
: > "$out/DONE"
