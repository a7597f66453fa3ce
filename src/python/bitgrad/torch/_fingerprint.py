"""Fingerprints of PyTorch tensors, bit for bit those of bitgrad's own tensors (numerics §13), and
the reusable snapshot buffers the recorder copies tensors into at a step."""
import threading

import numpy
import torch

import bitgrad

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
