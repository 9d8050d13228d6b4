# cython: language_level=3
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
# The copy keyword as a dla::CopyMode value; TypeError for anything else.
cdef int parse_copy(object copy) except -2
