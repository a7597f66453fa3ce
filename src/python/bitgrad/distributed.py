"""bitgrad.distributed: data parallel from a Python training loop (docs/python.md, "Data parallel").

    mpirun -n P python3 train.py

gives the model the bits of one process (contract T6) for any P: every rank loads only its shard
of each batch (contiguous leaves of the batch's tree, numerics.md §20), computes the gradients of
its tree nodes, and the combine evaluates the tree over every rank's nodes (bytes over MPI, no
floating-point reduction left to MPI); every rank then holds the batch's gradient and runs the
optimizer itself. Rank 0 writes checkpoints; `load` continues a run on any number of ranks; the
replica check compares every rank's state by fingerprint.

Without mpirun there is one rank, MPI is never started, and everything here works the same.
MPI is started as `bitgrad train` starts it (MPI_Init_thread, FUNNELED: call bitgrad.distributed
from the thread that called init, the main one); an MPI that mpi4py started first is used.
"""
import atexit as _atexit
import json as _json
import os as _os
import sys as _sys

import numpy as _np

from . import _bitgrad as _b
from ._accumulate import _name_parameter, _named_param_list, _per_sample, _refuse_batch_norm, _sample_mode, _split

_d = _b.distributed
globals().update({k: v for k, v in vars(_d).items() if not k.startswith("_")})



def _finalize_at_exit():
    if _d.initialized():
        _d.finalize()


# MPI is left at exit (mpirun counts a rank that exits without MPI_Finalize as failed), whoever
# started it: init below, or bitgrad.train under mpirun
_atexit.register(_finalize_at_exit)
_previous_excepthook = None


def _excepthook(kind, value, tb):
    """Under mpirun: an error every rank raises alike (CollectiveError) is printed by rank 0 and the
    ranks end normally; any other uncaught error is printed by its rank, naming it, and ends the
    whole job (MPI_Abort), so that the other ranks do not wait for it in vain."""
    collective = isinstance(value, CollectiveError)
    if not collective or _d.rank() == 0:
        if not collective:
            _sys.stderr.write("bitgrad.distributed: rank %d (%s): uncaught %s; ending the job\n"
                              % (_d.rank(), _d.host_name(), kind.__name__))
        (_previous_excepthook or _sys.__excepthook__)(kind, value, tb)
    if not collective and _d.initialized() and _d.world_size() > 1:
        _sys.stderr.flush()
        _sys.stdout.flush()
        _d.abort(1)


def init(timeout=None):
    """Starts MPI when launched by mpirun (idempotent) and returns the world size (1 otherwise).

    timeout: seconds a rank waits for the others before an error names the wait (default 300,
    BITGRAD_DIST_TIMEOUT). MPI is left at exit (MPI_Finalize), as mpirun expects; an uncaught
    exception on one rank ends the job (MPI_Abort) instead of leaving the others waiting.
    """
    global _previous_excepthook
    n = _d.init()
    if timeout is not None:
        _d.set_timeout(float(timeout))
    if n > 1 and _previous_excepthook is None:
        _previous_excepthook = _sys.excepthook
        _sys.excepthook = _excepthook
    return n


def is_root():
    """Whether this is rank 0 (the one that writes and prints)."""
    return _d.rank() == 0


class CollectiveError(_b.Error):
    """An error every rank raises alike (under mpirun: printed once, by rank 0; the ranks end
    normally)."""


class ReplicaError(CollectiveError):
    """The ranks no longer hold the same state (raised alike on every rank)."""


class RefusedError(CollectiveError, _b.InputError):
    """A data-parallel set-up refused alike on every rank (a world larger than the batch's
    blocks, batch norm over several parts)."""


def _state_entries(model, optimizer=None, loader=None):
    """(name, tensor) of the model's state (parameters, buffers), the optimizer's buffers, and the
    positions (optimizer steps, loader epoch and index) as one int64 tensor."""
    entries = []
    sd = model.state_dict() if hasattr(model, "state_dict") else dict(model)
    entries += [("parameter '%s'" % k, v) for k, v in sd.items() if isinstance(v, _b.Tensor)]
    pos = []
    if optimizer is not None:
        st = optimizer.state_dict()
        entries += [("optimizer buffer '%s'" % k, v) for k, v in st.items() if isinstance(v, _b.Tensor)]
        pos.append(int(st.get("steps", 0)))
    if loader is not None:
        pos += [loader.epoch, loader.index]
    if pos:
        entries.append(("the optimizer's step count or the loader's position", _b.from_numpy(_np.array(pos, dtype=_np.int64))))
    return entries


def check_replicas(model, optimizer=None, loader=None, step=None):
    """The replica check: every rank's parameters, buffers, optimizer state and loader position
    against rank 0's, by fingerprint. Collective (every rank calls it); a difference raises
    ReplicaError on every rank, naming the rank, its host and the first tensor that differs."""
    entries = _state_entries(model, optimizer, loader)
    mine = _json.dumps({"host": _d.host_name(), "names": [n for n, _ in entries],
                        "fingerprints": [_b.fingerprint(t) for _, t in entries]}).encode()
    got = [_json.loads(g) for g in _d.allgather_bytes(mine, "the replica check")]
    at = "" if step is None else " after step %d" % step
    for r in range(1, len(got)):
        if got[r]["fingerprints"] == got[0]["fingerprints"] and got[r]["names"] == got[0]["names"]:
            continue
        what = "its state (another model?)"
        if got[r]["names"] == got[0]["names"]:
            for n, a, b in zip(got[0]["names"], got[0]["fingerprints"], got[r]["fingerprints"]):
                if a != b:
                    what = n
                    break
        raise ReplicaError("replica check%s: rank %d (%s) differs from rank 0 (%s) in %s: the ranks no longer hold the same "
                           "model (initialised differently, a fault in memory or a bug)"
                           % (at, r, got[r]["host"], got[0]["host"], what))


class ShardedLoader:
    """This rank's shard of every batch of bitgrad.data.DataLoader(dataset, batch_size, ...): the
    same batches in the same order as one process, each rank building only its rows. A batch's
    `rows` is the whole batch's, `first` the row its x starts at. next(), seek(epoch, index),
    epoch, index, len() and iteration (to the end of the epoch) as DataLoader."""

    def __init__(self, dataset, batch_size, *, accumulate=1, world=None, rank=None, shuffle=True, drop_last=True, workers=0,
                 prefetch=4, seed=0, crop_padding=0, hflip=False, num_classes=None):
        from .data import _as_dataset
        world = _d.world_size() if world is None else world
        rank = _d.rank() if rank is None else rank
        self.batch_size, self.accumulate, self.world, self.rank = batch_size, accumulate, world, rank
        self._loader = _d._loader(_as_dataset(dataset, num_classes), batch_size, shuffle, drop_last, workers, prefetch, seed,
                                  crop_padding, hflip, world, rank, _d.leaf_rows(batch_size, accumulate))

    def next(self):
        return self._loader.next()

    def seek(self, epoch, index):
        self._loader.seek(epoch, index)

    @property
    def epoch(self):
        return self._loader.epoch

    @property
    def index(self):
        return self._loader.index

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        from .data import _batches
        return _batches(self)


class DataParallel:
    """DataParallel(model, batch_size, *, accumulate=1, timeout=None)

    The training step of `mpirun -n P bitgrad train`, for a loop written in Python. model: a
    module (or (name, tensor) pairs, or tensors) the same on every rank: built with the same
    seeds (checked here by a replica check of the parameters). batch_size: the whole batch (all
    ranks), split into `accumulate` micro-batches.

        dp = bitgrad.distributed.DataParallel(model, batch_size=128)
        loader = dp.loader(train_set, seed=SEED, workers=2)        # this rank's shard
        for step in range(steps):
            batch = loader.next()
            opt.zero_grad()
            loss = dp.step(batch, lambda x, y, row: bg.cross_entropy(
                model(x, nn.Context(training=True, seed=SEED, step=step, row_offset=row)), y, reduction="sum"))
            opt.step()                                              # the same update on every rank
    """

    def __init__(self, model, batch_size, *, accumulate=1, timeout=None):
        init(timeout)
        self.model = model
        self.batch_size = int(batch_size)
        self.accumulate = int(accumulate)
        self.world = _d.world_size()
        self.rank = _d.rank()
        why = _d.plan_problem(self.batch_size, self.accumulate, self.world)
        if why:
            raise RefusedError("DataParallel: cannot train on %d ranks: %s" % (self.world, why))
        if self.world > 1 or self.accumulate > 1:
            try:
                _refuse_batch_norm(model, "DataParallel on %d rank(s) in %d micro-batch(es)" % (self.world, self.accumulate))
            except _b.InputError as e:
                raise RefusedError(str(e)) from None
        named = _named_param_list(model, "DataParallel")
        self.params = [t for _, t in named]
        self._names = [n for n, _ in named]
        self._per_block = False  # an imported graph run per 32-sample block (numerics.md §42), found at the first step
        self.whole_batch = None  # after a step: whether its bits are the whole batch's (plan, and what the backward ran)
        self.sample_mismatch = ""  # after a step: its first sum over samples off the batch rule
        self._comb = _d.GradientCombiner(self.params)
        if self.world > 1 and hasattr(model, "state_dict"):
            check_replicas(model, step=0)

    def loader(self, dataset, **options):
        """A ShardedLoader of this rank's shard of every batch (DataLoader's options)."""
        return ShardedLoader(dataset, self.batch_size, accumulate=self.accumulate, world=self.world, rank=self.rank, **options)

    def plan(self, rows=None):
        """The StepPlan of a batch of `rows` samples (default: a full batch) on this rank."""
        return _d.plan_step(self.batch_size if rows is None else rows, self.batch_size, self.accumulate, self.world, self.rank,
                            per_block=self._per_block)

    def step(self, batch, loss_fn, *, divisor=None):
        """One step's gradient: loss_fn(x, y, row_offset) returns the loss SUMMED over the samples of
        a piece (reduction="sum"; row_offset its first row in the whole batch, for nn.Context).
        batch: this rank's shard (a Batch of dp.loader) or the whole batch as (x, y) (every rank
        then takes its rows). Leaves the batch's gradient in .grad on every rank (zero_grad
        first) and returns the batch's loss (its sum over divisor, 0-d), the same on every rank.
        divisor: what a mean over the whole batch divides by (default: its samples times the
        values per sample of y)."""
        if isinstance(batch, _b.data.Batch):
            x, y = batch.x, batch.y
            rows, first = batch.rows, batch.first
        else:
            x, y = _split(batch, "DataParallel.step")
            rows, first = x.shape[0], 0
        try:
            self._per_block = _sample_mode(self.model, x, "DataParallel on %d rank(s) in %d micro-batch(es)" % (self.world, self.accumulate),
                                           self.world > 1 or self.accumulate > 1) == "per_block"
            self._comb.per_block = self._per_block  # its pieces are its blocks: their uses added first
        except _b.InputError as e:
            raise RefusedError(str(e)) from None
        plan = self.plan(rows)
        lo, hi = plan.shard
        if first == 0 and x.shape[0] == rows and (lo, hi) != (0, rows):
            x, y, first = x[lo:hi], y[lo:hi], lo  # the whole batch given: this rank's rows
        if first != lo or x.shape[0] != hi - lo:
            raise _b.InputError("DataParallel.step: the batch holds rows [%d, %d) of %d; this rank's shard is [%d, %d) (use "
                                "dp.loader, or pass the whole batch)" % (first, first + x.shape[0], rows, lo, hi))
        if divisor is None:
            divisor = rows * _per_sample(y)
        try:
            for node in plan.pieces:
                for r0, r1 in node:
                    whole = r0 == lo and r1 == hi
                    xp = x if whole else x[r0 - lo:r1 - lo]
                    yp = y if whole else y[r0 - lo:r1 - lo]
                    self._comb.backward(loss_fn(xp, yp, r0), float(divisor), r1 - r0)
                self._comb.end_node()
            total = self._comb.finish(plan)
            pieces = sum(len(node) for node in plan.pieces) * self.world
            # the whole batch's bits: the plan's, unless a sum over samples was off the batch rule
            # (not for a graph run per block, whose blocks are the pieces: numerics.md §42)
            self.whole_batch = plan.whole_batch and (pieces <= 1 or self._per_block or not self._comb.sample_mismatch)
            self.sample_mismatch = "" if self._per_block else _name_parameter(self._comb.sample_mismatch, self._names)
        except BaseException:
            self._comb.reset()
            raise
        with _b.no_grad():
            return _b.div(total, float(divisor))

    def check_replicas(self, optimizer=None, loader=None, step=None):
        """check_replicas(self.model, optimizer, loader, step)."""
        check_replicas(self.model, optimizer, loader, step)


_KIND = "bitgrad.distributed checkpoint"


def save(path, model, optimizer=None, loader=None, step=0, metadata=None):
    """Rank 0 writes a checkpoint (atomically, safetensors with bitgrad's checksum): the model's
    state_dict, the optimizer's state, the loader's position and the step; the other ranks write
    nothing (every rank holds the same state). Call it on every rank."""
    if _d.rank() != 0:
        return
    tensors = [("model." + k, v) for k, v in model.state_dict().items() if isinstance(v, _b.Tensor)]
    meta = {"kind": _KIND, "step": str(int(step)), "world_size": str(_d.world_size())}
    if optimizer is not None:
        st = optimizer.state_dict()
        tensors += [("optimizer." + k, v) for k, v in st.items() if isinstance(v, _b.Tensor)]
        meta["optimizer_steps"] = str(int(st.get("steps", 0)))
    if loader is not None:
        meta["epoch"], meta["index"] = str(loader.epoch), str(loader.index)
    for k, v in (metadata or {}).items():
        meta["user." + k] = str(v)
    d = _os.path.dirname(_os.path.abspath(path))
    _os.makedirs(d, exist_ok=True)
    _b.io.save_safetensors(path, tensors, meta)


def load(path, model, optimizer=None, loader=None):
    """Continues from a checkpoint of `save`, on any number of ranks (elastic resume): rank 0 reads
    it and hands its bytes to the others. Restores the model, the optimizer and the loader's
    position; returns the metadata (its "step" an int; yours under "user.NAME")."""
    init()
    data = None
    if _d.rank() == 0:
        with open(path, "rb") as f:
            data = f.read()
    data = _d.broadcast_bytes(data, 0, "the checkpoint from rank 0")
    tensors, meta = _d._parse_safetensors(data, path)
    if meta.get("kind") != _KIND:
        raise _b.InputError("%s: not a checkpoint of bitgrad.distributed.save (kind %r)" % (path, meta.get("kind")))
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")}, strict=True)
    if optimizer is not None:
        if "optimizer_steps" not in meta:
            raise _b.InputError("%s: the checkpoint holds no optimizer state" % path)
        st = {k[10:]: v for k, v in tensors.items() if k.startswith("optimizer.")}
        st["steps"] = int(meta["optimizer_steps"])
        optimizer.load_state_dict(st)
    if loader is not None:
        if "epoch" not in meta:
            raise _b.InputError("%s: the checkpoint holds no loader position" % path)
        loader.seek(int(meta["epoch"]), int(meta["index"]))
    out = dict(meta)
    out["step"] = int(meta["step"])
    return out
