# cython: language_level=3
from cpython.buffer cimport Py_buffer
from dlpackarray.core cimport TensorView


cimport cython


# no_gc_clear: the collector may traverse `source` (so cycles through the
# exporter are found) but must never clear it, because the buffer still has
# to be released on the live exporter in __dealloc__.
@cython.no_gc_clear
cdef class BufferOwner:
    """Holds a PEP 3118 Py_buffer; released when the last user is gone."""
    cdef Py_buffer buf
    cdef bint acquired
    # The exporter.  The reference Py_buffer.obj took is moved here (obj is
    # set to NULL) so the garbage collector can see it.
    cdef object source


cdef BufferOwner acquire_buffer(object obj, int flags)
cdef BufferOwner view_from_buffer(object obj, TensorView* out)
cdef int fill_buffer(Py_buffer* buf, object exporter, const TensorView* v,
                     Py_ssize_t* byte_strides, int flags) except -1
