"""How an import asks a DLPack producer for its device (``__dlpack_device__``).

The query is one method call without a bound method; these tests pin that it
still behaves as ``getattr(producer, "__dlpack_device__", None)`` followed by
a call: instance attributes win, ``None`` or a missing method means "has
none", and an error raised by the method itself is the producer's own.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlpackarray import DLPackArray


class Producer:
    """A host producer: exports a NumPy array, counts device queries."""

    def __init__(self):
        self.a = np.arange(6.0)
        self.queries = 0

    def __dlpack__(self, **kwargs):
        kwargs.pop("stream", None)
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        self.queries += 1
        return (1, 0)


class NoneDevice(Producer):
    __dlpack_device__ = None


class NoDevice:
    def __init__(self):
        self.a = np.arange(6.0)

    def __dlpack__(self, **kwargs):
        kwargs.pop("stream", None)
        return self.a.__dlpack__(**kwargs)


class RaisesAttributeError(Producer):
    def __dlpack_device__(self):
        raise AttributeError("inner failure of the producer")


class WrongShape(Producer):
    def __dlpack_device__(self):
        return [1, 0]


@pytest.mark.parametrize("stream", [None, -1])
def test_the_method_is_asked_once(stream):
    p = Producer()
    d = DLPackArray(p, stream=stream)
    assert p.queries == 1
    np.testing.assert_array_equal(np.from_dlpack(d), p.a)


@pytest.mark.parametrize("cls", [NoneDevice, NoDevice])
def test_a_producer_without_a_device_imports_without_a_stream(cls):
    p = cls()
    np.testing.assert_array_equal(np.from_dlpack(DLPackArray(p)), p.a)


@pytest.mark.parametrize("cls", [NoneDevice, NoDevice])
def test_a_stream_needs_a_device(cls):
    with pytest.raises(TypeError, match=f"'{cls.__name__}' has none"):
        DLPackArray(cls(), stream=-1)


def test_an_instance_attribute_is_honoured():
    p = Producer()
    calls = []
    p.__dlpack_device__ = lambda: calls.append(1) or (1, 0)
    DLPackArray(p, stream=-1)
    assert calls == [1] and p.queries == 0


def test_an_instance_none_hides_the_method():
    p = Producer()
    p.__dlpack_device__ = None
    with pytest.raises(TypeError, match="'Producer' has none"):
        DLPackArray(p, stream=-1)
    assert p.queries == 0


def test_an_error_of_the_method_itself_propagates_when_a_stream_needs_it():
    with pytest.raises(AttributeError, match="inner failure"):
        DLPackArray(RaisesAttributeError(), stream=-1)
    # Without a stream nothing was asked for: the producer's __dlpack__ decides.
    p = RaisesAttributeError()
    np.testing.assert_array_equal(np.from_dlpack(DLPackArray(p)), p.a)


def test_a_non_callable_attribute_is_a_type_error():
    p = Producer()
    p.__dlpack_device__ = 5
    with pytest.raises(TypeError, match="not callable"):
        DLPackArray(p, stream=-1)


def test_a_malformed_answer_is_named():
    with pytest.raises(TypeError, match=r"must return \(device_type, device_id\)"):
        DLPackArray(WrongShape(), stream=-1)
