"""Views of more dimensions than fit inline in the descriptor (8) move their
shape and strides to the heap; every path that builds or copies a view must
keep them intact up to the 64-dimension limit."""

import numpy as np
import pytest

from dlpackarray import MAX_NDIM, DLPackArray, from_dlpack


def _strided(ndim: int) -> np.ndarray:
    base = np.arange(2 ** min(ndim, 12) * 3, dtype=np.int16)
    shape = (2,) * min(ndim, 12) + (1,) * (ndim - min(ndim, 12))
    a = base[: 2 ** min(ndim, 12)].reshape(shape)
    return a.transpose(tuple(reversed(range(ndim))))


@pytest.mark.parametrize("ndim", [7, 8, 9, 12, 33, MAX_NDIM])
def test_dlpack_buffer_and_interface_paths_keep_every_dimension(ndim):
    src = _strided(ndim)
    for a in (
        DLPackArray(src),  # __dlpack__
        DLPackArray(memoryview(src)),  # buffer protocol
        DLPackArray(type("I", (), {"__array_interface__": src.__array_interface__})()),
        DLPackArray(type("S", (), {"__array_struct__": src.__array_struct__})()),
    ):
        assert a.ndim == ndim
        assert a.shape == src.shape
        assert a.strides == tuple(s // src.itemsize for s in src.strides)
        np.testing.assert_array_equal(np.from_dlpack(a), src)
        copy = DLPackArray(a)  # descriptor copy
        assert copy.shape == src.shape and copy.strides == a.strides
        np.testing.assert_array_equal(np.asarray(a.copy()), src)
        np.testing.assert_array_equal(np.from_dlpack(from_dlpack(a)), src)


def test_indexing_grows_past_the_inline_room():
    src = np.arange(2**8, dtype=np.uint8).reshape((2,) * 8)
    a = DLPackArray(src)
    v = a[None, ..., None, ::-1]
    assert v.ndim == 10
    np.testing.assert_array_equal(np.asarray(v), src[None, ..., None, ::-1])
    w = v[0, 1, 0]
    np.testing.assert_array_equal(np.asarray(w), src[None, ..., None, ::-1][0, 1, 0])


def test_reshape_and_transpose_past_the_inline_room():
    src = np.arange(2**10, dtype=np.float32)
    a = DLPackArray(src).reshape((2,) * 10)
    np.testing.assert_array_equal(np.asarray(a), src.reshape((2,) * 10))
    axes = tuple(reversed(range(10)))
    np.testing.assert_array_equal(np.asarray(a.transpose(axes)), src.reshape((2,) * 10).T)
    flat = a.transpose(axes).reshape(-1, order="F")
    np.testing.assert_array_equal(np.asarray(flat), src)
    too_many = (1,) * (MAX_NDIM + 1)
    with pytest.raises(ValueError, match="at most 64"):
        a.reshape(too_many)
    with pytest.raises(IndexError, match="more than 64"):
        DLPackArray(np.zeros((1,) * MAX_NDIM))[(None,) + (Ellipsis,)]
