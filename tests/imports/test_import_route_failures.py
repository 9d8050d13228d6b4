"""Failures on every route of ``DLPackArray(obj)`` once the route is cached.

``_import_into`` hands each import on in tail position through pointers of a
noexcept type, and ``_fill`` checks the -1 itself instead of a try/finally.
So nothing but these tests holds the contract that Cython's own checks
would otherwise hold: a route that fails returns -1 with its error set, the error
reaches the caller unchanged, the array is left failed for good, the
source's memory is let go, and no error is left pending after a success.
Each case imports a good object first (the type's route is cached), then a
bad object of the same type through ``__new__`` + ``__init__``.
"""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest
from conftest import require
from failed_init import FAILED, failed_init

from dlpackarray import DLPackArray


def _pa():
    return require("pyarrow", "the Arrow routes' producer")


class Boom(Exception):
    """The producer's own error, which must reach the caller unchanged."""


class DLPackSource:
    """A plain ``__dlpack__`` producer (the cached plain-DLPack route)."""

    def __init__(self, arr, fail=False):
        self.arr = arr
        self.fail = fail

    def __dlpack__(self, **kwargs):
        if self.fail:
            raise Boom("dlpack refused")
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


class ArrowSource:
    """An Arrow-only producer (the cached instance-probe route)."""

    def __init__(self, arr, fail=None):
        self.arr = arr
        self.fail = fail

    def __arrow_c_array__(self, requested_schema=None):
        if self.fail == "raise":
            raise Boom("arrow refused")
        if self.fail == "pair":
            return (1, 2, 3)
        return self.arr.__arrow_c_array__(requested_schema)


class InterfaceSource:
    """An ``__array_interface__`` producer (the instance-probe route's
    interface arm), whose memory is tracked through a weak reference."""

    def __init__(self, arr):
        self.arr = arr
        self.__array_interface__ = arr.__array_interface__


class Tracked(np.ndarray):
    """An ndarray subclass that can be weakly referenced and is not the exact
    ndarray type (so it takes the DLPack route, not the ndarray fast path)."""


def _warm(source):
    """Imports ``source`` twice: the first fills the route cache, the second hits it."""
    for _ in range(2):
        DLPackArray(source)
        assert sys.exc_info() == (None, None, None)


def _bool_array():
    return _pa().array([True, False, True])


CASES = {
    # route: (good source, bad source, keywords, error type, error text)
    "plain DLPack": (
        lambda: DLPackSource(np.arange(3.0)),
        lambda: DLPackSource(np.arange(3.0), fail=True),
        {},
        Boom,
        "dlpack refused",
    ),
    "DLPack with a request": (
        lambda: DLPackSource(np.arange(3.0)),
        lambda: DLPackSource(np.arange(3.0)),
        {"device": (2, 0)},
        BufferError,
        None,
    ),
    "DLPack, the producer refusing a request": (
        lambda: DLPackSource(np.arange(3.0)),
        lambda: DLPackSource(np.arange(3.0), fail=True),
        {"copy": True},
        Boom,
        "dlpack refused",
    ),
    "copy argument": (
        lambda: DLPackSource(np.arange(3.0)),
        lambda: DLPackSource(np.arange(3.0)),
        {"copy": "yes"},
        TypeError,
        "copy must be None, True or False, got 'yes'",
    ),
    "stream argument": (
        lambda: DLPackSource(np.arange(3.0)),
        lambda: DLPackSource(np.arange(3.0)),
        {"stream": 5},
        ValueError,
        "stream=5 is not valid for CPU data: only None or -1 may be passed",
    ),
    "Arrow first": (
        _bool_array,
        _bool_array,
        {"copy": False},
        BufferError,
        "the Arrow data (bool) holds bit-packed booleans; making one tensor of it needs a "
        "copy and copy=False was given",
    ),
    "instance probes, producer error": (
        lambda: ArrowSource(_pa().array(np.arange(3.0))),
        lambda: ArrowSource(_pa().array(np.arange(3.0)), fail="raise"),
        {},
        Boom,
        "arrow refused",
    ),
    "instance probes, malformed pair": (
        lambda: ArrowSource(_pa().array(np.arange(3.0))),
        lambda: ArrowSource(_pa().array(np.arange(3.0)), fail="pair"),
        {},
        TypeError,
        None,
    ),
    "instance probes, interface then request": (
        lambda: InterfaceSource(np.arange(3.0)),
        lambda: InterfaceSource(np.arange(3.0)),
        {"device": (2, 0)},
        BufferError,
        None,
    ),
}


@pytest.mark.parametrize("route", sorted(CASES))
def test_a_cached_route_fails_cleanly(route):
    good, bad, kwargs, kind, text = CASES[route]
    _warm(good())
    for _ in range(2):  # both imports hit the cached route
        a, error = failed_init(bad(), **kwargs)
        assert type(error) is kind, (route, error)
        if text is not None:
            assert str(error) == text
        assert repr(a) == FAILED
        with pytest.raises(TypeError):
            a.__init__(good())  # failed for good
        # Nothing left pending: the next import of the same type succeeds.
        assert DLPackArray(good()).shape == (3,)
        assert sys.exc_info() == (None, None, None)


def test_a_failed_cached_import_lets_the_source_go():
    """The owner was set before the request failed: dropping it (with the
    error pending, set aside around the drop) frees the source."""
    _warm(Tracked(3))
    for _ in range(3):
        src = np.arange(3.0).view(Tracked)
        ref = weakref.ref(src)
        a, error = failed_init(src, device=(2, 0))
        assert type(error) is BufferError and repr(a) == FAILED
        del src, error
        gc.collect()
        assert ref() is None
