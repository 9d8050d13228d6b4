"""ctypes mirror of the Arrow C data / device interfaces, used by the tests to
look inside Arrow capsules without a library in between: read fields, edit
them (to build malformed input), move structs out and call their release
callbacks from any thread."""

from __future__ import annotations

import ctypes

# The struct layouts are dlpackarray.testing's own ABI mirror (one definition),
# re-exported here for the tests.
from dlpackarray.testing._abi import (  # noqa: F401
    ArrowArray,
    ArrowArrayStream,
    ArrowDeviceArray,
    ArrowDeviceArrayStream,
    ArrowSchema,
)

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]

RELEASE_ARRAY = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))
STREAM_GET_NEXT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ArrowArray))
STREAM_GET_SCHEMA = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ArrowSchema))
RELEASE_STREAM = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
RELEASE_SCHEMA = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))
DEVICE_STREAM_GET_SCHEMA = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ArrowDeviceArrayStream), ctypes.POINTER(ArrowSchema)
)
DEVICE_STREAM_GET_NEXT = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ArrowDeviceArrayStream), ctypes.POINTER(ArrowDeviceArray)
)


def capsule_name(capsule) -> str:
    return _get_name(capsule).decode()


def struct_of(capsule, struct: type):
    """The struct a capsule points at (a live view, not a copy)."""
    ptr = _get_pointer(capsule, _get_name(capsule))
    return struct.from_address(ptr)


def move_array(capsule) -> ArrowArray:
    """Moves the ArrowArray out of an "arrow_array" capsule, as a consumer does."""
    src = struct_of(capsule, ArrowArray)
    moved = ArrowArray()
    ctypes.memmove(ctypes.addressof(moved), ctypes.addressof(src), ctypes.sizeof(ArrowArray))
    src.release = None
    return moved


def schema_format(capsule) -> str:
    return struct_of(capsule, ArrowSchema).format.decode()


def metadata_dict(schema: ArrowSchema) -> dict[bytes, bytes]:
    """Decodes ArrowSchema.metadata (int32 count, then length-prefixed pairs)."""
    if not schema.metadata:
        return {}
    p = schema.metadata

    def int32():
        nonlocal p
        v = ctypes.c_int32.from_address(p).value
        p += 4
        return v

    out = {}
    for _ in range(int32()):
        k = ctypes.string_at(p + 4, ctypes.c_int32.from_address(p).value)
        p += 4 + len(k)
        v = ctypes.string_at(p + 4, ctypes.c_int32.from_address(p).value)
        p += 4 + len(v)
        out[k] = v
    return out
