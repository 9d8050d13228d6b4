"""Every route that copies a DLPackArray gives the bytes NumPy gives.

The routes (the constructor with ``copy=True``, ``.copy()``,
``__dlpack__(copy=True)`` through ``np.from_dlpack``, ``copy.copy`` and
``copy.deepcopy``, ``device="cpu"`` with ``copy=True``, the C API's
``DLPackArray_AsContiguous``, a protocol-5 pickle, an Arrow export of a
layout Arrow cannot describe, and ``bytes()``) all end in the core's strided
copy.  Its transposes run through register tiles of 64 bytes a side with
item-by-item edges, in strips, streamed past the caches from 8 MiB on; the
views drawn here are large enough to hold whole tiles and ragged edges for
1-, 2-, 4- and 8-byte items, over every rank to 4, any axis permutation,
negative steps, gaps and offsets.
"""

from __future__ import annotations

import copy
import math
import pickle

import c_api_ctypes as capi
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from dlpackarray import DLPackArray

DTYPES = ["uint8", "int16", "float32", "float64", "complex128"]


class _ArrowOnly:
    """Exposes only the Arrow C data interface of a DLPackArray, so importing it
    takes the Arrow route and exercises the export's dense copy."""

    def __init__(self, array):
        self._array = array

    def __arrow_c_array__(self, requested_schema=None):
        return self._array.__arrow_c_array__(requested_schema)


def _route_bytes(route: str, d: DLPackArray) -> bytes:
    """The C-ordered bytes of ``d`` copied by ``route``; the copy's own memory
    is checked to be dense C order where the route yields an array."""
    if route == "bytes":
        return bytes(d)
    if route == "from_dlpack":
        out = np.from_dlpack(d, copy=True)
        # Writability is NumPy's to decide and differs between its versions (2.1.3 marks
        # this import read-only); the bytes and their C order are the invariant here.
        assert out.flags.c_contiguous
        return out.tobytes()
    if route == "pickle5":
        buffers: list = []
        data = pickle.dumps(d, protocol=5, buffer_callback=buffers.append)
        out = pickle.loads(data, buffers=buffers)
    elif route == "pickle4":
        out = pickle.loads(pickle.dumps(d, protocol=4))
    elif route == "arrow":
        out = DLPackArray(_ArrowOnly(d))
        return np.from_dlpack(out).tobytes()
    else:
        out = {
            "constructor": lambda: DLPackArray(d, copy=True),
            "copy": d.copy,
            "copy.copy": lambda: copy.copy(d),
            "deepcopy": lambda: copy.deepcopy(d),
            "device-cpu": lambda: DLPackArray(d, device="cpu", copy=True),
            "as_contiguous": lambda: capi.table().as_contiguous(d),
        }[route]()
        assert out.c_contiguous
        if d.size and not d.c_contiguous:
            assert out.data_ptr != d.data_ptr
    assert out.shape == d.shape
    return bytes(np.from_dlpack(out).tobytes())


ROUTES = [
    "constructor",
    "copy",
    "from_dlpack",
    "copy.copy",
    "deepcopy",
    "device-cpu",
    "as_contiguous",
    "pickle5",
    "pickle4",
    "arrow",
    "bytes",
]


@st.composite
def copy_views(draw):
    """A strided NumPy view over random bytes: 1 to 4 dimensions, each with a
    start offset and a step in -3..3 (no 0), then any permutation of the
    axes.  Extents go past two tiles of 1-byte items in 2-D (150 > 2 x 64)
    and are rarely a multiple of any tile."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    ndim = draw(st.integers(1, 4))
    limit = {1: 300, 2: 150, 3: 40, 4: 12}[ndim]
    shape = draw(st.lists(st.integers(1, limit), min_size=ndim, max_size=ndim))
    seed = draw(st.integers(0, 2**32 - 1))
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.random.default_rng(seed).integers(0, 256, size=nbytes, dtype=np.uint8)
    base = raw.view(dtype).reshape(shape)
    index = []
    for n in shape:
        step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
        start = draw(st.integers(0, min(n - 1, 5)))
        index.append(slice(start, None, step) if step > 0 else slice(n - 1 - start, None, step))
    view = base[tuple(index)]
    if ndim > 1:
        view = view.transpose(draw(st.permutations(range(ndim))))
    return view


@pytest.mark.parametrize("route", ROUTES)
@given(view=copy_views())
def test_every_copy_route_gives_numpys_bytes(route, view):
    """Each route's copy holds exactly the elements NumPy's C-ordered copy holds."""
    assume(route != "arrow" or view.dtype.kind != "c")  # Arrow has no complex type
    expected = np.ascontiguousarray(view).tobytes()
    assert _route_bytes(route, DLPackArray(view)) == expected


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
@pytest.mark.parametrize(
    "layout", ["transpose", "transpose-ragged", "permute-021", "permute-210", "reversed", "gaps"]
)
def test_large_copies_give_numpys_bytes(dtype, layout):
    """Copies of 8 MiB and more (whose transposes stream past the caches:
    whole destination lines where a row is a multiple of 64 bytes, ordinary
    stores otherwise), with and without ragged tile edges, match NumPy byte
    for byte."""
    itemsize = np.dtype(dtype).itemsize
    rng = np.random.default_rng(7)
    if layout in ("transpose", "transpose-ragged", "reversed", "gaps"):
        # 2112 bytes = 33 lines per destination row; + 3 items: ragged rows.
        rows = 2112 // itemsize + (0 if layout == "transpose" else 3)
        raw = rng.integers(0, 256, size=rows * 4099 * itemsize, dtype=np.uint8)
        base = raw.view(dtype).reshape(rows, 4099)
        view = {
            "transpose": base.T,
            "transpose-ragged": base.T,
            "reversed": base[::-1, ::-1].T,
            "gaps": base[1::2, ::3].T,
        }[layout]
    else:
        n = 1030 // itemsize + 1  # about 9 MB
        raw = rng.integers(0, 256, size=n * 131 * 67 * itemsize, dtype=np.uint8)
        base = raw.view(dtype).reshape(n, 131, 67)
        view = base.transpose((0, 2, 1) if layout == "permute-021" else (2, 1, 0))
    d = DLPackArray(view)
    expected = np.ascontiguousarray(view).tobytes()
    assert np.from_dlpack(d.copy()).tobytes() == expected
    assert bytes(d) == expected


def test_bytes_keeps_the_buffer_protocols_refusals():
    """bytes() of a dtype without a PEP 3118 format code raises BufferError,
    as bytes() of its buffer does."""
    ml = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (bfloat16 data)")
    d = DLPackArray(np.zeros((3, 4), ml.bfloat16).T)
    with pytest.raises(BufferError, match="PEP 3118"):
        bytes(d)
