"""B9's import floors (``b9_floor.DLPackBufferWrap``, ``DLPackSpecWrap``,
``ArrowSpecWrap``, ``consume_arrow``) read what the route reads.

The floor of ``np.asarray(DLPackArray(pa_array))`` is a minimal C wrapper that
NumPy reads through the buffer protocol.  A floor that read other memory,
another dtype, or went through another protocol would measure something else
and the benchmark would not say so; these tests pin it to pa_array's own
memory, and the benchmarks' floor statements to ours' result.  The spec
consumer floor must do what the DLPack Python spec asks of a consumer (device
query first, the capsule checked), and the Arrow one what the C data interface
leaves to a consumer reading a column as an array, or their rows would
understate what a conforming import costs.  The module is
C compiled here, so each check runs in a child interpreter.
"""

import os

import pytest
from conftest import assert_clean_exit, require, run_python

pa = require("pyarrow", "the Arrow array the floor wraps")
np = pytest.importorskip("numpy")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PRELUDE = f"""
import sys
sys.path.insert(0, {ROOT!r})
import numpy as np, pyarrow as pa
from benchmarks.cases_arrow import floor_module
Wrap = floor_module().DLPackBufferWrap
SpecWrap = floor_module().DLPackSpecWrap
ArrowWrap = floor_module().ArrowSpecWrap
"""


def _require_versioned_pyarrow_export() -> None:
    """The DLPack-route floors consume versioned capsules, which pyarrow exports
    from 26 on; an older pyarrow refuses ``max_version`` (and DLPackArray reads
    its arrays through Arrow, not DLPack, so there is no DLPack route to floor)."""
    try:
        pa.array(np.arange(2)).__dlpack__(max_version=(1, 3))
    except TypeError as e:
        pytest.skip(
            f"pyarrow {pa.__version__}: Array.__dlpack__ refuses max_version ({e}); "
            "B9's DLPack-route floors need pyarrow >= 26"
        )


def _run(body: str) -> None:
    proc = run_python(_PRELUDE + body, timeout=300)
    assert_clean_exit(proc, "b9_floor child")
    assert proc.stdout.strip().endswith("ok"), proc.stdout


def test_wrap_floor_reads_pa_arrays_memory_through_the_buffer_protocol():
    _require_versioned_pyarrow_export()
    _run(
        """
import ctypes
dtypes = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64")
for name in dtypes:
    whole = pa.array(np.arange(256).astype(name))
    for pa_array, kind in [(p, k) for p in (whole, whole.slice(3, 100), whole.slice(256))
                           for k in (Wrap, SpecWrap)]:
        expected = pa_array.to_numpy(zero_copy_only=True)
        w = kind(pa_array)
        x = np.asarray(w)
        case = (kind.__name__, name, len(pa_array))
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


def test_arrow_spec_floor_reads_the_column_dlpackarray_reads():
    _run(
        """
import ctypes
from benchmarks.cases_arrow import ArrowOnly
from dlpackarray import DLPackArray
from dlpackarray.testing import _abi

dtypes = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64")
for name in dtypes:
    whole = pa.array(np.arange(256).astype(name))
    for col in (whole, whole.slice(3, 100), whole.slice(256)):
        case = (name, col.offset, len(col))
        w = ArrowWrap(ArrowOnly(col))
        x, ours = np.asarray(w), np.asarray(DLPackArray(ArrowOnly(col)))
        assert x.dtype == ours.dtype and x.shape == ours.shape == (len(col),), case
        assert np.array_equal(x, ours), case
        if len(col):
            assert x.ctypes.data == ours.ctypes.data, case
            assert not x.flags.writeable, case
        assert isinstance(x.base, memoryview) and x.base.obj is w, case
        try:
            (ctypes.c_char * max(1, x.nbytes)).from_buffer(w)
        except (BufferError, TypeError):
            pass
        else:
            raise AssertionError(f"writable buffer of Arrow data {case}")
# A validity bitmap whose null count the producer left uncomputed (-1) is counted
# over the slice's own rows: the floor accepts exactly what DLPackArray accepts.
class Uncounted:
    def __init__(self, src):
        self.src = src
    def __arrow_c_array__(self, requested_schema=None):
        schema, array = self.src.__arrow_c_array__()
        _abi.ArrowArray.from_address(_abi.capsule_pointer(array)).null_count = -1
        return schema, array

with_null = pa.array([1.0, None] + [2.0] * 20)
verdicts = []
for col in (with_null, with_null.slice(2), with_null.slice(1, 3), with_null.slice(2, 0),
            with_null.slice(0, 1)):
    for src in (ArrowOnly(col), Uncounted(col)):
        try:
            ours = np.asarray(DLPackArray(src))
        except ValueError:
            ours = None
        try:
            x = np.asarray(ArrowWrap(src))
        except BufferError as e:
            assert "holds nulls" in str(e), str(e)
            x = None
        assert (x is None) == (ours is None), (col.offset, len(col), type(src).__name__)
        assert x is None or np.array_equal(x, ours)
        verdicts.append(x is None)
assert verdicts == [True] * 2 + [False] * 2 + [True] * 2 + [False] * 4, verdicts
print("ok")
"""
    )


def test_arrow_spec_floor_makes_each_check_and_leaks_no_refusal():
    _run(
        """
import ctypes
from dlpackarray.testing import _abi

F = floor_module()

class Mutated:
    # Hands out the floor producer's capsule pair with fields of a struct changed.
    def __init__(self, src, schema=(), array=(), buffer1=False):
        self.src, self.schema, self.array = src, dict(schema), dict(array)
        self.buffer1, self.kept = buffer1, []
    def __arrow_c_array__(self, requested_schema=None):
        schema, array = self.src.__arrow_c_array__()
        s = _abi.ArrowSchema.from_address(_abi.capsule_pointer(schema))
        a = _abi.ArrowArray.from_address(_abi.capsule_pointer(array))
        for k, v in self.schema.items():
            setattr(s, k, v)
        for k, v in self.array.items():
            setattr(a, k, v)
        if self.buffer1:
            a.buffers[1] = None
        self.kept.append(s)  # keeps a replaced format string alive
        return schema, array

class SamePair:
    # Hands out one capsule pair twice: the second time its array has been moved out.
    def __init__(self, src):
        self.pair = src.__arrow_c_array__()
    def __arrow_c_array__(self, requested_schema=None):
        return self.pair

a = np.arange(16, dtype=np.float32)
base = sys.getrefcount(a)
cases = [
    ({"schema": {"format": b"b"}}, "not a fixed-width primitive"),
    ({"schema": {"format": b"u"}}, "not a fixed-width primitive"),
    ({"schema": {"format": b"ff"}}, "not a fixed-width primitive"),
    ({"schema": {"format": b"+w:4"}}, "not a fixed-width primitive"),
    ({"schema": {"n_children": 1}}, "not a fixed-width primitive"),
    ({"array": {"n_buffers": 3}}, "buffers or children"),
    ({"array": {"n_buffers": 1}}, "buffers or children"),
    ({"array": {"n_children": 1}}, "buffers or children"),
    ({"array": {"offset": -1}}, "out of range"),
    ({"array": {"length": -1}}, "out of range"),
    ({"array": {"offset": 2**62}}, "out of range"),
    ({"array": {"length": 2**61, "offset": 1}}, "out of range"),
    ({"array": {"null_count": 1}}, "holds nulls"),
    ({"buffer1": True}, "no data buffer"),
]
for _ in range(20):
    for kwargs, words in cases:
        try:
            ArrowWrap(Mutated(F.Producer(a), **kwargs))
        except BufferError as e:
            assert words in str(e), (kwargs, str(e))
        else:
            raise AssertionError(f"accepted {kwargs}")
    twice = SamePair(F.Producer(a))
    w = ArrowWrap(twice)
    try:
        ArrowWrap(twice)
    except BufferError as e:
        assert "already been released" in str(e), str(e)
    else:
        raise AssertionError("a moved-out array accepted")
    del twice, w
# An uncomputed null count (-1) without a validity bitmap: no nulls.
assert np.array_equal(np.asarray(ArrowWrap(Mutated(F.Producer(a), array={"null_count": -1}))), a)
# The exact end of int64 byte counts is still accepted by the range check alone.
try:
    ArrowWrap(Mutated(F.Producer(a), array={"length": 2**61 - 1, "offset": 0}, buffer1=True))
except BufferError as e:
    assert "no data buffer" in str(e), str(e)
for bad, words in ((0, "capsule pair"), ((1,), "capsule pair"), ((), "capsule pair"),
                   (("x", "y"), "PyCapsule")):
    class Pair:
        def __arrow_c_array__(self, requested_schema=None, bad=bad):
            return bad
    try:
        ArrowWrap(Pair())
    except (TypeError, ValueError) as e:
        assert words in str(e), (bad, str(e))
    else:
        raise AssertionError(f"accepted {bad!r}")
# Every refused struct stayed in its capsule, whose destructor released it;
# every accepted one was released with its wrapper.
assert sys.getrefcount(a) == base, (sys.getrefcount(a), base)
print("ok")
"""
    )


def test_benchmark_floor_statements_read_what_ours_reads():
    _require_versioned_pyarrow_export()
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
    assert "DLPackSpecWrap(pa_array)" in stmts["spec consumer floor"], route
    check(eval(stmts["dlpackarray"], ns), eval(stmts["spec consumer floor"], ns), route)
stmts = dict(ai.ROUTES["import (Arrow capsules)"])
assert "ArrowSpecWrap(arrow_only)" in stmts["spec consumer floor"]
check(eval(stmts["dlpackarray"], ns), eval(stmts["spec consumer floor"], ns), "Arrow capsules")

cases = {c.name: c for c in ca.cases()}
for name, floor in (("B9/np.asarray/1KB", None), ("B9/import/1KB", ca._FLOOR_WRAP)):
    case = cases[name]
    floor = floor or case.floor
    stmts = {c.label: c.stmt for c in case.contenders}
    assert "DLPackBufferWrap(pa_array)" in stmts[floor], name
    ns = case.setup()
    check(eval(stmts["dlpackarray"], ns), eval(stmts[floor], ns), name)
    spec = ca._SPEC_WRAP_ASARRAY if floor == ca._FLOOR_WRAP_ASARRAY else ca._SPEC_WRAP
    assert "DLPackSpecWrap(pa_array)" in stmts[spec], name
    check(eval(stmts["dlpackarray"], ns), eval(stmts[spec], ns), name)
stmts = {c.label: c.stmt for c in cases["B9/import/1KB"].contenders}
ns = cases["B9/import/1KB"].setup()
check(eval(stmts["dlpackarray (Arrow capsules)"], ns), eval(stmts[ca._ARROW_SPEC], ns),
      "B9/import/1KB, Arrow capsules")
print("ok")
"""
    )


def test_spec_floor_queries_the_device_first_and_checks_the_capsule():
    _run(
        """
import ctypes
from dlpackarray.testing import _abi

class Producer:
    def __init__(self, device=(1, 0), major=None):
        self.a, self.device, self.major, self.calls = np.arange(6.0), device, major, []
    def __dlpack_device__(self):
        self.calls.append("device")
        return self.device
    def __dlpack__(self, **kwargs):
        self.calls.append(("dlpack", tuple(sorted(kwargs))))
        capsule = self.a.__dlpack__(**kwargs)
        if self.major is not None:
            m = _abi.DLManagedTensorVersioned.from_address(_abi.capsule_pointer(capsule))
            m.version.major = self.major
        return capsule

p = Producer()
x = np.asarray(SpecWrap(p))
assert np.array_equal(x, p.a) and np.shares_memory(x, p.a)
assert p.calls == ["device", ("dlpack", ("max_version",))], p.calls
assert Wrap(Producer()).__class__ is Wrap  # the plain floor asks no device

def refused(p, words):
    try:
        SpecWrap(p)
    except BufferError as e:
        assert words in str(e), (words, str(e))
    else:
        raise AssertionError(f"accepted: {words}")
    return p.calls

assert refused(Producer(device=(2, 0)), "host (CPU) data only") == ["device"]
assert len(refused(Producer(device=(1, 3)), "not the one __dlpack_device__ reported")) == 2
assert len(refused(Producer(major=2), "major version")) == 2
for bad in ((1,), "cpu", (1.5, 0)):
    try:
        SpecWrap(Producer(device=bad))
    except (TypeError, ValueError):
        pass
    else:
        raise AssertionError(f"device {bad!r} accepted")
# A refused capsule is left unused: the producer's destructor frees it.
q = Producer(major=2)
base = sys.getrefcount(q.a)
for _ in range(100):
    try:
        SpecWrap(q)
    except BufferError:
        pass
assert sys.getrefcount(q.a) == base
print("ok")
"""
    )


def test_floors_and_ours_pass_interned_keyword_names():
    # A Cython producer (pyarrow's __dlpack__) matches an interned keyword name
    # by pointer and any other by comparing strings (~110 instructions): a floor
    # that passed an uninterned "max_version" overstated the route's floor.
    _run(
        """
from dlpackarray import DLPackArray

class Producer:
    def __init__(self):
        self.a, self.names = np.arange(3.0), []
    def __dlpack_device__(self):
        return (1, 0)
    def __dlpack__(self, **kwargs):
        self.names.extend(kwargs)
        return self.a.__dlpack__(**kwargs)

for consumer in (Wrap, SpecWrap, DLPackArray):
    p = Producer()
    consumer(p)
    assert p.names, consumer
    for name in p.names:
        assert sys.intern(name) is name, (consumer.__name__, name)

# Method names too: one made per call misses CPython's type attribute cache.
from benchmarks.cases_arrow import floor_module
F = floor_module()
src = pa.array(np.arange(4.0))

class Recorder:
    def __init__(self):
        object.__setattr__(self, "names", [])
    def __getattribute__(self, name):
        object.__getattribute__(self, "names").append(name)
        return object.__getattribute__(self, name)
    def __arrow_c_array__(self, requested_schema=None):
        return src.__arrow_c_array__(requested_schema)
    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return src.__arrow_c_device_array__(requested_schema, **kwargs)

for consumer in (F.consume_arrow, F.consume_arrow_device, DLPackArray):
    r = Recorder()
    consumer(r)
    names = object.__getattribute__(r, "names")
    assert any(n.startswith("__arrow_c_") for n in names), (consumer, names)
    for name in names:
        assert sys.intern(name) is name, (consumer, name)
print("ok")
"""
    )


def test_device_aware_arrow_floor_reads_the_tensor_and_refuses_device_memory():
    _run(
        """
import ctypes
from dlpackarray import DLPackArray
from dlpackarray.testing import _abi

consume, consume_device = floor_module().consume_arrow, floor_module().consume_arrow_device
cells = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)
fst = pa.FixedShapeTensorArray.from_numpy_ndarray(cells)
ours = np.asarray(DLPackArray(fst))

def leaf_data(owner):
    # The moved ArrowArray's leaf values buffer (what the floor reads).
    a = _abi.ArrowArray.from_address(_abi.capsule_pointer(owner))
    while a.n_children == 1:
        a = a.children[0].contents
    return a.buffers[1]

for f in (consume, consume_device):
    owner = f(fst)
    assert leaf_data(owner) == ours.ctypes.data, f  # the memory DLPackArray(fst) reads

class Calls:
    def __init__(self, src, device_type=1, event=False):
        self.src, self.device_type, self.event, self.calls = src, device_type, event, []
    def __arrow_c_array__(self, requested_schema=None):
        self.calls.append("array")
        return self.src.__arrow_c_array__()
    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        self.calls.append("device")
        schema, array = self.src.__arrow_c_device_array__()
        d = _abi.ArrowDeviceArray.from_address(_abi.capsule_pointer(array))
        d.device_type = self.device_type
        if self.event:
            d.sync_event = 8
        return schema, array

c = Calls(fst)
consume_device(c)
consume(c)
assert c.calls == ["device", "array"], c.calls
for bad in (Calls(fst, device_type=2), Calls(fst, event=True)):
    try:
        consume_device(bad)
    except ValueError as e:
        assert "not host memory" in str(e)
    else:
        raise AssertionError("accepted device memory")
# A refused struct stays in its capsule, whose destructor releases it: nothing leaks
# (each leaked export of a fresh DLPackArray would keep a reference to x).
x = np.zeros((8, 4, 4), np.float32)
base = sys.getrefcount(x)
for _ in range(200):
    try:
        consume_device(Calls(DLPackArray(x), device_type=2))
    except ValueError:
        pass
assert sys.getrefcount(x) == base, (sys.getrefcount(x), base)
print("ok")
"""
    )


def test_icache_reader_takes_the_events_named_by_the_header():
    from benchmarks.arrow_instructions import read_cachegrind_summary

    out = ["desc: I1 cache: 32768 B, 64 B, 8-way associative\n",
           "events: Ir I1mr ILmr Dr D1mr\n", "fl=x.c\n", "fn=f\n", "1 5 2 0 1 0\n",
           "summary: 1234 56 7 89 10\n"]  # fmt: skip
    assert read_cachegrind_summary(out) == {"Ir": 1234, "I1mr": 56, "ILmr": 7, "Dr": 89,
                                            "D1mr": 10}  # fmt: skip
    for broken in (out[:-1], out[2:], [*out[:-1], "summary: 1 2\n"]):
        with pytest.raises(RuntimeError, match="events and summary"):
            read_cachegrind_summary(broken)
