# kiln import-triton's capture script, part 3 of 3 (after import_triton_module.py and
# import_triton_target.py; docs/import-triton.md): runs a user's Python file that launches a Triton
# kernel, stops it at the first launch of the named kernel (the launch is never made: no driver,
# no GPU) and describes that launch as a kiln target. kiln runs the three parts as one text, with a
# deadline:
#
#   python -c <text> REQUEST RESULT
#   request {"file": the user's file, "kernel": NAME, "name": the target's name, "call": a
#            function of the file to call ("": run the file as __main__), "outputs": [tensor
#            names] or [], "product": bool, "folder": a private folder to run in}
#   result  {"ok": true, "target": target.json's content, "module": the kernel module's text,
#            "entry": "kiln_NAME", "notes": [...], "grid_values": the launch's grid, ...}
#        or {"ok": false, "error": why}
#
# The user's file runs as it would on its own, except that every @triton.jit launch goes through
# the hooks below: the named kernel's first launch is recorded and ends the program; other kernels
# are skipped (not run), so a launcher that prepares inputs with its own kernels still gets there.
import json
import runpy
import sys
import traceback


class Captured(BaseException):  # a BaseException: the user's `except Exception` cannot eat it
    pass


STATE = {"launch": None, "tuner": None, "refused": None, "defined": [], "skipped": []}


def base_function(k):
    while not inspect.isfunction(k):
        k = k.fn
    return k


def install_hooks(name):
    from triton.runtime import autotuner
    from triton.runtime.jit import JITFunction

    original_init = JITFunction.__init__

    def init(self, fn, *args, **kwargs):
        original_init(self, fn, *args, **kwargs)
        if not (fn.__module__ or "").startswith("triton."):  # not Triton's own helpers
            STATE["defined"].append(fn.__name__)

    def jit_run(self, *args, grid=None, warmup=False, **kwargs):
        if self.fn.__name__ == name and not warmup:
            STATE["launch"] = (self, args, kwargs, grid)
            raise Captured()
        if not warmup:
            STATE["skipped"].append(self.fn.__name__)
        return None

    def tuner_run(self, *args, **kwargs):
        if base_function(self).__name__ != name:
            STATE["skipped"].append(base_function(self).__name__)
            return None
        STATE["tuner"] = self
        first = next((c for c in self.configs if (c.num_ctas or 1) == 1), self.configs[0])
        return self.fn.run(*args, **{**kwargs, **first.all_kwargs()})

    def heuristics_run(self, *args, **kwargs):
        if base_function(self).__name__ != name:
            STATE["skipped"].append(base_function(self).__name__)
            return None
        STATE["refused"] = (
            "'%s' is wrapped in @triton.heuristics (%s): kiln gives a kernel the same constexprs "
            "at every shape, so values computed from the arguments cannot follow the shapes it "
            "verifies. Remove the decorator and pass those values in the launcher (as a "
            "constexpr, or make them autotune configs)" % (name, ", ".join(self.values)))
        raise Captured()

    JITFunction.__init__ = init
    JITFunction.run = jit_run
    autotuner.Autotuner.run = tuner_run
    autotuner.Heuristics.run = heuristics_run


def run_user_file(req):
    path = os.path.abspath(req["file"])
    sys.path.insert(0, os.path.dirname(path))
    sys.argv = [path]
    if req.get("call"):
        scope = runpy.run_path(path, run_name="kiln_import_triton")
        fn = scope.get(req["call"])
        if not callable(fn):
            raise Refused("the file defines no function '%s' to call (--call)" % req["call"])
        fn()
    else:
        runpy.run_path(path, run_name="__main__")


def user_traceback(path):
    # The frames of the user's file and below, not this script's.
    lines = traceback.format_exc().splitlines()
    for i, line in enumerate(lines):
        if os.path.abspath(path) in line:
            return "Traceback (most recent call last):\n" + "\n".join(lines[i:])
    return "\n".join(lines)


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    out = os.path.abspath(sys.argv[2])
    name = req["kernel"]

    def answer(body):
        with open(out, "w") as f:
            json.dump(body, f)
        return 0

    try:
        import triton  # noqa: F401
    except Exception as e:
        return answer({"ok": False, "error": "cannot import triton with %s (%s): give kiln a "
                       "Python that has Triton and your file's imports (--python)"
                       % (sys.executable, e)})
    install_hooks(name)
    os.chdir(req["folder"])
    try:
        run_user_file(req)
    except Captured:
        if STATE["refused"]:
            return answer({"ok": False, "error": STATE["refused"]})
    except Refused as e:
        return answer({"ok": False, "error": str(e)})
    except SystemExit as e:
        if STATE["launch"] is None and e.code not in (None, 0):
            return answer({"ok": False, "error": "the file exited (code %s) before it launched "
                           "'%s'" % (e.code, name)})
    except BaseException:
        return answer({"ok": False, "error": "the file failed before it launched '%s':\n%s"
                       % (name, user_traceback(req["file"]))})
    if STATE["launch"] is None:
        defined = sorted(set(STATE["defined"]))
        if name not in defined:
            why = ("it defines no @triton.jit function '%s' (it defines: %s)"
                   % (name, ", ".join(defined) or "none"))
        else:
            others = sorted(set(STATE["skipped"]))
            why = ("%s without launching '%s'%s; " % (
                "'%s()' returned" % req["call"] if req.get("call") else "it ran to its end",
                name, " (it launched only %s)" % ", ".join(others) if others else "")) + (
                "make that function launch it" if req.get("call") else
                "run your launcher when the file runs as a script (an `if __name__ == "
                "\"__main__\":` block), or name a function of the file that does with --call")
        return answer({"ok": False, "error": "the file never launched the kernel: " + why})
    try:
        body = analyse(req, *STATE["launch"], STATE["tuner"])
    except Refused as e:
        return answer({"ok": False, "error": str(e)})
    except Exception:
        return answer({"ok": False, "error": "kiln could not describe the launch of '%s':\n%s"
                       % (name, traceback.format_exc(limit=6))})
    body["ok"] = True
    body["skipped"] = sorted(set(STATE["skipped"]))
    return answer(body)


if __name__ == "__main__":
    sys.exit(main())
