"""PEP 3118 from the consumer's side: PyObject_GetBuffer called through ctypes
with explicit request flags, so a test can ask for exactly the fields a C
consumer asks for and see what the exporter fills in.
"""

from __future__ import annotations

import ctypes

from dlpackarray.testing._abi import PyBuffer

PyBUF_SIMPLE = 0
PyBUF_WRITABLE = 0x0001
PyBUF_FORMAT = 0x0004
PyBUF_ND = 0x0008
PyBUF_STRIDES = 0x0010 | PyBUF_ND
PyBUF_C_CONTIGUOUS = 0x0020 | PyBUF_STRIDES
PyBUF_F_CONTIGUOUS = 0x0040 | PyBUF_STRIDES
PyBUF_ANY_CONTIGUOUS = 0x0080 | PyBUF_STRIDES
PyBUF_INDIRECT = 0x0100 | PyBUF_STRIDES
PyBUF_RECORDS_RO = PyBUF_STRIDES | PyBUF_FORMAT
PyBUF_FULL_RO = PyBUF_INDIRECT | PyBUF_FORMAT


# CPython's Py_buffer layout, declared once (dlpackarray.testing's probes use it too).
Py_buffer = PyBuffer


_get_buffer = ctypes.PyDLL(None).PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(Py_buffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.PyDLL(None).PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(Py_buffer)]
_release_buffer.restype = None


def get_buffer(obj, flags) -> dict:
    """Calls PyObject_GetBuffer(obj, flags), returns the filled fields, releases."""
    view = Py_buffer()
    _get_buffer(obj, ctypes.byref(view), flags)  # raises the exporter's exception
    try:
        nd = view.ndim
        return {
            "buf": view.buf,
            "len": view.len,
            "itemsize": view.itemsize,
            "readonly": bool(view.readonly),
            "ndim": nd,
            "format": None if view.format is None else view.format.decode(),
            "shape": None if not view.shape else tuple(view.shape[i] for i in range(nd)),
            "strides": None if not view.strides else tuple(view.strides[i] for i in range(nd)),
            "suboffsets": bool(view.suboffsets),
            "obj_is_exporter": view.obj == id(obj),
        }
    finally:
        _release_buffer(ctypes.byref(view))


def used_strides(shape, strides):
    """The strides of dimensions that move (extent > 1).  The others address nothing, and
    NumPy versions disagree on them (2.2, the last for Python 3.10, reports another value for
    an extent-1 dimension of a sliced view than 2.4 does), so they are not compared."""
    return tuple(s for n, s in zip(shape, strides, strict=True) if n > 1)
