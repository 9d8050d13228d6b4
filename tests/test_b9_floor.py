"""B9's DLPack floor (``b9_floor.DLPackBufferWrap``) reads what the route reads.

The floor of ``np.asarray(DLPackArray(pa_array))`` is a minimal C wrapper that
NumPy reads through the buffer protocol.  A floor that read other memory,
another dtype, or went through another protocol would measure something else
and the benchmark would not say so; these tests pin it to pa_array's own
memory, and the benchmarks' floor statements to ours' result.  The module is
C compiled here, so each check runs in a child interpreter.
"""

import os

import pytest
from conftest import assert_clean_exit, require, run_python

require("pyarrow", "the Arrow array the floor wraps")
pytest.importorskip("numpy")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PRELUDE = f"""
import sys
sys.path.insert(0, {ROOT!r})
import numpy as np, pyarrow as pa
from benchmarks.cases_arrow import floor_module
Wrap = floor_module().DLPackBufferWrap
"""


def _run(body: str) -> None:
    proc = run_python(_PRELUDE + body, timeout=300)
    assert_clean_exit(proc, "b9_floor child")
    assert proc.stdout.strip().endswith("ok"), proc.stdout


def test_wrap_floor_reads_pa_arrays_memory_through_the_buffer_protocol():
    _run(
        """
import ctypes
dtypes = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64")
for name in dtypes:
    whole = pa.array(np.arange(256).astype(name))
    for pa_array in (whole, whole.slice(3, 100), whole.slice(256)):
        expected = pa_array.to_numpy(zero_copy_only=True)
        w = Wrap(pa_array)
        x = np.asarray(w)
        case = (name, len(pa_array))
        assert x.dtype == expected.dtype and x.shape == expected.shape, case
        assert np.array_equal(x, expected), case
        if len(pa_array):  # NumPy makes any empty array writeable
            assert x.ctypes.data == expected.ctypes.data, case
            assert not x.flags.writeable, case
        # np.asarray took the buffer protocol: its base is a view of the wrapper.
        assert isinstance(x.base, memoryview) and x.base.obj is w, case
        assert x.base.readonly, case
        with memoryview(w) as m:  # a read-only request is fine ...
            assert m.readonly and m.nbytes == x.nbytes, case
        try:
            (ctypes.c_char * max(1, x.nbytes)).from_buffer(w)  # ... a writable one is not
        except (BufferError, TypeError):
            pass
        else:
            raise AssertionError(f"writable buffer of read-only DLPack data {case}")
print("ok")
"""
    )


def test_wrap_floor_honours_strides_writability_and_calls_the_deleter():
    _run(
        """
a = np.arange(24, dtype=np.float64).reshape(4, 6)
base = sys.getrefcount(a)
for src in (a, a[:, ::2], a[1:, 2:5], a[::-1]):
    w = Wrap(src)
    x = np.asarray(w)
    assert np.array_equal(x, src) and x.strides == src.strides, src.strides
    assert x.flags.writeable and np.shares_memory(x, src)
    x[0, 0] = -1.0
    assert src[0, 0] == -1.0
    del w, x
assert sys.getrefcount(a) == base  # NumPy's deleter ran: its reference is gone
try:
    memoryview(Wrap(a[:, ::2])).cast("B")
except TypeError:
    pass
else:
    raise AssertionError("a strided view passed as C-contiguous")
print("ok")
"""
    )


def test_benchmark_floor_statements_read_what_ours_reads():
    # The statements the two harnesses count and time, evaluated as they are
    # written there: each floor's array is ours' array (same memory and values).
    require("torch", "the B9 import cases' setup imports it")
    _run(
        """
from benchmarks import arrow_instructions as ai, cases_arrow as ca

def check(ours, floor, what):
    x, y = np.asarray(ours), np.asarray(floor)
    assert x.dtype == y.dtype and np.array_equal(x, y), what
    assert x.ctypes.data == y.ctypes.data, what

ns = {}
exec(ai.SETUP.format(polars=False, floor_path=floor_module().__file__), ns)
for route in ("import (DLPack route)", "np.asarray(DLPackArray(pa_array))"):
    stmts = dict(ai.ROUTES[route])
    assert "DLPackBufferWrap(pa_array)" in stmts["floor"], route
    check(eval(stmts["dlpackarray"], ns), eval(stmts["floor"], ns), route)

cases = {c.name: c for c in ca.cases()}
for name, floor in (("B9/np.asarray/1KB", None), ("B9/import/1KB", ca._FLOOR_WRAP)):
    case = cases[name]
    floor = floor or case.floor
    stmts = {c.label: c.stmt for c in case.contenders}
    assert "DLPackBufferWrap(pa_array)" in stmts[floor], name
    ns = case.setup()
    check(eval(stmts["dlpackarray"], ns), eval(stmts[floor], ns), name)
print("ok")
"""
    )
