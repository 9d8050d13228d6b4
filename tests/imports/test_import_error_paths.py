"""The error paths of a DLPack producer's import.

The import's cleanups run on the error path only (try/finally and raw calls
whose failure alone enters a handler, src/dlpackarray/_raw_call.pxd): these
tests pin what every failure leaves behind, whichever stage fails.  The
exception is the one the failing stage raised (type, text, no context or
cause added), the array reports its failed initialisation, and a capsule
that was taken over has its deleter called exactly once, at once.  The
producer's ``__dlpack_device__`` rules: asked without a stream, any
Exception of the query means "none"; asked with one, it propagates.
"""

from __future__ import annotations

import dlpack_ctypes as dc
import numpy as np
import pytest
from failed_init import FAILED, failed_init

from dlpackarray import DLPackArray


class Refusal(BaseException):
    """Not an Exception: no rule may swallow it."""


class Producer:
    """A DLPack producer whose stages can fail: ``dlpack`` is the capsule's
    dc.Producer keywords or an exception to raise; ``device`` the value of
    ``__dlpack_device__()``, an exception it raises, or ``"absent"``."""

    def __init__(self, dlpack=None, device=(1, 0)):
        self.calls = []
        self.source = np.arange(6.0)
        self.dc = dc.Producer(self.source, **(dlpack or {})) if not _is_error(dlpack) else None
        self._dlpack = dlpack
        self._device = device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append("__dlpack__")
        if _is_error(self._dlpack):
            raise self._dlpack
        return self.dc.capsule()

    def __getattr__(self, name):
        if name != "__dlpack_device__" or self._device == "absent":
            raise AttributeError(name)
        if self._device is None:
            return None

        def query():
            self.calls.append("__dlpack_device__")
            if _is_error(self._device):
                raise self._device
            return self._device

        return query


def _is_error(x):
    return isinstance(x, BaseException)


def _assert_failed(a, error, kind, text):
    assert type(error) is kind
    assert str(error) == text
    assert error.__cause__ is None and error.__context__ is None
    assert repr(a) == FAILED
    with pytest.raises(ValueError, match="its __init__ failed"):
        a.shape  # noqa: B018


SUPPORTED = (
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, "
    "float64, bfloat16, complex64, complex128, float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, "
    "float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu (one lane, "
    "whole bytes, native byte order)"
)
NO_MOVE = (
    "cannot move data from device CPU:0 to CUDA:0: dlpackarray copies between host memory and "
    "from CUDA devices to the host only; accepted: None or (1, 0) for CPU:0"
)

# stage -> (producer, __init__ keywords, exception type, text)
CAPSULE_REFUSALS = {
    "major_version": (
        dict(version=(2, 0)),
        {},
        BufferError,
        "DLPack tensor has version 2.0; this consumer understands major version 1 only",
    ),
    "negative_shape": (
        dict(shape=(-1,), strides=(1,)),
        {},
        ValueError,
        "shape[0] = -1 is negative",
    ),
    "legacy_negative_shape": (
        dict(shape=(-1,), strides=(1,), versioned=False),
        {},
        ValueError,
        "shape[0] = -1 is negative",
    ),
    "null_data": (
        dict(data=0),
        {},
        ValueError,
        "data pointer is NULL but the array has 6 element(s)",
    ),
    "unsupported_dtype": (
        dict(dtype=(dc.KDL_FLOAT, 24, 1)),
        {},
        BufferError,
        "unsupported dtype DLDataType(code=2, bits=24, lanes=1); supported dtypes are " + SUPPORTED,
    ),
    "device_request": ({}, dict(device=(2, 0)), BufferError, NO_MOVE),
    "legacy_device_request": (dict(versioned=False), dict(device=(2, 0)), BufferError, NO_MOVE),
}


@pytest.mark.parametrize("stage", sorted(CAPSULE_REFUSALS))
def test_a_refused_capsule_is_released_at_once(stage):
    kwargs, init, kind, text = CAPSULE_REFUSALS[stage]
    p = Producer(kwargs)
    a, error = failed_init(p, **init)
    _assert_failed(a, error, kind, text)
    assert p.dc.deleter_calls == 1 and p.dc.source is None


@pytest.mark.parametrize(
    "raised",
    [RuntimeError("boom"), BufferError("no export"), TypeError("refused"), Refusal("stop")],
    ids=lambda e: type(e).__name__,
)
@pytest.mark.parametrize("stream", [None, -1])
def test_the_producers_own_error_propagates_unchanged(raised, stream):
    p = Producer(raised)
    a, error = failed_init(p, stream=stream)
    assert error is raised
    _assert_failed(a, error, type(raised), str(raised))
    assert p.calls == ["__dlpack_device__", "__dlpack__"]


def test_success_keeps_the_capsule_until_the_array_dies():
    p = Producer()
    a = DLPackArray(p)
    assert p.calls == ["__dlpack_device__", "__dlpack__"]
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and p.dc.deleter_calls == 0
    del a
    assert p.dc.deleter_calls == 1


# __dlpack_device__ value -> what a query with a stream raises (type, text)
MALFORMED = {
    "str": (
        "cpu",
        TypeError,
        "__dlpack_device__() must return (device_type, device_id), got 'cpu'",
    ),
    "list": (
        [1, 0],
        TypeError,
        "__dlpack_device__() must return (device_type, device_id), got [1, 0]",
    ),
    "three": (
        (1, 0, 0),
        TypeError,
        "__dlpack_device__() must return (device_type, device_id), got (1, 0, 0)",
    ),
    "float_id": (
        (1, 0.0),
        TypeError,
        "__dlpack_device__() must return (device_type, device_id), got (1, 0.0)",
    ),
    "raises": (RuntimeError("query failed"), RuntimeError, "query failed"),
    "none_attr": (
        None,
        TypeError,
        "a stream needs the producer's __dlpack_device__ to know "
        "what it means (DLPack spec), and 'Producer' has none",
    ),
    "absent": (
        "absent",
        TypeError,
        "a stream needs the producer's __dlpack_device__ to know "
        "what it means (DLPack spec), and 'Producer' has none",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_failed_device_query_means_none_without_a_stream(case):
    device, _, _ = MALFORMED[case]
    p = Producer(device=device)
    assert DLPackArray(p).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert p.calls[-1] == "__dlpack__"


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_failed_device_query_raises_with_a_stream(case):
    device, kind, text = MALFORMED[case]
    p = Producer(device=device)
    a, error = failed_init(p, stream=-1)
    assert type(error) is kind and str(error) == text
    assert error.__cause__ is None
    # "has none" is raised from None; a query's own error keeps its (empty) context.
    assert error.__context__ is None or error.__suppress_context__
    assert repr(a) == FAILED
    assert "__dlpack__" not in p.calls


class IntLike(int):
    pass


class DeviceTuple(tuple):
    """A tuple subclass: its items are read through its own __getitem__."""

    def __getitem__(self, i):
        return IntLike(tuple.__getitem__(self, i))


class BrokenTuple(tuple):
    def __getitem__(self, i):
        raise Refusal("no item")


@pytest.mark.parametrize("stream", [None, -1])
def test_device_tuples_read_as_before(stream):
    for device in [(1, 0), (IntLike(1), IntLike(0)), (True, 0), DeviceTuple((1, 0))]:
        p = Producer(device=device)
        assert DLPackArray(p, stream=stream).tolist()[:2] == [0.0, 1.0]
    # Out of C int range: the conversion's OverflowError, with a stream or not.
    for device in [(2**40, 0), (1, 2**40)]:
        a, error = failed_init(Producer(device=device), stream=stream)
        assert type(error) is OverflowError and repr(a) == FAILED
    # A BaseException from the tuple's items is no "failed query".
    a, error = failed_init(Producer(device=BrokenTuple((1, 0))), stream=stream)
    assert type(error) is Refusal and str(error) == "no item" and repr(a) == FAILED


@pytest.mark.parametrize("stream", [None, -1])
def test_a_base_exception_of_the_query_propagates(stream):
    p = Producer(device=Refusal("interrupted"))
    a, error = failed_init(p, stream=stream)
    _assert_failed(a, error, Refusal, "interrupted")
    assert p.calls == ["__dlpack_device__"]


class WeakBytes(bytearray):
    """A buffer exporter that supports weak references."""


def test_a_failed_init_drops_what_it_had_taken():
    """The import took a buffer (the owner is set) before the device request
    was refused: __init__'s cleanup alone lets the source go."""
    import gc
    import weakref

    src = WeakBytes(8)
    ref = weakref.ref(src)
    a, error = failed_init(src, device=(2, 0))
    assert type(error) is BufferError and repr(a) == FAILED
    del src, error
    gc.collect()
    assert ref() is None
