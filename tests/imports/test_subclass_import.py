"""Another DLPackArray, of any subclass, is imported as one.

The import tests a source's type size before isinstance (a subclass's
instances extend DLPackArray's, so no smaller type can be one): every
subclass still takes the DLPackArray route, which shares the source's view
and owner without calling any of its protocol methods, and every other
type, however large, takes the protocol precedence.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from dlpackarray import DLPackArray


def _refuse(*args, **kwargs):
    raise AssertionError("the DLPackArray route calls no protocol method of its source")


class Plain(DLPackArray):
    __dlpack__ = _refuse
    __dlpack_device__ = _refuse
    __array__ = _refuse


class SameSize(DLPackArray):
    """No dict, no slot: instances exactly as large as a DLPackArray's."""

    __slots__ = ()
    __dlpack__ = _refuse


class Slotted(DLPackArray):
    __slots__ = tuple(f"s{i}" for i in range(40))
    __dlpack__ = _refuse


class WithDict(Plain):
    def __init__(self, obj, tag):
        super().__init__(obj)
        self.tag = tag


class Deeper(WithDict):
    __slots__ = ("extra",)


class Interfaces(DLPackArray):
    __array_interface__ = property(_refuse)
    __array_struct__ = property(_refuse)
    __cuda_array_interface__ = property(_refuse)
    __arrow_c_array__ = _refuse


SUBCLASSES = [Plain, SameSize, Slotted, WithDict, Deeper, Interfaces]

if sys.version_info >= (3, 12):

    class OwnBuffer(DLPackArray):
        """PEP 688: a Python __buffer__ replaces the type's bf_getbuffer slot."""

        def __buffer__(self, flags):
            raise AssertionError("not called by the DLPackArray route")

    SUBCLASSES.append(OwnBuffer)


def _make(cls, src):
    return cls(src, "tag") if issubclass(cls, WithDict) else cls(src)


@pytest.mark.parametrize("cls", SUBCLASSES, ids=lambda c: c.__name__)
def test_every_subclass_takes_the_dlpackarray_route(cls):
    assert cls.__basicsize__ >= DLPackArray.__basicsize__
    src = np.arange(6.0, dtype=np.float32)
    sub = _make(cls, src)
    a = DLPackArray(sub)
    assert type(a) is DLPackArray
    assert a.data_ptr == src.ctypes.data and a.shape == (6,) and str(a.dtype) == "float32"
    assert DLPackArray(sub, copy=True).tolist() == src.tolist()
    # A subclass of the subclass's instance is read the same way by a subclass.
    b = Plain(sub)
    assert b.data_ptr == src.ctypes.data


class Large:
    """Larger than a DLPackArray, and no subclass of it: a DLPack producer."""

    __slots__ = tuple(f"s{i}" for i in range(60)) + ("array",)

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class LargeBuffer(bytearray):
    __slots__ = tuple(f"s{i}" for i in range(60))


def test_types_as_large_take_the_protocol_precedence():
    assert Large.__basicsize__ >= DLPackArray.__basicsize__
    assert LargeBuffer.__basicsize__ >= DLPackArray.__basicsize__
    src = np.arange(4.0)
    a = DLPackArray(Large(src))
    assert a.data_ptr == src.ctypes.data and a.tolist() == [0.0, 1.0, 2.0, 3.0]
    b = DLPackArray(LargeBuffer(b"abc"))
    assert b.tolist() == [97, 98, 99]


@pytest.mark.parametrize(
    "src",
    [b"ab", bytearray(3), memoryview(b"xy"), np.arange(3), np.float64(1.5)],
    ids=lambda src: type(src).__name__,  # a memoryview's repr holds its address
)
def test_unrelated_buffer_types_are_not_dlpackarrays(src):
    a = DLPackArray(src)
    assert type(a) is DLPackArray and a.nbytes == np.asarray(src).nbytes
