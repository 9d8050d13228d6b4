"""Ownership and lifetime: deleters run exactly once, sources stay alive exactly
as long as needed, nothing leaks, and deleters are safe on other threads and
during exception propagation."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
import threading
import tracemalloc
import weakref

import dlpack_ctypes as dc
import numpy as np
import pytest
from conftest import require, require_torch

from dlpackarray import DLPackArray, from_dlpack


class WeakBytes(bytearray):
    """A buffer exporter that supports weak references."""


@pytest.mark.parametrize("versioned", [True, False])
def test_deleter_called_exactly_once_through_consumers(versioned):
    p = dc.Producer(np.arange(6.0), versioned=versioned)
    x = DLPackArray(p.capsule())
    y = DLPackArray(x)  # a second array sharing the owner
    cap = x.__dlpack__(max_version=(1, 3))
    n = np.from_dlpack(y)
    mv = memoryview(x)
    del x
    assert p.deleter_calls == 0
    del y
    assert p.deleter_calls == 0
    consumed = DLPackArray(cap)
    del cap
    assert p.deleter_calls == 0
    del n
    assert p.deleter_calls == 0
    mv.release()
    assert p.deleter_calls == 0
    del consumed
    gc.collect()
    assert p.deleter_calls == 1


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_unconsumed_exported_capsule_runs_deleter_when_dropped(max_version):
    p = dc.Producer(np.arange(4), versioned=max_version is not None)
    x = DLPackArray(p.capsule())
    cap = x.__dlpack__(max_version=max_version)
    del x
    assert p.deleter_calls == 0
    del cap
    assert p.deleter_calls == 1


@pytest.mark.parametrize(
    "make_source",
    [lambda: np.arange(10.0), lambda: WeakBytes(b"x" * 64)],
    ids=["numpy", "buffer_exporter"],
)
def test_source_alive_while_any_user_exists(make_source):
    src = make_source()
    ref = weakref.ref(src)
    x = DLPackArray(src)
    del src
    assert ref() is not None
    cap = x.__dlpack__(max_version=(1, 3))
    del x
    assert ref() is not None
    consumer = np.from_dlpack(DLPackArray(cap))
    del cap
    assert ref() is not None
    del consumer
    gc.collect()
    assert ref() is None


def test_source_alive_while_torch_tensor_exists():
    torch = require_torch()
    src = np.arange(8.0)
    ref = weakref.ref(src)
    t = torch.from_dlpack(DLPackArray(src))
    del src
    gc.collect()
    assert ref() is not None
    assert t[3].item() == 3.0
    del t
    gc.collect()
    assert ref() is None


def test_refcounts_unchanged_across_loops():
    src = np.arange(16, dtype=np.int32).reshape(4, 4)
    raw = bytearray(32)
    before = (sys.getrefcount(src), sys.getrefcount(raw))
    for _ in range(200):
        x = DLPackArray(src)
        c1 = x.__dlpack__(max_version=(1, 3))
        c2 = x.__dlpack__()
        y = DLPackArray(c1)
        z = from_dlpack(c2)
        n = np.from_dlpack(y)
        m = memoryview(z)
        b = DLPackArray(raw)
        bc = b.__dlpack__(max_version=(1, 3), copy=True)
        del x, c1, c2, y, z, n, b, bc
        m.release()
    after = (sys.getrefcount(src), sys.getrefcount(raw))
    assert after == before


def test_deleter_runs_on_another_thread():
    torch = require_torch()
    p = dc.Producer(np.arange(5.0))
    src = np.arange(7.0)
    ref = weakref.ref(src)
    holder = [torch.from_dlpack(DLPackArray(p.capsule())), torch.from_dlpack(DLPackArray(src))]
    del src
    errors = []

    def drop():
        try:
            holder.clear()  # the last references die on this thread
        except BaseException as e:  # noqa: BLE001 -- any failure on the thread is reported below
            errors.append(e)

    th = threading.Thread(target=drop)
    th.start()
    th.join()
    assert not errors
    assert p.deleter_calls == 1
    gc.collect()
    assert ref() is None


def test_deleter_while_exception_propagates_c_level():
    """The consumed managed tensor is released while BufferError is being raised."""
    p = dc.Producer(np.arange(3.0))
    with pytest.raises(BufferError, match="cannot move data") as info:
        DLPackArray(p.capsule(), device=(2, 0))
    assert p.deleter_calls == 1
    assert info.value.__context__ is None


def test_deleter_while_exception_propagates_python_level():
    torch = require_torch()
    p = dc.Producer(np.arange(3.0))
    holder = [torch.from_dlpack(DLPackArray(p.capsule()))]
    try:
        try:
            raise KeyError("original")
        except KeyError as e:
            holder.clear()  # deleter runs while KeyError is the handled exception
            assert sys.exc_info()[1] is e
            raise
    except KeyError as e:
        assert e.args == ("original",)
        assert e.__context__ is None
    assert p.deleter_calls == 1


def test_gc_collects_cycles_holding_arrays():
    src = np.arange(4.0)
    ref = weakref.ref(src)

    class Holder:
        pass

    h = Holder()
    h.self = h
    h.array = DLPackArray(src)
    h.capsule = h.array.__dlpack__(max_version=(1, 3))
    del src, h
    gc.collect()
    assert ref() is None


def _malloc_in_use() -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("glibc mallinfo2 not available: cannot measure C heap use")

    class Mallinfo2(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    libc.mallinfo2.restype = Mallinfo2
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


def test_no_growth_over_many_iterations():
    """C heap (managed-tensor blocks, copies) and Python heap stay flat."""
    src = np.arange(64, dtype=np.float64).reshape(8, 8)[:, ::2]

    def cycle():
        x = DLPackArray(src)
        y = DLPackArray(x.__dlpack__(max_version=(1, 3)))
        z = from_dlpack(y.__dlpack__())
        c = DLPackArray(z, copy=True)
        memoryview(c).release()
        x.__dlpack__(max_version=(1, 3))  # dropped unconsumed
        return np.from_dlpack(z).sum()

    for _ in range(500):  # warm caches and free lists
        cycle()
    gc.collect()
    tracemalloc.start()
    c_before = _malloc_in_use()
    py_before = tracemalloc.get_traced_memory()[0]
    for _ in range(5000):
        cycle()
    gc.collect()
    py_growth = tracemalloc.get_traced_memory()[0] - py_before
    c_growth = _malloc_in_use() - c_before
    tracemalloc.stop()
    # One leaked managed tensor or copy per iteration would be >= 5000 * 100
    # bytes; allow a little allocator noise.
    assert py_growth < 64 * 1024
    assert c_growth < 128 * 1024


def test_gc_collects_cycles_through_a_buffer_exporter():
    """A source that refers back to its own DLPackArray is still collected:
    the Py_buffer's reference to the exporter is visible to the collector."""

    class Buf(bytearray):
        pass

    src = Buf(32)
    src.array = DLPackArray(src)
    src.view = memoryview(src.array)
    ref = weakref.ref(src)
    del src
    gc.collect()
    assert ref() is None


def test_failed_init_leaves_an_unusable_array():
    """A refused import must not leave a half-written descriptor that points
    at released memory, nor an array that answers as if it were empty."""
    a = DLPackArray.__new__(DLPackArray)
    with pytest.raises(BufferError):
        a.__init__(b"\x00" * 8, device=(2, 0))
    for read in (lambda: a.shape, lambda: a.data_ptr, lambda: memoryview(a)):
        with pytest.raises(ValueError, match="__init__ failed"):
            read()
    with pytest.raises(TypeError, match="cannot be initialised twice"):
        a.__init__(b"\x00" * 8)


def test_uninitialised_array_cannot_be_exported_before_init():
    a = DLPackArray.__new__(DLPackArray)
    with pytest.raises(ValueError, match="not initialised"):
        memoryview(a)
    a.__init__(bytearray(8))
    assert a.shape == (8,) and memoryview(a).nbytes == 8


def test_refused_capsule_is_released_although_the_caller_still_holds_it():
    src = np.arange(4.0)
    ref = weakref.ref(src)
    cap = DLPackArray(src).__dlpack__(max_version=(1, 3))
    del src
    with pytest.raises(BufferError):
        DLPackArray(cap, device=(2, 0))
    gc.collect()
    assert ref() is None  # the tensor's deleter ran although `cap` is alive
    with pytest.raises(ValueError, match="already been consumed"):
        DLPackArray(cap)


def _versioned_deleter_of(capsule):
    """Takes ownership of one of our versioned capsules (renames it) and
    returns (managed-tensor address, its deleter as a GIL-releasing ctypes
    function)."""
    api = ctypes.PyDLL(None)
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    api.PyCapsule_SetName(capsule, b"used_dltensor_versioned")
    # DLManagedTensorVersioned: version (8 bytes), manager_ctx, deleter.
    deleter_address = ctypes.c_void_p.from_address(address + 16).value
    # CFUNCTYPE (not PYFUNCTYPE): ctypes releases the GIL around the call, so
    # the deleter runs the way it would from a foreign, GIL-less thread.
    return address, ctypes.CFUNCTYPE(None, ctypes.c_void_p)(deleter_address)


def test_deleter_called_without_the_gil_takes_it():
    src = np.arange(8.0)
    ref = weakref.ref(src)
    cap = DLPackArray(src).__dlpack__(max_version=(1, 3))
    del src
    gc.collect()
    assert ref() is not None
    address, deleter = _versioned_deleter_of(cap)
    deleter(address)  # no GIL held here: must take it to drop the owner
    gc.collect()
    assert ref() is None
    del cap  # renamed: its destructor must not call the deleter again


def test_deleter_called_without_the_gil_from_threads():
    caps = [DLPackArray(np.arange(4.0)).__dlpack__(max_version=(1, 3)) for _ in range(64)]
    pairs = [_versioned_deleter_of(c) for c in caps]
    errors = []

    def run(chunk):
        try:
            for address, deleter in chunk:
                deleter(address)
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(pairs[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


SHUTDOWN_SCRIPT = r"""
import threading, numpy as np, torch
from dlpackarray import DLPackArray

# Capsules, arrays and consumer tensors still alive at exit, some in cycles.
keep = [DLPackArray(np.arange(10.0)).__dlpack__(max_version=(1, 3)) for _ in range(10)]
keep += [torch.from_dlpack(DLPackArray(bytearray(64))) for _ in range(10)]
class Node: pass
n = Node(); n.me = n; n.arr = DLPackArray(np.arange(3)); n.cap = n.arr.__dlpack__()

# A daemon thread keeps exchanging while the interpreter shuts down: its
# deleters may run during finalisation and must leak, not crash or hang.
# (Only NumPy consumers here: torch itself aborts when a daemon thread is
# inside its C++ code at shutdown, with or without dlpackarray.)
def churn():
    while True:
        a = DLPackArray(np.arange(100.0))
        x = np.from_dlpack(a)
        b = DLPackArray(a.__dlpack__(max_version=(1, 3)))
        m = memoryview(DLPackArray(bytearray(32)))
        del a, x, b, m
threading.Thread(target=churn, daemon=True).start()
print("exiting")
"""


def test_interpreter_shutdown_with_live_exports_is_clean():
    require("torch", "these tests exchange data with it")
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", SHUTDOWN_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "exiting" in proc.stdout
