"""Lifetime paths that must not crash the interpreter: the
collector clearing a buffer exporter still exported to a DLPackArray, deleters
run by threads that the interpreter ends while it shuts down, and a source
whose own code reads or exports the DLPackArray it is being imported into.
Each scenario runs in a subprocess (conftest.run_python)."""

from __future__ import annotations

import gc
import sys
import textwrap

import pytest
import shutdown_race
from conftest import assert_clean_exit, run_python

from dlpackarray import DLPackArray

# -- item 2: buffer exporters in collected cycles ----------------------------

# name -> (expression building the source, whether the collector may see it).
# The expressions run with numpy as np, array, mmap, ctypes and DLPackArray
# imported.
BUFFER_SOURCES = {
    "memoryview_cast": ('memoryview(bytearray(64)).cast("f")', False),
    "memoryview_slice": ("memoryview(bytearray(64))[8:40:2]", False),
    "memoryview_of_memoryview": ("memoryview(memoryview(bytearray(64)))", False),
    "memoryview_numpy": ("memoryview(np.arange(16.0))", False),
    "memoryview_numpy_view": ("memoryview(np.arange(32.0).reshape(4, 8)[:, ::2])", False),
    "memoryview_of_dlpackarray": ("memoryview(DLPackArray(bytearray(64)))", False),
    "numpy_view_of_memoryview": (
        "np.frombuffer(memoryview(bytearray(64)), dtype=np.float32)[2:]",
        False,
    ),
    "ctypes_array": ("(ctypes.c_double * 8)()", False),
    "ctypes_from_buffer": ("(ctypes.c_char * 64).from_buffer(bytearray(64))", False),
    "dlpackarray": ("DLPackArray(bytearray(64))", False),
    "bytes": ("bytes(64)", False),  # not tracked by the collector at all
    "bytearray": ("bytearray(64)", False),  # not tracked by the collector at all
    "array": ('array.array("d", range(8))', True),
    "mmap": ("mmap.mmap(-1, 4096)", True),
    "bytearray_subclass": ("BytearraySub(64)", True),
    "bytes_subclass": ("BytesSub(64)", True),
    "array_subclass": ('ArraySub("d", range(8))', True),
    "mmap_subclass": ("MmapSub(-1, 4096)", True),
}

PRELUDE = """
import array, ctypes, gc, mmap, sys, weakref
import numpy as np
from dlpackarray import DLPackArray

class BytearraySub(bytearray): pass
class BytesSub(bytes): pass
class ArraySub(array.array): pass
class MmapSub(mmap.mmap): pass
"""

CYCLE_SCRIPT = """
def make():
    return {expr}

def owners_of(a):
    return [o for o in gc.get_referents(a) if type(o).__name__ == "BufferOwner"]

# Every way a Py_buffer is taken: the buffer protocol, from_buffer, and an
# array interface whose data is a buffer object.
class Iface:
    def __init__(self, src):
        m = memoryview(src)
        self.src = src
        self.__array_interface__ = {{
            "version": 3, "shape": (m.nbytes,), "typestr": "|u1", "data": src}}

def arrays(src):
    yield DLPackArray(src)
    if memoryview(src).contiguous:  # the other two read raw bytes
        yield DLPackArray.from_buffer(src, "uint8")
        yield DLPackArray(Iface(src))

# Garbage cycles holding the array (alone, with a memoryview of it, with a
# view of it); the source is reachable only from them.
for extra in (lambda a: [], lambda a: [memoryview(a)], lambda a: [a.T]):
    for a in arrays(make()):
        c = [a] + extra(a)
        c.append(c)
        del a, c
        gc.collect()

# Cycles through the exporter itself, where it takes attributes.
for a in arrays(make()):
    src = make()
    try:
        src.array = a.__class__(src)
    except (AttributeError, TypeError):
        continue
    src.view = memoryview(src.array)
    del src, a
    gc.collect()
print("survived")
"""


@pytest.mark.parametrize("name", sorted(BUFFER_SOURCES))
def test_buffer_source_in_collected_cycle_does_not_crash(name):
    """The collector must not clear a memoryview source while the BufferOwner
    holds its export: that is "memoryview has 1 exported buffer", then a
    segfault when the buffer is released."""
    expr, _ = BUFFER_SOURCES[name]
    proc = run_python(PRELUDE + CYCLE_SCRIPT.format(expr=expr))
    assert_clean_exit(proc, name)
    assert "survived" in proc.stdout
    # tp_clear errors are only printed ("Exception ignored"), never raised.
    assert "Exception ignored" not in proc.stderr, proc.stderr


def _buffer_owners(array):
    return [o for o in gc.get_referents(array) if type(o).__name__ == "BufferOwner"]


@pytest.mark.parametrize("name", sorted(BUFFER_SOURCES))
def test_collector_sees_only_exporters_that_survive_clearing(name):
    """The exporter is visible to the collector exactly when clearing it cannot
    disturb the held buffer (see _collector_may_see in _buffer.pyx).  Clearing
    a ctypes object made by from_buffer, say, drops the memoryview that owns
    its memory: no crash, but a dangling buffer that only this test catches."""
    namespace: dict = {}
    exec(PRELUDE, namespace)
    expr, visible = BUFFER_SOURCES[name]
    src = eval(expr, namespace)
    arrays = [DLPackArray(src)]
    if memoryview(src).contiguous:
        arrays.append(DLPackArray.from_buffer(src, "uint8"))
    # DLPackArray(src) holds no Py_buffer for DLPack sources (NumPy arrays) and
    # shares the owner of a DLPackArray source.
    owners = [o for a in arrays for o in _buffer_owners(a)]
    assert owners
    for owner in owners:
        seen = [o for o in gc.get_referents(owner) if o is not None]
        if visible:
            assert seen == [src], f"{name}: exporter hidden from the collector"
        else:
            # Untracked objects (bytes, NumPy arrays) are ignored by the
            # collector whether or not they are traversed.
            seen = [o for o in seen if gc.is_tracked(o)]
            assert seen == [], f"{name}: the collector can clear {seen!r}"


@pytest.mark.parametrize(
    "name", sorted(n for n, (_, visible) in BUFFER_SOURCES.items() if visible and "sub" in n)
)
def test_cycles_through_clear_safe_exporters_are_collected(name):
    expr, _ = BUFFER_SOURCES[name]
    code = (
        PRELUDE
        + f"""
src = {expr}
src.array = DLPackArray(src)
src.typed = DLPackArray.from_buffer(src, "uint8")
src.view = memoryview(src.array)
class Marker: pass
src.marker = Marker()  # weak references to bytes subclasses are impossible
ref = weakref.ref(src.marker)
del src
gc.collect()
assert ref() is None, "the cycle through the exporter was not collected"
print("collected")
"""
    )
    proc = run_python(code)
    assert_clean_exit(proc, name)
    assert "collected" in proc.stdout


def test_python_buffer_class_in_collected_cycle():
    """PEP 688 classes (3.12+): the Py_buffer's exporter is CPython's wrapper
    around the memoryview __buffer__ returned, which must stay hidden."""
    if sys.version_info < (3, 12):
        pytest.skip("__buffer__ classes need Python 3.12 (PEP 688)")
    code = (
        PRELUDE
        + """
class Exporter:
    def __init__(self):
        self.data = bytearray(64)
    def __buffer__(self, flags):
        return memoryview(self.data).cast("f")
    def __release_buffer__(self, view):
        view.release()

for _ in range(3):
    e = Exporter()
    e.array = DLPackArray(e)
    c = [DLPackArray(Exporter()), e]
    c.append(c)
    del e, c
    gc.collect()
print("survived")
"""
    )
    proc = run_python(code)
    assert_clean_exit(proc)
    assert "Exception ignored" not in proc.stderr, proc.stderr


# -- item 3: deleters on threads that end during interpreter shutdown --------

# Daemon threads run the deleters of renamed (consumer-owned) capsules through
# ctypes, which releases the GIL around the call, while the main thread keeps
# the GIL busy and then exits.  A thread that waits for the GIL inside the
# deleter when finalization starts is ended by CPython with pthread_exit, a
# forced unwind through the deleter's frames.
DAEMON_SCRIPT = """
import ctypes, threading, time
import dlpack_ctypes as dc
from dlpackarray import DLPackArray

api = ctypes.PyDLL(None)
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
OFFSETS = {b"dltensor_versioned": dc.DLManagedTensorVersioned.deleter.offset,
           b"dltensor": dc.DLManagedTensor.deleter.offset}

def take(cap, name):
    address = api.PyCapsule_GetPointer(cap, name)
    api.PyCapsule_SetName(cap, b"used_" + name)
    return address, dc.DELETER(ctypes.c_void_p.from_address(address + OFFSETS[name]).value)

src = bytearray(64)
def churn(versioned):
    name = b"dltensor_versioned" if versioned else b"dltensor"
    while True:
        cap = DLPackArray(src).__dlpack__(max_version=(1, 3) if versioned else None)
        address, deleter = take(cap, name)
        deleter(address)  # without the GIL: the deleter takes it

for i in range(4):
    threading.Thread(target=churn, args=(i % 2 == 0,), daemon=True).start()
start = time.perf_counter()
while time.perf_counter() - start < 0.05:
    pass
"""

SHUTDOWN_RUNS = 24


@pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="CPython ends threads with pthread_exit (a forced unwind) on Linux/glibc",
)
def test_deleters_on_daemon_threads_during_shutdown_never_abort():
    """No run aborts with "terminate called without an active exception": the
    forced unwind of a daemon thread at exit must not reach noexcept C++ frames."""
    failures = shutdown_race.run_many(DAEMON_SCRIPT, SHUTDOWN_RUNS)
    assert not failures, f"{len(failures)}/{SHUTDOWN_RUNS} runs failed:\n" + failures[0]


# -- deleters on foreign threads racing the exit --------------------------------
# The deleters are the start routines of threads made with pthread_create:
# threads the interpreter has never seen, started in a burst as the script
# ends (shutdown_race.BURST).  Before the shutdown gate, a thread that had
# passed the finalizing check could call PyGILState_Ensure on an interpreter
# being torn down: about 1 run in 100 here (1 in 5 on a loaded machine)
# segfaulted.  The gate (python_shim.cpp) shuts from an atexit callback, while
# the interpreter is whole, and waits for the releases already inside, so no
# thread without the GIL enters CPython once finalization can begin.  CI runs
# it 200 times (DLPACKARRAY_SHUTDOWN_RACES).


@pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="starts threads with glibc's pthread_create through ctypes",
)
def test_deleters_on_foreign_c_threads_during_shutdown_never_abort():
    runs = shutdown_race.RACES
    failures = shutdown_race.run_many(shutdown_race.burst_script(shutdown_race.DLPACK_KINDS), runs)
    assert not failures, shutdown_race.failure_report(failures, runs)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's pthread_create")
@pytest.mark.parametrize("kind", shutdown_race.DLPACK_KINDS)
def test_deleter_on_foreign_thread_after_exit_began_leaks(kind):
    """Once exit has begun (atexit callbacks running), a deleter on a thread
    without the GIL leaves Python alone: the owner is leaked, not released.
    Before the gate the thread took the GIL and released it ("released")."""
    proc = run_python(shutdown_race.after_exit_began_script(kind))
    assert_clean_exit(proc)
    assert proc.stdout.split() == ["taken", "True", "leaked"], proc.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's pthread_create")
@pytest.mark.parametrize("kind", shutdown_race.DLPACK_KINDS)
def test_deleter_inside_python_when_exit_begins_finishes(kind):
    """A deleter already running Python code (the owner's finalizer) when the
    interpreter exits is waited for and finishes.  Before the gate the thread
    was ended by CPython half-way (no "finished")."""
    proc = run_python(shutdown_race.in_flight_script(kind))
    assert_clean_exit(proc)
    assert proc.stdout.split() == ["exiting", "finished"], proc.stdout


# -- item 4: a source that reads or exports the array being initialised ------

REENTRANT_PRELUDE = """
import numpy as np
from dlpackarray import DLPackArray

class Source:
    '''Its __array_interface__ is computed by code that uses the DLPackArray
    being initialised from it.'''
    def __init__(self, data, action):
        self.data = data
        self.action = action
        self.target = None
        self.kept = []

    @property
    def __array_interface__(self):
        self.action(self)
        return self.data.__array_interface__

data = np.arange(24.0).reshape(2, 3, 4)[:, ::2, 1:]
"""


def _run_reentrant(body: str):
    proc = run_python(REENTRANT_PRELUDE + textwrap.dedent(body))
    assert_clean_exit(proc)
    assert "checked" in proc.stdout
    return proc


# A DLPackArray is unusable until its __init__ returns, so
# the source's code sees errors, never the half-built array (nor an empty
# placeholder), and cannot re-initialise it.
NOT_READY = "not initialised yet: its __init__ is still running"


def test_reentrant_export_is_refused_and_leaves_no_stale_descriptor():
    """``a.shape`` is never the placeholder's ``(0,)``, and the memoryview's
    strides never come from a 1-entry stride array cached for the placeholder."""
    _run_reentrant(
        f"""
        def peek(src):
            for use in (lambda: memoryview(src.target), lambda: src.target.shape,
                        lambda: src.target.strides):
                try:
                    use()
                except ValueError as e:
                    assert {NOT_READY!r} in str(e), e
                    src.kept.append(e)
                else:
                    raise AssertionError("the array being initialised answered")

        src = Source(data, peek)
        a = DLPackArray.__new__(DLPackArray)
        src.target = a
        a.__init__(src)
        assert len(src.kept) == 3
        assert a.shape == data.shape, a.shape
        assert a.strides == tuple(s // 8 for s in data.strides), a.strides
        m = memoryview(a)
        assert m.shape == data.shape and m.strides == data.strides, (m.shape, m.strides)
        assert m.tolist() == data.tolist()
        assert np.array_equal(np.asarray(a), data)
        print("checked")
        """
    )


def test_reentrant_reads_are_refused():
    _run_reentrant(
        f"""
        seen = []
        def look(src):
            t = src.target
            for name in ("shape", "strides", "ndim", "size", "nbytes", "dtype", "data_ptr"):
                try:
                    getattr(t, name)
                except ValueError as e:
                    seen.append(str(e))
            try:
                bytes(memoryview(t))
            except ValueError as e:
                seen.append(str(e))
            seen.append(repr(t))

        src = Source(data, look)
        a = DLPackArray.__new__(DLPackArray)
        src.target = a
        a.__init__(src)
        assert len(seen) == 9 and all({NOT_READY!r} in s for s in seen[:8]), seen
        assert seen[8] == "<DLPackArray (initialising)>", seen
        assert a.shape == data.shape
        print("checked")
        """
    )


def test_reentrant_initialisation_is_refused_and_the_outer_import_stands():
    _run_reentrant(
        """
        def init(src):
            try:
                src.target.__init__(bytearray(8))
            except TypeError as e:
                assert "cannot be initialised twice (its first initialisation is still " \
                    "running)" in str(e), e
                src.kept.append(e)

        src = Source(data, init)
        a = DLPackArray.__new__(DLPackArray)
        src.target = a
        a.__init__(src)
        assert len(src.kept) == 1
        assert a.shape == data.shape and np.array_equal(np.asarray(a), data)
        print("checked")
        """
    )


def test_reentrant_shape_entry_cannot_export_a_half_written_descriptor():
    """An ``__index__`` in the shape runs while the shape is being parsed; an
    export taken then would describe half an import (data NULL, new shape)."""
    _run_reentrant(
        f"""
        class Dim:
            def __init__(self, n, src):
                self.n, self.src = n, src
            def __index__(self):
                try:
                    memoryview(self.src.target)
                except ValueError as e:
                    self.src.seen = str(e)
                return self.n

        class Src2:
            def __init__(self):
                self.data = np.arange(6.0)
                self.target = None
                self.seen = None
            @property
            def __array_interface__(self):
                d = dict(self.data.__array_interface__)
                d["shape"] = (Dim(2, self), Dim(3, self))
                return d

        src = Src2()
        a = DLPackArray.__new__(DLPackArray)
        src.target = a
        a.__init__(src)
        assert {NOT_READY!r} in src.seen, src.seen
        assert a.shape == (2, 3)
        assert memoryview(a).tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        print("checked")
        """
    )
