# kiln import-triton's capture script, part 1 of 3 (kiln runs import_triton_module.py,
# import_triton_target.py and import_triton_capture.py as one text; docs/import-triton.md): the
# generated kernel module (the user's @triton.jit kernel with the helpers, constants and imports
# it uses, and an entry point in kiln's calling convention) and which tensors the kernel writes.
# The imports here serve all three parts.
import ast
import inspect
import math
import numbers
import os
import re
import textwrap
import types


class Refused(Exception):  # what kiln cannot import, with a message that says why
    pass


DTYPES = {"float16": "f16", "fp16": "f16", "half": "f16", "bfloat16": "bf16", "bf16": "bf16",
          "float32": "f32", "fp32": "f32", "float64": "f64", "fp64": "f64", "double": "f64",
          "int32": "i32", "i32": "i32", "int64": "i64", "i64": "i64"}
BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i32": 4, "i64": 8}
TOLERANCE = {"f16": {"rel": 4e-3, "abs": 1e-3, "rms": 2e-3},
             "bf16": {"rel": 1.6e-2, "abs": 1e-2, "rms": 1e-2},
             "f32": {"rel": 1e-5, "abs": 1e-6, "rms": 1e-5},
             "f64": {"rel": 1e-12, "abs": 1e-14}, "i32": {"rel": 0, "abs": 0},
             "i64": {"rel": 0, "abs": 0}}
STORES = {"store", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or",
          "atomic_xor", "atomic_xchg", "atomic_cas"}
LOADS = {"load"}


def is_tensor(v):  # what Triton's own launcher takes for a tensor
    return hasattr(v, "data_ptr") and hasattr(v, "dtype")


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def base_name(param):
    return re.sub(r"_?(ptr|pointer|Ptr)$", "", param) or param


def kiln_dtype(param, v):
    name = str(v.dtype).rsplit(".", 1)[-1]
    if name not in DTYPES:
        raise Refused("argument '%s' is a tensor of %s; kiln's tensors are f16, bf16, f32, f64, "
                      "i32 or i64" % (param, v.dtype))
    return DTYPES[name]


def strides_of(v):
    s = getattr(v, "stride", None)
    if s is None:  # no strides: dense row-major
        shape, out, acc = list(v.shape), [], 1
        for e in reversed(shape):
            out.insert(0, acc)
            acc *= int(e)
        return out
    return [int(x) for x in (s() if callable(s) else s)]


def kernel_source(jit):
    src = getattr(jit, "src", None) or textwrap.dedent(inspect.getsource(jit.fn))
    return src[re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE).start():].rstrip() + "\n"


class Names:
    """Identifiers for the generated entry point, none of which shadows another."""

    def __init__(self, taken):
        self.taken = set(taken)

    def fresh(self, want):
        name = re.sub(r"\W", "_", want)
        if not name or name[0].isdigit():
            name = "d_" + name
        while name in self.taken or name == "S":
            name += "_"
        self.taken.add(name)
        return name


# --- which tensors the kernel writes: pointers that reach tl.store or an atomic ------------------

def expr_names(node):
    """Names an expression's value derives from; what a tl.load reads is data, not an address."""
    out = set()

    def walk(n):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in LOADS:
            return
        if isinstance(n, ast.Name):
            out.add(n.id)
        for c in ast.iter_child_nodes(n):
            walk(c)
    walk(node)
    return out


def pointer_params(jit, seen=None):
    """The indices of jit's parameters whose pointers reach a store (an atomic counts as both),
    and those that reach a load, through its @triton.jit helpers: (written, read)."""
    from triton.runtime.jit import JITFunction
    seen = seen if seen is not None else {}
    if id(jit) in seen:
        return seen[id(jit)]
    seen[id(jit)] = (set(), set())
    fn = ast.parse(kernel_source(jit)).body[0]
    params = [a.arg for a in fn.args.args]
    deps = {}
    for n in ast.walk(fn):
        targets, value = [], None
        if isinstance(n, ast.Assign):
            targets, value = n.targets, n.value
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and n.value is not None:
            targets, value = [n.target], n.value
        elif isinstance(n, ast.For):
            targets, value = [n.target], n.iter
        for t in targets:
            for name in expr_names(t):
                deps.setdefault(name, set()).update(expr_names(value))

    def closure(names):
        todo, out = list(names), set()
        while todo:
            x = todo.pop()
            if x not in out:
                out.add(x)
                todo.extend(deps.get(x, ()))
        return out

    written, read = set(), set()
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Attribute) and n.func.attr in STORES | LOADS:
            ptr = n.args[0] if n.args else next((k.value for k in n.keywords
                                                  if k.arg in ("pointer", "ptr")), None)
            names = closure(expr_names(n.func.value) | (expr_names(ptr) if ptr is not None
                                                        else set()))
            if n.func.attr in STORES:
                written |= names
            if n.func.attr != "store":
                read |= names
        elif isinstance(n.func, ast.Name):
            callee = jit.fn.__globals__.get(n.func.id)
            if isinstance(callee, JITFunction):
                inner_written, inner_read = pointer_params(callee, seen)
                callee_params = [p.name for p in callee.params]
                passed = list(enumerate(n.args)) + [
                    (callee_params.index(k.arg), k.value) for k in n.keywords
                    if k.arg in callee_params]
                for i, a in passed:
                    if i in inner_written:
                        written |= closure(expr_names(a))
                    if i in inner_read:
                        read |= closure(expr_names(a))
    seen[id(jit)] = ({i for i, p in enumerate(params) if p in written},
                     {i for i, p in enumerate(params) if p in read})
    return seen[id(jit)]


# --- the module: the kernel, its helpers, constants and imports -----------------------------------

def literal(v, where):
    import triton.language as tl
    if isinstance(v, tl.constexpr):
        v = v.value
    if isinstance(v, bool) or is_int(v) or v is None:
        return repr(v)
    if isinstance(v, float) and math.isfinite(v):
        return repr(v)
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, tl.dtype):
        for attr in sorted(dir(tl)):
            known = getattr(tl, attr)
            if not attr.startswith("_") and type(known) is type(v) and known == v:
                return "tl." + attr
    raise Refused("%s is %r (a %s); kiln can carry integers, floats, booleans, strings and "
                  "Triton dtypes into the generated module" % (where, v, type(v).__name__))


def module_parts(jit, parts):
    """Collects the imports, constants and @triton.jit helpers that jit's source refers to."""
    from triton.runtime.jit import JITFunction
    import triton.language as tl
    fn = ast.parse(kernel_source(jit)).body[0]
    local = {a.arg for a in fn.args.args}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            local.add(n.id)
    g = jit.fn.__globals__
    for n in ast.walk(fn):
        if not isinstance(n, ast.Name) or n.id in local or n.id not in g or n.id in parts["seen"]:
            continue
        parts["seen"].add(n.id)
        v = g[n.id]
        if isinstance(v, types.ModuleType):
            if v.__name__ != "math" and v.__name__.split(".")[0] != "triton":
                raise Refused("'%s' uses the module %s (as %s); the generated module may import "
                              "only triton, triton.* and math (kiln's scan of Triton sources)"
                              % (jit.fn.__name__, v.__name__, n.id))
            parts["imports"].append("import %s as %s" % (v.__name__, n.id)
                                    if v.__name__ != n.id else "import " + n.id)
        elif isinstance(v, JITFunction):
            if v is not jit:
                module_parts(v, parts)
                parts["helpers"].append(kernel_source(v))
                if v.fn.__name__ != n.id:
                    parts["constants"].append("%s = %s" % (n.id, v.fn.__name__))
        elif inspect.isfunction(v) and (v.__module__ or "").split(".")[0] == "triton":
            parts["imports"].append("from %s import %s as %s" % (v.__module__, v.__name__, n.id))
        elif isinstance(v, tl.constexpr):
            parts["constants"].append("%s = tl.constexpr(%s)" % (n.id, literal(v, n.id)))
        else:
            parts["constants"].append("%s = %s" % (n.id, literal(v, "the global '%s'" % n.id)))


def module_text(file, jit, entry, entry_params, call_args):
    parts = {"seen": set(), "imports": [], "constants": [], "helpers": []}
    module_parts(jit, parts)
    head = ["# Generated by `kiln import-triton` from %s: the @triton.jit kernel '%s' as written"
            % (os.path.basename(file), jit.fn.__name__),
            "# there, with the helpers and constants it uses, launched through %s, which takes"
            % entry,
            "# kiln's calling convention (docs/targets.md): the tensors, every dim (i64), the "
            "scalars,", "# then the template's constexprs.",
            "import triton", "import triton.language as tl"]
    head += [i for i in dict.fromkeys(parts["imports"])
             if i not in ("import triton", "import triton.language as tl")]
    blocks = ["\n".join(head)]
    if parts["constants"]:
        blocks.append("\n".join(dict.fromkeys(parts["constants"])))
    for src in list(dict.fromkeys(parts["helpers"])) + [kernel_source(jit)]:
        blocks.append("@triton.jit\n" + src.rstrip())
    call = "%s(%s)" % (jit.fn.__name__, ", ".join(call_args))
    if len(call) > 90:
        call = "%s(\n        %s)" % (jit.fn.__name__, ",\n        ".join(call_args))
    blocks.append("@triton.jit\ndef %s(%s):\n    %s" % (entry, ", ".join(entry_params), call))
    return "\n\n\n".join(blocks) + "\n"
