# shellcheck shell=bash
# Sourced by the lease scripts that time or profile kiln's kernels as PyTorch extensions
# (same_call_lease.sh, gemm_ncu.sh): the bundle unpacked, and a target's torch export made and
# built. Each function returns the command's exit status; the caller logs and decides.

# unpack_bundle TARBALL NAME: unpacks the relocatable bundle into a new folder under /tmp, sets
# `bundle` to it, puts its bin/ first on PATH and builds extensions in /tmp/NAME-ext.
unpack_bundle() {
  local unpacked
  unpacked=$(mktemp -d "/tmp/$2.XXXXXX") || return 2
  tar -C "$unpacked" -xzf "$1" || return 2
  bundle=$(ls -d "$unpacked"/kiln-*/ | head -1)
  [[ -n "$bundle" ]] || return 2
  export PATH="$bundle/bin:$PATH" TORCH_EXTENSIONS_DIR="/tmp/$2-ext" PYTHONUNBUFFERED=1
}

# export_torch T PARAMS DIR LOG [kiln export options]: `kiln export T --template` at PARAMS as a
# torch extension into DIR (the export verifies the kernel on this GPU first), output in LOG.
export_torch() {
  local t=$1 params=$2 dir=$3 log=$4
  shift 4
  timeout 300 kiln export "$t" --template --params "$params" --format torch --to "$dir" "$@" \
    > "$log" 2>&1
}

# build_torch DIR LOG: compiles the extension of the export in DIR (named after its folder).
build_torch() {
  local t
  t=$(basename "$1")
  (cd "$1" && timeout 400 python3 -c "import sys; sys.path.insert(0, '.'); import $t; $t._ext()") \
    > "$2" 2>&1
}
