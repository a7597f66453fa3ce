"""The recorder: per optimizer step, snapshots of what decides the step (the batch that reached the
model, the loss, the gradients, the updated parameters, the optimizer state, the RNG states, the
data order), hashed at the step (or copied there and hashed on a background thread) into
trace.jsonl in bitgrad's step-trace format."""
import array
import atexit
import collections
import itertools
import json
import operator
import os
import queue
import shlex
import struct
import sys
import threading
import traceback
import weakref

import numpy
import torch

import bitgrad

from bitgrad.torch import _environ
from bitgrad.torch import _manifest
from bitgrad.torch import _patches
from bitgrad.torch import _rng
from bitgrad.torch import _rundir
from bitgrad import _bitgrad
from bitgrad.torch._fingerprint import (Arrays, Buffers, KeptViews, ZERO_DIGEST, _groups, fingerprint, fingerprint_bytes,
                                        fingerprints)

_WHO = _rundir.WHO
_MAX_SETTING_CALLS = 1000  # a script that reseeds every step would otherwise grow the manifest without bound
_MAX_BATCHES = 10000  # data-loader batches kept for optimizers that have not stepped yet
_MAX_CLOCK_SITES = 100


def _shape_str(shape):
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"  # bitgrad's Shape::str()


def _tensors_in(obj, out, depth=0):
    """The tensors of a call's arguments in order (positional, then keyword), through tuples,
    lists and dicts."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif depth < 4 and isinstance(obj, (tuple, list)):
        for x in obj:
            _tensors_in(x, out, depth + 1)
    elif depth < 4 and isinstance(obj, dict):
        for x in obj.values():
            _tensors_in(x, out, depth + 1)
    return out


_LOSS_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


_PACK_F32 = struct.Struct("<f").pack
# a tensor on the CPU (Tensor.is_cpu where this torch has it: the cheaper read)
_ON_CPU = operator.attrgetter("is_cpu") if hasattr(torch.Tensor, "is_cpu") else (lambda t: t.device.type == "cpu")


def _loss_bits(v):
    """The loss's float32 bits as bitgrad writes them: "0x%08x" (a float64 loss rounded to
    nearest, as torch's .to(torch.float32) rounds); a string is such bits already."""
    if type(v) is str:
        return v
    if isinstance(v, torch.Tensor):
        if v.numel() == 1 and v.dtype in _LOSS_DTYPES and _ON_CPU(v):
            x = v.item()  # exact in a Python float
            try:
                return "0x%08x" % int.from_bytes(_PACK_F32(x), "little")
            except OverflowError:
                pass  # a float64 beyond float32's range: torch rounds it to inf
        t = v.detach().reshape(-1)[:1].cpu().to(torch.float32)
    else:
        t = torch.tensor([float(v)], dtype=torch.float64).to(torch.float32)
    return "0x%08x" % (t.view(torch.int32).item() & 0xFFFFFFFF)


def _indices_item(indices):
    """The sample indices as a fingerprints() item (one int64 vector) and their count; indices
    that are not integers (a sampler of keys) give the fingerprint of their repr."""
    if len(indices) == 1 and type(indices[0]) is list and indices[0] and _INTS.issuperset(map(type, indices[0])):
        try:  # a batch sampler's list of ints: packed without NumPy's per-element conversion
            a = numpy.frombuffer(array.array("q", indices[0]), dtype=numpy.int64)
            return a, int(a.size)
        except (TypeError, OverflowError):
            pass  # floats, ints beyond int64: NumPy decides, as below
    try:
        if len(indices) == 1:
            a = numpy.asarray(indices[0], dtype=numpy.int64).reshape(-1)
        else:
            a = numpy.concatenate([numpy.asarray(i, dtype=numpy.int64).reshape(-1) for i in indices])
    except (TypeError, ValueError, OverflowError):
        return fingerprint_bytes(repr(indices).encode()), len(indices)
    return a, int(a.size)


def _json_int(v):
    return str(v) if type(v) is int else json.dumps(v)


_INTS = frozenset((int,))
_READY = frozenset((str, Arrays))  # values _hashed_line takes as they are
_TENSOR_TYPES = frozenset((torch.Tensor, torch.nn.Parameter))


def _record_template(grad_names, param_names, state_labels, rng_names):
    """The text of a step record around its values, as _hashed_line takes it: what json.dumps
    writes for the record's dict, the names quoted as it quotes them."""
    pieces = ['{"step": ']

    def slot(after):
        pieces.append(after)

    slot(', "epoch": ')
    slot(', "batch": ')
    slot(', "input": "')
    slot('", "loss": "')
    slot('", "grad": [')
    for names, close in ((grad_names, '], "param": ['), (param_names, '], "optimizer": ')):
        for i, n in enumerate(names):
            pieces[-1] += "%s[%s, \"" % (", " if i else "", json.dumps(n))
            slot('"]')
        pieces[-1] += close
    slot(', "optimizer_step": ')
    slot(', "state": [')
    for i, n in enumerate(state_labels):
        pieces[-1] += "%s[%s, \"" % (", " if i else "", json.dumps(n))
        slot('"]')
    pieces[-1] += '], "rng": {'
    for i, n in enumerate(rng_names):
        pieces[-1] += '%s%s: "' % (", " if i else "", json.dumps(n))
        slot('"')
    pieces[-1] += '}, "indices": "'
    slot('", "samples": ')
    slot(', "loader_seed": ')
    slot(', "lr": ')
    slot('}')
    return tuple(pieces)


class _Optimizer:
    """What the recorder knows of one optimizer: its number (in the order of first steps), its
    parameters in the recorded order with their names."""

    def __init__(self, index, opt):
        self.index = index
        self.cls = type(opt).__module__ + "." + type(opt).__qualname__
        self.ref = weakref.ref(opt)
        self.key = None  # ids of the parameters as the optimizer holds them, to notice add_param_group
        self.raw_key = None  # the same with repeats, as param_groups list them
        self.named = []  # (name, parameter) in the recorded order
        self.ids = set()
        self.names = {}  # id(parameter) -> name, kept once given
        self.steps = 0
        self.last_seq = -1  # event number of the end of its last step
        self.model = ""
        self.groups = []
        self.state_keys = {}  # parameter number -> (its state's keys, its name, [(key, label)] in the recorded order)
        self.names_key = ()  # the names of `named`, a new tuple whenever they change
        self.state_plan = None  # (names_key, keys per parameter, their recorded order, labels): see _kept_params_state
        self.views = KeptViews()  # of the parameters and state tensors (inline hashing)


class _Call:
    """The first top-level call of a module with parameters since its optimizer's last step."""

    __slots__ = ("seq", "grad", "snap", "refs", "consumed", "total", "owners", "order")

    def __init__(self, order):
        self.order = order  # of the module's first top-level call among the modules
        self.owners = None  # (generation, numbers of the optimizers holding the module's parameters)

    def begin(self, seq, grad, snap, refs, total):
        """The module's call now captured (the one before released)."""
        self.seq, self.grad, self.snap, self.refs, self.total = seq, grad, snap, refs, total
        self.consumed = set()


class _LoaderIter:
    __slots__ = ("epoch", "pending")

    def __init__(self):
        self.epoch = None
        self.pending = collections.deque()  # indices drawn from the sampler, not yet yielded


HASHING = ("inline", "thread")


class Recorder:
    """Records the PyTorch training that runs between start() and close() (or inside `with`) into
    out_dir: manifest.json and trace.jsonl, one record per optimizer step (every `every`-th), in
    the format `bitgrad diff` reads. hashing="inline" (the default) hashes the tensors at the
    step, without copies; hashing="thread" copies them at the step and hashes the copies on a
    background thread, at most `max_pending` steps behind (a step beyond them waits), which pays
    only where copying is much cheaper than hashing (docs/benchmarks.md).

    Set from outside (bitgrad audit --torch): `threads` is torch's thread count for the whole
    run (a torch.set_num_threads of the script's is noted and keeps it), `workers` every
    DataLoader's num_workers (the script's value noted); `keep_last` writes the last recorded
    step's loss, gradients and parameters into last.safetensors, for the size of a difference."""

    # a step's job holds the loss, gradients and parameters as tensors: a subclass reads them
    # in _encode (the replay); otherwise a CPU loss is kept as its bits and the parameters and
    # state as their kept views
    _job_tensors = False

    def __init__(self, out_dir, *, every=1, max_pending=2, hashing="inline", threads=None, workers=None,
                 keep_last=False):
        for name, v in (("every", every), ("max_pending", max_pending)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError("%s: %s: expected a positive integer, got %r" % (_WHO, name, v))
        for name, v, low in (("threads", threads, 1), ("workers", workers, 0)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
                raise ValueError("%s: %s: expected an integer from %d, got %r" % (_WHO, name, low, v))
        self._threads = threads
        self._workers = workers
        self._keep_last = bool(keep_last)
        self._last = {}  # optimizer number -> (step, {name: tensor}) of its last recorded step
        self._overrides = []
        self._clock_reads = {}  # site -> {"call", "site", "reads", "step"}
        if hashing not in HASHING:
            raise ValueError("%s: hashing: expected 'inline' or 'thread', got %r" % (_WHO, hashing))
        # resolved now: a script that changes directory keeps writing where it was asked to
        self._out = os.path.abspath(os.fspath(out_dir))
        self._every = every
        self._max_pending = max_pending
        self._inline = hashing == "inline"
        self._state = "new"
        self._failed = None
        self._lock = threading.RLock()
        self._fail_lock = threading.Lock()
        self._buffers = Buffers()
        self._generators = _rng.Generators()
        self._patches = _patches.Patches()
        self._seq = 0  # event counter: module calls, backwards, batches and steps, in order
        self._total = 0  # optimizer steps of all optimizers
        self._numbered = 0  # the last step number taken (a step in progress holds its number)
        self._written = 0
        self._optimizers = []
        self._by_opt = weakref.WeakKeyDictionary()
        self._roots = weakref.WeakKeyDictionary()  # module -> order of its first top-level call
        self._calls = weakref.WeakKeyDictionary()  # module -> _Call
        self._generation = 0
        self._loss = None  # (seq, tensor or its bits) of the last scalar backward
        self._epochs = weakref.WeakKeyDictionary()  # DataLoader -> epochs begun
        self._iters = weakref.WeakKeyDictionary()  # loader iterator -> _LoaderIter
        self._batches = collections.deque()  # (seq, iterator id, epoch, batch, indices, base seed)
        self._setting_calls = []
        self._environ_read = {}
        self._setting_calls_dropped = 0
        self._templates = {}  # names of a record -> its text around the values
        self._fd = None
        self._size = 0  # of trace.jsonl: created by this recorder (O_EXCL), written by it alone
        self._queue = None
        self._thread = None
        self._exit = None

    # ---- public

    @property
    def out_dir(self):
        return self._out

    @property
    def every(self):
        return self._every

    @property
    def hashing(self):
        return "inline" if self._inline else "thread"

    @property
    def steps(self):
        """Optimizer steps taken so far (all optimizers)."""
        return self._total

    @property
    def recorded(self):
        """Step records written to trace.jsonl so far."""
        return self._written

    @property
    def error(self):
        """Why recording stopped before close() (the script went on), or None."""
        return self._failed

    def start(self):
        """Checks out_dir, writes the first manifest, installs the hooks; returns self."""
        if self._state != "new":
            raise RuntimeError("%s: this recorder was already started; make a new one" % _WHO)
        if _patches.state.active is not None:
            raise RuntimeError("%s: %s is already being recorded; one recording at a time"
                               % (_WHO, _patches.state.active.out_dir))
        why = _rundir.problem(self._out)
        if why is not None:
            raise bitgrad.InputError(why)
        os.makedirs(self._out, exist_ok=True)
        # O_EXCL: two recorders started on one directory at once cannot both own its trace
        try:
            self._fd = os.open(os.path.join(self._out, "trace.jsonl"),
                               os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            raise bitgrad.InputError("%s: %s already holds a run (trace.jsonl); choose another directory"
                                     % (_WHO, self._out)) from None
        self._script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c", "-m") else None
        self._argv = list(sys.argv[1:])
        self._command = " ".join(shlex.quote(a) for a in getattr(sys, "orig_argv", sys.argv))
        self._pid = os.getpid()
        if self._threads is not None:
            torch.set_num_threads(self._threads)  # before the patches: not the script's call
        self._base = self._base_manifest()
        self._write_manifest()
        if not self._inline:
            self._queue = queue.Queue(maxsize=self._max_pending)
            # a daemon: Python joins other threads before atexit, and the atexit hook drains this one
            self._thread = threading.Thread(target=self._work, name="bitgrad.torch.record", daemon=True)
            self._thread.start()
        self._patches.install()
        _environ.start()
        _patches.state.active = self
        self._state = "recording"
        atexit.register(self._at_exit)
        return self

    def close(self):
        """Stops recording: the pending steps are hashed and written, the final manifest too."""
        self._finish({"status": "closed"})

    def __enter__(self):
        return self.start()

    def __exit__(self, etype, value, tb):
        self._finish(_exit_info(value))
        return False

    # ---- the end

    def _at_exit(self):
        self._finish({"status": "interpreter exit"})

    def _finish(self, exit_info):
        if self._state != "recording" or os.getpid() != self._pid:
            return  # not started, finished, or a forked child's copy (the parent owns the files)
        self._state = "closing"
        atexit.unregister(self._at_exit)
        if _patches.state.active is self:
            _patches.state.active = None
        self._patches.uninstall()
        self._environ_read = _environ.stop()
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
        os.close(self._fd)
        self._exit = exit_info
        try:
            self._write_last()
        except (OSError, RuntimeError, ValueError) as e:
            print("%s: cannot write %s: %s" % (_WHO, os.path.join(self._out, "last.safetensors"), e), file=sys.stderr)
        self._state = "closed"
        problem = None
        try:
            self._write_manifest()
        except OSError as e:
            problem = e
            print("%s: cannot write %s: %s" % (_WHO, os.path.join(self._out, "manifest.json"), e), file=sys.stderr)
        if self._total == 0 and exit_info.get("status") != "exception":  # after a traceback, that is the news
            print("%s: %s made no optimizer step (no torch.optim.Optimizer step() ran); %s has an empty "
                  "trace.jsonl and run.steps = 0 in manifest.json"
                  % (_WHO, self._script or "the recorded code", self._out), file=sys.stderr)
        if problem is not None and exit_info.get("status") in ("closed", "completed"):
            raise problem

    def _fail(self, error):
        """Recording stops (the script goes on): a failing instrument must not change the run."""
        with self._fail_lock:
            if self._failed is not None:
                return
            self._failed = "%s: %s (at step %d)" % (type(error).__name__, error, self._total)
        print("%s: recording stopped: %s; %s keeps the steps before it" % (_WHO, self._failed, self._out),
              file=sys.stderr)

    # ---- manifest

    def _base_manifest(self):
        m = _manifest.machine_sections()
        m["environment"] = _manifest.environment()
        m["torch"] = _manifest.torch_section()
        m["python"] = _manifest.python_section()
        script = None
        if self._script is not None:
            script = {"path": self._script, "sha256": None, "argv": self._argv}
            try:
                import hashlib

                with open(self._script, "rb") as f:
                    script["sha256"] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                pass  # an interactive session's argv[0] names no file
        m["run"] = {"kind": "train", "source": "torch", "command": self._command, "script": script,
                    "cwd": os.getcwd(), "trace": "steps", "every": self._every, "hashing": self.hashing,
                    "threads": torch.get_num_threads()}
        # the generators' states before the script: one still there at a step was not drawn from
        names, items = self._generators.read()
        m["run"]["rng_at_start"] = dict(zip(names, fingerprints(items)))
        outside = {k: v for k, v in (("threads", self._threads), ("num_workers", self._workers)) if v is not None}
        if outside:
            m["run"]["set_from_outside"] = outside
        return m

    def _write_manifest(self):
        with self._lock:
            m = dict(self._base)
            run = dict(m["run"])
            opts = self._optimizers
            run["model"] = " | ".join(o.model for o in opts)
            run["parameters"] = [[n, _shape_str(p.shape)] for o in opts for n, p in o.named]
            run["optimizers"] = [{"index": o.index, "class": o.cls, "steps": o.steps, "param_groups": o.groups}
                                 for o in opts]
            run["steps"] = self._total
            run["recorded"] = self._written
            run["settings_calls"] = list(self._setting_calls)
            if self._overrides:
                run["overridden"] = list(self._overrides)
            if self._clock_reads:
                run["clock_reads"] = list(self._clock_reads.values())
            if self._setting_calls_dropped:
                run["settings_calls_dropped"] = self._setting_calls_dropped
            if self._state == "closed":
                # what the script read of the environment (null: unset), which a replay gives it again
                run["environment_read"] = self._environ_read
                run["seed"] = torch.initial_seed()
                run["settings_at_exit"] = _manifest.settings()
                run["exit"] = self._exit
            if self._failed is not None:
                run["recording_error"] = self._failed
            m["run"] = run
        _manifest.write_atomic(os.path.join(self._out, "manifest.json"), m)

    # ---- hooks (called by _patches with the recording active)

    def _owner_set(self, module, call):
        """The optimizers holding module's parameters, kept in its call while no optimizer's
        parameters changed."""
        got = call.owners
        if got is not None and got[0] == self._generation:
            return got[1]
        ids = {id(p) for p in module.parameters()}
        owners = frozenset(o.index for o in self._optimizers if not ids.isdisjoint(o.ids))
        call.owners = (self._generation, owners)
        return owners

    def _expect_record(self):
        """Whether one of the next steps (one per known optimizer) will be recorded."""
        if self._every == 1:
            return True
        n = max(1, len(self._optimizers))
        return any((self._total + k) % self._every == 0 for k in range(1, n + 1))

    def _capture(self, key, t, buffers):
        """What the record will hash of tensor t as it is now: t itself (inline: hashed before
        anything can change it), or a copy in a reused buffer, listed in `buffers` to be given
        back once hashed."""
        if self._inline:
            return t
        b = self._buffers.copy(key, t)
        buffers.append((key, b))
        return b

    def _release(self, call):
        """Gives the call's copies back; its tensors stay referenced for an optimizer that steps
        for the first time later (it copies them then). A digest taken at the call (inline
        hashing) stays: it serves such an optimizer without keeping the batch alive."""
        if call.snap and not isinstance(call.snap, str):
            for key, buf in call.snap:
                self._buffers.give_back(key, buf)
            call.snap = None

    def _on_top_call(self, module, args, kwargs):
        try:
            with self._lock:
                grad = torch.is_grad_enabled()
                c = self._calls.get(module)
                if c is None:
                    if module not in self._roots:
                        if next(module.parameters(), None) is None:
                            return  # a loss or a parameterless layer: not the model
                        self._roots[module] = len(self._roots)
                    c = fresh = _Call(self._roots[module])
                else:
                    fresh = None
                    owners = self._owner_set(module, c)
                    done = bool(c.consumed) and c.consumed >= owners  # every optimizer of it has stepped
                    stale = c.total < self._total and not owners
                    if not (done or (grad and not c.grad) or stale):
                        return
                    self._release(c)
                tensors = _tensors_in(kwargs, _tensors_in(args, []))
                order = c.order
                snap = None
                if self._expect_record():
                    if self._inline:
                        snap = fingerprints([tensors], kept=False)[0] if tensors else ""
                    else:
                        snap = [(("input", order, k), self._buffers.copy(("input", order, k), t))
                                for k, t in enumerate(tensors)]
                # the tensors themselves only where nothing was taken of them now: a batch kept
                # alive until the next call makes the allocator map fresh pages for every batch
                c.begin(self._seq, grad, snap, tensors if snap is None else (), self._total)
                if fresh is not None:
                    self._calls[module] = fresh
                self._seq += 1
        except Exception as e:
            self._fail(e)

    def _on_backward(self, tensors):
        try:
            t = tensors
            if isinstance(t, (tuple, list)) and len(t) == 1:
                t = t[0]
            if not isinstance(t, torch.Tensor) or t.numel() != 1:
                return
            # a CPU loss's bits now (what a clone kept to the step gives); a loss on a device is
            # kept (its value would wait for the device), as is one kept for last.safetensors
            keep = self._keep_last or self._job_tensors or t.dtype not in _LOSS_DTYPES or not _ON_CPU(t)
            loss = t.detach().clone() if keep else _loss_bits(t)
            with self._lock:
                self._loss = (self._seq, loss)
                self._seq += 1
        except Exception as e:
            self._fail(e)

    def _on_loader_iter(self, loader, it):
        try:
            with self._lock:
                n = self._epochs.get(loader, -1) + 1
                self._epochs[loader] = n
                self._iter_state(it).epoch = n
        except Exception as e:
            self._fail(e)

    def _iter_state(self, it):
        s = self._iters.get(it)
        if s is None:
            s = self._iters[it] = _LoaderIter()
        return s

    def _on_reset(self, it):
        try:
            with self._lock:
                self._iter_state(it).pending.clear()  # indices prefetched for an epoch left early
        except Exception as e:
            self._fail(e)

    def _on_index(self, it, index):
        try:
            with self._lock:
                self._iter_state(it).pending.append(index)
        except Exception as e:
            self._fail(e)

    def _on_batch(self, it):
        try:
            with self._lock:
                s = self._iters.get(it)
                # batches come back in the order their indices were drawn, prefetching workers or not
                index = s.pending.popleft() if s is not None and s.pending else None
                epoch = s.epoch if s is not None and s.epoch is not None else 0
                self._batches.append((self._seq, id(it), epoch, getattr(it, "_num_yielded", 0) - 1, index,
                                      getattr(it, "_base_seed", None)))
                self._seq += 1
                while len(self._batches) > _MAX_BATCHES:
                    self._batches.popleft()
        except Exception as e:
            self._fail(e)

    def _on_setting(self, label, args, kwargs, out, site="", kept=None):
        try:
            with self._lock:
                asked = _manifest.json_safe(list(args) + list(kwargs.values()))
                if kept is not None and asked != [kept]:
                    self._on_override(label, asked, kept, True, site)
                if len(self._setting_calls) >= _MAX_SETTING_CALLS:
                    self._setting_calls_dropped += 1
                    return
                call = {"call": label, "args": _manifest.json_safe(list(args)), "step": self._total}
                if kwargs:
                    call["kwargs"] = _manifest.json_safe(dict(kwargs))
                if label == "torch.seed":
                    call["returned"] = _manifest.json_safe(out)
                if site:
                    call["site"] = site
                self._setting_calls.append(call)
        except Exception as e:
            self._fail(e)

    def _on_override(self, what, asked, used, explicit, site):
        """A setting fixed from outside that the script sets otherwise (or leaves at its default)."""
        try:
            with self._lock:
                if any(o["setting"] == what and o["site"] == site for o in self._overrides):
                    return  # one note per line (a loader made every epoch)
                if len(self._overrides) < _MAX_SETTING_CALLS:
                    self._overrides.append({"setting": what, "script": _manifest.json_safe(asked), "used": used,
                                            "explicit": bool(explicit), "site": site, "step": self._total})
        except Exception as e:
            self._fail(e)

    def _on_clock(self, label, site):
        """The user's code read the wall clock (a seed or an order may follow it)."""
        try:
            with self._lock:
                r = self._clock_reads.get(site)
                if r is None:
                    if len(self._clock_reads) >= _MAX_CLOCK_SITES:
                        return
                    r = self._clock_reads[site] = {"call": label, "site": site, "reads": 0, "step": self._total}
                r["reads"] += 1
        except Exception as e:
            self._fail(e)

    # ---- the step

    def _register(self, opt):
        """The optimizer's record: numbered at its first step; names given to parameters it has
        not had before (add_param_group)."""
        info = self._by_opt.get(opt)
        if info is None:
            info = _Optimizer(len(self._optimizers), opt)
            self._by_opt[opt] = info
            self._optimizers.append(info)
        # the same tensors as at the last step: one comparison (a parameter listed twice included)
        raw = tuple(map(id, itertools.chain.from_iterable(g["params"] for g in opt.param_groups)))
        if raw == info.raw_key:
            return info
        info.raw_key = raw
        params, seen = [], set()
        for g in opt.param_groups:
            for p in g["params"]:
                if id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        key = tuple(id(p) for p in params)
        if key == info.key:
            return info
        info.key = key
        info.ids = set(key)
        self._generation += 1
        self._name(info, opt, params)
        info.groups = [_manifest.json_safe({k: v for k, v in g.items() if k != "params"}) for g in opt.param_groups]
        for i, g in enumerate(opt.param_groups):
            info.groups[i]["params"] = len(g["params"])
        self._write_manifest()
        return info

    def _name(self, info, opt, params):
        """Names from the modules called at top level that hold the parameters (the module
        holding most of them first), in their registration order; `groupI.J` for a parameter no
        called module holds. A name another optimizer already gives another tensor gets the
        prefix `optK.`, a name two of this optimizer's modules share `mR.`."""
        wanted = {id(p) for p in params}
        candidates = []
        for m, order in list(self._roots.items()):
            named = [(n, p) for n, p in m.named_parameters() if id(p) in wanted]
            if named:
                candidates.append((-len(named), order, m, named))
        candidates.sort(key=lambda c: (c[0], c[1]))
        others = {}  # name -> ids of the tensors other optimizers call so
        for o in self._optimizers:
            if o is not info:
                for n, p in o.named:
                    others.setdefault(n, set()).add(id(p))
        rank = {}
        mine = set()
        for r, (_, _, m, named) in enumerate(candidates):
            for pos, (n, p) in enumerate(named):
                if id(p) in rank:
                    continue
                if id(p) not in info.names:
                    name = n if r == 0 or n not in mine else "m%d.%s" % (r, n)
                    if name in others and id(p) not in others[name]:
                        name = "opt%d.%s" % (info.index, name)
                    info.names[id(p)] = name
                mine.add(info.names[id(p)])
                rank[id(p)] = (r, pos)
        for gi, g in enumerate(opt.param_groups):
            for j, p in enumerate(g["params"]):
                if id(p) not in rank:
                    info.names.setdefault(id(p), "group%d.%d" % (gi, j))
                    rank[id(p)] = (len(candidates), gi * 1000003 + j)
        ordered = sorted(params, key=lambda p: rank[id(p)])
        info.named = [(info.names[id(p)], p) for p in ordered]
        info.names_key = tuple(n for n, _ in info.named)
        models = [" ".join(repr(c[2]).split()) for c in candidates]
        info.model = " + ".join(models) if models else "%s over %d tensors" % (type(opt).__name__, len(params))

    def _step(self, opt, fn, args, kwargs, closure):
        _patches.set_in_step(True)
        try:
            pre = None
            try:
                pre = self._before_step(opt)
            except Exception as e:
                self._fail(e)
            try:
                out = fn(*args, **kwargs)  # the script's step, as it was
            except BaseException:
                if pre is not None:
                    with self._lock:  # a step that raised takes no number, unless a later one took the next
                        if self._numbered == pre["step"]:
                            self._numbered -= 1
                raise
            if pre is not None and self._failed is None:
                try:
                    job = self._after_step(opt, pre, out, closure)
                    if job is not None and self._inline:
                        self._emit(job)
                    elif job is not None:
                        self._queue.put(job)  # blocks while max_pending steps wait to be hashed
                except Exception as e:
                    self._fail(e)
            return out
        finally:
            _patches.set_in_step(False)

    def _before_step(self, opt):
        with self._lock:
            info = self._register(opt)
            # the number is taken now: another thread's optimizer stepping meanwhile takes the next
            self._numbered = max(self._numbered, self._total) + 1
            pre = {"info": info, "step": self._numbered, "seq": self._seq, "last_seq": info.last_seq}
            self._seq += 1
            pre["recorded"] = pre["step"] % self._every == 0
            if pre["recorded"]:
                # the gradients as the optimizer receives them, before it may change them
                pre["buffers"] = []
                pre["rng"] = self._generators.read()
                if self._inline:  # hashed now: the optimizer may change them in place, and draw
                    names, items = pre["rng"]
                    grads = [p.grad for _, p in info.named]
                    present = [g for g in grads if g is not None]
                    # each gradient's view is kept while the gradient lives (zero_grad(set_to_none=True)
                    # frees it), not in bulk as the parameters' are
                    digests = iter(fingerprints(present + items))
                    pre["grad"] = [(name, None if g is None else next(digests)) for (name, _), g in zip(info.named, grads)]
                    pre["rng"] = (names, list(digests))
                else:
                    pre["grad"] = [(name, None if p.grad is None else
                                    self._capture(("grad", info.index, j), p.grad, pre["buffers"]))
                                   for j, (name, p) in enumerate(info.named)]
                if self._keep_last:
                    pre["last_grad"] = [(n, p.grad.detach().clone()) for n, p in info.named if p.grad is not None]
                pre["loss"] = self._loss[1] if self._loss is not None and self._loss[0] > info.last_seq else None
            return pre

    def _pick_input(self, info, last_seq):
        """The batch that reached the model: the first top-level call, since this optimizer's
        last step, of a module holding its parameters (else of any module with parameters)."""
        mine, other = None, None
        for m, c in list(self._calls.items()):
            if c.seq <= last_seq or info.index in c.consumed:
                continue
            if info.index in self._owner_set(m, c):
                if mine is None or c.seq < mine[1].seq:
                    mine = (m, c)
            elif other is None or c.seq < other[1].seq:
                other = (m, c)
        return mine or other

    def _after_step(self, opt, pre, out, closure):
        with self._lock:
            info = pre["info"]
            self._total = max(self._total, pre["step"])
            info.steps += 1
            last_seq = pre["last_seq"]
            job = None
            if pre["recorded"]:
                buffers = pre["buffers"]
                grads = pre["grad"]
                # step(closure) evaluates the loss itself and returns it; otherwise the last
                # backward since this optimizer's last step (one loss may serve two optimizers)
                if closure and not isinstance(out, bool) and (
                        isinstance(out, (int, float)) or (isinstance(out, torch.Tensor) and out.numel() == 1)):
                    loss = out.detach().clone() if isinstance(out, torch.Tensor) else out
                else:
                    loss = pre["loss"]
                if loss is None and self._loss is not None and self._loss[0] > pre["seq"]:
                    loss = self._loss[1]  # a backward inside step(closure)
                picked = self._pick_input(info, last_seq)
                inputs = None
                if picked is not None:
                    m, c = picked
                    waiting = self._owner_set(m, c) - c.consumed - {info.index}
                    if isinstance(c.snap, str):
                        inputs = c.snap
                    elif c.snap is not None and waiting:
                        inputs = [b.clone() for _, b in c.snap]  # another optimizer of the module has yet to step
                    elif c.snap is not None:
                        buffers.extend(c.snap)
                        inputs = [b for _, b in c.snap]
                        c.snap = None
                    elif c.refs:
                        inputs = fingerprint(c.refs) if self._inline else [t.detach().clone() for t in c.refs]
                fast = self._kept_params_state(info, opt) if self._inline and not self._job_tensors else None
                if fast is not None:
                    params, state, labels = fast
                else:
                    params, state, labels = self._params_state(info, opt, buffers)
                batches = [b for b in self._batches if b[0] > last_seq]
                if batches:
                    it = batches[-1][1]
                    mine = [b for b in batches if b[1] == it]
                    epoch, batch, seed = batches[-1][2], batches[-1][3], batches[-1][5]
                    indices = [b[4] for b in mine] if all(b[4] is not None for b in mine) else None
                elif self._batches:
                    epoch, batch, seed, indices = self._batches[-1][2], self._batches[-1][3], self._batches[-1][5], None
                else:
                    epoch, batch, seed, indices = 0, pre["step"] - 1, None, None
                job = {"step": pre["step"], "epoch": epoch, "batch": batch, "input": inputs, "loss": loss,
                       "grad": grads, "param": params, "optimizer": info.index, "optimizer_step": info.steps,
                       "state": state, "rng": pre["rng"], "indices": indices, "loader_seed": seed,
                       "lr": [_manifest.json_safe(g.get("lr")) for g in opt.param_groups], "buffers": buffers,
                       "names": info.names_key, "labels": labels}
                if self._keep_last:
                    kept = {}
                    if isinstance(loss, torch.Tensor):
                        kept["loss"] = loss.detach().reshape(-1)[:1].reshape([]).clone()
                    elif isinstance(loss, (int, float)):
                        kept["loss"] = torch.tensor(float(loss), dtype=torch.float64)
                    for n, g in pre["last_grad"]:
                        kept["grad " + n] = g
                    for n, p in info.named:
                        kept["param " + n] = p.detach().clone()
                    self._last[info.index] = (pre["step"], kept)
            # this step used the calls since the last: the next call of each module is captured anew
            for m, c in list(self._calls.items()):
                if c.seq <= last_seq:
                    continue
                owners = self._owner_set(m, c)
                if info.index in owners:
                    c.consumed.add(info.index)
                    if c.consumed >= owners:
                        self._release(c)
            info.last_seq = self._seq
            self._seq += 1
            if self._optimizers:
                oldest = min(o.last_seq for o in self._optimizers)
                while self._batches and self._batches[0][0] <= oldest:
                    self._batches.popleft()
            return job

    def _params_state(self, info, opt, buffers):
        """(name, tensor or copy) of the parameters, (label, value) of the optimizer's state in
        the recorded order (a parameter's keys sorted), and the labels; inline, the tensors as
        their kept views. Notes the state's layout for _kept_params_state when it holds tensors
        only."""
        params = [(name, self._capture(("param", info.index, j), p, buffers)) for j, (name, p) in enumerate(info.named)]
        state = []
        layout, order, only_tensors = [], [], True
        for j, (name, p) in enumerate(info.named):
            st = opt.state.get(p)
            layout.append(tuple(st) if st else ())
            if not st:
                order.append(())
                continue
            keys = tuple(st)
            known = info.state_keys.get(j)
            if known is None or known[0] != keys or known[1] != name:
                known = info.state_keys[j] = (keys, name, [(k, "%s.%s" % (name, k)) for k in sorted(keys, key=str)])
            order.append(tuple(k for k, _ in known[2]))
            for k, label in known[2]:
                v = st[k]
                only_tensors = only_tensors and type(v) in _TENSOR_TYPES
                if isinstance(v, torch.Tensor):
                    state.append((label, v if self._inline else
                                  self._capture(("state", info.index, j, str(k)), v, buffers)))
                elif isinstance(v, bool):
                    state.append((label, [torch.tensor(v)]))
                elif isinstance(v, int):
                    state.append((label, [torch.tensor(v, dtype=torch.int64)]))
                elif isinstance(v, float):
                    state.append((label, [torch.tensor(v, dtype=torch.float64)]))
                elif isinstance(v, (list, tuple)) and all(isinstance(x, torch.Tensor) for x in v):
                    state.append((label, [x.detach().clone() for x in v]))
                elif v is not None:
                    state.append((label, fingerprint_bytes(repr(v).encode())))
        labels = tuple(label for label, _ in state)
        info.state_plan = (info.names_key, layout, order, labels) if only_tensors else None
        if self._inline and not self._job_tensors:
            params, state = self._kept_views(info, params, state)
        return params, state, labels

    def _kept_params_state(self, info, opt):
        """What _params_state gives inline, read in a few passes where the optimizer's state
        has the layout of the step before, tensors only (the common case: Adam's moments and
        step count); None otherwise."""
        plan = info.state_plan
        if plan is None or plan[0] is not info.names_key:
            return None
        states = [opt.state.get(p) for _, p in info.named]
        if [tuple(st) if st else () for st in states] != plan[1]:
            return None
        tensors = [st[k] for st, keys in zip(states, plan[2]) for k in keys]
        if not _TENSOR_TYPES.issuperset(map(type, tensors)):
            return None
        groups = info.views.groups([p for _, p in info.named] + tensors)
        if groups is None:
            return None
        n = len(info.named)
        return list(zip(info.names_key, groups[:n])), list(zip(plan[3], groups[n:])), plan[3]

    @staticmethod
    def _kept_views(info, params, state):
        """params and state with each tensor given as its kept view (KeptViews): the same
        tensors step after step, checked in bulk rather than one by one."""
        at = [i for i, (_, v) in enumerate(state) if isinstance(v, torch.Tensor)]
        groups = info.views.groups([p for _, p in params] + [state[i][1] for i in at])
        if groups is None:
            return params, state
        n = len(params)
        params = [(name, g) for (name, _), g in zip(params, groups)]
        state = list(state)
        for i, g in zip(at, groups[n:]):
            state[i] = (state[i][0], g)
        return params, state

    def _write_last(self):
        """last.safetensors: the last recorded step's loss, gradients and parameters (floating
        point ones, as float32 or float64), named as diff names them."""
        if not self._keep_last or not self._last:
            return
        out, steps = {}, []
        for index in sorted(self._last):  # every optimizer's last step: a loss each, named apart
            step, kept = self._last[index]
            steps.append(str(step))
            for name, t in kept.items():
                if name == "loss" and len(self._last) > 1:
                    out_name = "loss %d" % index
                else:
                    out_name = name
                out[out_name] = t
        bitgrad_out = {}
        for name, t in out.items():
            if not t.is_floating_point():
                continue
            t = t.detach().cpu()
            if t.dtype not in (torch.float32, torch.float64):
                t = t.to(torch.float32)  # bf16/fp16 values are exact in float32
            bitgrad_out[name] = bitgrad.from_numpy(t.contiguous().numpy())
        bitgrad.io.save_safetensors(os.path.join(self._out, "last.safetensors"), bitgrad_out, {"step": ",".join(steps)})

    # ---- the hashing thread

    def _work(self):
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                if self._failed is None:
                    self._emit(job)
            except Exception as e:
                self._fail(e)
            finally:
                for key, buf in job["buffers"]:
                    self._buffers.give_back(key, buf)

    def _encode(self, job):
        """The record's line of JSON as _hashed_line's (pieces, values): the text json.dumps
        writes for the record's dict around its values. A tensor slot holds its fingerprint
        already (values hashed before the step, values that are not tensors) or the tensors to
        hash, all hashed in the one call that writes the line."""
        rng_names, rng_items = job["rng"]
        indices, samples = _indices_item(job["indices"]) if job["indices"] is not None else ("", None)
        inputs = job["input"] if job["input"] else ""
        values = [str(job["step"]), _json_int(job["epoch"]), _json_int(job["batch"]), inputs,
                  _loss_bits(job["loss"]) if job["loss"] is not None else ""]
        values += [ZERO_DIGEST if g is None else g for _, g in job["grad"]]
        values += [v for _, v in job["param"]]
        values += (str(job["optimizer"]), str(job["optimizer_step"]))
        values += [v for _, v in job["state"]]
        values += rng_items
        values += (indices, _json_int(samples), _json_int(job["loader_seed"]), json.dumps(job["lr"]))
        if not _READY.issuperset(map(type, values)):
            values = [v if type(v) in _READY else _groups([v], True)[0][0] for v in values]
        key = (job["names"], job["labels"], tuple(rng_names))
        pieces = self._templates.get(key)
        if pieces is None:
            if len(self._templates) > 64:
                self._templates.clear()  # names that change every step: no cache
            pieces = self._templates[key] = _record_template(key[0], key[0], key[1], key[2])
        return pieces, values

    def _emit(self, job):
        """The job's record hashed and appended to trace.jsonl as one line in one write(2) (on
        the O_APPEND descriptor this recorder alone writes; a write cut short is taken back, so
        the file stays a sequence of complete lines)."""
        pieces, values = self._encode(job)
        self._size += _bitgrad._hashed_line(pieces, values, self._fd, self._size)
        self._written += 1


def _exit_info(exc):
    if exc is None:
        return {"status": "completed"}
    if isinstance(exc, SystemExit):
        code = exc.code
        return {"status": "exit", "code": code if code is None or isinstance(code, int) else 1}
    return {"status": "exception", "exception": "".join(traceback.format_exception_only(type(exc), exc)).strip()}


def record(out_dir, *, every=1, max_pending=2, hashing="inline", threads=None, workers=None, keep_last=False):
    """A Recorder for `with bitgrad.torch.record("runs/a"): ...`: what the block trains is recorded
    into runs/a, as `python3 -m bitgrad.torch.record --out runs/a -- train.py` records a script."""
    return Recorder(out_dir, every=every, max_pending=max_pending, hashing=hashing, threads=threads, workers=workers,
                    keep_last=keep_last)
