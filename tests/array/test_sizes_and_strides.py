"""Byte counts and strides that never address memory.

* The byte count ``size * itemsize`` is computed once, overflow-checked, in the
  C++ core and used by every copy, ``nbytes`` and ``Py_buffer.len``: a
  broadcast (stride-0) view of 2**61 int64 elements is a legal input, but its
  copy must raise instead of allocating a wrapped (short) block.  Those tests
  run in a subprocess, since the old failure was a heap overflow.
* A stride that is never multiplied by a non-zero index (a length-1
  dimension, any dimension of an empty array) is free: odd byte strides are
  normalised on import instead of refused, huge element strides never
  overflow indexing or exports, and a slice step that selects at most one
  element gives NumPy's one-element view.
"""

from __future__ import annotations

import dlpack_ctypes as dc
import numpy as np
import pytest
from array_struct_ctypes import read_struct
from conftest import assert_clean_exit, require_torch, run_python
from hypothesis import given
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

from dlpackarray import DLPackArray

# --- byte counts ------------------------------------------------------------------

_PRELUDE = """
import numpy as np
from dlpackarray import DLPackArray, from_dlpack

N = 2**61 + 1  # N * 8 bytes overflows int64; the view itself touches 8 bytes
a = DLPackArray.from_buffer(bytearray(8), "int64", shape=(N,), strides=(0,))

def refused(call, exc=OverflowError, text="overflows int64"):
    try:
        call()
    except exc as e:
        assert text in str(e), e
        return
    raise AssertionError(f"{call} was not refused with {exc.__name__}")
"""

_BYTE_COUNT_ROUTES = {
    "copy": """
refused(a.copy)
# 2**62 one-byte elements: the count fits, the allocation cannot succeed.
b = DLPackArray.from_buffer(bytearray(1), "int8", shape=(2**62,), strides=(0,))
assert b.nbytes == 2**62
refused(b.copy, MemoryError, "4611686018427387904 bytes")
""",
    "import_copy_true": """
refused(lambda: DLPackArray(a, copy=True))
refused(lambda: DLPackArray(a.__dlpack__(max_version=(1, 3)), copy=True))
""",
    "from_dlpack_copy_true": """
refused(lambda: from_dlpack(a, copy=True))
refused(lambda: from_dlpack(a.__dlpack__(max_version=(1, 3)), copy=True))
""",
    "dunder_dlpack_copy_true": """
refused(lambda: a.__dlpack__(max_version=(1, 3), copy=True))
refused(lambda: a.__dlpack__(copy=True))
""",
    "array_interface_zero_strides": """
class Iface:
    pass

raw = np.arange(1, dtype=np.int64)
for data in [(raw.ctypes.data, False), raw]:
    obj = Iface()
    obj.keep = raw
    obj.__array_interface__ = {
        "version": 3, "shape": (N,), "typestr": "<i8", "data": data, "strides": (0,)}
    view = DLPackArray(obj)
    assert view.size == N and view.strides == (0,)
    refused(lambda: DLPackArray(obj, copy=True))
    refused(view.copy)
""",
    "array_struct_zero_strides": """
from array_struct_ctypes import StructExporter

raw = np.arange(1, dtype=np.int64)
obj = StructExporter(typekind=b"i", itemsize=8, shape=(N,), strides=(0,), data=raw.ctypes.data)
refused(lambda: DLPackArray(obj, copy=True))
""",
    "nbytes_and_buffer_len": """
refused(lambda: a.nbytes)
refused(lambda: memoryview(a))
assert a.size == N and a[N - 1].nbytes == 8  # the view itself stays usable
""",
    "torch_expand": """
import torch

t = torch.zeros(1, dtype=torch.int64).expand(N)
refused(DLPackArray(t).copy)
refused(lambda: DLPackArray(torch.utils.dlpack.to_dlpack(t), copy=True))
""",
}


@pytest.mark.parametrize("route", sorted(_BYTE_COUNT_ROUTES))
def test_huge_broadcast_copy_refused(route):
    if route == "torch_expand":
        require_torch()
    proc = run_python(_PRELUDE + _BYTE_COUNT_ROUTES[route])
    assert_clean_exit(proc, route)


def test_nbytes_is_the_buffer_length():
    for x in [np.arange(24.0).reshape(4, 6)[::2, ::-3], np.zeros((0, 3), np.int16)]:
        d = DLPackArray(x)
        assert d.nbytes == x.nbytes == memoryview(d).nbytes == len(d.copy().__array__().tobytes())
    huge = DLPackArray.from_buffer(bytearray(2), "int16", shape=(2**62,), strides=(0,))
    with pytest.raises(OverflowError, match=r"\(4611686018427387904 elements of 2 bytes\)"):
        _ = huge.nbytes


# --- unused strides on import -----------------------------------------------------


class _Holder:
    """Exposes exactly one protocol attribute of an array."""

    def __init__(self, attr, source):
        setattr(self, attr, getattr(source, attr))
        self.source = source


# Non-contiguous, so NumPy's buffer export keeps the 4-byte stride as well.
_SIZE1 = np.ndarray((10, 5, 1), "f8", buffer=np.arange(2000, dtype=np.uint8), strides=(16, 160, 4))


def _import_size1(route):
    x = _SIZE1
    if route == "buffer":
        return DLPackArray(memoryview(x))
    if route in ("__array_interface__", "__array_struct__"):
        return DLPackArray(_Holder(route, x))
    if route == "from_buffer":
        return DLPackArray.from_buffer(x.base, "float64", shape=x.shape, strides=x.strides)
    # DLPack counts elements; a huge element stride is the analogue of an odd
    # byte stride: it never fits in bytes.
    assert route == "dlpack"
    p = dc.Producer(x.base, shape=x.shape, strides=(2, 20, 2**62), dtype=(dc.KDL_FLOAT, 64, 1))
    return DLPackArray(p.capsule())


@pytest.mark.parametrize(
    "route", ["buffer", "__array_interface__", "__array_struct__", "from_buffer", "dlpack"]
)
def test_length1_dimension_with_odd_stride(route):
    x = _SIZE1
    d = _import_size1(route)
    assert d.shape == (10, 5, 1) and d.strides[:2] == (2, 20)
    np.testing.assert_array_equal(np.asarray(d), x)
    np.testing.assert_array_equal(np.asarray(d[:, :, 0]), x[:, :, 0])
    np.testing.assert_array_equal(np.asarray(d[3:, ::2, -1:]), x[3:, ::2, -1:])
    np.testing.assert_array_equal(np.asarray(d.copy()), x)
    np.testing.assert_array_equal(np.asarray(d.view("float32")), x.view(np.float32))
    # Every byte-stride export gives the length-1 dimension a whole number of items.
    strides = [memoryview(d).strides, d.__array_interface__["strides"]]
    strides.append(read_struct(d.__array_struct__)["strides"])
    for s in strides:
        assert s[:2] == (16, 160) and s[2] % 8 == 0


@pytest.mark.parametrize("route", ["__array_interface__", "__array_struct__", "from_buffer"])
def test_numpy_size1dims_arrays(route):
    # NumPy's test_dlpack.py::test_size1dims_arrays, through the other protocols.
    buf = np.ones(1000, dtype=np.uint8)
    x = np.ndarray(dtype="f8", shape=(10, 5, 1), strides=(8, 80, 4), buffer=buf, order="F")
    if route == "from_buffer":
        d = DLPackArray.from_buffer(buf, "f8", shape=(10, 5, 1), strides=(8, 80, 4))
    else:
        d = DLPackArray(_Holder(route, x))
    assert d.strides == (1, 10, 1) and d.f_contiguous
    np.testing.assert_array_equal(np.asarray(d), x)


@pytest.mark.parametrize("route", ["__array_interface__", "__array_struct__", "from_buffer"])
def test_empty_array_with_odd_strides(route):
    raw = np.zeros(3)
    x = as_strided(raw, shape=(0, 3), strides=(3, 5))
    if route == "from_buffer":
        d = DLPackArray.from_buffer(raw, "float64", shape=(0, 3), strides=(3, 5))
    elif route == "__array_interface__":
        # NumPy reports strides=None for an empty array (it is contiguous).
        holder = _Holder(route, x)
        holder.__array_interface__ = dict(x.__array_interface__, strides=(3, 5))
        d = DLPackArray(holder)
    else:
        d = DLPackArray(_Holder(route, x))
    assert d.shape == (0, 3) and d.size == 0 and d.nbytes == 0
    assert d.strides == (3, 1)  # C-contiguous: no stride of an empty array is used
    assert np.asarray(d).shape == (0, 3) and d.copy().shape == (0, 3)


def test_used_odd_stride_still_refused():
    x = np.ndarray((10, 5, 2), "f8", buffer=np.arange(2000, dtype=np.uint8), strides=(16, 160, 4))
    for obj in [_Holder("__array_interface__", x), _Holder("__array_struct__", x)]:
        with pytest.raises(BufferError, match="stride of 4 bytes in dimension 2, not a multiple"):
            DLPackArray(obj)
    with pytest.raises(BufferError, match="buffer of a 'memoryview' object has a stride of 4"):
        DLPackArray(memoryview(x))


# --- unused strides in views and exports ------------------------------------------


def test_huge_unused_stride_of_length1_dimension():
    src = np.arange(4, dtype=np.float32)
    p = dc.Producer(src, shape=(1, 4), strides=(2**62, 1), dtype=(dc.KDL_FLOAT, 32, 1))
    d = DLPackArray(p.capsule())
    np.testing.assert_array_equal(np.asarray(d[0]), src)
    np.testing.assert_array_equal(np.asarray(d[0, 1::2]), src[1::2])
    np.testing.assert_array_equal(np.asarray(d[-1:, :2]), src[None, :2])
    np.testing.assert_array_equal(np.asarray(d.view("int16")), src.view(np.int16)[None])
    # 2**62 elements do not fit in bytes: exported as the C-contiguous stride.
    assert memoryview(d).strides == (16, 4)
    assert read_struct(d.__array_struct__)["strides"] == (16, 4)
    assert memoryview(d).tolist() == [src.tolist()]


def test_huge_unused_strides_of_empty_array():
    src = np.arange(5, dtype=np.float32)
    p = dc.Producer(src, shape=(0, 5), strides=(1, 2**62), dtype=(dc.KDL_FLOAT, 32, 1))
    d = DLPackArray(p.capsule())
    assert d[:, 2:].shape == (0, 3)
    assert d[:, ::2].shape == (0, 3)
    assert d[..., 4].shape == (0,)
    assert d.view("uint8").shape == (0, 20)
    assert d.copy().shape == (0, 5)
    assert memoryview(d).shape == (0, 5)


def test_zero_extent_does_not_hide_an_overflowing_shape():
    # NumPy's (and torch's) rule: the non-zero extents' product must fit, so
    # the verdict does not depend on where the 0 is.
    for shape in [(0, 2**62, 2**62), (2**62, 2**62, 0)]:
        p = dc.Producer(None, shape=shape, strides=(1, 1, 1), dtype=(dc.KDL_UINT, 8, 1), data=0)
        cap = p.capsule()
        with pytest.raises(OverflowError, match="number of elements overflows int64"):
            DLPackArray(cap)
        assert p.deleter_calls == 1
    big = DLPackArray.from_buffer(bytearray(0), "uint8", shape=(0, 2**31, 2**31))
    assert big.size == 0 and big.strides == (2**62, 2**31, 1)


# --- slices whose step selects at most one element -----------------------------

_HUGE_STEPS = [2**62, -(2**62), 2**63 - 1, -(2**63 - 1), -(2**63), 2**61 + 3, 10**30, -(10**30)]


@pytest.mark.parametrize(
    "key",
    [
        slice(None, None, 2**62),
        slice(None, None, -(2**62)),
        slice(5, None, 2**63 - 1),
        slice(None, None, -(2**63)),
        slice(-1, None, 2**62),
        slice(3, 4, 2**62),
        slice(20, None, 2**62),
        slice(None, None, 10**30),
        (slice(None, None, 2**62), slice(None, None, -(2**62))),
    ],
)
def test_huge_slice_step_matches_numpy(key):
    x = np.arange(60).reshape(10, 6)[::2, ::-3]
    d = DLPackArray(x)
    expected = x[key]
    got = d[key]
    assert got.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(got), expected)


@given(
    start=st.none() | st.integers(-(2**64), 2**64),
    stop=st.none() | st.integers(-(2**64), 2**64),
    step=st.sampled_from(_HUGE_STEPS) | st.integers(-(2**64), 2**64).filter(bool),
    source_step=st.sampled_from([1, 2, -3]),
)
def test_slices_with_any_step_match_numpy(start, stop, step, source_step):
    x = np.arange(10, dtype=np.int16)[::source_step]
    key = slice(start, stop, step)
    got = DLPackArray(x)[key]
    assert got.shape == x[key].shape
    np.testing.assert_array_equal(np.asarray(got), x[key])
