#!/usr/bin/env bash
# `kiln profile` against torch.profiler on a small transformer training step (bench/profile_step.py:
# 4 layers, d=512, bf16 autocast, AdamW), run on a GPU machine. kiln profile sees a whole program,
# so it profiles two runs that differ only in the number of timed steps, W warm-up + N steps and
# W warm-up + 0 steps: the difference of their GPU totals is the GPU time of N steady-state steps.
# torch.profiler records the same N steps after the same W warm-up steps in one run. Prints both
# totals (sum of kernel durations) and their ratio; exit code 0 when they agree within --tolerance.
#
# Usage: bench/profile_vs_torch.sh KILN_BUNDLE_DIR|KILN_TARBALL|KILN_BINARY [options]
#   --steps N        timed steps (default 10)
#   --warmup W       warm-up steps (default 3)
#   --batch B        batch size (default 48; pick one that gives ~50 ms/step, printed by run 1)
#   --tolerance T    allowed relative difference (default 0.10)
#   --out DIR        plans, traces and logs (default: a temporary folder, kept)
#   --python PY      python with torch (default python3)
# Example: bench/profile_vs_torch.sh build/bin/kiln --steps 10 --batch 48
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "profile_vs_torch: $*" >&2; exit 2; }
say() { echo "[profile_vs_torch $(date -u +%H:%M:%S)] $*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ $# -ge 1 ]] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
src=$1; shift
steps=10 warmup=3 batch=48 tolerance=0.10 out="" python=python3
value() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }
while (($#)); do
  case "$1" in
    --steps) value "$@"; steps=$2; shift ;;
    --warmup) value "$@"; warmup=$2; shift ;;
    --batch) value "$@"; batch=$2; shift ;;
    --tolerance) value "$@"; tolerance=$2; shift ;;
    --out) value "$@"; out=$2; shift ;;
    --python) value "$@"; python=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
for n in "$steps" "$warmup" "$batch"; do [[ "$n" =~ ^[0-9]+$ ]] || die "'$n' is not a whole number"; done
((steps > 0)) || die "--steps must be at least 1"

# The kiln binary: a bundle folder, its tarball, or the binary itself.
if [[ -d "$src" ]]; then
  kiln="${src%/}/bin/kiln"
elif [[ -f "$src" && "$src" == *.tar.gz ]]; then
  unpacked=$(mktemp -d /tmp/kiln-bundle.XXXXXX) || die "mktemp failed"
  tar -C "$unpacked" -xzf "$src" || die "cannot unpack $src"
  kiln=$(find "$unpacked" -mindepth 3 -maxdepth 3 -path '*/bin/kiln' | head -1)
else
  kiln=$src
fi
[[ -n "$kiln" && -x "$kiln" ]] || die "no kiln binary at '$kiln'"
out=${out:-$(mktemp -d /tmp/kiln-profile-vs-torch.XXXXXX)}
mkdir -p "$out" || die "cannot create $out"
step=("$python" "$here/profile_step.py" --warmup "$warmup" --batch "$batch")

say "1/3 kiln profile: $warmup warm-up + $steps steps"
"$kiln" profile --top 15 --out "$out/plan_steps.json" --keep-traces "$out/traces_steps" -- \
  "${step[@]}" --mode plain --steps "$steps" > "$out/kiln_steps.txt" 2> "$out/kiln_steps.err" ||
  { cat "$out/kiln_steps.err" >&2; die "kiln profile (run 1) failed; see $out"; }
grep 'profile_step:' "$out/kiln_steps.err" >&2
say "2/3 kiln profile: $warmup warm-up + 0 steps"
"$kiln" profile --out "$out/plan_warmup.json" --keep-traces "$out/traces_warmup" -- \
  "${step[@]}" --mode plain --steps 0 > "$out/kiln_warmup.txt" 2> "$out/kiln_warmup.err" ||
  { cat "$out/kiln_warmup.err" >&2; die "kiln profile (run 2) failed; see $out"; }
say "3/3 torch.profiler: $warmup warm-up, then $steps steps profiled"
"${step[@]}" --mode torch --steps "$steps" > "$out/torch.json" 2> "$out/torch.err" ||
  { cat "$out/torch.err" >&2; die "the torch.profiler run failed; see $out"; }

cat "$out/kiln_steps.txt"
"$python" - "$out" "$steps" "$tolerance" <<'PY'
import json, sys
out, steps, tol = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
full = json.load(open(f"{out}/plan_steps.json"))["total_gpu_ns"]
warm = json.load(open(f"{out}/plan_warmup.json"))["total_gpu_ns"]
torch_ns = json.load(open(f"{out}/torch.json"))["torch_kernel_ns"]
kiln_ns = full - warm
ratio = kiln_ns / torch_ns if torch_ns else float("inf")
print(f"\nkiln profile: {kiln_ns / 1e6:.3f} ms of kernels in {steps} steps "
      f"({full / 1e6:.3f} ms whole run - {warm / 1e6:.3f} ms warm-up-only run)")
print(f"torch.profiler: {torch_ns / 1e6:.3f} ms of kernels in {steps} steps")
print(f"ratio kiln/torch: {ratio:.4f} ({'within' if abs(ratio - 1) <= tol else 'OUTSIDE'} {100 * tol:.0f}%)")
print(f"files: {out}")
sys.exit(0 if abs(ratio - 1) <= tol else 1)
PY
