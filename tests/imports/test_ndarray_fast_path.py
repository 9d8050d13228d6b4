"""An exact ``numpy.ndarray`` is read in place (src/dlpackarray/_array.pyx,
``_import_exact_ndarray``) instead of through its ``__dlpack__``; the view must be the one
the ``__dlpack__`` route gives, for every dtype, layout and flag.

Differential: the same array is wrapped as is (the fast path when it applies) and as an
ndarray subclass instance, which is not an exact ndarray and so takes the documented
``__dlpack__`` route.  Every observable field, the values, the outcome for arrays the fast
path declines (byte-swapped, unaligned, odd strides, unsupported dtypes: the same exception
type) and the keep-alive must agree.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray


class Sub(np.ndarray):
    pass


FIELDS = ("shape", "strides", "dtype", "device", "readonly", "data_ptr", "byte_offset",
          "c_contiguous", "f_contiguous", "nbytes")  # fmt: skip

DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "l", "L", "q", "Q", "h", "H",
          "f2", "f4", "f8", "c8", "c16", "g", "G", ">i4", ">f8", "<i2", "M8[s]", "m8[s]",
          "S3", "U2", "O", "V4", "i4,f4"]  # fmt: skip


def _outcome(obj, copy=None, same_memory=True):
    try:
        a = DLPackArray(obj, copy=copy)
    except Exception as exc:  # noqa: BLE001 - compared between the two routes
        return type(exc)
    out = {f: getattr(a, f) for f in FIELDS}
    out["values"] = np.from_dlpack(a).tobytes() if a.size else b""
    out["interface"] = a.__array_interface__
    if not same_memory:  # two copies: equal but for their addresses
        del out["data_ptr"], out["interface"]["data"]
    return out


def _addressing(strides, shape):
    """The strides that address elements: none in an empty array, and none
    along a dimension of extent 1 (only index 0 exists there)."""
    if strides is None:
        return None
    if 0 in shape:
        return ()
    return tuple(s if n > 1 else None for s, n in zip(strides, shape, strict=True))


def _check(arr):
    assert type(arr) is np.ndarray
    fast, exported = _outcome(arr), _outcome(arr.view(Sub))
    if isinstance(fast, dict) and isinstance(exported, dict):
        # Strides that address no element are free, and NumPy's DLPack export
        # rewrites them in some versions (2.2 and 2.3 do); the ones that address
        # elements, and every other field, must agree.
        for out in (fast, exported):
            out["strides"] = _addressing(out["strides"], out["shape"])
            iface = out["interface"]
            iface["strides"] = _addressing(iface.get("strides"), iface["shape"])
    assert fast == exported


@st.composite
def arrays(draw):
    # Object arrays cannot view raw bytes; test_every_dtype_matches covers them.
    dtype = np.dtype(draw(st.sampled_from([d for d in DTYPES if d != "O"])))
    ndim = draw(st.integers(0, 5))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    n = int(np.prod(shape)) if shape else 1
    base = np.zeros(n * dtype.itemsize + 1, np.uint8)
    if draw(st.booleans()) and dtype.itemsize > 1:  # unaligned data
        a = base[1:].view(dtype)[:n]
    else:
        a = base[: n * dtype.itemsize].view(dtype)
    if dtype.kind in "biufc":
        a[...] = np.arange(n).astype(dtype, casting="unsafe") if n else a
    a = a.reshape(shape)
    if ndim:
        steps = tuple(draw(st.sampled_from([1, 2, -1])) for _ in range(ndim))
        a = a[tuple(slice(None, None, s) for s in steps)]
        a = a.transpose(draw(st.permutations(range(ndim))))
    if draw(st.booleans()):
        a.flags.writeable = False
    return a


@settings(max_examples=300, deadline=None)
@given(arrays())
def test_fast_path_matches_the_dlpack_route(arr):
    _check(arr)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_matches(dtype):
    a = np.zeros((2, 3), dtype=dtype)
    _check(a)
    _check(a.T)
    _check(a[:, ::2])


def test_odd_strides_and_high_ndim_match():
    raw = np.zeros(64, np.uint8)
    _check(np.lib.stride_tricks.as_strided(raw[:40].view("i4"), (3,), (3,)))  # 3 % 4 != 0
    _check(np.lib.stride_tricks.as_strided(raw[:8].view("f8"), (4, 2), (0, 0)))  # broadcast
    _check(np.zeros((1,) * 32))  # beyond the inline dimensions
    _check(np.zeros((2,) * 8, np.int16)[..., ::2])


def test_the_array_keeps_the_ndarray_alive():
    a = np.arange(1000.0)
    d = DLPackArray(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(np.from_dlpack(d), np.arange(1000.0))


def test_copy_and_device_requests_keep_their_route():
    a = np.arange(6.0).reshape(2, 3)[:, ::2]
    assert DLPackArray(a, copy=True).data_ptr != DLPackArray(a).data_ptr
    assert _outcome(a, True, False) == _outcome(a.view(Sub), True, False)
    assert _outcome(DLPackArray(a, device="cpu")) == _outcome(a.view(Sub))
