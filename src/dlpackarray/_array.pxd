# cython: language_level=3
from cpython.object cimport PyTypeObject
from libc.stdint cimport int64_t
from libcpp.vector cimport vector

from dlpackarray.core cimport BufferLayout, TensorView


# The life of a DLPackArray (docs/protocols.rst, "Lifetime"): initialised once,
# immutable after.  Only kReady may be read or exported; the others are
# refused by check_ready, so an object made by __new__ alone, one whose
# __init__ is still running (re-entered from the source's own code) and one
# whose __init__ failed never answer as if they held data.
cdef enum ArrayState:
    kUninitialised = 0  # what tp_new leaves (a zeroed allocation)
    kInitialising = 1
    kReady = 2
    kFailed = 3


cdef class DLPackArray:
    # The descriptor never changes after construction: exported buffers point
    # at _view.shape and capsules copy it, so immutability is what keeps them
    # valid.  (Named _view because the public method view(dtype) needs "view".)
    cdef TensorView _view
    # Keeps the memory alive (BufferOwner, an adopted DLPack capsule,
    # HeapOwner, or an owner of another protocol module); shared by every
    # view of the data.
    cdef object owner
    # Byte strides of buffer-protocol exports, made on the first one: inside
    # the object up to 8 dimensions (a fresh array read once, as in
    # np.asarray(DLPackArray(x)), allocates nothing), else in the vector.  A
    # C++ member, destroyed by the generated tp_dealloc: the class needs no
    # __dealloc__, whose error-state save/restore every array would pay.
    cdef int64_t _byte_strides_inline[8]
    cdef vector[int64_t] _byte_strides
    # The request-independent part of buffer exports, made on the first one.
    cdef BufferLayout _buffer_layout
    cdef tuple _shape
    cdef tuple _strides
    # An ArrayState; C-level only, so Python code cannot forge it.
    cdef unsigned char _state
    # weakref.ref and WeakValueDictionary (docs/processes.md).
    cdef object __weakref__


cdef inline void mark_ready(DLPackArray self) noexcept:
    """Makes ``self``, its descriptor and owner set, readable (kReady).  Every
    constructor ends here; the owner never changes afterwards (a failed
    import drops it, which needs nothing)."""
    self._state = kReady


cdef DLPackArray wrap_view(const TensorView* v, object owner)
# DLPackArray(obj, copy=copy, device=device) for C callers (the C API).
cdef DLPackArray new_from_object(object obj, object copy, object device)


# Raises the error of a DLPackArray that is not kReady (cold path).
cdef int raise_not_ready(DLPackArray self) except -1


cdef inline int check_ready(DLPackArray self) except -1:
    """0 when ``self`` may be read or exported; raises TypeError otherwise.
    One compare on the hot path: every method, property, protocol slot and
    C API entry point calls it first."""
    if self._state == kReady:
        return 0
    return raise_not_ready(self)
