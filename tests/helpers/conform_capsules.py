"""Capsule plumbing the broken producers of conform_corpus.py and conform_corpus_arrow.py
share: the C API called through ctypes (capsules made and read on raw pointers), the
capsule names (which must outlive their capsules) and the callbacks kept alive for as
long as a capsule may call them."""

from __future__ import annotations

import ctypes

DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
capi = ctypes.PyDLL(None)
capi.PyCapsule_New.restype = ctypes.py_object
capi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
capi.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
capi.PyCapsule_IsValid.restype = ctypes.c_int
capi.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
capi.PyCapsule_GetName.restype = ctypes.c_char_p
capi.PyCapsule_GetName.argtypes = [ctypes.c_void_p]

#: Capsule names must outlive the capsules.
CAPSULE_NAMES = {
    n: ctypes.create_string_buffer(n.encode())
    for n in (
        "dltensor",
        "dltensor_versioned",
        "dltensor_v",
        "arrow_schemaX",
        "arrow_stream",
        "arrow_device_stream",
        "dlpack_exchange",
        "dlpack_exchange_api",
        "array_struct",
    )
}
KEEP_ALIVE: list = []
