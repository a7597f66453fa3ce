"""The generators a PyTorch training draws from, read at each recorded step as cheaply as their
states can be had: torch's CPU generator (and CUDA's), NumPy's global RandomState through a
view of its Mersenne Twister (key and position) instead of get_state()'s conversions, and
Python's random read in place where CPython allows (packed from getstate() otherwise)."""
import ctypes
import random
import struct
import sys

import numpy
import torch

from bitgrad.torch._fingerprint import Arrays

NAMES = ("torch", "numpy", "python")


def _numpy_words(state):
    """The 624 key words and the position of a legacy get_state() tuple, as the view holds them."""
    words = numpy.empty(625, dtype="<u4")
    words[:624] = numpy.asarray(state[1], dtype="<u4")
    words[624] = numpy.uint32(int(state[2]) & 0xFFFFFFFF)
    return words


def _global_bit_generator():
    try:
        return numpy.random.mtrand._rand._bit_generator
    except AttributeError:
        return None


def _numpy_view(bit_generator):
    """A live view of the Mersenne Twister state (uint32 key[624], int pos) of NumPy's global
    RandomState, or None where this NumPy lays it out otherwise (then get_state() is read each
    time). The view is only read while `bit_generator` is still the global one (NumPy 1.25's
    set_bit_generator can replace it) and referenced, so its memory lives."""
    try:
        address = bit_generator.ctypes.state_address
        view = numpy.ctypeslib.as_array((ctypes.c_uint32 * 625).from_address(address))
        if numpy.array_equal(view, _numpy_words(numpy.random.get_state())):
            return view
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        pass  # not NumPy's legacy Mersenne Twister layout: read through get_state()
    return None


def _python_words(words):
    """getstate()'s 625 words (624 keys, then the index) as the generator holds them: the index
    (int32), then the keys (uint32), little-endian, as uint8."""
    return numpy.frombuffer(bytearray(struct.pack("<i624I", words[624], *words[:624])), dtype=numpy.uint8)


def _python_view(inst):
    """A live uint8 view of the index and keys of CPython's random generator object (its C
    struct after the object header: int index, uint32_t state[624]), or None where they are not
    laid out so (another Python, a big-endian machine): checked against getstate() now. inst
    stays referenced (random's module global), so the memory lives."""
    try:
        if sys.implementation.name != "cpython" or sys.byteorder != "little" or type(inst) is not random.Random:
            return None
        view = numpy.ctypeslib.as_array((ctypes.c_uint8 * 2500).from_address(id(inst) + object.__basicsize__))
        if bytes(view) == bytes(_python_words(inst.getstate()[1])):
            return view
    except (AttributeError, TypeError, ValueError, IndexError, struct.error):
        pass
    return None


class Generators:
    """Reads the generators' states: read() gives (names, items) for fingerprints(), each item an
    Arrays group of copies taken now: the step that follows may draw, and so may another thread
    while bitgrad hashes them without the GIL (5 KB in all, read in place and copied)."""

    def __init__(self):
        self._mtrand = getattr(numpy.random, "mtrand", None)
        self._bit_generator = _global_bit_generator()
        self._numpy = _numpy_view(self._bit_generator) if self._bit_generator is not None else None
        self._numpy_u8 = self._numpy.view(numpy.uint8) if self._numpy is not None else None
        self._python_state, self._python_words = None, None
        self._inst = random._inst  # what random.random() and the module's other functions draw from
        self._python_view = _python_view(self._inst)

    def _numpy_bytes(self, copy=True):
        """NumPy's global state as uint8: the view's bytes (or a copy), else get_state()'s."""
        try:
            bg = self._mtrand._rand._bit_generator
        except AttributeError:
            bg = None
        if bg is not self._bit_generator:  # replaced: view the new one (or read get_state())
            self._bit_generator = bg
            self._numpy = _numpy_view(bg) if bg is not None else None
            self._numpy_u8 = self._numpy.view(numpy.uint8) if self._numpy is not None else None
        if self._numpy_u8 is not None:
            return self._numpy_u8.copy() if copy else self._numpy_u8
        state = numpy.random.get_state(legacy=False)
        if state.get("bit_generator") == "MT19937":
            return _numpy_words(numpy.random.get_state()).view(numpy.uint8)
        # another bit generator behind the global RandomState (NumPy 1.25's set_bit_generator):
        # its state as NumPy reports it
        return numpy.frombuffer(bytearray(repr(state).encode()), dtype=numpy.uint8)

    def _python(self):
        """Python's random as the bytes its Mersenne Twister holds (the index as int32, the 624
        keys as uint32, little-endian), then gauss_next as f64 where it is set: in place where
        CPython lays out the generator so (checked at the start), packed from getstate()
        otherwise, the same bytes either way."""
        gauss = self._inst.gauss_next
        if self._python_view is not None:
            words = self._python_view
        else:
            st = self._inst.getstate()
            if st[1] != self._python_state:  # most trainings never draw from it: packed once
                self._python_state = st[1]
                self._python_words = _python_words(st[1])
            words = self._python_words
        if gauss is None:
            return [words]
        return [words, numpy.array([float(gauss)], dtype="<f8")]

    def read(self):
        items = [Arrays([torch.get_rng_state().numpy()]), Arrays([self._numpy_bytes(True)]),
                 Arrays([a.copy() for a in self._python()])]
        names = list(NAMES)
        if torch.cuda.is_initialized():
            names.append("cuda")
            items.append(torch.cuda.get_rng_state_all())
        return names, items
