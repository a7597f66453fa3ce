"""Fingerprints of PyTorch tensors, bit for bit those of bitgrad's own tensors (numerics §13), and
the reusable snapshot buffers the recorder copies tensors into at a step."""
import operator
import threading
import weakref

import numpy
import torch

import bitgrad
from bitgrad import _bitgrad

# torch dtypes with a bitgrad dtype of the same bits; bool arrives as uint8, as NumPy's bool does
_NATIVE = (torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool, torch.float16, torch.bfloat16)
_MAX_DIMS = 8  # bitgrad tensors have at most 8 dimensions

ZERO_DIGEST = "0" * 32  # what bitgrad's own tracer writes for a parameter without a gradient


def _dense_cpu(t):
    """t detached, strided, on the CPU, conjugation and negation resolved, row-major."""
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()  # a sparse gradient is hashed as the dense tensor it stands for
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.resolve_conj().resolve_neg()
    return t.contiguous()


def _bytes_tensor(data):
    return bitgrad.tensor(numpy.frombuffer(bytes(data), dtype=numpy.uint8))


def _parts(t):
    """The bitgrad tensors whose fingerprint is t's: t itself as a bitgrad view where bitgrad has
    its dtype and rank; otherwise three tensors (the dtype's name as bytes, the shape as int64,
    the elements' little-endian bytes in row-major order), which no single bitgrad tensor's
    header can equal."""
    if t.is_quantized:
        raise TypeError("fingerprint: expected a tensor of a numeric dtype, got a quantized %s tensor; "
                        "fingerprint its int_repr() instead" % t.dtype)
    t = _dense_cpu(t)
    if t.dtype in _NATIVE and t.dim() <= _MAX_DIMS:
        if t.dtype is torch.bfloat16:
            return [bitgrad.from_dlpack(t)]  # NumPy has no bfloat16; DLPack carries it
        return [bitgrad.from_numpy(t.numpy())]
    flat = t.reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    raw = flat.view(torch.uint8) if flat.dtype is not torch.bool else flat.to(torch.uint8)
    return [_bytes_tensor(str(t.dtype).encode()),
            bitgrad.tensor(numpy.asarray(list(t.shape), dtype=numpy.int64).reshape(-1)),
            bitgrad.from_numpy(raw.numpy())]


_VIEWED = (torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool, torch.float16)


class _Views:
    """NumPy views of tensors, kept while the tensor lives: parameters, their gradients and the
    optimizer's state are the same tensors from step to step, and a view checked against the
    tensor's address, shape, strides and dtype costs less than a new one. An entry whose tensor died
    is dropped (its view would keep the memory alive)."""

    def __init__(self):
        self._views = {}
        self._lock = threading.Lock()

    def get(self, t):
        v = self._views.get(id(t))
        if v is not None and v[0]() is t and v[1] == (t.data_ptr(), t.shape, t.stride(), t.dtype):
            return v[2]
        a = self._make(t)
        if a is not None:
            key = id(t)
            try:
                ref = weakref.ref(t, self._dropper(key))
            except TypeError:
                return a  # a tensor subclass without weak references: a new view each time
            with self._lock:
                self._views[key] = (ref, (t.data_ptr(), t.shape, t.stride(), t.dtype), a)
        return a

    def _dropper(self, key):
        def drop(ref):
            with self._lock:
                v = self._views.get(key)
                if v is not None and v[0] is ref:
                    del self._views[key]
        return drop

    @staticmethod
    def _make(t):
        d = t.detach()
        if d.dtype in _VIEWED and d.dim() <= _MAX_DIMS:
            try:
                return d.numpy()  # strided views are hashed row-major all the same
            except (RuntimeError, TypeError):
                pass  # on a device, sparse, a negative view: numpy() refuses
        return None


_views = _Views()


class Arrays(list):
    """A group already made of what bitgrad hashes (NumPy arrays, bitgrad tensors):
    fingerprints() hands it on as it is."""


_KEY_OF = (id, torch.Tensor.data_ptr, operator.attrgetter("shape"), torch.Tensor.stride, operator.attrgetter("dtype"))


class KeptViews:
    """NumPy views of a list of tensors that stays the same from step to step (an optimizer's
    parameters and state), checked in bulk: the tensors' ids, addresses, shapes, strides and
    dtypes against those the views were made for, all made anew where any differs. A view holds
    its tensor's memory, so an equal address is that same memory."""

    def __init__(self):
        self._key = None
        self._made = None  # per tensor: Arrays of its view, or None (hashed through _parts each time)
        self._all = False

    def groups(self, tensors):
        """One Arrays group per tensor, or None where a tensor has no address to check (sparse,
        a subclass whose methods refuse): the caller then hashes the tensors one by one."""
        try:
            key = [list(map(f, tensors)) for f in _KEY_OF]
        except Exception:
            return None
        if key != self._key:
            made = []
            for t in tensors:
                a = _Views._make(t)
                made.append(Arrays([a]) if a is not None else None)
            self._key, self._made, self._all = key, made, all(m is not None for m in made)
        if self._all:
            return self._made
        return [m if m is not None else Arrays(_parts(t)) for m, t in zip(self._made, tensors)]


def _groups(items, kept):
    """The groups to hash for fingerprints(items), and where each item's digest is: a string
    that stays, or the number of its group."""
    groups, slots = [], []
    get = _views.get if kept else _Views._make
    Tensor, ndarray = torch.Tensor, numpy.ndarray
    for item in items:
        if type(item) is Arrays:
            slots.append(len(groups))
            groups.append(item)
            continue
        if isinstance(item, str):
            slots.append(item)
            continue
        group = []
        for t in ((item,) if isinstance(item, (Tensor, ndarray)) else item):
            if isinstance(t, Tensor):
                a = get(t)
                if a is not None:
                    group.append(a)
                else:
                    group.extend(_parts(t))
            elif isinstance(t, ndarray):
                group.append(t)
            else:
                raise TypeError("fingerprint: expected a torch.Tensor or a sequence of them, got an element of type %s"
                                % type(t).__name__)
        slots.append(len(groups))
        groups.append(group)
    return groups, slots


def fingerprints(items, kept=True):
    """fingerprint(item) of each item (a tensor, a sequence of tensors, an Arrays group, or a
    digest string that stays as it is; a NumPy array hashes as bitgrad.from_numpy of it), in one
    call to bitgrad. kept=False: the tensors are new ones (a batch), whose views are not worth
    keeping."""
    groups, slots = _groups(items, kept)
    digests = _bitgrad._fingerprints(groups)
    return [s if isinstance(s, str) else digests[s] for s in slots]


def fingerprint(tensors):
    """XXH3-128 (32 hex digits) of a torch tensor, or of a sequence of them in order, exactly as
    bitgrad.fingerprint hashes bitgrad tensors of the same dtypes, shapes and bits: a float32
    tensor gives the fingerprint of the bitgrad float32 tensor with its shape and bits. bool
    hashes as uint8; strides, devices, sparse layouts and conjugate views do not enter, only the
    row-major values. A dtype bitgrad lacks (int32, int16, int8, complex...) or more than 8
    dimensions hashes the dtype's name, the shape and the bytes together."""
    if isinstance(tensors, torch.Tensor):
        return bitgrad.fingerprint(_parts(tensors))
    parts = []
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError("fingerprint: expected a torch.Tensor or a sequence of them, got an element of type %s"
                            % type(t).__name__)
        parts.extend(_parts(t))
    return bitgrad.fingerprint(parts)


def fingerprint_bytes(data):
    """Fingerprint of a 1-d uint8 bitgrad tensor holding `data` (RNG states, indices that are not
    integers)."""
    return bitgrad.fingerprint(_bytes_tensor(data))


class Buffers:
    """Snapshot tensors reused from step to step: a fresh allocation per copy costs page faults
    that make the copy several times slower than the hash it defers. Each key keeps a few free
    buffers; a change of shape, dtype or device allocates anew."""

    KEEP = 4

    def __init__(self):
        self._free = {}
        self._lock = threading.Lock()

    def copy(self, key, t):
        """A row-major copy of tensor t (detached) in a buffer of `key`."""
        if t.layout != torch.strided or t.is_quantized:
            return t.detach().clone()  # not poolable; hashed as it is
        buf = None
        free = self._free.get(key)
        if free:
            with self._lock:
                shape, dtype = t.shape, t.dtype
                # the buffer given back last: the hashing thread has just read it, it is in cache
                for i in range(len(free) - 1, -1, -1):
                    b = free[i]
                    if b.shape == shape and b.dtype is dtype and (not b.is_cuda or b.device == t.device):
                        buf = free.pop(i)
                        break
        if buf is None or buf.is_cuda != t.is_cuda:
            buf = torch.empty(t.shape, dtype=t.dtype, device=t.device)
        buf.copy_(t.detach())
        return buf

    def give_back(self, key, buf):
        if buf.layout != torch.strided or buf.is_quantized:
            return
        with self._lock:
            free = self._free.setdefault(key, [])
            free.append(buf)
            del free[:-self.KEEP]  # the least recently used go
