"""The garbage collector sees every DLPackArray that can be part of a cycle.

An array's only reference that can lead back to it is its owner (the shape
and strides tuples hold ints).  Pinned here, for every kind of owner the
constructors make, on fresh instances and on instances reused from the type's
freelist:

- the invariant: an array whose referents include a GC object is tracked;
- the point of it: a cycle through such an owner is collected;
- a failed import holds nothing the collector would need to follow.
"""

from __future__ import annotations

import ctypes
import gc
import pickle
import sys
import weakref

import c_api_ctypes
import dlpack_ctypes as dc
import numpy as np
import pytest
from conftest import require, require_torch

from dlpackarray import DLPackArray, from_dlpack

_HAVE_GC = 1 << 14  # Py_TPFLAGS_HAVE_GC


def _is_gc_object(o) -> bool:
    return bool(type(o).__flags__ & _HAVE_GC)


def _churn():
    # Makes and drops more arrays than a freelist keeps, so the next instance
    # is most often a reused one.
    arrays = [DLPackArray(np.zeros(1)) for _ in range(32)]
    del arrays


class _Interface:
    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


class _Struct:
    def __init__(self, a):
        self._a = a

    @property
    def __array_struct__(self):
        return self._a.__array_struct__


class _Producer:
    """A DLPack producer of its own: the owner is the consumed capsule."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class _Bytes(bytearray):
    pass


class _ArrowOnly:
    """Arrow's PyCapsule interface and nothing else: the owner is an Arrow owner."""

    def __init__(self, arrow_array):
        self._a = arrow_array

    def __arrow_c_array__(self, requested_schema=None):
        return self._a.__arrow_c_array__(requested_schema)


def _from_data(base: np.ndarray, owner):
    """DLPackArray_FromData over ``base``'s memory, kept alive by ``owner``."""
    fn = c_api_ctypes.from_data_prototype(ctypes.py_object)(c_api_ctypes.table().from_data)
    shape = (ctypes.c_int64 * 1)(base.size)
    return fn(base.ctypes.data, 1, shape, None, dc.DLDataType(2, 64, 1), dc.DLDevice(1, 0), 0,
              owner, None, None)  # fmt: skip


def _sources():
    """name -> a function making a fresh DLPackArray, one per owner kind."""
    x = np.arange(8.0)

    def pa():
        return require("pyarrow", "an Arrow owner kind")

    def torch():
        return require_torch()

    return {
        "ndarray": lambda: DLPackArray(x),
        "ndarray slice": lambda: DLPackArray(x[::2]),
        "dlpack producer": lambda: DLPackArray(_Producer(x)),
        "capsule": lambda: DLPackArray(x.__dlpack__(max_version=(1, 3))),
        "legacy capsule": lambda: DLPackArray(x.__dlpack__()),
        "torch": lambda: DLPackArray(torch().arange(4)),
        "pyarrow (DLPack)": lambda: DLPackArray(pa().array(x)),
        "arrow capsules": lambda: DLPackArray(_ArrowOnly(pa().array(x))),
        "from_dlpack": lambda: from_dlpack(x),
        "copy": lambda: DLPackArray(x, copy=True),
        "another DLPackArray": lambda: DLPackArray(DLPackArray(x)),
        "view": lambda: DLPackArray(x)[1:],
        "reshape": lambda: DLPackArray(x).reshape((2, 4)),
        "bytes": lambda: DLPackArray(b"abcd"),
        "bytearray": lambda: DLPackArray(bytearray(4)),
        "memoryview": lambda: DLPackArray(memoryview(bytearray(4))),
        "from_buffer": lambda: DLPackArray.from_buffer(bytearray(8), "uint8"),
        "array interface": lambda: DLPackArray(_Interface(x)),
        "array struct": lambda: DLPackArray(_Struct(x)),
        "pickled": lambda: pickle.loads(pickle.dumps(DLPackArray(x), protocol=5)),
        "C API, owner a list": lambda: _from_data(x, [x]),
        "C API, owner an ndarray": lambda: _from_data(x, x),
    }


_NAMES = [
    "ndarray", "ndarray slice", "dlpack producer", "capsule", "legacy capsule", "torch",
    "pyarrow (DLPack)", "arrow capsules", "from_dlpack", "copy", "another DLPackArray", "view",
    "reshape", "bytes", "bytearray", "memoryview", "from_buffer", "array interface",
    "array struct", "pickled", "C API, owner a list", "C API, owner an ndarray",
]  # fmt: skip


def test_every_source_kind_is_listed():
    assert sorted(_sources()) == sorted(_NAMES)


@pytest.mark.parametrize("name", _NAMES)
def test_an_array_holding_a_gc_object_is_tracked(name):
    make = _sources()[name]
    for _ in range(3):  # the first may be a fresh allocation, the rest reused
        _churn()
        a = make()
        assert a.nbytes >= 0  # ready
        held = [o for o in gc.get_referents(a) if _is_gc_object(o)]
        if held:
            assert gc.is_tracked(a), f"{name}: holds {held!r} but is untracked"
        del a


def _cycle_through(make_source):
    """An object whose array's owner leads back to the object: collected?"""
    _churn()
    src = make_source()
    src.array = DLPackArray(src)
    ref = weakref.ref(src)
    del src
    gc.collect()
    return ref() is None


@pytest.mark.parametrize(
    "make_source",
    [
        lambda: _Interface(np.arange(3.0)),
        lambda: _Struct(np.arange(3.0)),
        lambda: _Bytes(8),
    ],
    ids=["array interface", "array struct", "buffer"],
)
def test_cycles_through_an_owner_are_collected(make_source):
    assert _cycle_through(make_source)


def test_cycles_through_a_c_api_owner_are_collected():
    class Holder:
        pass

    x = np.arange(4.0)
    for _ in range(3):
        _churn()
        h = Holder()
        h.array = _from_data(x, h)
        ref = weakref.ref(h)
        del h
        gc.collect()
        assert ref() is None


class _Refuses:
    def __dlpack__(self, **kwargs):
        raise BufferError("refused on purpose")

    def __dlpack_device__(self):
        return (1, 0)


class _BadInterface:
    """An array interface whose shape validate() refuses, after its owner was taken."""

    def __init__(self):
        self._buf = np.zeros(4)
        self.__array_interface__ = {
            "version": 3, "shape": (-1,), "typestr": "<f8",
            "data": (self._buf.ctypes.data, False),
        }  # fmt: skip


@pytest.mark.parametrize(
    "make_source, error",
    [(_Refuses, BufferError), (_BadInterface, ValueError)],
    ids=["refused", "invalid array interface"],
)
def test_a_failed_import_holds_nothing_for_the_collector(make_source, error):
    # Whether a failed array is tracked then does not matter: it holds no GC object.
    for _ in range(3):
        _churn()
        a = DLPackArray.__new__(DLPackArray)  # most often a reused instance
        src = make_source()
        # Relative to the count before the import: how the interpreter counts
        # a local's own references differs between versions (3.14 borrows them).
        held = sys.getrefcount(src)
        with pytest.raises(error):
            a.__init__(src)
        assert not [o for o in gc.get_referents(a) if _is_gc_object(o)]
        assert sys.getrefcount(src) == held  # the source was let go
        assert not any(r is a for r in gc.get_referrers(src))
        del a, src
    gc.collect()
