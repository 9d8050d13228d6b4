"""ctypes mirror of the DLPack 1.x ABI, used by the tests to build and inspect
capsules without going through dlpackarray itself.

Building capsules here (rather than with a library) lets the tests control
every field -- version, flags, dtype, strides, NULL pointers -- and count how
often the deleter runs.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np

# The struct layouts are dlpackarray.testing's own ABI mirror (one definition),
# re-exported here for the tests.
from dlpackarray.testing._abi import (  # noqa: F401
    DLDataType,
    DLDevice,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLPackVersion,
    DLTensor,
)

c_int64_p = ctypes.POINTER(ctypes.c_int64)

KDL_CPU = 1
KDL_CUDA = 2
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_IS_SUBBYTE_TYPE_PADDED = 1 << 2

# DLDataTypeCode values.
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_OPAQUE, KDL_BFLOAT, KDL_COMPLEX, KDL_BOOL = range(7)
KDL_FLOAT8_E4M3FN = 10
KDL_FLOAT4_E2M1FN = 17


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

# Capsule names must outlive the capsules: module-level buffers never die.
NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
NAME_FOREIGN = ctypes.create_string_buffer(b"not_a_tensor")

# A private handle: ctypes.pythonapi's function objects are shared process-wide
# and other libraries (pydlpack) reassign their argtypes.
_api = ctypes.PyDLL(None)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)

# Every producer ever made stays referenced here: its struct memory must stay
# valid even if a (buggy) consumer called the deleter late.
_ALL_PRODUCERS: list = []
_ids = itertools.count(1)


def capsule_name(capsule) -> str:
    return _api.PyCapsule_GetName(capsule).decode()


def capsule_struct(capsule):
    """Return the DLManagedTensor(Versioned) a capsule points at (not consumed)."""
    name = capsule_name(capsule)
    ptr = _api.PyCapsule_GetPointer(capsule, name.encode())
    cls = DLManagedTensorVersioned if name.endswith("versioned") else DLManagedTensor
    return cls.from_address(ptr)


def tensor_fields(capsule) -> dict:
    """Shape, strides, dtype, pointers and (when versioned) version/flags of a capsule."""
    m = capsule_struct(capsule)
    t = m.dl_tensor
    out = {
        "data": t.data or 0,
        "byte_offset": t.byte_offset,
        "ndim": t.ndim,
        "device": (t.device.device_type, t.device.device_id),
        "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        "shape": tuple(t.shape[i] for i in range(t.ndim)),
        "strides": tuple(t.strides[i] for i in range(t.ndim)) if t.strides or not t.ndim else None,
        "strides_is_null": not bool(t.strides),
    }
    if isinstance(m, DLManagedTensorVersioned):
        out["version"] = (m.version.major, m.version.minor)
        out["flags"] = m.flags
    return out


class Producer:
    """A hand-made DLPack tensor over ``source``'s memory with a counting deleter.

    ``capsule()`` returns a fresh capsule (only once: a managed tensor has one
    owner).  With ``destructor=True`` the capsule gets a producer destructor
    that calls the deleter if the capsule is dropped unconsumed; it is off by
    default because a ctypes callback cannot run while a Python exception is
    pending (CPython destroys objects during exception propagation), so such
    capsules may only be dropped on exception-free paths.  ``deleter_calls``
    counts deleter invocations; the source object is kept alive until the
    deleter has run (like a real producer).
    """

    def __init__(
        self,
        source,
        *,
        shape=None,
        strides=None,
        dtype=None,
        versioned=True,
        version=(1, 3),
        flags=0,
        data=None,
        byte_offset=0,
        device=(KDL_CPU, 0),
        ndim=None,
        null_strides=False,
        null_shape=False,
        destructor=False,
    ):
        self.id = next(_ids)
        self.deleter_calls = 0
        self.source = source
        arr = None if source is None else np.asarray(source)
        if shape is None:
            shape = arr.shape
        if strides is None and arr is not None and not null_strides:
            strides = tuple(s // arr.itemsize for s in arr.strides)
        if dtype is None:
            dtype = numpy_dl_dtype(arr.dtype)
        if data is None:
            data = 0 if arr is None else arr.__array_interface__["data"][0]
        n = len(shape) if ndim is None else ndim
        self._shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self._strides = (ctypes.c_int64 * max(len(shape), 1))(*(strides or ()))
        self.versioned = versioned
        self.struct = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        if versioned:
            self.struct.version = DLPackVersion(*version)
            self.struct.flags = flags
        t = self.struct.dl_tensor
        t.data = data
        t.device = DLDevice(*device)
        t.ndim = n
        t.dtype = DLDataType(*dtype)
        t.shape = None if null_shape else ctypes.cast(self._shape, c_int64_p)
        t.strides = (
            None if (null_strides or strides is None) else ctypes.cast(self._strides, c_int64_p)
        )
        t.byte_offset = byte_offset
        self._deleter = DELETER(self._on_delete)
        self.struct.deleter = ctypes.cast(self._deleter, ctypes.c_void_p).value
        self.address = ctypes.addressof(self.struct)
        self._destructor = CAPSULE_DESTRUCTOR(self._on_capsule_destroyed)
        self._made = False
        self._with_destructor = destructor
        _ALL_PRODUCERS.append(self)

    def _on_delete(self, address):
        assert address == self.address, "deleter called with a foreign pointer"
        self.deleter_calls += 1
        self.source = None  # what a producer's deleter does: release the memory owner

    def _on_capsule_destroyed(self, capsule_address):
        # Producer rule: call the deleter only if nobody consumed the capsule.
        name = NAME_VERSIONED if self.versioned else NAME_LEGACY
        if _api.PyCapsule_IsValid(capsule_address, name):
            self._on_delete(self.address)

    def capsule(self, name=None):
        assert not self._made, "a managed tensor can be put in one capsule only"
        self._made = True
        if name is None:
            name = NAME_VERSIONED if self.versioned else NAME_LEGACY
        destructor = (
            ctypes.cast(self._destructor, ctypes.c_void_p).value if self._with_destructor else None
        )
        return _api.PyCapsule_New(self.address, ctypes.addressof(name), destructor)


_NUMPY_CODES = {"b": KDL_BOOL, "i": KDL_INT, "u": KDL_UINT, "f": KDL_FLOAT, "c": KDL_COMPLEX}


# DLDataTypeCode of the ml_dtypes extension types (DLPack 1.3 header values).
ML_DTYPE_CODES = {
    "bfloat16": KDL_BFLOAT,
    "float8_e3m4": 7,
    "float8_e4m3": 8,
    "float8_e4m3b11fnuz": 9,
    "float8_e4m3fn": 10,
    "float8_e4m3fnuz": 11,
    "float8_e5m2": 12,
    "float8_e5m2fnuz": 13,
    "float8_e8m0fnu": 14,
}


def numpy_dl_dtype(dt) -> tuple:
    """(code, bits, lanes) for a NumPy dtype, including ml_dtypes extension types."""
    dt = np.dtype(dt)
    if dt.isbuiltin == 1 and dt.kind in _NUMPY_CODES:  # 2: user dtype (ml_dtypes)
        return (_NUMPY_CODES[dt.kind], dt.itemsize * 8, 1)
    return (ML_DTYPE_CODES[dt.name], dt.itemsize * 8, 1)
