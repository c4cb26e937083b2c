#!/usr/bin/env bash
# kiln against PyTorch on the built-in targets, run on a GPU machine. For each target:
#  (a) `kiln eval T --json`                      the seed: five verification stages and its time;
#  (b) `kiln eval T --sweep [--limit N] --json`  the template's configurations; the fastest
#                                                verified one is taken;
#  (c) `kiln eval T --params BEST --json`        that configuration again on its own: all five
#                                                stages, timed in the same conditions as the seed;
#  (d) bench/pytorch_baselines.py                eager, torch.compile default and max-autotune.
# Every JSON goes under DIR, with a manifest (kiln version, nvidia-smi -L, commit, date, the exact
# command lines and their exit codes); progress lines go to stderr. Turn DIR(s) into a table with
# bench/make_results_md.py. Calls have a wall limit: run a few targets per call (--targets) into
# separate DIRs and pass them all to make_results_md.py.
#
# Usage: bench/targets_vs_pytorch.sh KILN_BUNDLE_DIR|KILN_TARBALL|KILN_BINARY [options]
#   --targets a,b,...   targets to run (default: every folder in the targets dir, plus the
#                       built-in names that have no folder yet, PyTorch only)
#   --limit N           sweep at most N configurations (a random sample; default: all)
#   --out DIR           where the JSON goes (default: $OUT if set, else bench/results/raw-<date>)
#   --backend B         passed to kiln eval (cuda or cpu; default: kiln's choice)
#   --dtype D           passed to kiln eval and the PyTorch script (default f16)
#   --targets-dir DIR   targets for kiln and PyTorch alike (default: a bundle's share/kiln/targets,
#                       else this repository's targets/)
#   --deadline-s S      stop starting new work S seconds after the start; each kiln command is
#                       given only the time left (default 0: no deadline)
#   --pytorch-reserve-s S   with a deadline, the last S seconds are kept for the PyTorch step
#                       (default 150; 0 with --skip-pytorch)
#   --skip-kiln | --skip-pytorch   run only one side
#   --python PY         python with torch (default python3)
#   --pytorch-args "…"  extra arguments for pytorch_baselines.py (e.g. "--target-budget-s 200")
# Example (one call of the GPU machine, within its 10 minutes):
#   bench/targets_vs_pytorch.sh .carry/kiln-0.1.0-x86_64.tar.gz --targets rmsnorm,softmax,reduce --limit 24 --deadline-s 540
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "targets_vs_pytorch: $*" >&2; exit 2; }
say() { echo "[targets_vs_pytorch $(date -u +%H:%M:%S)] $*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
invocation=("$0" "$@")
[[ $# -ge 1 ]] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
src=$1; shift
targets="" limit="" out="" backend="" dtype="f16" targets_dir="" deadline=0
skip_kiln=0 skip_pytorch=0 python=python3 pytorch_args="" reserve=150
value() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }
while (($#)); do
  case "$1" in
    --targets) value "$@"; targets=$2; shift ;;
    --limit) value "$@"; limit=$2; shift ;;
    --out) value "$@"; out=$2; shift ;;
    --backend) value "$@"; backend=$2; shift ;;
    --dtype) value "$@"; dtype=$2; shift ;;
    --targets-dir) value "$@"; targets_dir=$2; shift ;;
    --deadline-s) value "$@"; deadline=$2; shift ;;
    --skip-kiln) skip_kiln=1 ;;
    --skip-pytorch) skip_pytorch=1 ;;
    --python) value "$@"; python=$2; shift ;;
    --pytorch-args) value "$@"; pytorch_args=$2; shift ;;
    --pytorch-reserve-s) value "$@"; reserve=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ -z "$limit" || "$limit" =~ ^[0-9]+$ ]] || die "--limit must be a number, not '$limit'"
[[ "$deadline" =~ ^[0-9]+$ ]] || die "--deadline-s must be a whole number of seconds, not '$deadline'"
[[ "$reserve" =~ ^[0-9]+$ ]] || die "--pytorch-reserve-s must be a whole number of seconds, not '$reserve'"
((skip_pytorch)) && reserve=0
[[ -z "$backend" || "$backend" == cuda || "$backend" == cpu ]] || die "--backend is cuda or cpu"

# The kiln binary: a bundle folder, its tarball, or the binary itself.
bundle=""
if [[ -d "$src" ]]; then
  bundle=$src
elif [[ -f "$src" && "$src" == *.tar.gz ]]; then
  unpacked=$(mktemp -d /tmp/kiln-bundle.XXXXXX) || die "mktemp failed"
  tar -C "$unpacked" -xzf "$src" || die "cannot unpack $src"
  bundle=$(find "$unpacked" -mindepth 1 -maxdepth 1 -type d -name 'kiln-*' | head -1)
  [[ -n "$bundle" ]] || die "$src holds no kiln-*/ folder"
fi
if [[ -n "$bundle" ]]; then
  kiln="${bundle%/}/bin/kiln"
  [[ -z "$targets_dir" && -d "${bundle%/}/share/kiln/targets" ]] && targets_dir="${bundle%/}/share/kiln/targets"
else
  kiln=$src
fi
[[ -x "$kiln" ]] || die "no kiln binary at '$kiln'"
kiln=$(cd "$(dirname "$kiln")" && pwd)/$(basename "$kiln")
[[ -n "$targets_dir" ]] || targets_dir="$repo/targets"
targets_dir=$(cd "$targets_dir" && pwd) || die "no targets dir '$targets_dir'"

day=$(date -u +%Y-%m-%d)
run_id=$(date -u +%Y%m%dT%H%M%SZ)
out=${out:-${OUT:-$repo/bench/results/raw-$day}}
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
commands="$out/commands-$run_id.jsonl"
: > "$commands"
start_s=0  # $SECONDS counts from the start of the script, unpacking included

known="rmsnorm softmax reduce layernorm rotary_embedding cross_entropy matmul flash_attention fused_mlp"
if [[ -z "$targets" ]]; then
  list=""
  for t in $known; do list+="$t "; done
  for d in "$targets_dir"/*/; do
    t=$(basename "$d")
    [[ -f "$d/target.json" && " $list " != *" $t "* ]] && list+="$t "
  done
  list=${list% }
  targets=${list// /,}
fi
IFS=, read -r -a target_list <<< "$targets"

# Seconds left before --deadline-s (a large number when there is none); kiln's steps see the
# time left before the PyTorch reserve.
left() { if ((deadline > 0)); then echo $((deadline - (SECONDS - start_s) - ${1:-0})); else echo 999999; fi; }
phase_reserve=$reserve

# Runs one command with stdout to $1 and stderr to $2, appends its line to the commands log;
# with a deadline, the command gets only the time left. Returns the command's exit code.
run_logged() {
  local stdout=$1 stderr=$2; shift 2
  local t0=$SECONDS rc
  local l; l=$(left "$phase_reserve")
  if ((l < 10)); then
    say "  skipped (time): $*"
    "$python" - "$commands" "skipped (time)" 0 "$@" <<'PY'
import json, sys
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"argv": sys.argv[4:], "rc": None, "status": sys.argv[2], "wall_s": 0}) + "\n")
PY
    return 124
  fi
  if ((deadline > 0)); then
    timeout --kill-after=10 "$l" "$@" > "$stdout" 2> "$stderr"; rc=$?
  else
    "$@" > "$stdout" 2> "$stderr"; rc=$?
  fi
  local status="done"
  ((rc == 124 || rc == 137)) && ((deadline > 0)) && status="killed at the deadline"
  "$python" - "$commands" "$status" "$rc" "$((SECONDS - t0))" "$stdout" "$@" <<'PY'
import json, sys
path, status, rc, wall, stdout = sys.argv[1:6]
with open(path, "a") as f:
    f.write(json.dumps({"argv": sys.argv[6:], "rc": int(rc), "status": status,
                        "wall_s": int(wall), "stdout": stdout}) + "\n")
PY
  return $rc
}

# Facts about a target.json: "template" (the backend has a template) or "seed-only", and the
# benchmark shape; "missing" when the folder has no target.json.
target_info() {
  "$python" - "$targets_dir/$1/target.json" "${2:-cuda}" <<'PY'
import json, os, sys
path, backend = sys.argv[1], sys.argv[2]
if not os.path.exists(path):
    print("missing"); sys.exit()
spec = json.load(open(path))
b = spec.get("backends", {}).get(backend, {})
print("template" if b.get("template") else ("seed-only" if b.get("seed") else "no-backend"))
PY
}

# The fastest verified configuration of a sweep JSON, as K=V,... over the template's own
# parameters (the sweep's "params" also hold the spec's fixed defines, which --params refuses).
best_params() {
  "$python" - "$1" "$targets_dir/$2/target.json" "$3" <<'PY'
import json, sys
try:
    sweep = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(1)
spec = json.load(open(sys.argv[2]))
names = set(spec["backends"][sys.argv[3]]["template"].get("params", {}))
ok = [r for r in sweep.get("results", []) if r.get("outcome") == "verified" and r["timing"]["median_us"] > 0]
if not ok:
    sys.exit(1)
best = min(ok, key=lambda r: r["timing"]["median_us"])
print(",".join(f"{k}={v}" for k, v in sorted(best["params"].items()) if k in names))
PY
}

# One line about a kiln eval JSON for the progress log.
summary() {
  "$python" - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no JSON ({type(e).__name__})"); sys.exit()
if "results" in r:
    print(f"{r['verified']} of {r['configurations']} configurations verified in {r['wall_s']:.1f} s")
else:
    t, m = r.get("timing", {}), r.get("metrics", {})
    s = f"{r.get('outcome')}"
    if r.get("outcome") != "verified":
        bad = [st["name"] for st in r.get("stages", []) if not st.get("passed")]
        print(s + (f" (failed: {', '.join(bad)})" if bad else "")); sys.exit()
    s += f", median {t.get('median_us', 0):.2f} us"
    if "fraction_of_floor" in m:
        s += f", {100 * m['fraction_of_floor']:.1f}% of the floor ({m['floor_us']:.2f} us)"
    print(s)
PY
}

say "kiln $kiln; targets dir $targets_dir; out $out; targets ${target_list[*]}"
common=()
[[ -n "$backend" ]] && common+=(--backend "$backend")
common+=(--dtype "$dtype" --targets-dir "$targets_dir")

"$kiln" version > "$out/kiln-version-$run_id.txt" 2>&1
"$kiln" version --json > "$out/kiln-version-$run_id.json" 2>/dev/null
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L > "$out/nvidia-smi-$run_id.txt" 2>&1
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv >> "$out/nvidia-smi-$run_id.txt" 2>&1
else
  echo "nvidia-smi: not found" > "$out/nvidia-smi-$run_id.txt"
fi

# Past the deadline, the steps not started are only logged (no python start-up per step).
out_of_time() {
  (($(left "$phase_reserve") >= 10)) && return 1
  say "$1: skipped (time): $2"
  printf '{"argv": ["%s", "%s"], "rc": null, "status": "skipped (time)", "wall_s": 0}\n' "$1" "$2" >> "$commands"
}

declare -A chosen=()
if ((!skip_kiln)); then
  for t in "${target_list[@]}"; do
    out_of_time "$t" "kiln eval (seed, sweep, best)" && continue
    info=$(target_info "$t" "${backend:-cuda}")
    if [[ "$info" == missing ]]; then
      say "$t: no $targets_dir/$t/target.json; PyTorch only"
      continue
    fi
    say "$t: (a) seed"
    run_logged "$out/$t.seed.json" "$out/$t.seed.log" "$kiln" eval "$t" "${common[@]}" --json
    say "$t: seed: $(summary "$out/$t.seed.json")"
    # The backend kiln used (it falls back to cpu without a GPU) decides which template applies.
    b=${backend:-$("$python" -c 'import json,sys
try: print("cpu" if json.load(open(sys.argv[1])).get("arch") == "cpu" else "cuda")
except Exception: print("cuda")' "$out/$t.seed.json")}
    info=$(target_info "$t" "$b")
    if [[ "$info" != template ]]; then
      say "$t: no template for the $b backend; no sweep"
      continue
    fi
    out_of_time "$t" "kiln eval --sweep, then the best configuration" && continue
    say "$t: (b) sweep${limit:+ (limit $limit)}"
    sweep=(eval "$t" --sweep "${common[@]}" --json)
    [[ -n "$limit" ]] && sweep+=(--limit "$limit")
    run_logged "$out/$t.sweep.json" "$out/$t.sweep.log" "$kiln" "${sweep[@]}"
    say "$t: sweep: $(summary "$out/$t.sweep.json")"
    if ! best=$(best_params "$out/$t.sweep.json" "$t" "$b") || [[ -z "$best" ]]; then
      say "$t: the sweep verified no configuration; no re-evaluation"
      continue
    fi
    chosen[$t]=$best
    out_of_time "$t" "kiln eval --params $best" && continue
    say "$t: (c) best configuration $best, evaluated again on its own"
    run_logged "$out/$t.best.json" "$out/$t.best.log" "$kiln" eval "$t" --params "$best" "${common[@]}" --json
    say "$t: best: $(summary "$out/$t.best.json")"
  done
fi

pytorch_json=""
phase_reserve=0
if ((!skip_pytorch)) && ! out_of_time pytorch "bench/pytorch_baselines.py"; then
  pytorch_json="$out/pytorch-$run_id.json"
  say "(d) PyTorch baselines for ${target_list[*]}"
  l=$(left)
  py=("$python" "$here/pytorch_baselines.py" --targets "$targets" --dtype "$dtype"
      --targets-dir "$targets_dir" --out "$pytorch_json")
  ((deadline > 0)) && py+=(--deadline-s "$((l > 30 ? l - 20 : 10))")
  # shellcheck disable=SC2206 # word splitting of the extra arguments is intended
  [[ -n "$pytorch_args" ]] && py+=($pytorch_args)
  run_logged "$out/pytorch-$run_id.stdout" "$out/pytorch-$run_id.log" "${py[@]}"
  say "PyTorch baselines: exit $?, $pytorch_json"
fi

# The manifest: everything make_results_md.py needs besides the result files themselves.
chosen_text=""
for t in "${!chosen[@]}"; do chosen_text+="$t=${chosen[$t]};"; done
"$python" - "$out/manifest-$run_id.json" "$commands" "$out" "$run_id" "$targets_dir" "$targets" \
  "$limit" "$backend" "$dtype" "$kiln" "$pytorch_json" "$chosen_text" "${invocation[@]}" <<'PY' || say "manifest: failed"
import datetime, json, os, shlex, sys
(path, commands, out, run_id, tdir, targets, limit, backend, dtype, kiln, pytorch_json,
 chosen) = sys.argv[1:13]
invocation = shlex.join(sys.argv[13:])
def read(name):
    p = os.path.join(out, name)
    return open(p).read().strip() if os.path.exists(p) else None
version_json = None
try:
    version_json = json.loads(read(f"kiln-version-{run_id}.json") or "null")
except Exception:
    pass
shapes = {}
for t in filter(None, targets.split(",")):
    p = os.path.join(tdir, t, "target.json")
    if os.path.exists(p):
        spec = json.load(open(p))
        shapes[t] = {"benchmark": spec["shapes"]["benchmark"], "description": spec.get("description", "")}
m = {
    "tool": "bench/targets_vs_pytorch.sh",
    "run_id": run_id,
    "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "invocation": invocation,
    "targets": [t for t in targets.split(",") if t],
    "targets_dir": tdir, "limit": int(limit) if limit else None, "backend": backend or None,
    "dtype": dtype, "kiln": kiln,
    "kiln_version": read(f"kiln-version-{run_id}.txt"),
    "kiln_version_json": version_json,
    "commit": (version_json or {}).get("commit"),
    "nvidia_smi": read(f"nvidia-smi-{run_id}.txt"),
    "shapes": shapes,
    "chosen_params": dict(x.split("=", 1) for x in chosen.split(";") if x),
    "pytorch_json": os.path.basename(pytorch_json) if pytorch_json else None,
    "commands": [json.loads(l) for l in open(commands) if l.strip()],
}
json.dump(m, open(path, "w"), indent=2)
PY
say "done in $((SECONDS - start_s)) s: $out/manifest-$run_id.json"
