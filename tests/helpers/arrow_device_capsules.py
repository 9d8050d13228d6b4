"""What the Arrow CUDA scenarios (tests/arrow/test_arrow_cuda_export.py and
test_arrow_cuda_import.py) use inside their child interpreters, on the fake
CUDA driver (tests/helpers/fake_cuda): the driver handle (``_fake``), readers
of the fake driver's call log and of exported device structs (``_event``,
``_values``), moving and releasing device arrays as a consumer does,
hand-built ``arrow_device_array`` and ``arrow_device_array_stream`` capsules
of "another library" (``HandBuilt``, ``HandStream``) and objects speaking
only one device method (``Pair``, ``Stream``).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
from arrow_ctypes import (
    DEVICE_STREAM_GET_NEXT,
    DEVICE_STREAM_GET_SCHEMA,
    RELEASE_ARRAY,
    ArrowDeviceArray,
    ArrowDeviceArrayStream,
    ArrowSchema,
    struct_of,
)

CUDA, CUDA_HOST, CUDA_MANAGED = 2, 3, 13


def _fake():
    from fake_cuda import FakeCuda

    f = FakeCuda(os.environ["DLPACKARRAY_CUDA_DRIVER"])
    f.standard_streams()  # the stream handles the scenarios write literally, on device 0
    return f


def _fields(line: str) -> dict[str, str]:
    return dict(item.split("=") for item in line.split()[1:])


def _names(f) -> list[str]:
    return [line.split()[0] for line in f.log()]


def _event(d: ArrowDeviceArray) -> int:
    """The CUevent handle a device array's sync_event points at."""
    assert d.sync_event, "no sync event"
    return ctypes.c_void_p.from_address(d.sync_event).value


def _values(d: ArrowDeviceArray) -> int:
    """Address of the leaf values buffer of an exported device array."""
    node = d.array
    while node.n_children:
        node = node.children[0].contents
    return node.buffers[1]


def _host(x) -> np.ndarray:
    from dlpackarray import DLPackArray

    return np.asarray(DLPackArray(x, device="cpu"))


def _move(capsule) -> ArrowDeviceArray:
    """Moves the ArrowDeviceArray out of its capsule, as a consumer does."""
    src = struct_of(capsule, ArrowDeviceArray)
    moved = ArrowDeviceArray()
    ctypes.memmove(ctypes.addressof(moved), ctypes.addressof(src), ctypes.sizeof(moved))
    src.array.release = None
    return moved


def _release(d: ArrowDeviceArray) -> None:
    RELEASE_ARRAY(d.array.release)(ctypes.byref(d.array))


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# Capsule names must outlive their capsules.
_DEVICE_ARRAY_NAME = b"arrow_device_array"
_DEVICE_STREAM_NAME = b"arrow_device_array_stream"


# Every HandBuilt/HandStream stays alive to the end of the child: an imported
# array calls its release callback whenever its last view goes.
_KEEP: list = []


class HandBuilt:
    """An ``arrow_device_array`` capsule made with ctypes: one primitive array over
    the given buffers, a sync event of "another library" and a release callback
    that counts its calls.  The capsule has no destructor: what a consumer does
    not move out stays here, for the test to see."""

    def __init__(self, values, length, *, device_type=CUDA, device_id=0, event=None,
                 validity=None, null_count=0, offset=0):  # fmt: skip
        _KEEP.append(self)
        self.released = 0
        self.buffers = (ctypes.c_void_p * 2)(validity, values)
        self.handle = ctypes.c_void_p(event)
        self.struct = ArrowDeviceArray()
        a = self.struct.array
        a.length, a.null_count, a.offset, a.n_buffers, a.n_children = (
            length, null_count, offset, 2, 0,
        )  # fmt: skip
        a.buffers = ctypes.cast(self.buffers, ctypes.POINTER(ctypes.c_void_p))
        self._callback = RELEASE_ARRAY(self._on_release)
        a.release = ctypes.cast(self._callback, ctypes.c_void_p).value
        self.struct.device_type = device_type
        self.struct.device_id = device_id
        self.struct.sync_event = ctypes.addressof(self.handle) if event else None

    def _on_release(self, array):
        self.released += 1
        array.contents.release = None

    def capsule(self):
        return _capsule_new(ctypes.addressof(self.struct), _DEVICE_ARRAY_NAME, None)


class HandStream:
    """An ``arrow_device_array_stream`` capsule made with ctypes that hands out
    the given (moved) device arrays, then the end of the stream."""

    def __init__(self, chunks, schema_of, device_type=CUDA):
        _KEEP.append(self)
        self.chunks = list(chunks)
        self.schema_of = schema_of  # () -> a fresh "arrow_schema" capsule
        self.released = 0
        self.struct = ArrowDeviceArrayStream()
        self.struct.device_type = device_type
        self._callbacks = (
            DEVICE_STREAM_GET_SCHEMA(self._get_schema),
            DEVICE_STREAM_GET_NEXT(self._get_next),
            ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(lambda s: None),
            ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowDeviceArrayStream))(self._on_release),
        )
        names = ("get_schema", "get_next", "get_last_error", "release")
        for name, cb in zip(names, self._callbacks, strict=True):
            setattr(self.struct, name, ctypes.cast(cb, ctypes.c_void_p).value)

    def _get_schema(self, stream, out):
        capsule = self.schema_of()  # alive until the struct is moved out
        src = struct_of(capsule, ArrowSchema)
        ctypes.memmove(out, ctypes.addressof(src), ctypes.sizeof(ArrowSchema))
        src.release = None
        return 0

    def _get_next(self, stream, out):
        if not self.chunks:
            out.contents.array.release = None
            return 0
        chunk = self.chunks.pop(0)
        ctypes.memmove(out, ctypes.addressof(chunk), ctypes.sizeof(ArrowDeviceArray))
        chunk.array.release = None
        return 0

    def _on_release(self, stream):
        self.released += 1
        stream.contents.release = None

    def capsule(self):
        return _capsule_new(ctypes.addressof(self.struct), _DEVICE_STREAM_NAME, None)


class Pair:
    """An object speaking only __arrow_c_device_array__, returning given capsules."""

    def __init__(self, schema, array):
        self.pair = (schema, array)

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return self.pair


class Stream:
    """An object speaking only __arrow_c_device_stream__, returning a given capsule."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __arrow_c_device_stream__(self, requested_schema=None, **kwargs):
        return self.capsule


def _schema(dtype="float32", cell=()):
    from dlpackarray import DLPackArray

    return DLPackArray(np.zeros((0, *cell), dtype=dtype)).__arrow_c_schema__()
