#!/usr/bin/env bash
# The step-11 run on a GPU machine, from the relocatable bundle: `kiln run` on a few targets with
# the HTTP endpoints on, /status, /metrics and the probes read while it runs (every 20 s, kept in
# OUTDIR/scrapes/), then `kiln report` of its folder as HTML and markdown. The HTML report is what
# docs/ shows (with a screenshot taken by headless Chromium on the development machine).
# Usage: bench/step11_report.sh TARBALL OUTDIR. Env: STEP11_TARGETS (default reduce,softmax,
# layernorm), STEP11_BUDGET (default 240s). Progress: OUTDIR/progress.log.
set -uo pipefail
tarball=${1:?usage: bench/step11_report.sh TARBALL OUTDIR}
out=${2:?usage: bench/step11_report.sh TARBALL OUTDIR}
mkdir -p "$out/scrapes"
out=$(cd "$out" && pwd)
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/progress.log" >&2; }

unpacked=$(mktemp -d /tmp/kiln-step11.XXXXXX)
tar -C "$unpacked" -xzf "$tarball" || { log "cannot unpack $tarball"; exit 2; }
bundle=$(ls -d "$unpacked"/kiln-*/ | head -1)
kiln="$bundle/bin/kiln"
log "kiln: $("$kiln" version 2>&1 | head -1)"
nvidia-smi -L >> "$out/progress.log" 2>&1
targets=${STEP11_TARGETS:-reduce,softmax,layernorm}
budget=${STEP11_BUDGET:-240s}

run="$out/run"
"$kiln" run --targets "$targets" --budget "$budget" --http 127.0.0.1:0 --out "$run" > "$out/run.stdout" 2> "$out/run.stderr" &
pid=$!
for _ in $(seq 100); do [[ -s "$run/http" ]] && break; sleep 0.3; done
url=$(cat "$run/http" 2>/dev/null)
log "kiln run pid $pid, HTTP at ${url:-none}"
fetch() {  # fetch PATH FILE: status code on stdout
  python3 - "$url$1" "$2" <<'PY'
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        open(sys.argv[2], "wb").write(r.read()); print(r.status)
except urllib.error.HTTPError as e:
    open(sys.argv[2], "wb").write(e.read()); print(e.code)
except Exception as e:
    print("error", e)
PY
}
n=0
while kill -0 "$pid" 2>/dev/null; do
  if [[ -n "$url" ]]; then
    n=$((n + 1))
    m=$(fetch /metrics "$out/scrapes/metrics-$n.txt"); s=$(fetch /status "$out/scrapes/status-$n.json")
    h=$(fetch /healthz "$out/scrapes/healthz-$n.txt"); r=$(fetch /readyz "$out/scrapes/readyz-$n.txt")
    log "scrape $n: /metrics $m /status $s /healthz $h /readyz $r"
  fi
  sleep 20
done
wait "$pid"; rc=$?
log "kiln run exited $rc"
"$kiln" report "$run" --out "$out/report.html" >> "$out/progress.log" 2>&1
log "kiln report (html) exited $?"
"$kiln" report "$run" --format md > "$out/report.md" 2>> "$out/progress.log"
log "kiln report (md) exited $?"
cp "$run/summary.json" "$run/results.jsonl" "$run/run.json" "$out/" 2>/dev/null
rm -rf "$unpacked"
