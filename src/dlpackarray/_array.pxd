# cython: language_level=3
from libcpp.vector cimport vector

from dlpackarray.core cimport TensorView


cdef class DLPackArray:
    # The descriptor never changes after construction: exported buffers point
    # at _view.shape and capsules copy it, so immutability is what keeps them
    # valid.  (Named _view because the public method view(dtype) needs "view".)
    cdef TensorView _view
    # Keeps the memory alive (BufferOwner, an adopted DLPack capsule,
    # HeapOwner, or an owner of another protocol module); shared by every
    # view of the data.
    cdef object owner
    # Byte strides of buffer-protocol exports, made on the first one.  A C++
    # member, destroyed by the generated tp_dealloc: the class needs no
    # __dealloc__, whose error-state save/restore every array would pay.
    cdef vector[Py_ssize_t] _byte_strides
    cdef tuple _shape
    cdef tuple _strides
    # Live buffer-protocol exports; __init__ of a placeholder refuses while
    # any exist, since they point into the descriptor.
    cdef Py_ssize_t _exports
    # weakref.ref and WeakValueDictionary (docs/processes.md).
    cdef object __weakref__


cdef DLPackArray wrap_view(const TensorView* v, object owner)
# DLPackArray(obj, copy=copy, device=device) for C callers (the C API).
cdef DLPackArray new_from_object(object obj, object copy, object device)
