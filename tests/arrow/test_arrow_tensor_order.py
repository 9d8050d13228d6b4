"""The cell order of an exported N-D tensor whose cell dimensions are
permuted (a dense array such as ``x.transpose(0, 2, 1)``).

arrow.fixed_shape_tensor's ``permutation`` can describe such an array without
a copy, but DuckDB, polars and nanoarrow ignore it and read each cell's
storage in memory order.  So (docs/arrow.md, "Permuted cells"):

* with ``copy=None`` and no request for the extension type (requested_schema
  None, or nested fixed-size lists), the cells go out in logical (C) order,
  copied: the storage read without the extension equals ``x``;
* when the consumer requests arrow.fixed_shape_tensor, or ``copy=False``
  forbids the copy, they go out zero-copy in memory order with the
  permutation, and the extension's rule reads them back as ``x``.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require
from hypothesis import given
from hypothesis import strategies as st

from dlpackarray import DLPackArray

pa = require("pyarrow", "the reference Arrow consumer")


def storage_cells(arr) -> np.ndarray:
    """Each row's storage as a flat cell, read the way a consumer that ignores
    the extension reads it (memory order)."""
    return arr.storage.flatten().to_numpy(zero_copy_only=False).reshape(len(arr), -1)


def spec_tensor(arr) -> np.ndarray:
    """The canonical extension's reading: cells C-ordered in the physical
    ``shape``; logical dimension i is physical dimension ``permutation[i]``."""
    shape = list(arr.type.shape)
    perm = arr.type.permutation or list(range(len(shape)))
    phys = storage_cells(arr).reshape([len(arr), *shape])
    return phys.transpose([0, *(p + 1 for p in perm)])


def values_address(arr) -> int:
    values = arr.storage.values
    return values.buffers()[1].address + values.offset * values.type.bit_width // 8


@st.composite
def permuted(draw):
    """A dense array whose rows are outermost and whose cell dimensions
    (2 to 4 of them, extents 2-4) are stored in a non-identity order."""
    ncell = draw(st.integers(2, 4))
    cell = draw(st.lists(st.integers(2, 4), min_size=ncell, max_size=ncell))
    order = draw(st.permutations(range(ncell)).filter(lambda p: list(p) != sorted(p)))
    rows = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(["int16", "float32", "float64"]))
    physical = np.arange(rows * int(np.prod(cell))).astype(dtype)
    physical = physical.reshape([rows, *(cell[i] for i in order)])
    # Logical dimension order[k] is physical dimension k.
    return physical.transpose([0, *(1 + int(np.argsort(order)[i]) for i in range(ncell))])


@given(permuted())
def test_default_export_is_logical_order_for_consumers_that_ignore_permutation(x):
    """copy=None without a request: no permutation, and the storage a
    permutation-blind consumer reads equals the array in C order."""
    assert not x.flags.c_contiguous
    out = pa.array(DLPackArray(x))
    assert out.type.permutation is None
    assert list(out.type.shape) == list(x.shape[1:])
    np.testing.assert_array_equal(storage_cells(out), x.reshape(len(x), -1))
    np.testing.assert_array_equal(out.to_numpy_ndarray(), x)
    assert values_address(out) != x.ctypes.data  # a C-ordered copy


@given(permuted())
def test_requesting_the_extension_or_copy_false_is_zero_copy_with_permutation(x):
    """A consumer that requests arrow.fixed_shape_tensor (it reads the
    permutation), or copy=False, gets the memory as it is: the storage is in
    memory order and the extension's rule gives the array back."""
    d = DLPackArray(x)
    tensor_type = pa.fixed_shape_tensor(pa.from_numpy_dtype(x.dtype), list(x.shape[1:]))
    for kwargs in ({"requested_schema": tensor_type.__arrow_c_schema__()}, {"copy": False}):
        out = pa.Array._import_from_c_capsule(*d.__arrow_c_array__(**kwargs))
        assert out.type.permutation is not None
        assert values_address(out) == x.ctypes.data
        np.testing.assert_array_equal(spec_tensor(out), x)
        memory_order = np.lib.stride_tricks.as_strided(x, (x.size,), (x.itemsize,), writeable=False)
        np.testing.assert_array_equal(storage_cells(out).ravel(), memory_order)


@given(permuted())
def test_nested_list_request_is_logical_order(x):
    """Nested fixed-size lists carry no permutation: always C order."""
    want = pa.from_numpy_dtype(x.dtype)
    for n in reversed(x.shape[1:]):
        want = pa.list_(want, n)
    out = pa.array(DLPackArray(x), type=want)
    assert out.type == want and out.to_pylist() == x.tolist()


def _x():
    return np.arange(2 * 2 * 3, dtype=np.int64).reshape(2, 2, 3).transpose(0, 2, 1)


def test_duckdb_sees_logical_order():
    """DuckDB reads the storage and ignores the permutation: the default export
    shows it the array's logical (C) order."""
    duckdb = require("duckdb", "a consumer that ignores the tensor permutation")
    x = _x()
    d = DLPackArray(x)  # noqa: F841 -- DuckDB's replacement scan finds it by name
    rows = duckdb.sql("SELECT * FROM d AS t(v)").fetchall()
    assert [list(r[0]) for r in rows] == x.reshape(len(x), -1).tolist()


def test_polars_sees_logical_order():
    """polars keeps the extension's storage and ignores the permutation."""
    pl = require("polars", "a consumer that ignores the tensor permutation")
    x = _x()
    s = pl.Series(DLPackArray(x))
    assert [list(r) for r in s.to_list()] == x.reshape(len(x), -1).tolist()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_nanoarrow_sees_logical_order():
    """nanoarrow reads an unregistered extension as its storage."""
    na = require("nanoarrow", "a consumer that ignores the tensor permutation")
    x = _x()
    got = na.Array(DLPackArray(x)).to_pylist()
    assert [list(r) for r in got] == x.reshape(len(x), -1).tolist()
