"""The generators a PyTorch training draws from, read at each recorded step as cheaply as their
states can be had: torch's CPU generator (and CUDA's), NumPy's global RandomState through a
view of its Mersenne Twister (key and position) instead of get_state()'s conversions, and
Python's random packed only when it moved."""
import ctypes
import random
import struct

import numpy
import torch

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


class Generators:
    """Reads the generators' states: read() gives (names, items) for fingerprints(), each item a
    copy taken now (the step that follows may draw), or read(copy=False) NumPy's as a view.""" 

    def __init__(self):
        self._bit_generator = _global_bit_generator()
        self._numpy = _numpy_view(self._bit_generator) if self._bit_generator is not None else None
        self._python_state, self._python_words = None, None

    def _numpy_words(self, copy=True):
        bg = _global_bit_generator()
        if bg is not self._bit_generator:  # replaced: view the new one (or read get_state())
            self._bit_generator = bg
            self._numpy = _numpy_view(bg) if bg is not None else None
        if self._numpy is not None:
            return self._numpy.copy() if copy else self._numpy
        state = numpy.random.get_state(legacy=False)
        if state.get("bit_generator") == "MT19937":
            return _numpy_words(numpy.random.get_state())
        # another bit generator behind the global RandomState (NumPy 1.25's set_bit_generator):
        # its state as NumPy reports it
        return numpy.frombuffer(bytearray(repr(state).encode()), dtype=numpy.uint8)

    def _python(self):
        # (version, 625 words of the Mersenne Twister and its index, gauss_next)
        st = random.getstate()
        if st != self._python_state:  # most trainings never draw from it: packed once
            version, words, gauss = st
            packed = (struct.pack("<q", int(version)) + struct.pack("<%dQ" % len(words), *words)
                      + struct.pack("<?d", gauss is not None, 0.0 if gauss is None else float(gauss)))
            self._python_state = st
            self._python_words = numpy.frombuffer(bytearray(packed), dtype=numpy.uint8)
        return self._python_words

    def read(self, copy=True):
        """copy=False: NumPy's state is given as a live view, for a caller that hashes the items
        before anything can draw."""
        items = [torch.get_rng_state().numpy(), self._numpy_words(copy).view(numpy.uint8), self._python()]
        names = list(NAMES)
        if torch.cuda.is_initialized():
            names.append("cuda")
            items.append(torch.cuda.get_rng_state_all())
        return names, items
