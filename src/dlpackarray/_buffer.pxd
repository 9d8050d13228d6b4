# cython: language_level=3
from cpython.buffer cimport Py_buffer
from cpython.object cimport PyObject
from libc.stdint cimport int64_t
from dlpackarray.core cimport BufferLayout, TensorView


# no_gc_clear (the decorator is on the class in _buffer.pyx, where Cython
# honours it): the buffer still has to be released on a live, intact
# exporter in __dealloc__.  The collector sees the exporter (through
# `source`) only for exporters whose own clearing cannot disturb the buffer;
# see _collector_may_see in _buffer.pyx.
cdef class BufferOwner:
    """Holds a PEP 3118 Py_buffer; released when the last user is gone."""
    # Cython's tp_traverse visits buf.obj, so it is None while the buffer is
    # held; the reference Py_buffer.obj took lives in `source` or `hidden`
    # and goes back to buf.obj for PyBuffer_Release in __dealloc__.
    cdef Py_buffer buf
    cdef bint acquired
    # The exporter when the collector may see it (so that cycles through it
    # are collected), else None.
    cdef object source
    # The exporter when the collector must not see it: an owned reference
    # that tp_traverse does not visit.  NULL otherwise.
    cdef PyObject* hidden


cdef BufferOwner acquire_buffer(object obj, int flags)
cdef BufferOwner view_from_buffer(object obj, TensorView* out)


cdef int fill_buffer(Py_buffer* buf, object exporter, const TensorView* v,
                     int64_t* byte_strides, int flags, BufferLayout* layout) except -1
