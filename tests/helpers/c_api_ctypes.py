"""The dlpackarray C API table (dlpackarray.h's DLPackArray_CAPI) through ctypes.

For tests that call the C API in child interpreters with no compiler at hand (the fake CUDA
driver's scenarios).  The prototypes are PYFUNCTYPE: the GIL stays held and a NULL/-1 return
with an exception set raises that exception here.  Only the 1.1 members are bound; the 1.0
members are exercised by compiled extensions (tests/helpers/c_api_probe.c, docs/examples/c_api/).
"""

from __future__ import annotations

import ctypes

import dlpack_ctypes as dc

import dlpackarray

_P = ctypes.c_void_p
_EMPTY = ctypes.PYFUNCTYPE(
    ctypes.py_object,
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_int64),
    dc.DLDataType,
    dc.DLDevice,
)
_IS_CONTIGUOUS = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char)
_AS_CONTIGUOUS = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)
_CONVERTER = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)
_ON_STREAM = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.py_object, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64
)


class Table(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("size", ctypes.c_size_t),
        ("type", _P),
        *[
            (name, _P)
            for name in (
                "check",
                "from_object",
                "from_data",
                "from_managed_versioned",
                "from_managed_legacy",
                "get_dltensor",
                "to_managed_versioned",
                "to_capsule",
            )
        ],
        ("empty", _EMPTY),
        ("is_contiguous", _IS_CONTIGUOUS),
        ("as_contiguous", _AS_CONTIGUOUS),
        ("converter", _CONVERTER),
        ("from_object_on_stream", _ON_STREAM),
    ]


def table() -> Table:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get(dlpackarray._C_API, b"dlpackarray._C_API")
    t = Table.from_address(address)
    assert (t.major, t.minor) >= (1, 1) and t.size >= ctypes.sizeof(Table)
    return t


def from_data_prototype(owner_type):
    """DLPackArray_FromData's prototype, the owner passed as ``owner_type``
    (ctypes.py_object for an object, ctypes.c_void_p to pass NULL)."""
    return ctypes.PYFUNCTYPE(
        ctypes.py_object,
        ctypes.c_void_p,  # data
        ctypes.c_int32,  # ndim
        ctypes.POINTER(ctypes.c_int64),  # shape
        ctypes.POINTER(ctypes.c_int64),  # strides (NULL: C-contiguous)
        dc.DLDataType,
        dc.DLDevice,
        ctypes.c_int,  # readonly
        owner_type,
        ctypes.c_void_p,  # deleter
        ctypes.c_void_p,  # deleter_ctx
    )


def empty(shape, code: int, bits: int, device_type: int = 1, device_id: int = 0):
    """DLPackArray_Empty(len(shape), shape, (code, bits, 1), (device_type, device_id))."""
    c_shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    return table().empty(
        len(shape), c_shape, dc.DLDataType(code, bits, 1), dc.DLDevice(device_type, device_id)
    )


def from_object_on_stream(obj, stream: int, copy: int = -1):
    return table().from_object_on_stream(obj, copy, None, stream)
