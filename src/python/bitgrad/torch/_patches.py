"""The places in PyTorch (and NumPy's and Python's seeding) where the recorder looks: each
wrapper calls what it replaces with the same arguments and returns its result untouched, and
does nothing else while no recorder is active, in a forked child (DataLoader workers) or inside
an optimizer step (an optimizer that steps an inner one is one step)."""
import functools
import gc
import os
import random
import sys
import threading
import types

import torch
import torch.utils.data.dataloader as _dl


class _State:
    active = None  # the Recorder now recording
    in_child = False


state = _State()
_local = threading.local()  # per thread: depth of module calls, inside a recorded step


def _forked_child():
    # a forked DataLoader worker inherits the patches, not the recording
    state.in_child = True


os.register_at_fork(after_in_child=_forked_child)


def _recording():
    rec = state.active
    if rec is None or state.in_child or rec._failed:
        return None
    return rec


def in_step():
    return getattr(_local, "in_step", False)


def set_in_step(v):
    _local.in_step = v


# ---- optimizer steps

def _is_ours(fn):
    """fn is one of our step wrappers, or wraps one (torch's profiling hook wraps a class's step
    with functools.wraps)."""
    for _ in range(16):
        if fn is None:
            return False
        if getattr(fn, "_bitgrad_recorder", False):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def _closure_given(args, kwargs):
    return kwargs.get("closure") is not None or (len(args) > 0 and args[0] is not None)


def _class_step(fn):
    @functools.wraps(fn)
    def step(self, *args, **kwargs):
        rec = _recording()
        if rec is None or in_step():
            return fn(self, *args, **kwargs)
        return rec._step(self, fn, (self,) + args, kwargs, _closure_given(args, kwargs))

    step._bitgrad_recorder = True
    return step


def _instance_step(opt, fn):
    # an instance attribute (an LR scheduler's step counter) that calls the class's step as it
    # was when the scheduler was made: from before the recording, so it needs its own wrapper
    import weakref

    ref = weakref.ref(opt)

    @functools.wraps(fn)
    def step(*args, **kwargs):
        rec = _recording()
        o = ref()
        if rec is None or o is None or in_step():
            return fn(*args, **kwargs)
        return rec._step(o, fn, args, kwargs, _closure_given(args, kwargs))

    step._bitgrad_recorder = True
    return step


def _then(fn, notify):
    """A method that runs fn(self), then tells the active recording `notify(rec, self, result)`."""
    @functools.wraps(fn)
    def method(self):
        out = fn(self)
        rec = _recording()
        if rec is not None:
            notify(rec, self, out)
        return out
    return method


class Patches:
    """Installs the wrappers and takes back those nothing else has wrapped since (a class step
    that torch's profiling hook wrapped again stays, passing through)."""

    def __init__(self):
        self._undo = []  # (owner, name, wrapper, original, was_in_dict)

    def _set(self, owner, name, wrapper):
        d = owner.__dict__ if isinstance(owner, (type, types.ModuleType)) else vars(owner)
        had = name in d
        original = d.get(name)
        setattr(owner, name, wrapper)
        self._undo.append((owner, name, wrapper, original, had))

    def _wrap_class(self, cls):
        fn = cls.__dict__.get("step")
        if not isinstance(fn, types.FunctionType) or _is_ours(fn):
            return
        self._set(cls, "step", _class_step(fn))

    def install(self):
        Optimizer = torch.optim.Optimizer
        seen, todo = set(), [Optimizer]
        while todo:  # every optimizer class that exists now, the script's own included
            cls = todo.pop()
            if cls in seen:
                continue
            seen.add(cls)
            self._wrap_class(cls)
            todo.extend(cls.__subclasses__())
        patches = self
        previous = Optimizer.__dict__.get("__init_subclass__")

        def __init_subclass__(cls, **kwargs):  # and every one defined from now on
            if previous is not None:
                previous.__get__(None, cls)(**kwargs)
            else:
                super(Optimizer, cls).__init_subclass__(**kwargs)
            patches._wrap_class(cls)

        self._set(Optimizer, "__init_subclass__", classmethod(__init_subclass__))
        # optimizers made before the recording whose step is an instance attribute
        for o in gc.get_objects():
            try:
                # type(o), not isinstance: some objects warn when their __class__ is read
                if issubclass(type(o), Optimizer) and isinstance(vars(o).get("step"), types.FunctionType) \
                        and not _is_ours(vars(o)["step"]):
                    self._set(o, "step", _instance_step(o, vars(o)["step"]))
            except Exception:  # an object whose isinstance or vars misbehaves is no optimizer of ours
                continue

        Module = torch.nn.Module
        module_call = Module.__call__

        def __call__(self, *args, **kwargs):
            rec = _recording()
            if rec is None:
                return module_call(self, *args, **kwargs)
            depth = getattr(_local, "depth", 0)
            if depth == 0:
                rec._on_top_call(self, args, kwargs)
            _local.depth = depth + 1
            try:
                return module_call(self, *args, **kwargs)
            finally:
                _local.depth = depth

        self._set(Module, "__call__", __call__)

        autograd_backward = torch.autograd.backward

        @functools.wraps(autograd_backward)
        def backward(tensors, *args, **kwargs):  # Tensor.backward calls torch.autograd.backward
            out = autograd_backward(tensors, *args, **kwargs)
            rec = _recording()
            if rec is not None:
                rec._on_backward(tensors)
            return out

        self._set(torch.autograd, "backward", backward)

        DataLoader, It = torch.utils.data.DataLoader, _dl._BaseDataLoaderIter
        loader_iter, it_next, it_next_index, it_reset = DataLoader.__iter__, It.__next__, It._next_index, It._reset

        __iter__ = _then(loader_iter, lambda rec, loader, it: rec._on_loader_iter(loader, it))
        __next__ = _then(it_next, lambda rec, it, data: rec._on_batch(it))
        _next_index = _then(it_next_index, lambda rec, it, index: rec._on_index(it, index))

        @functools.wraps(it_reset)
        def _reset(self, *args, **kwargs):
            rec = _recording()
            if rec is not None:
                rec._on_reset(self)
            return it_reset(self, *args, **kwargs)

        self._set(DataLoader, "__init__", _loader_init(DataLoader.__init__))
        self._set(DataLoader, "__iter__", __iter__)
        self._set(It, "__next__", __next__)
        self._set(It, "_next_index", _next_index)
        self._set(It, "_reset", _reset)

        # the settings a script fixes: seeds, threads, determinism
        wrapped = {}
        targets = [(torch, "manual_seed", "torch.manual_seed"), (torch.random, "manual_seed", "torch.manual_seed"),
                   (torch, "seed", "torch.seed"), (torch, "set_num_threads", "torch.set_num_threads"),
                   (torch, "set_num_interop_threads", "torch.set_num_interop_threads"),
                   (torch, "use_deterministic_algorithms", "torch.use_deterministic_algorithms"),
                   (torch, "set_flush_denormal", "torch.set_flush_denormal"),
                   (torch, "set_default_dtype", "torch.set_default_dtype"),
                   (torch, "set_float32_matmul_precision", "torch.set_float32_matmul_precision"),
                   (random, "seed", "random.seed")]
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            targets.append((numpy.random, "seed", "numpy.random.seed"))
        for owner, name, label in targets:
            fn = getattr(owner, name, None)
            if fn is None:
                continue
            if id(fn) not in wrapped:
                wrapped[id(fn)] = _setting_call(fn, label)
            self._set(owner, name, wrapped[id(fn)])

        import time

        for name in ("time", "time_ns"):
            self._set(time, name, _clock(getattr(time, name), "time." + name))

    def uninstall(self):
        while self._undo:
            owner, name, wrapper, original, had = self._undo.pop()
            d = owner.__dict__ if isinstance(owner, (type, types.ModuleType)) else vars(owner)
            if d.get(name) is not wrapper:
                continue  # wrapped again since: ours stays, passing through
            if had:
                setattr(owner, name, original)
            else:
                delattr(owner, name)


def script_site(skip=1):
    """"file.py:LINE" of the nearest caller outside this package, PyTorch, NumPy and Python's
    own library: the user's code that made the call ("" when there is none)."""
    f = sys._getframe(skip + 1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_LIBRARY) and not fn.startswith("<frozen"):
            return "%s:%d" % (os.path.basename(fn), f.f_lineno)
        f = f.f_back
    return ""


def _library_dirs():
    import sysconfig

    dirs = {os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # bitgrad
            os.path.dirname(os.path.abspath(torch.__file__))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        d = sysconfig.get_paths().get(key)
        if d:
            dirs.add(os.path.abspath(d))
    for d in sys.path:  # installed packages (Debian's /usr/lib/python3/dist-packages among them)
        if os.path.basename(d) in ("site-packages", "dist-packages"):
            dirs.add(os.path.abspath(d))
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        dirs.add(os.path.dirname(os.path.abspath(numpy.__file__)))
    return tuple(d + os.sep for d in sorted(dirs))


_LIBRARY = _library_dirs()


def _setting_from_outside(name):
    """The value an audit set from outside for `name` ("_threads", "_workers"), or None: kept
    while the recorder is active, even after its recording failed (the run stays the audited one)."""
    rec = state.active
    if rec is None or state.in_child:
        return None
    return getattr(rec, name, None)


def _setting_call(fn, label):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        rec = _recording()
        kept = _setting_from_outside("_threads") if label == "torch.set_num_threads" else None
        site = script_site() if kept is not None else ""
        if kept is not None and site:
            # the audit sets the thread count from outside: the script's own call is noted,
            # with where it is, and the setting under test stays (PyTorch's own calls, from no
            # line of the user's, such as its pin-memory thread's, run as they are)
            out = fn(kept)
            if rec is not None:
                rec._on_setting(label, args, kwargs, out, site=site, kept=kept)
            return out
        out = fn(*args, **kwargs)
        if rec is not None:
            rec._on_setting(label, args, kwargs, out, site=script_site())
        return out

    return call


def _loader_init(init):
    """DataLoader.__init__ with num_workers set from outside (an audit's --workers): the
    script's value, where it gave one, is noted with its line."""
    import inspect

    sig = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        workers = _setting_from_outside("_workers")
        if workers is None:
            return init(self, *args, **kwargs)
        rec = _recording()
        b = sig.bind(self, *args, **kwargs)
        explicit = "num_workers" in b.arguments  # bound arguments hold only what the call gave
        asked = b.arguments.get("num_workers", 0)
        if asked != workers:
            b.arguments["num_workers"] = workers
            if workers == 0:  # options torch accepts only with worker processes
                for k in ("prefetch_factor", "persistent_workers", "multiprocessing_context"):
                    b.arguments.pop(k, None)
            if rec is not None:
                rec._on_override("torch.utils.data.DataLoader(num_workers=...)", asked, workers, explicit,
                                 script_site())
        return init(*b.args, **b.kwargs)

    return __init__


def _clock(fn, label):
    """time.time / time.time_ns, noting a read by the user's code (a seed from the clock)."""
    @functools.wraps(fn)
    def call():
        rec = state.active
        if rec is not None and not state.in_child:
            # the direct caller only: a library's read (logging's timestamps, a progress bar)
            # on behalf of a user's line is no seed
            f = sys._getframe(1)
            if not f.f_code.co_filename.startswith(_LIBRARY) and not f.f_code.co_filename.startswith("<"):
                rec._on_clock(label, "%s:%d" % (os.path.basename(f.f_code.co_filename), f.f_lineno))
        return fn()

    return call
