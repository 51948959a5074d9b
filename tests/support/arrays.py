"""Arrays placed where a test needs them in memory."""

import numpy as np


def at_address(a, offset):
    """A C-ordered copy of ``a`` whose data start ``offset`` bytes past a 64-byte boundary."""
    buf = np.empty(a.nbytes + 128, dtype=np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = np.frombuffer(buf[start:start + a.nbytes], dtype=a.dtype).reshape(a.shape)
    out[...] = a
    assert out.ctypes.data % 64 == offset
    return out
