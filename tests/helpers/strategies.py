"""Hypothesis strategies over strided NumPy views of every dtype DLPackArray
carries, and the wrapper that hands each view to DLPackArray through the
producer NumPy can be (its own ``__dlpack__``) or a hand-made capsule for the
ml_dtypes NumPy cannot export through DLPack.

The views cover what a consumer must honour: positive and negative steps,
transposes, zero strides from broadcasting, read-only flags, empty extents and
0..8 dimensions, over 64-byte aligned random bytes.
"""

from __future__ import annotations

import math

import dlpack_ctypes as dc
import numpy as np
from conftest import require_ml_dtypes
from dtype_names import NUMPY_DTYPES
from hypothesis import strategies as st

from dlpackarray import DLPackArray

ML_DTYPES = [
    "bfloat16",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]
ALL_DTYPES = NUMPY_DTYPES + ML_DTYPES


def storage_dtype(name: str) -> np.dtype:
    """NumPy dtype holding the bits: itself, or an unsigned int for ml_dtypes."""
    if name in NUMPY_DTYPES:
        return np.dtype(name)
    ml = require_ml_dtypes()
    return np.dtype(f"u{np.dtype(getattr(ml, name)).itemsize}")


def address(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


@st.composite
def strided_views(draw, dtypes=ALL_DTYPES):
    """(dtype name, base array, view) with random slicing/transpose/broadcast."""
    name = draw(st.sampled_from(dtypes))
    sdt = storage_dtype(name)
    ndim = draw(st.integers(0, 8))
    limit = 6 if ndim <= 3 else 4 if ndim <= 5 else 3
    base_shape = list(draw(st.lists(st.integers(1, limit), min_size=ndim, max_size=ndim)))
    if ndim and draw(st.integers(0, 9)) == 9:  # empty arrays, but not most of the time
        base_shape[draw(st.integers(0, ndim - 1))] = 0
    seed = draw(st.integers(0, 2**32 - 1))
    nbytes = math.prod(base_shape) * sdt.itemsize
    # 64-byte aligned storage, so that consumers with alignment rules (XLA)
    # can share the memory whenever the view's first element stays aligned.
    padded = np.random.default_rng(seed).integers(0, 256, size=nbytes + 64, dtype=np.uint8)
    start = (-address(padded)) % 64
    raw = padded[start : start + nbytes]
    if name == "bool":
        raw &= 1
    base = raw.view(sdt).reshape(base_shape)
    index = []
    for n in base_shape:
        step = draw(st.sampled_from([1, 2, 3, -1, -2]))
        lo = draw(st.integers(0, max(n - 1, 0)))
        hi = draw(st.integers(lo + 1, max(n, lo + 1)))
        if draw(st.integers(0, 19)) == 19:
            hi = lo  # an empty slice
        # positive steps walk [lo, hi); negative ones walk down from hi - 1 to lo.
        index.append(
            slice(lo, hi, step) if step > 0 else slice(hi - 1, lo - 1 if lo else None, step)
        )
    view = base[tuple(index)] if index else base[...]  # base[()] would be a scalar
    if ndim > 1 and draw(st.booleans()):
        view = view.transpose(draw(st.permutations(range(ndim))))
    if draw(st.integers(0, 4)) == 4:
        extra = draw(st.lists(st.integers(0, 3), max_size=8 - view.ndim))
        target = tuple(extra) + tuple(draw(st.integers(1, 3)) if n == 1 else n for n in view.shape)
        view = np.broadcast_to(view, target)  # zero strides, read-only
    elif draw(st.integers(0, 5)) == 5:
        view.flags.writeable = False
    return name, base, view


def wrap(name: str, view: np.ndarray):
    """DLPackArray over ``view``: NumPy's own __dlpack__ for NumPy dtypes, a
    hand-made capsule (NumPy cannot export ml_dtypes through DLPack)."""
    if name in NUMPY_DTYPES:
        return DLPackArray(view)
    flags = 0 if view.flags.writeable else dc.FLAG_READ_ONLY
    producer = dc.Producer(
        view, dtype=dc.numpy_dl_dtype(getattr(require_ml_dtypes(), name)), flags=flags
    )
    return DLPackArray(producer.capsule())
