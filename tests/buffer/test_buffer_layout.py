"""The first buffer export of a view measures its layout in one call into the core.

``measure_buffer_layout`` (cpp/src/tensor_view.cpp) fills, on a view's first
buffer export, what no request changes: the PEP 3118 format, the item size,
C and Fortran contiguity, ``len`` and the byte strides.  A one-dimensional view
takes a pass of its own, written out; every other view takes the general
functions.  Both are held here to NumPy's own buffer export of the same memory,
request by request, on a fresh array (the measuring export) and again on the
same array (the remembered layout), for every dtype both sides name.
"""

from __future__ import annotations

import buffers as pep3118
import numpy as np
import pytest
from buffers import get_buffer, used_strides
from hypothesis import given
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

from dlpackarray import DLPackArray

DTYPES = [
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
    np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
]  # fmt: skip

# Every request that changes an answer: a shape or not, strides or not, each
# contiguity, a writable buffer, and the format.
REQUESTS = [
    pep3118.PyBUF_SIMPLE,
    pep3118.PyBUF_SIMPLE | pep3118.PyBUF_FORMAT,
    pep3118.PyBUF_ND,
    pep3118.PyBUF_ND | pep3118.PyBUF_FORMAT,
    pep3118.PyBUF_STRIDES,
    pep3118.PyBUF_RECORDS_RO,
    pep3118.PyBUF_FULL_RO,
    pep3118.PyBUF_C_CONTIGUOUS | pep3118.PyBUF_FORMAT,
    pep3118.PyBUF_F_CONTIGUOUS | pep3118.PyBUF_FORMAT,
    pep3118.PyBUF_ANY_CONTIGUOUS | pep3118.PyBUF_FORMAT,
    pep3118.PyBUF_RECORDS_RO | pep3118.PyBUF_WRITABLE,
    pep3118.PyBUF_ND | pep3118.PyBUF_WRITABLE,
]


def _dtype_of(fmt: str) -> np.dtype:
    """The dtype a PEP 3118 code names: NumPy writes 'l' where dlpackarray writes 'q'
    for int64 (both are 8-byte integers here), and complex as 'Z' plus the part."""
    return np.dtype({"Zf": "complex64", "Zd": "complex128"}.get(fmt, fmt))


def _answer(obj, flags):
    """What PyObject_GetBuffer(obj, flags) answers, in terms both exporters share:
    the exception type, or the fields a consumer reads."""
    try:
        b = get_buffer(obj, flags)
    except (BufferError, ValueError):
        # NumPy refuses a writable buffer of a read-only array with ValueError
        # where the buffer protocol's convention (and dlpackarray) says BufferError.
        return "refused"
    out = {"buf": b["buf"], "len": b["len"], "readonly": b["readonly"]}
    if flags & pep3118.PyBUF_ND == pep3118.PyBUF_ND:
        nd = b["ndim"]
        out["ndim"] = nd
        out["shape"] = b["shape"] if nd else ()
        out["itemsize"] = b["itemsize"]
        if b["format"] is not None:
            out["format"] = _dtype_of(b["format"])
        if nd and b["strides"] is not None and b["len"] != 0:  # (0-d: NULL or empty)
            out["strides"] = used_strides(b["shape"], b["strides"])
    # Without a shape, dlpackarray describes plain bytes ("B", item size 1) where
    # NumPy gives the dtype's code with ndim 0: not compared (test_buffer_protocol.py).
    return out


@st.composite
def views(draw):
    """A view of NumPy memory: any of the dtypes, 0 to 5 dimensions of extent 0 to
    4, sliced with steps of either sign, transposed, broadcast (stride 0) along some
    dimensions, read-only or not.  One-dimensional views come often: they take the
    written-out pass."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    ndim = draw(st.sampled_from([1, 1, 0, 2, 3, 5]))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    full = tuple(n * 2 for n in shape)  # room for steps of 2
    a = np.arange(int(np.prod(full)), dtype=np.int64).astype(dtype).reshape(full)
    idx = tuple(slice(None, None, draw(st.sampled_from([2, -2]))) for _ in shape)
    v = a[idx] if ndim else a
    if ndim > 1 and draw(st.booleans()):
        v = v.transpose(draw(st.permutations(range(ndim))))
    if ndim and draw(st.booleans()):
        strides = list(v.strides)
        for i in draw(st.sets(st.integers(0, ndim - 1))):
            strides[i] = 0
        v = as_strided(v, v.shape, strides, writeable=False)
    if draw(st.booleans()):
        v = v.view()
        v.flags.writeable = False
    return v


@given(views(), st.sampled_from(REQUESTS))
def test_first_export_answers_as_numpy(v, flags):
    assert _answer(DLPackArray(v), flags) == _answer(v, flags)


@given(views(), st.lists(st.sampled_from(REQUESTS), min_size=2, max_size=6))
def test_remembered_layout_answers_as_the_first_export(v, requests):
    d = DLPackArray(v)
    for flags in requests:
        assert _answer(d, flags) == _answer(v, flags)


@pytest.mark.parametrize("ndim", [1, 2, 9, 12])
def test_layout_of_many_dimensions_and_of_one(ndim):
    # Nine dimensions and more keep their byte strides outside the object (a
    # vector made on the first export): the same answers as inside it.
    shape = (2,) + (1,) * (ndim - 2) + (3,) if ndim > 1 else (5,)
    v = np.arange(int(np.prod(shape)) * 2, dtype=np.float32).reshape(shape + (2,))[..., 0]
    for flags in REQUESTS:
        assert _answer(DLPackArray(v), flags) == _answer(v, flags)


def test_broadcast_view_beyond_int64_bytes_is_refused_on_every_export():
    # A legal view whose size in bytes overflows int64: its layout is measured
    # (len -1) and every export, first or later, raises instead of wrapping len.
    huge = DLPackArray.from_buffer(bytearray(8), "int64", shape=(2**61 + 1,), strides=(0,))
    for _ in range(2):
        with pytest.raises(OverflowError, match="overflows int64"):
            memoryview(huge)
    fine = DLPackArray.from_buffer(bytearray(8), "int64", shape=(2**59,), strides=(0,))
    assert memoryview(fine).nbytes == 2**62


def test_dtype_without_a_format_code_refuses_only_requests_for_one():
    # bfloat16 has no PEP 3118 code: a format or a shape needs one, plain bytes do not.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    v = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16)
    d = DLPackArray(v)
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(d)
    assert get_buffer(d, pep3118.PyBUF_SIMPLE)["len"] == 12
    with pytest.raises(BufferError, match="bfloat16"):
        get_buffer(d, pep3118.PyBUF_RECORDS_RO)
