"""DLPackArray(x)'s fast constructor, its reused instances and the cached
plain-__dlpack__ import.

The fast path must be indistinguishable from ``__new__`` + ``__init__``: the
same view or the same error, the producer asked the same questions exactly
once, and an instance reused from the type's freelist starting as clean as a
fresh allocation.
"""

import weakref

import numpy as np
import pytest
from conftest import require

from dlpackarray import DLPackArray


class CountingProducer:
    """Forwards to an ndarray and counts the protocol calls it receives."""

    def __init__(self, arr, refuse_after=None):
        self.arr = arr
        self.device_calls = 0
        self.dlpack_calls = 0
        self.refuse_after = refuse_after

    def __dlpack_device__(self):
        self.device_calls += 1
        return self.arr.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self.dlpack_calls += 1
        if self.refuse_after is not None and self.dlpack_calls > self.refuse_after:
            raise BufferError("CountingProducer: refused on purpose")
        return self.arr.__dlpack__(**kwargs)


def _generic(obj, **kwargs):
    a = DLPackArray.__new__(DLPackArray)
    a.__init__(obj, **kwargs)
    return a


def _outcome(make, obj):
    try:
        a = make(obj)
    except Exception as e:  # noqa: BLE001 - the outcome under comparison
        return ("error", type(e), str(e))
    return ("ok", repr(a), np.asarray(a).tobytes())


def _pa():
    return require("pyarrow", "an Arrow PyCapsule producer")


SOURCES = {
    "pyarrow": lambda: _pa().array(np.arange(6, dtype=np.float32)),
    "ndarray": lambda: np.arange(12).reshape(3, 4)[:, ::2],
    "bytes": lambda: b"abcdef",
    "memoryview": lambda: memoryview(bytearray(range(8))).cast("H"),
    "capsule": lambda: np.arange(5.0).__dlpack__(max_version=(1, 3)),
    "legacy capsule": lambda: np.arange(5.0).__dlpack__(),
    "used capsule": lambda: _used_capsule(),
    "not a capsule": lambda: object(),
    "pyarrow with nulls": lambda: _pa().array([1.0, None]),
    "counting": lambda: CountingProducer(np.arange(4)),
    "zero-d": lambda: np.float64(2.5),
}


def _used_capsule():
    c = np.arange(3).__dlpack__(max_version=(1, 3))
    DLPackArray(c)
    return c


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_fast_constructor_matches_new_plus_init(name):
    # Twice each, so that the per-type route caches are filled, then hit.
    for _ in range(2):
        assert _outcome(DLPackArray, SOURCES[name]()) == _outcome(_generic, SOURCES[name]())


def test_keyword_and_arity_calls_keep_the_generated_constructor():
    with pytest.raises(TypeError, match="takes exactly 1 positional argument"):
        DLPackArray()
    with pytest.raises(TypeError, match="takes exactly 1 positional argument"):
        DLPackArray(b"ab", b"cd")
    with pytest.raises(TypeError):
        DLPackArray(b"ab", bogus=1)
    a = DLPackArray(np.arange(3), copy=True)
    assert np.asarray(a).tolist() == [0, 1, 2]


def test_subclasses_construct_through_their_own_init():
    calls = []

    class Sub(DLPackArray):
        def __init__(self, obj, tag):
            calls.append(tag)
            super().__init__(obj)

    s = Sub(np.arange(3), "t")
    assert type(s) is Sub and calls == ["t"]
    assert np.asarray(s).tolist() == [0, 1, 2]


def test_cached_plain_dlpack_route_asks_each_question_once():
    for _ in range(4):  # the first fills the route cache, the rest hit it
        p = CountingProducer(np.arange(5))
        a = DLPackArray(p)
        assert (p.device_calls, p.dlpack_calls) == (1, 1)
        assert np.asarray(a).tolist() == [0, 1, 2, 3, 4]


def test_cached_plain_dlpack_route_refusal_is_the_producers():
    DLPackArray(CountingProducer(np.arange(2)))  # fill the cache for the type
    p = CountingProducer(np.arange(2), refuse_after=0)
    with pytest.raises(BufferError, match="refused on purpose"):
        DLPackArray(p)
    # The refused request was made once and not repeated by the slow path.
    assert (p.device_calls, p.dlpack_calls) == (1, 1)


def test_reused_instances_start_uninitialised_and_unreferenced():
    """A new instance, whatever memory it reuses, is uninitialised and has no
    weak references."""
    for _ in range(40):
        a = DLPackArray(np.arange(4))
        r = weakref.ref(a)
        del a
        assert r() is None
        b = DLPackArray.__new__(DLPackArray)  # often the memory of a ready one
        assert "uninitialised" in repr(b) or "not initialised" in repr(b)
        with pytest.raises((TypeError, ValueError)):
            _ = b.shape
        assert weakref.ref(b)() is b
        del b


def test_reused_instances_measure_their_own_buffer_layout():
    """A new instance never inherits the buffer layout (or the byte strides)
    measured for the array that used its memory before."""
    shapes = [(2, 3), (7,), (1, 1, 1, 1, 1, 1, 1, 1, 1, 2), (5, 1), ()]
    for _ in range(3):
        for shape in shapes:
            x = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
            if x.ndim:
                x = x[..., ::-1] if shape[-1] > 1 else x
            a = DLPackArray(x)
            m = memoryview(a)
            assert m.shape == x.shape and m.strides == x.strides
            assert m.format == "h" and m.nbytes == x.nbytes
            np.testing.assert_array_equal(np.asarray(a), x)
            # No cycle holds either: the instance is freed (and its memory offered to the
            # next one) here, without a collection.
            del m, a


def test_failed_construction_leaves_a_clean_instance_for_the_next():
    pa = _pa()
    for _ in range(20):
        with pytest.raises(TypeError):
            DLPackArray(object())
        a = DLPackArray(pa.array([1, 2, 3], pa.int8()))
        assert np.asarray(a).tolist() == [1, 2, 3]
