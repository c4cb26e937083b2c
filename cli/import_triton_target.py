# kiln import-triton's capture script, part 2 of 3 (docs/import-triton.md): from one captured launch
# of a @triton.jit kernel, the kiln target that runs it. What the launch carried (tensors' dtypes,
# shapes and strides, integers, constexprs, the grid) is read in terms of the target's dims: each
# distinct tensor extent is a dim, named after the integer argument that carries it; an integer
# argument is a dim, a stride (a product of dims) or a tensor's size, else a scalar; the grid is
# evaluated over symbols. Every guess that can be wrong is said in a note.


class Sym:
    """An integer of the grid as an expression of the dims and parameters, with its value."""
    names = {}  # value -> expression, for the plain integers a grid function closes over

    def __init__(self, text, value, atom=True, sum_of=None):
        self.text, self.value, self.atom, self.sum_of = text, value, atom, sum_of
        self.cdiv_of = None

    @staticmethod
    def lift(x):
        if isinstance(x, Sym):
            return x
        if not is_int(x):
            raise TypeError("not an integer")
        return Sym(Sym.names.get(x, str(x)) if x >= 2 else str(x), x)

    def inner(self):
        return self.text if self.atom else "(" + self.text + ")"

    def __add__(self, o):
        o = Sym.lift(o)
        return Sym(self.inner() + " + " + o.inner(), self.value + o.value, False, (self, o))

    def __sub__(self, o):
        o = Sym.lift(o)
        r = Sym(self.inner() + " - " + o.inner(), self.value - o.value, False)
        if self.sum_of and o.text == "1":  # (a + b - 1) // b is cdiv(a, b)
            r.cdiv_of = self.sum_of
        return r

    def __mul__(self, o):
        o = Sym.lift(o)
        return Sym(self.inner() + " * " + o.inner(), self.value * o.value, False)

    def __floordiv__(self, o):
        o = Sym.lift(o)
        if self.cdiv_of and self.cdiv_of[1].text == o.text:
            return Sym("cdiv(%s, %s)" % (self.cdiv_of[0].text, o.text), self.value // o.value)
        return Sym("idiv(%s, %s)" % (self.text, o.text), self.value // o.value)

    def __radd__(self, o):
        return Sym.lift(o) + self

    def __rsub__(self, o):
        return Sym.lift(o) - self

    def __rmul__(self, o):
        return Sym.lift(o) * self

    def __rfloordiv__(self, o):
        return Sym.lift(o) // self


def plain(v):
    """numpy's and others' numbers as Python's, which the rest of this script expects."""
    if isinstance(v, bool) or is_tensor(v) or not isinstance(v, numbers.Number):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    return float(v) if isinstance(v, numbers.Real) else v


def grid_search(g, dims, params, sizes, notes, axis):
    """An expression for a grid axis that the launcher computed as a number."""
    if g == 1:
        return "1"
    terms = [(d, v) for d, v in dims if v > 1] + [(e, v) for e, v in sizes if v > 1]
    for e, v in list(terms):
        terms += [("cdiv(%s, %s)" % (e, p), -(-v // pv)) for p, pv in params if pv > 1]
    hits = [e for e, v in terms if v == g]
    hits += ["%s * %s" % (a, b) for i, (a, av) in enumerate(terms) for b, bv in terms[i + 1:]
             if av * bv == g]
    if hits:
        return hits[0]
    notes.append("grid axis %d is %d programs at this launch and kiln found no expression of the "
                 "dims and parameters for it: it is written as that number; write its expression "
                 "in target.json's grid" % (axis, g))
    return str(g)


def derived_shapes(dims, pinned):
    """Verification shapes no larger than the launch's (a block sized from a dim still covers
    it), each dim a different size where it can be (a kernel that mixes two dims up fails)."""
    def shape(f):
        return {d: v if d in pinned or v == 1 else max(1, min(v, f(v, i)))
                for i, (d, v) in enumerate(dims)}
    edge = [shape(lambda v, i: 1), shape(lambda v, i: 3 + 2 * i), shape(lambda v, i: 33 + 4 * i)]
    if len(dims) > 1:
        s = shape(lambda v, i: 131 + 6 * i)
        if dims[0][0] not in pinned:
            s[dims[0][0]] = 1
        edge.append(s)
    lists = {"smoke": [shape(lambda v, i: 64 - 8 * i)],
             "sweep": [shape(lambda v, i: 256 + 64 * i),
                       shape(lambda v, i: min(v // 2 + 1, 1000 - 24 * i)),
                       shape(lambda v, i: 100 + 17 * i)], "edge": edge}
    for k, shapes in lists.items():
        seen, lists[k] = set(), []
        for s in shapes:
            if tuple(s.items()) not in seen:
                seen.add(tuple(s.items()))
                lists[k].append(s)
    return lists


def tensor_layouts(tensors, dim_of):
    """Each tensor as kiln sees it: dense, its dims in memory order, its strides as dim products."""
    notes = []
    for t in tensors:
        shape, stride = t["shape"], t["stride"]
        order = sorted(range(len(shape)), key=lambda i: (-stride[i], i))
        expect, inner, t["stride_expr"] = 1, [], {}
        for i in reversed(order):
            if shape[i] > 1 and stride[i] != expect:
                raise Refused("argument '%s' is not a dense tensor (shape %s, strides %s): kiln's "
                              "tensors are dense (a permuted view is fine, a slice or a broadcast "
                              "is not); launch with .contiguous() tensors"
                              % (t["name"], tuple(shape), tuple(stride)))
            t["stride_expr"][i] = " * ".join(inner) or "1"
            inner.insert(0, dim_of[shape[i]])
            expect *= shape[i]
        t["kiln_shape"] = [dim_of[shape[i]] for i in order]
        if order != sorted(order):
            notes.append("'%s' is a permuted view: kiln's '%s' is its storage, of shape [%s] (the "
                         "reference reads it that way)" % (t["name"], t["name"],
                                                           ", ".join(t["kiln_shape"])))
        if len(set(e for e in shape if e > 1)) < len([e for e in shape if e > 1]):
            notes.append("two axes of '%s' have the same extent at this launch, so they are one "
                         "dim: launch with different sizes to tell them apart" % t["name"])
    return notes


def autotune_space(tuner, constexprs, product, notes):
    cfgs = [c for c in tuner.configs if (c.num_ctas or 1) == 1]
    if len(cfgs) < len(tuner.configs):
        notes.append("%d autotune config(s) with num_ctas > 1 left out (kiln launches no "
                     "clusters)" % (len(tuner.configs) - len(cfgs)))
    if not cfgs:
        raise Refused("every autotune config has num_ctas > 1; kiln launches no clusters")
    keys = list(dict.fromkeys(k for c in cfgs for k in c.kwargs))
    rows = []
    for c in cfgs:
        if set(c.kwargs) != set(keys):
            raise Refused("the autotune configs set different parameters (%s and %s): give every "
                          "config a value for each" % (sorted(c.kwargs), keys))
        row = {}
        for k in keys:
            v = int(c.kwargs[k]) if isinstance(c.kwargs[k], bool) else c.kwargs[k]
            if k not in constexprs or not is_int(v):
                raise Refused("autotune config value %s=%r is not an integer constexpr of the "
                              "kernel; kiln's template parameters are integers" % (k, v))
            row[k] = v
        row["num_warps"] = c.num_warps if c.num_warps is not None else 4
        row["num_stages"] = c.num_stages if c.num_stages is not None else 3
        if row not in rows:
            rows.append(row)
        if c.pre_hook or getattr(c, "maxnreg", None):
            notes.append("a config's pre_hook or maxnreg is not carried over")
    if getattr(tuner, "early_config_prune", None) or getattr(tuner, "perf_model", None):
        notes.append("autotune's prune_configs_by is not carried over: every config is in the "
                     "template's space")
    for what in ("reset_to_zero", "restore_value"):
        if getattr(tuner, what, None):
            notes.append("autotune's %s (%s) is not carried over: kiln never runs a candidate "
                         "twice on one output" % (what, ", ".join(getattr(tuner, what))))
    space = {k: sorted({r[k] for r in rows}) for k in rows[0]}
    size = 1
    for v in space.values():
        size *= len(v)
    constraints = []
    if size > len(rows) and not product:
        constraints = [" || ".join("(" + " && ".join("%s == %d" % kv for kv in r.items()) + ")"
                                   for r in rows)]
    notes.append("the template's space is the %d autotune configs%s" % (
        len(rows), " and every combination of their values (%d)" % size if product and size >
        len(rows) else " (a constraint admits exactly those; --product searches every "
        "combination of their values)" if constraints else ""))
    return keys, rows[0], space, constraints


def jit_space(jit, values, dims, settings, notes):
    """Without @triton.autotune: the block sizes (BLOCK*, TILE*, BM, BN, BK, ...) around their
    values, num_warps and num_stages."""
    tuned, space = [], {}
    for p in jit.params:
        v = values[p.name]
        if not (p.is_constexpr and is_int(v) and (re.search("BLOCK|TILE", p.name.upper()) or
                                                  re.fullmatch("B[MNKDHL]", p.name.upper()))):
            continue
        tuned.append(p.name)
        covers = [d for d, e in dims if 1 < e <= v < 2 * e]
        if v & (v - 1) or v < 2:
            space[p.name] = [v]
        elif covers:  # BLOCK = next_power_of_2(N): a whole row in one block; never smaller
            space[p.name] = [v, 2 * v]
            notes.append("%s=%d covers %s at this launch (its next power of two, likely): kiln "
                         "tries %s >= %d only, and the verification shapes keep %s <= its value "
                         "here" % (p.name, v, covers[0], p.name, v, covers[0]))
        else:
            space[p.name] = [v // 2, v, 2 * v]
    space["num_warps"] = sorted({2, 4, 8, settings["num_warps"]})
    space["num_stages"] = sorted({2, 3, 4, settings["num_stages"]})
    notes.append("no @triton.autotune: the template tries %s, num_warps and num_stages around "
                 "the launch's values (edit params in target.json for more)"
                 % (", ".join(tuned) or "no constexpr (none is named like a block size)"))
    return tuned, space


def analyse(req, jit, args, kwargs, grid, tuner):
    name, notes = jit.fn.__name__, []
    pnames = [p.name for p in jit.params]
    constexprs = {p.name for p in jit.params if p.is_constexpr}
    options = {k: v for k, v in kwargs.items() if k not in pnames}
    try:
        bound = inspect.signature(jit.fn).bind(
            *args, **{k: v for k, v in kwargs.items() if k in pnames})
    except TypeError as e:
        raise Refused("the launch's arguments do not fit '%s': %s" % (name, e))
    bound.apply_defaults()
    values = {k: plain(v) for k, v in bound.arguments.items()}
    if int(options.get("num_ctas") or 1) != 1:
        raise Refused("the launch asks for num_ctas=%s; kiln launches no clusters"
                      % options["num_ctas"])
    for k in ("launch_cooperative_grid", "launch_pdl"):
        if options.get(k):
            raise Refused("the launch asks for %s, which kiln cannot launch" % k)
    settings = {"num_warps": int(options.get("num_warps") or 4),
                "num_stages": int(options.get("num_stages") if options.get("num_stages")
                                  is not None else 3)}

    tensors = []
    for p in jit.params:
        v = values[p.name]
        if not p.is_constexpr and is_tensor(v):
            shape = [int(e) for e in v.shape]
            if not shape or 0 in shape:
                raise Refused("argument '%s' has shape %s; kiln's tensors have at least one dim, "
                              "each at least 1" % (p.name, tuple(shape)))
            tensors.append({"name": p.name, "shape": shape, "stride": strides_of(v),
                            "dtype": kiln_dtype(p.name, v)})
    if not tensors:
        raise Refused("'%s' was launched with no tensor (anything with data_ptr() and dtype)"
                      % name)
    ints = {p.name: values[p.name] for p in jit.params
            if not p.is_constexpr and is_int(values[p.name])}
    stride_like = [n for n in ints if "stride" in n.lower()]
    ids = Names(pnames + [name, "kiln_" + name, "tl", "triton", "math"])
    dim_of, dims = {}, []
    for t in tensors:
        for axis, e in enumerate(t["shape"]):
            if e in dim_of:
                continue
            namers = sorted(n for n, v in ints.items() if v == e and n not in stride_like)
            if len(namers) > 1 and e > 1:
                raise Refused("the integer arguments %s are all %d at this launch, so kiln cannot "
                              "tell which tensor extents each one is: launch with a different "
                              "size for each dim" % (", ".join(namers), e))
            d = namers[0] if len(namers) == 1 and namers[0] != "S" else \
                ids.fresh("%s_dim%d" % (base_name(t["name"]), axis))
            dim_of[e] = d
            dims.append((d, e))
    notes += tensor_layouts(tensors, dim_of)
    sizes = [(" * ".join(t["kiln_shape"]), math.prod(t["shape"])) for t in tensors
             if len(t["shape"]) > 1]
    value_expr = {e: d for d, e in reversed(dims)}
    for t in tensors:
        for i, s in enumerate(t["stride"]):
            if t["shape"][i] > 1 and s > 1:
                value_expr.setdefault(s, t["stride_expr"][i])
    for e, v in sizes:
        value_expr.setdefault(v, e)

    def stride_match(pname, v):
        toks = [x for x in re.split(r"_+", pname.lower()) if x and x != "stride"]
        best = None
        for k, t in enumerate(tensors):
            b = base_name(t["name"]).lower()
            for i, s in enumerate(t["stride"]):
                if s == v:
                    score = (3 if b in toks else 2 if any(x.startswith(b) for x in toks) else 0) \
                        + (t["shape"][i] > 1)
                    if best is None or score > best[0]:
                        best = (score, t["stride_expr"][i])
        return best[1] if best else None

    def int_expr(pname, v):
        if pname in stride_like:
            e = stride_match(pname, v)
            if e or v in (0, 1):
                return e or str(v)
        return dim_of.get(v) or stride_match(pname, v) or (value_expr.get(v) if v > 1 else None)

    tensor_names = [t["name"] for t in tensors]
    written, read = pointer_params(jit)
    for i in sorted(written & read):
        if pnames[i] in tensor_names:
            notes.append("'%s' is read and written: kiln fills an output with a marker before "
                         "each run, so a kernel that updates a tensor in place needs its old "
                         "values as another (input) argument" % pnames[i])
    if req.get("outputs"):
        unknown = sorted(set(req["outputs"]) - set(tensor_names))
        if unknown:
            raise Refused("--outputs names %s, which is not a tensor argument of '%s' (its "
                          "tensors: %s)" % (", ".join(unknown), name, ", ".join(tensor_names)))
        outputs = set(req["outputs"])
    else:
        outputs = {pnames[i] for i in written} & set(tensor_names)
        if outputs:
            notes.append("outputs: %s (the tensors the kernel stores to); name them with "
                         "--outputs if that is wrong" % ", ".join(sorted(outputs)))
        else:
            outputs = {tensor_names[-1]}
            notes.append("kiln found no tl.store to a tensor argument and took the last tensor, "
                         "'%s', as the output; name them with --outputs" % tensor_names[-1])
    if set(tensor_names) <= outputs:
        raise Refused("every tensor of '%s' is an output; a kiln target needs at least one input "
                      "(name the outputs with --outputs)" % name)

    call, scalars = {}, []
    for p in jit.params:
        v = values[p.name]
        if p.is_constexpr:
            continue
        if is_tensor(v):
            call[p.name] = p.name
        elif isinstance(v, bool) or v is None:
            call[p.name] = repr(v)
            notes.append("'%s' is %r at every launch" % (p.name, v))
        elif is_int(v):
            call[p.name] = int_expr(p.name, v)
            if call[p.name] is None:
                call[p.name] = p.name
                scalars.append({"name": p.name, "role": "scalar", "type": "i64", "value": v})
                notes.append("'%s' = %d matches no dim or stride: it is an i64 scalar, the same "
                             "at every shape" % (p.name, v))
        elif isinstance(v, float) and math.isfinite(v):
            call[p.name] = p.name
            scalars.append({"name": p.name, "role": "scalar", "type": "f32", "value": v})
        else:
            raise Refused("argument '%s' is %r (a %s); kiln passes tensors, integers and floats"
                          % (p.name, v, type(v).__name__))

    if tuner is not None:
        tuned, seed, space, constraints = autotune_space(tuner, constexprs, req.get("product"),
                                                         notes)
    else:
        tuned, space = jit_space(jit, values, dims, settings, notes)
        seed, constraints = {k: values[k] for k in tuned}, []
        seed.update(settings)
    pinned = set()
    for p in jit.params:
        if p.name in tuned:
            call[p.name] = p.name
        elif p.is_constexpr:
            call[p.name] = literal(values[p.name], "the constexpr '%s'" % p.name)
            v = values[p.name]
            if is_int(v) and v > 1 and v in dim_of:
                pinned.add(dim_of[v])
                notes.append("the constexpr %s=%d equals %s here: %s stays %d in every shape"
                             % (p.name, v, dim_of[v], dim_of[v], v))

    entry = "kiln_" + name
    entry_params = (tensor_names + [d for d, _ in dims] + [s["name"] for s in scalars] +
                    ["%s: tl.constexpr" % k for k in tuned])
    module = module_text(req["file"], jit, entry, entry_params, [call[p] for p in pnames])

    meta_real, meta_sym = dict(values), {}
    meta_real.update(options)
    for p in jit.params:
        v, e = values[p.name], call.get(p.name, "")
        if p.name in tuned:
            meta_sym[p.name] = Sym(p.name, v)
        elif not p.is_constexpr and is_int(v) and e != p.name and not e.isdigit():
            meta_sym[p.name] = Sym(e, v, " " not in e)  # a dim or a product of dims
        elif is_int(v):  # a constant: never read as a dim that happens to have its value
            meta_sym[p.name] = Sym(str(v), v, v >= 0)
        else:
            meta_sym[p.name] = v
    meta_sym.update(options)
    real = grid(meta_real) if callable(grid) else grid
    real = [int(g) for g in (real if isinstance(real, (tuple, list)) else (real,))]
    exprs = None
    if callable(grid):
        Sym.names = dict(value_expr)
        for k in tuned:
            Sym.names.setdefault(values[k] if k in values else seed[k], k)
        try:
            out = grid(meta_sym)
            out = [Sym.lift(x) for x in (out if isinstance(out, (tuple, list)) else (out,))]
            if [s.value for s in out] == real:
                exprs = [s.text for s in out]
        except Exception:
            pass
    if exprs is None:
        params = [(k, seed[k]) for k in tuned] + [
            (str(values[p.name]), values[p.name]) for p in jit.params
            if p.is_constexpr and p.name not in tuned and is_int(values[p.name])]
        exprs = [grid_search(g, dims, params, sizes, notes, i) for i, g in enumerate(real)]
    if len(exprs) > 3:
        raise Refused("the grid has %d axes; a launch has at most 3" % len(exprs))

    t_dtype = max((t["dtype"] for t in tensors),
                  key=lambda d: (d[0] in "fb", sum(t["dtype"] == d for t in tensors)))
    kargs = [{"name": t["name"], "role": "output" if t["name"] in outputs else "input",
              "dtype": "T" if t["dtype"] == t_dtype else t["dtype"], "shape": t["kiln_shape"]}
             for t in tensors] + scalars
    moved = ["(%s)" % " + ".join(" * ".join(t["kiln_shape"]) for t in tensors
                                 if t["dtype"] == t_dtype) + " * S"]
    moved += ["%s * %d" % (" * ".join(t["kiln_shape"]), BYTES[t["dtype"]]) for t in tensors
              if t["dtype"] != t_dtype]
    kernel = {"source": "kernel_triton.py", "kernel": entry, "grid": exprs,
              "block": ["32 * num_warps"]}
    target = {
        "name": req["name"],
        "description": "Imported by kiln import-triton from %s: the Triton kernel '%s' (say what "
                       "it computes)" % (os.path.basename(req["file"]), name),
        "dims": [d for d, _ in dims], "args": kargs, "dtypes": [t_dtype],
        "tolerance": {t_dtype: TOLERANCE[t_dtype]},
        "shapes": dict(benchmark={d: v for d, v in dims}, **derived_shapes(dims, pinned)),
        "bytes": " + ".join(moved), "flops": "0", "reference": "reference.cpp",
        "backends": {"triton": {
            "dtypes": [t_dtype],
            "seed": dict(kernel, defines={k: str(v) for k, v in seed.items()}),
            "template": dict(kernel, params=space, **({"constraints": constraints}
                                                      if constraints else {}))}}}
    return {"target": target, "module": module, "entry": entry, "notes": notes,
            "grid_values": real, "autotune": tuner is not None,
            "configs": len(tuner.configs) if tuner is not None else 0}
