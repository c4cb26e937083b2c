# kiln's Triton compile worker: one Triton kernel in, one cubin and its launch metadata out, with
# no GPU (Triton compiles for an explicit target). kiln's TritonCompiler runs it once per compile
# (python3 -c <this text> REQUEST RESPONSE CUBIN), with JSON files:
#
#   request  {"source": Python text, "kernel": the @triton.jit function's name,
#             "args": [Triton type of each runtime parameter, in kiln's calling convention:
#                      tensors "*fp16" ..., then dims "i64", then scalars "fp32" or "i64"],
#             "constants": {constexpr parameter: int value}, "num_warps": N, "num_stages": N,
#             "arch": "sm_90a", "cache_dir": the folder for Triton's own cache}
#   response {"ok": true, "name": entry point (the cubin goes to CUBIN), "shared": dynamic
#             shared bytes, "num_warps": N, "hidden_args": trailing pointer parameters Triton
#             added (passed as null), "ptx": Triton's PTX (kiln scans it), "triton_version": "3.6.0",
#             "divisible": {"args": [indices of the pointer and integer parameters], "name",
#             "shared", "ptx"} when there are any: a second compile (its cubin goes to
#             CUBIN.divisible) told that every one of them is a multiple of 16, as Triton's own
#             launcher specializes, so that masked loads along such dims are vectorized; kiln
#             launches it where every such argument is}
#         or {"ok": false, "rejected": true when refused for what kiln cannot launch, "log": why}
#
# The source was scanned by kiln before it gets here (only triton, triton.language and math may be
# imported); what the kernel's module prints goes to kiln's compile log.
import importlib.util
import json
import os
import re
import sys
import tempfile
import traceback


def respond(out, body):
    with open(out, "w") as f:
        json.dump(body, f)


def fail(out, log, rejected=False):
    respond(out, {"ok": False, "rejected": rejected, "log": log})
    return 0


def load_kernel(source, kernel, folder):
    path = os.path.join(folder, "kiln_triton_kernel.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("kiln_triton_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, kernel, None)
    if fn is None:
        raise LookupError("the source defines no '%s'" % kernel)
    return fn


def main():
    if len(sys.argv) != 4:
        sys.stderr.write("usage: compile_worker.py REQUEST RESPONSE CUBIN\n")
        return 2
    out, cubin_path = sys.argv[2], sys.argv[3]
    try:
        with open(sys.argv[1]) as f:
            req = json.load(f)
    except Exception as e:
        return fail(out, "compile worker: the request is not JSON: %s" % e)
    os.environ["TRITON_CACHE_DIR"] = req["cache_dir"]
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except Exception as e:
        return fail(out, "compile worker: cannot import triton (%s): install it for this python "
                         "(%s), or point kiln at one that has it (KILN_TRITON_PYTHON)"
                    % (e, sys.executable))
    arch = req.get("arch", "")
    m = re.fullmatch(r"sm_(\d+)a?", arch)
    if not m:
        return fail(out, "compile worker: arch '%s' is not sm_NN" % arch, rejected=True)
    with tempfile.TemporaryDirectory(prefix="kiln-triton-src-") as folder:
        try:
            fn = load_kernel(req["source"], req["kernel"], folder)
        except Exception:
            return fail(out, "the kernel's module failed to load:\n" + traceback.format_exc(limit=4))
        if not isinstance(fn, triton.runtime.jit.JITFunction):
            return fail(out, "'%s' is not a @triton.jit function (it is %s); kiln compiles "
                             "@triton.jit kernels, without @triton.autotune or @triton.heuristics "
                             "(their settings are the template's parameters)"
                        % (req["kernel"], type(fn).__name__), rejected=True)
        args = list(req.get("args", []))
        constants = dict(req.get("constants", {}))
        runtime = [p.name for p in fn.params if not p.is_constexpr]
        constexprs = [p.name for p in fn.params if p.is_constexpr]
        if len(runtime) != len(args):
            return fail(out, "'%s' takes %d runtime parameter(s) (%s), and the target passes %d "
                             "(%s: tensors, then dims, then scalars; docs/targets.md)"
                        % (req["kernel"], len(runtime), ", ".join(runtime), len(args),
                           ", ".join(args)))
        missing = [c for c in constexprs if c not in constants and
                   not next(p for p in fn.params if p.name == c).has_default]
        if missing:
            return fail(out, "no value for the constexpr parameter(s) %s of '%s': name them in "
                             "the spec's defines or the template's params"
                        % (", ".join(missing), req["kernel"]))
        unused = sorted(set(constants) - set(constexprs))
        if unused:
            return fail(out, "parameter(s) %s are not constexpr parameters of '%s' (its "
                             "constexprs: %s)" % (", ".join(unused), req["kernel"],
                                                  ", ".join(constexprs) or "none"))
        signature = dict(zip(runtime, args))
        for c in constexprs:
            signature[c] = "constexpr"
        values = {c: constants[c] for c in constexprs if c in constants}
        target = GPUTarget("cuda", int(m.group(1)), 32)
        options = {"num_warps": int(req.get("num_warps", 4)),
                   "num_stages": int(req.get("num_stages", 3))}
        try:
            compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=values),
                                      target=target, options=options)
        except Exception as e:
            return fail(out, "Triton could not compile '%s':\n%s"
                        % (req["kernel"], "".join(traceback.format_exception_only(type(e), e))))
        # The divisible variant: every pointer and integer runtime parameter a multiple of 16
        # (attrs are keyed by the parameter's position among all of the function's parameters).
        divisible = [i for i, t in enumerate(args) if t.startswith("*") or re.fullmatch(r"[iu]\d+", t)]
        position = {p.name: k for k, p in enumerate(fn.params)}
        attrs = {(position[runtime[i]],): [["tt.divisibility", 16]] for i in divisible}
        aligned = None
        if divisible:
            try:
                aligned = triton.compile(
                    ASTSource(fn=fn, signature=signature, constexprs=values, attrs=attrs),
                    target=target, options=options)
            except Exception as e:
                return fail(out, "Triton could not compile '%s' for arguments that are multiples "
                                 "of 16:\n%s" % (req["kernel"], "".join(
                                     traceback.format_exception_only(type(e), e))))
    answer = {"ok": True, "triton_version": triton.__version__}
    meta = launch_metadata(out, compiled, len(runtime))
    if meta is None:
        return 0
    answer.update(meta)
    write_cubin(cubin_path, compiled)
    if aligned is not None:
        meta = launch_metadata(out, aligned, len(runtime))
        if meta is None:
            return 0
        answer["divisible"] = dict(meta, args=divisible)
        write_cubin(cubin_path + ".divisible", aligned)
    respond(out, answer)
    return 0


def write_cubin(path, compiled):
    with open(path, "wb") as f:
        f.write(compiled.asm["cubin"])


def launch_metadata(out, compiled, runtime_params):
    """The launch metadata kiln needs of one compiled variant, or None after refusing it (with
    the reason written to `out`)."""
    md = compiled.metadata._asdict()
    refusals = []
    if md.get("num_ctas", 1) != 1:
        refusals.append("a cluster of %s CTAs (num_ctas)" % md["num_ctas"])
    if md.get("launch_cooperative_grid"):
        refusals.append("a cooperative launch")
    if md.get("launch_pdl"):
        refusals.append("a programmatic dependent launch")
    if md.get("tensordesc_meta"):
        refusals.append("TMA tensor descriptors made on the host")
    for scratch in ("global_scratch_size", "profile_scratch_size"):
        if md.get(scratch, 0):
            refusals.append("%s bytes of %s per program" % (md[scratch], scratch))
    if refusals:
        fail(out, "kiln's triton backend cannot launch this kernel yet: it needs " +
             "; ".join(refusals), rejected=True)
        return None
    ptx = compiled.asm.get("ptx", "")
    entry = re.search(r"\.entry\s+%s\s*\((.*?)\)" % re.escape(md["name"]), ptx, re.S)
    if not entry:
        fail(out, "compile worker: no entry point '%s' in Triton's PTX" % md["name"])
        return None
    hidden = entry.group(1).count(".param") - runtime_params
    if hidden < 0:
        fail(out, "compile worker: the PTX entry takes fewer parameters than the kernel")
        return None
    return {"name": md["name"], "shared": int(md.get("shared", 0)),
            "num_warps": int(md["num_warps"]), "hidden_args": hidden, "ptx": ptx}


if __name__ == "__main__":
    sys.exit(main())
