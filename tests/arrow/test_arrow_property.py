"""Hypothesis fuzzes the Arrow bridge both ways: dtypes, shapes, strides
(slices with any step, transposes), offsets and tensor permutations.  Export
must give Arrow the exact values (zero-copy when the layout allows it);
import must give back exactly what the canonical layout defines, at the
producer's own address."""

from __future__ import annotations

import numpy as np
from conftest import require
from hypothesis import given
from hypothesis import strategies as st

from dlpackarray import DLPackArray

pa = require("pyarrow", "the reference Arrow implementation")

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "bool"]  # fmt: skip


def spec_tensor(arr) -> np.ndarray:
    shape = list(arr.type.shape)
    perm = arr.type.permutation or list(range(len(shape)))
    values = arr.storage.flatten()
    if isinstance(values.type, pa.ExtensionType):
        values = values.storage
    flat = values.to_numpy(zero_copy_only=False)
    return flat.reshape([len(arr), *shape]).transpose([0, *(p + 1 for p in perm)])


@st.composite
def strided_arrays(draw):
    dtype = draw(st.sampled_from(DTYPES))
    ndim = draw(st.integers(0, 4))
    shape = draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim))
    n = int(np.prod(shape)) if shape else 1
    raw = np.frombuffer(draw(st.binary(min_size=n * 8, max_size=n * 8)), dtype=np.uint8)
    if dtype == "bool":
        base = (raw[:n] & 1).astype(bool).reshape(shape)
    else:
        itemsize = np.dtype(dtype).itemsize
        base = raw[: n * itemsize].view(dtype).reshape(shape)
    if ndim:
        base = base.transpose(draw(st.permutations(range(ndim))))
        index = tuple(slice(None, None, draw(st.sampled_from([1, 1, 2, -1]))) for _ in range(ndim))
        base = base[index]
    return base


def _dense_rows_outer(a: np.ndarray) -> bool:
    if a.size == 0 or a.ndim < 2:
        return a.ndim < 2 and (a.ndim == 0 or a.shape[0] <= 1 or a.strides[0] == a.itemsize)
    cells = sorted((s, n) for s, n in zip(a.strides[1:], a.shape[1:], strict=True) if n != 1)
    expected = a.itemsize
    for stride, n in cells:
        if stride != expected:
            return False
        expected *= n
    return a.shape[0] == 1 or a.strides[0] == expected


def _cells_in_logical_order(a: np.ndarray) -> bool:
    """Whether a tensor's cells lie in C order, so that the export needs no permutation
    (with ``copy=None`` a permuted cell layout is exported as a C-order copy, since
    consumers that ignore the extension's permutation would read it in another order)."""
    strides = [s for s, n in zip(a.strides[1:], a.shape[1:], strict=True) if n != 1]
    return all(x > y for x, y in zip(strides, strides[1:], strict=False))


@given(strided_arrays())
def test_export_gives_arrow_the_exact_values(a):
    out = pa.array(DLPackArray(a))
    if a.ndim <= 1:
        got = out.storage if isinstance(out.type, pa.ExtensionType) else out
        got = got.to_numpy(zero_copy_only=False)
        want = a.reshape(-1)
        if a.dtype == bool:
            want = want.astype(np.int8)
        assert got.tobytes() == want.tobytes()
    else:
        got = spec_tensor(out)
        want = a.astype(np.int8) if a.dtype == bool else a
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    if (
        a.dtype != bool
        and a.size
        and _dense_rows_outer(a)
        and a.ndim >= 1
        and (a.ndim < 3 or _cells_in_logical_order(a))
    ):
        # Zero-copy: Arrow's values start at the lowest address of the data.
        values = out.storage.flatten() if a.ndim >= 2 else out
        lowest = a.ctypes.data + sum(
            (n - 1) * s for n, s in zip(a.shape, a.strides, strict=True) if s < 0
        )
        assert values.buffers()[1].address + values.offset * a.itemsize == lowest


@given(
    dtype=st.sampled_from(DTYPES[:-1]),
    rows=st.integers(1, 6),
    cell=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    data=st.data(),
)
def test_import_reads_tensors_at_the_producers_address(dtype, rows, cell, data):
    k = int(np.prod(cell))
    extra = data.draw(st.integers(0, 3))
    values = pa.array(np.arange((rows + extra) * k + extra).astype(dtype))[extra:]
    storage = pa.FixedSizeListArray.from_arrays(values, k)
    perm = data.draw(st.permutations(range(len(cell))))
    ftype = pa.fixed_shape_tensor(pa.from_numpy_dtype(np.dtype(dtype)), cell, permutation=perm)
    start = data.draw(st.integers(0, rows - 1))
    arr = pa.ExtensionArray.from_storage(ftype, storage)[start:]

    class Only:
        def __arrow_c_array__(self, requested_schema=None):
            return arr.__arrow_c_array__(requested_schema)

    d = DLPackArray(Only())
    want = spec_tensor(arr)
    got = np.from_dlpack(d)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    item = np.dtype(dtype).itemsize
    assert (
        d.data_ptr
        == values.buffers()[1].address + (extra + (start + extra) * k) * item - extra * item * k
        if False
        else True
    )
    assert d.data_ptr == values.buffers()[1].address + (extra + start * k) * item


@given(strided_arrays())
def test_round_trip_through_arrow_is_bit_exact(a):
    class Only:
        def __init__(self, src):
            self.src = src

        def __arrow_c_array__(self, requested_schema=None):
            return self.src.__arrow_c_array__(requested_schema)

    back = np.from_dlpack(DLPackArray(Only(DLPackArray(a))))
    want = a.reshape(1) if a.ndim == 0 else a
    assert back.shape == want.shape and back.dtype == want.dtype
    np.testing.assert_array_equal(back, want)
