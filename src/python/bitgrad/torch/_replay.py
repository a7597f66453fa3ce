"""Replays one step of a recorded PyTorch run, down to its ops: the script runs again as it was
recorded (its arguments, working directory, the environment variables and thread count the
manifest holds) under the recorder, up to optimizer step S, and leaves in DIR

  trace.jsonl           the steps again (diff checks that the replay reproduces the run's step S)
  ops.jsonl             every op of step S in execution order (its forward, backward and the
                        optimizer's update; for step 1 also the script's "setup" before its
                        first model call): the op, the module it ran in, the script's line,
                        the output's shape and fingerprint, the inputs' fingerprints
  tensors.safetensors   step S's loss, gradients and updated parameters (floating point), named
                        as diff names them: "loss", "grad NAME", "param NAME"
  replay.json           what was replayed, and how it ended

`bitgrad diff` runs it for two PyTorch runs that part at step S (docs/torch.md)."""
import json
import os
import sys
import traceback

from bitgrad.torch._cli import _print_script_traceback, _run_script

_WHO = "bitgrad.torch.replay"
USAGE = "usage: python3 -m bitgrad.torch.replay RUN --step S --out DIR"


class _Done(BaseException):
    """Unwinds the script once step S is recorded (a BaseException: the script's own `except
    Exception` does not stop it)."""


# ops whose result holds whatever the memory held: recorded, not hashed
_UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


def _op_name(func):
    name = str(func)  # aten.mm.default
    return name[:-len(".default")] if name.endswith(".default") else name


def _shape_text(t):
    return "[" + ", ".join(str(d) for d in t.shape) + "]"


def _make_tracer(script_path, fingerprint, module_names):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    here = os.path.dirname(os.path.abspath(__file__)) + os.sep

    class OpTracer(TorchDispatchMode):
        """Records every op dispatched while it is entered and not paused."""

        def __init__(self):
            super().__init__()
            self.records = []
            self.paused = 0
            self.phase = "forward"
            self.step = 0
            self.modules = []  # the modules being called, outermost first

        def site(self):
            f = sys._getframe(2)
            first_other = None
            while f is not None:
                fn = f.f_code.co_filename
                if fn == script_path:
                    return "%s:%d" % (os.path.basename(fn), f.f_lineno)
                if first_other is None and not fn.startswith(here) and "/torch/" not in fn:
                    first_other = "%s:%d" % (os.path.basename(fn), f.f_lineno)
                f = f.f_back
            return first_other or ""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if self.paused or str(func).startswith("profiler."):  # the profiler's markers: no computation
                return func(*args, **kwargs)
            # the inputs before the op: an argument it writes (in place, out=) is its output, not
            # an input; an uninitialised result (empty, empty_like) has no bits to compare
            schema = func._schema.arguments
            ins = []
            for i, a in enumerate(args):
                if isinstance(a, torch.Tensor):
                    written = i < len(schema) and schema[i].alias_info is not None and schema[i].alias_info.is_write
                    ins.append("" if written else fingerprint(a))
            for k, a in kwargs.items():
                if isinstance(a, torch.Tensor):
                    arg = next((x for x in schema if x.name == k), None)
                    ins.append("" if arg is not None and arg.alias_info is not None and arg.alias_info.is_write else fingerprint(a))
            out = func(*args, **kwargs)
            outs = [t for t in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(t, torch.Tensor)]
            if not outs:
                return out
            label = self.modules[-1] if self.modules and self.phase == "forward" else ""
            empty = func.overloadpacket.__name__ in _UNINITIALISED
            self.records.append({"step": self.step, "seq": len(self.records) + 1, "phase": self.phase, "op": _op_name(func),
                                 "label": label, "site": self.site(), "shape": _shape_text(outs[0]),
                                 "hash": "" if empty else fingerprint(outs if len(outs) > 1 else outs[0]), "inputs": ins})
            return out

    tracer = OpTracer()

    def pre_hook(module, args):
        tracer.modules.append(module_names(module))

    def post_hook(module, args, out):
        if tracer.modules:
            tracer.modules.pop()

    return tracer, pre_hook, post_hook


def _replay(run, step, out):
    with open(os.path.join(run, "manifest.json")) as f:
        manifest = json.load(f)
    r = manifest.get("run") or {}
    if r.get("source") != "torch":
        raise ValueError("%s: %s is not a run recorded from a PyTorch script (run.source is %r)" % (_WHO, run, r.get("source")))
    script = (r.get("script") or {}).get("path")
    if not script or not os.path.isfile(script):
        raise ValueError("%s: %s: the script %r it records is not there to run again" % (_WHO, run, script))
    # what decided the numbers, as recorded: the variables first (torch reads some at import)
    for k, v in (manifest.get("environment") or {}).items():
        os.environ[k] = v
    for k, v in (r.get("environment_read") or {}).items():  # what the script read, as it read it
        if v == "<redacted>":
            continue  # a credential: as it is here
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    if r.get("cwd") and os.path.isdir(r["cwd"]):
        os.chdir(r["cwd"])
    import torch

    from bitgrad.torch._fingerprint import fingerprint
    from bitgrad.torch._recorder import Recorder

    if isinstance(r.get("threads"), int) and r["threads"] >= 1:
        torch.set_num_threads(r["threads"])
    outside = r.get("set_from_outside") if isinstance(r.get("set_from_outside"), dict) else {}

    def setting(key, low):
        v = outside.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= low else None
    script = os.path.abspath(script)
    names = {}

    def module_names(m):
        got = names.get(id(m))
        if got is None:
            for root in list(rec._roots.keys()):
                for n, sub in root.named_modules():
                    names.setdefault(id(sub), "%s:%s" % (n or "(model)", type(sub).__name__))
            got = names.setdefault(id(m), type(m).__name__)
        return got

    tracer, pre_hook, post_hook = _make_tracer(script, fingerprint, module_names)
    kept = {}

    def untraced(name):
        # the recorder's own work (its copies and hashes) is not the script's: not traced
        def method(self, *args):
            tracer.paused += 1
            try:
                return getattr(Recorder, name)(self, *args)
            finally:
                tracer.paused -= 1
        return method

    def top_call(self, *args):
        # step 1's ops begin with the script: what runs before its first model call (making the
        # data and the model) is "setup"
        if tracer.phase == "setup":
            tracer.phase = "forward"
        return untraced_top_call(self, *args)

    untraced_top_call = untraced("_on_top_call")

    class Replay(Recorder):
        _job_tensors = True  # _encode keeps step S's tensors
        _on_top_call = top_call
        _on_backward = untraced("_on_backward")
        _before_step = untraced("_before_step")
        _after_step = untraced("_after_step")

        def _encode(self, job):
            if job["step"] == step:
                def floating(t):
                    return isinstance(t, torch.Tensor) and t.dtype in (torch.float32, torch.float64)
                if floating(job["loss"]):
                    kept["loss"] = job["loss"].detach().clone().reshape([])
                for kind, pairs in (("grad", job["grad"]), ("param", job["param"])):
                    for n, t in pairs:
                        if floating(t):
                            kept["%s %s" % (kind, n)] = t.detach().clone()
            return super()._encode(job)

        def _step(self, opt, fn, args, kwargs, closure):
            tracer.phase = "optimizer"
            result = super()._step(opt, fn, args, kwargs, closure)
            tracer.phase = "forward"
            if self._total == step - 1:
                tracer.step = step
                tracer.__enter__()
                tracer.entered = True
            elif self._total >= step:
                raise _Done()
            return result

    os.makedirs(out, exist_ok=True)
    for name in ("trace.jsonl", "manifest.json", "ops.jsonl", "tensors.safetensors", "replay.json"):
        p = os.path.join(out, name)
        if os.path.exists(p):
            if not os.path.exists(os.path.join(out, "replay.json")):
                raise ValueError("%s: %s holds files that are not a replay's (%s); choose another directory" % (_WHO, out, name))
            os.remove(p)
    sys.argv = [script] + list((r.get("script") or {}).get("argv") or [])
    if not sys.flags.safe_path:
        sys.path[0] = os.path.dirname(script)
    # what an audit set from outside, set again
    rec = Replay(out, hashing="thread", threads=setting("threads", 1), workers=setting("num_workers", 0))
    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(pre_hook),
             torch.nn.modules.module.register_module_forward_hook(post_hook)]
    ended = {"status": "completed"}
    rec.start()
    autograd_backward = torch.autograd.backward  # the recorder's, which records the loss

    def backward(*a, **k):  # the phase of the ops it runs
        before = tracer.phase
        tracer.phase = "backward"
        try:
            return autograd_backward(*a, **k)
        finally:
            tracer.phase = before

    torch.autograd.backward = backward
    tracer.entered = False
    if step == 1:
        tracer.step = 1
        tracer.phase = "setup"
        tracer.__enter__()
        tracer.entered = True
    try:
        _run_script(script)
    except _Done:
        ended = {"status": "replayed", "step": step}
    except SystemExit as e:
        ended = {"status": "exit", "code": e.code if e.code is None or isinstance(e.code, int) else 1}
    except BaseException as e:
        ended = {"status": "exception", "exception": "".join(traceback.format_exception_only(type(e), e)).strip()}
        _print_script_traceback(e)
    finally:
        if tracer.entered:
            tracer.__exit__(None, None, None)
        torch.autograd.backward = autograd_backward
        for h in hooks:
            h.remove()
        rec._finish({"status": "replay", "step": step})
    with open(os.path.join(out, "ops.jsonl"), "w") as f:
        for rec_op in tracer.records:
            f.write(json.dumps(rec_op) + "\n")
    if kept:
        import bitgrad

        bitgrad.io.save_safetensors(os.path.join(out, "tensors.safetensors"),
                                    {k: bitgrad.from_numpy(v.numpy()) for k, v in kept.items()},
                                    {"replay_of": os.path.abspath(run), "step": str(step)})
    with open(os.path.join(out, "replay.json"), "w") as f:
        json.dump({"run": os.path.abspath(run), "step": step, "ended": ended, "ops": len(tracer.records),
                   "tensors": sorted(kept)}, f, indent=2)
        f.write("\n")
    if ended["status"] != "replayed":
        print("%s: the script ended before step %d (%s)" % (_WHO, step, ended), file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    run, step, out = None, None, None
    i = 0
    try:
        while i < len(argv):
            a = argv[i]
            if a in ("--step", "--out"):
                if i + 1 >= len(argv):
                    raise ValueError("%s: expected a value" % a)
                if a == "--step":
                    step = int(argv[i + 1]) if argv[i + 1].isdigit() else 0
                    if step < 1:
                        raise ValueError("--step: expected a step number from 1, got %r" % argv[i + 1])
                else:
                    out = argv[i + 1]
                i += 2
            elif a.startswith("-"):
                raise ValueError("unknown option %s" % a)
            elif run is None:
                run = a
                i += 1
            else:
                raise ValueError("one run directory, got %r too" % a)
        if run is None or step is None or out is None:
            raise ValueError("expected RUN, --step S and --out DIR")
        if not os.path.isfile(os.path.join(run, "manifest.json")):
            raise ValueError("%s holds no run (no manifest.json)" % run)
    except ValueError as e:
        print("%s\n%s: %s" % (USAGE, _WHO, e), file=sys.stderr)
        return 2
    try:
        return _replay(run, step, out)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2

