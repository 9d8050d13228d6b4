# cython: language_level=3
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport int64_t
from dlpackarray.abi cimport DLDataType, DLDevice
from dlpackarray.core cimport TensorView


cdef class DType:
    cdef readonly int code
    cdef readonly int bits
    cdef readonly int lanes
    cdef readonly str name
    cdef DLDataType dt


cdef class HeapOwner:
    """Owns one aligned heap block (the result of a copy)."""
    cdef void* ptr
    cdef int64_t nbytes


cdef DType dtype_object(DLDataType dt)
cdef DLDataType parse_dtype(object obj) except *
cdef object device_tuple(DLDevice dev)
cdef DLDevice parse_device(object device) except *
cdef HeapOwner copy_to_heap(const TensorView* src, TensorView* dst) except *
cdef object copy_to_bytes(object exporter, const TensorView* src)
# MemoryError up front when a result of `count` elements needs at least
# `nbytes` bytes and the process can never hold that many.
cdef int require_memory(object nbytes, object count, str what) except -1
# The copy keyword as a dla::CopyMode value; TypeError for anything else.
cdef int parse_copy(object copy) except -2


cdef extern from "Python.h":
    # MRO lookup through the type cache; unlike hasattr(type, name) it never
    # creates and discards an AttributeError (~200 ns) when the name is absent.
    PyObject* _PyType_Lookup(PyTypeObject* t, PyObject* name)


cdef inline bint type_has(type t, str name) noexcept:
    """Whether instances of ``t`` get ``name`` from their class (special-method lookup)."""
    return _PyType_Lookup(<PyTypeObject*>t, <PyObject*>name) != NULL
