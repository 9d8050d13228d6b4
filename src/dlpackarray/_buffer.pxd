# cython: language_level=3
from cpython.buffer cimport Py_buffer
from dlpackarray.core cimport TensorView


cdef class BufferOwner:
    """Holds a PEP 3118 Py_buffer; released when the last user is gone."""
    cdef Py_buffer buf
    cdef bint acquired


cdef BufferOwner view_from_buffer(object obj, TensorView* out)
cdef int fill_buffer(Py_buffer* buf, object exporter, const TensorView* v,
                     Py_ssize_t* byte_strides, int flags) except -1
