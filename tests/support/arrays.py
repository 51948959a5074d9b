"""Arrays for the tests: random shards, and arrays placed where a test needs them in memory."""

import numpy as np


def at_address(a, offset):
    """A C-ordered copy of ``a`` whose data start ``offset`` bytes past a 64-byte boundary."""
    buf = np.empty(a.nbytes + 128, dtype=np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = np.frombuffer(buf[start:start + a.nbytes], dtype=a.dtype).reshape(a.shape)
    out[...] = a
    assert out.ctypes.data % 64 == offset
    return out


def random_shard(seed, m, d1, d2, rank):
    """``(X, labels, y, A, B, P)`` of a shard of ``m`` random rows: normal ``X`` (``m x d1``),
    uniform labels in ``[0, d2)``, fair +-1 bits, a normal model ``A`` (``d1 x rank``),
    ``B`` (``d2 x rank``) and probe ``P`` (``(d1 + d2) x rank``), drawn in that order from
    ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, d1))
    labels = rng.integers(0, d2, m)
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    A = rng.standard_normal((d1, rank))
    B = rng.standard_normal((d2, rank))
    P = rng.standard_normal((d1 + d2, rank))
    return X, labels, y, A, B, P
