# cython: language_level=3, boundscheck=False, wraparound=False
"""PEP 3118 buffer protocol: import a Py_buffer as a view, export a view."""
cimport cython
from cpython.buffer cimport (
    PyBUF_ANY_CONTIGUOUS, PyBUF_C_CONTIGUOUS, PyBUF_F_CONTIGUOUS, PyBUF_FORMAT,
    PyBUF_ND, PyBUF_RECORDS_RO, PyBUF_STRIDES, PyBUF_WRITABLE, PyBuffer_Release,
    PyObject_GetBuffer, Py_buffer,
)
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.type cimport PyType_IsSubtype
from libc.stdint cimport int64_t
import array as _array_module
import mmap as _mmap_module

from dlpackarray.abi cimport kDLCPU
from dlpackarray._internal cimport synchronize_for_host_read
from dlpackarray.core cimport (
    BufferLayout, TensorView, dtype_from_pep3118, dtype_name, is_c_contiguous, kMaxNdim,
    measure_buffer_layout, require_host_memory, set_strides_from_bytes, validate,
    validate_within, view_nbytes,
)


cdef extern from "Python.h":
    # Views of CPython structs with just the fields read here (function
    # pointers are only compared, so their signatures are left opaque).
    ctypedef void* _inquiry "inquiry"
    ctypedef void* _getbufferproc "getbufferproc"
    ctypedef void* _releasebufferproc "releasebufferproc"
    ctypedef struct _BufferProcs "PyBufferProcs":
        _getbufferproc bf_getbuffer
        _releasebufferproc bf_releasebuffer
    ctypedef struct _TypeSlots "PyTypeObject":
        _inquiry tp_clear
        _BufferProcs* tp_as_buffer
        _TypeSlots* tp_base
    ctypedef struct _RawBuffer "Py_buffer":
        PyObject* obj
    bint PyObject_IS_GC(object obj)


# Whether the collector may see (traverse) the exporter a BufferOwner holds a
# Py_buffer on.  Seeing it lets cycles through the exporter be collected, but
# everything in an unreachable cycle, and everything reachable only from it,
# gets its tp_clear called while the BufferOwner (no_gc_clear) still holds
# the export; __dealloc__ then releases the buffer on the cleared exporter.
# That is safe only if clearing cannot free or unhook the exported memory or
# the state bf_releasebuffer uses.  Per exporter type:
# - memoryview (of anything: bytearray, NumPy arrays, slices and casts of
#   either): tp_clear drops its managed buffer although exports are live
#   ("memoryview has 1 exported buffer"), freeing the memory, and releasing
#   the cleared view later dereferences NULL.  Unsafe.
# - ctypes instances: tp_clear drops b_base and b_objects, which hold the
#   memory of from_buffer() objects and of sub-objects.  Unsafe.
# - Python classes with __buffer__ (3.12+): Py_buffer.obj is CPython's
#   wrapper, which holds the memoryview __buffer__ returned: as memoryview.
# - DLPackArray (from_buffer of one): tp_clear drops its owner.  Unsafe.
# - NumPy arrays are not tracked by the collector at all, so traversing them
#   would change nothing; arrays, views and their bases are safe either way.
#   (Pillow images come through __array_interface__ with a bytes copy.)
# - bytes, bytearray, array.array, mmap.mmap own their memory and free it only
#   when deallocated (which our reference prevents); they have no tp_clear.
#   Python subclasses of them are cleared by CPython's subtype_clear, which
#   empties __dict__ and __slots__ only, and export the base's buffer unless
#   they override __buffer__/__release_buffer__.  Safe: these are the
#   exporters whose cycles are collected.
# Anything else (third-party types, C subclasses with their own tp_clear) is
# not traversed: a cycle through it leaks rather than risking a crash.
cdef tuple _clear_safe_bases():
    cdef list bases = []
    for t in (bytes, bytearray, _array_module.array, _mmap_module.mmap):
        # Re-checked at import, so a Python version that gives one of them a
        # tp_clear turns traversal of it off instead of reintroducing the crash.
        if (<_TypeSlots*>t).tp_clear == NULL and (<_TypeSlots*>t).tp_as_buffer != NULL:
            bases.append(t)
    return tuple(bases)


cdef tuple _CLEAR_SAFE_BASES = _clear_safe_bases()


class _PlainSubclass(bytearray):
    pass


# The tp_clear CPython gives classes defined in Python (subtype_clear).
cdef _inquiry _SUBTYPE_CLEAR = (<_TypeSlots*>_PlainSubclass).tp_clear


cdef bint _collector_may_see(object exporter):
    """Whether clearing ``exporter`` in a collected cycle leaves a buffer
    exported from it intact (see the table above)."""
    cdef type tp = type(exporter)
    cdef _TypeSlots* t = <_TypeSlots*>tp
    cdef _TypeSlots* base
    if not PyObject_IS_GC(exporter):
        # The collector ignores it either way (exact bytes, bytearray, NumPy
        # arrays): the common case returns here.
        return False
    if tp is memoryview:
        # The commonest tracked exporter, and unsafe (see above): decided
        # without walking the bases below (a fifth of wrapping one).
        return False
    for b in _CLEAR_SAFE_BASES:
        # The real type, not isinstance(), which a __class__ attribute can fool.
        if PyType_IsSubtype(tp, b):
            base = <_TypeSlots*>b
            if (t.tp_as_buffer == NULL
                    or t.tp_as_buffer.bf_getbuffer != base.tp_as_buffer.bf_getbuffer
                    or t.tp_as_buffer.bf_releasebuffer != base.tp_as_buffer.bf_releasebuffer):
                return False
            # Every class between the type and the base must be a Python class.
            while t != base:
                if t == NULL or t.tp_clear != _SUBTYPE_CLEAR:
                    return False
                t = t.tp_base
            return True
    return False


cdef inline int _take_exporter(BufferOwner owner) except -1:
    """Records a freshly filled ``owner.buf``: moves the exporter reference
    out of ``buf.obj`` into ``source`` or ``hidden``."""
    owner.acquired = True
    cdef PyObject* exporter = (<_RawBuffer*>&owner.buf).obj
    if exporter == NULL:
        return 0
    if _collector_may_see(<object>exporter):
        owner.source = <object>exporter
    else:
        Py_INCREF(<object>exporter)
        owner.hidden = exporter
    owner.buf.obj = None  # drops the reference the Py_buffer held
    return 0


# no_gc_clear must be given here: on the .pxd declaration Cython ignores it
# and generates a tp_clear that drops the exporter (then __dealloc__ crashes).
@cython.no_gc_clear
cdef class BufferOwner:
    def __dealloc__(self):
        if self.acquired:
            self.acquired = False
            # Hand the exporter's reference back to the Py_buffer: releasing
            # calls its bf_releasebuffer and drops that reference.
            if self.source is not None:
                self.buf.obj = self.source
            elif self.hidden != NULL:
                self.buf.obj = <object>self.hidden
                Py_DECREF(<object>self.hidden)
                self.hidden = NULL
            PyBuffer_Release(&self.buf)


cdef BufferOwner acquire_buffer(object obj, int flags):
    """``PyObject_GetBuffer(obj, flags)`` into a new owner, following the
    owner's reference protocol (see ``BufferOwner.source``)."""
    cdef BufferOwner owner = BufferOwner.__new__(BufferOwner)
    PyObject_GetBuffer(obj, &owner.buf, flags)
    _take_exporter(owner)
    return owner


cdef inline bint _has_partial_stride(const Py_buffer* b) noexcept:
    """Whether a stride is not a whole number of items (only then is the
    exporter's name formatted into an error message)."""
    cdef int i
    for i in range(b.ndim):
        if b.itemsize > 0 and b.strides[i] % b.itemsize != 0:
            return True
    return False


cdef BufferOwner view_from_buffer(object obj, TensorView* out):
    """Zero-copy view of ``obj``'s buffer; the returned owner holds the buffer."""
    cdef BufferOwner owner = BufferOwner.__new__(BufferOwner)
    # RECORDS_RO: exporters report writability in `readonly`, so writable and
    # read-only sources (bytes, read-only mmap) take one call.
    PyObject_GetBuffer(obj, &owner.buf, PyBUF_RECORDS_RO)
    _take_exporter(owner)
    cdef Py_buffer* b = &owner.buf
    cdef int i
    # ndim first: it bounds every array read below.
    if b.ndim < 0 or b.ndim > kMaxNdim:
        raise BufferError(
            f"{type(obj).__name__} exports a buffer with ndim {b.ndim}; "
            f"at most {kMaxNdim} dimensions are supported")
    if b.shape == NULL and b.ndim > 1:
        # PyBUF_ND was requested, so a shape is mandatory (PEP 3118); only the
        # 1-D case has a documented meaning without one (len / itemsize items).
        raise BufferError(
            f"{type(obj).__name__} exports a {b.ndim}-dimensional buffer with a NULL shape")
    if b.suboffsets != NULL:
        for i in range(b.ndim):
            if b.suboffsets[i] >= 0:
                raise BufferError(
                    f"{type(obj).__name__} exports an indirect (PIL-style) buffer with "
                    "suboffsets; DLPack can only describe strided memory")
    out.dtype = dtype_from_pep3118(b.format, b.itemsize)
    out.data = b.buf
    out.byte_offset = 0
    out.set_ndim(b.ndim)
    out.device.device_type = kDLCPU
    out.device.device_id = 0
    out.readonly = b.readonly != 0
    out.ready_stream = NULL
    cdef int64_t itemsize = b.itemsize
    cdef bint contiguous = True
    if b.ndim == 1 and b.shape == NULL:
        out.shape[0] = b.len // itemsize
    else:
        for i in range(b.ndim):
            out.shape[i] = b.shape[i]
    cdef int64_t byte_strides[64]  # kMaxNdim, checked above
    if b.strides == NULL:
        set_strides_from_bytes(out[0], NULL, b"")
    else:
        for i in range(b.ndim):
            byte_strides[i] = b.strides[i]
        # The core keeps a used stride's "not a multiple of the item size"
        # error and fixes up unused ones; the message names the exporter.
        source = b"the buffer"
        if _has_partial_stride(b):
            source = f"the buffer of a '{type(obj).__name__}' object".encode()
        set_strides_from_bytes(out[0], byte_strides, source)
        contiguous = is_c_contiguous(out[0])
    # Py_buffer.len is the logical size, which equals the memory span only for
    # contiguous buffers: only then can the extent be checked against it.
    if contiguous:
        validate_within(out[0], b.buf, b.len)
    else:
        validate(out[0])
    return owner


cdef int _raise_no_format(const TensorView* v) except -1:
    # Out of fill_buffer: Cython declares the C++ string of this message at
    # the top of the function it is in, so every export would construct and
    # destroy one.
    raise BufferError(
        f"dtype {dtype_name(v.dtype).decode()} has no PEP 3118 format code; export it "
        "through DLPack instead")


cdef int fill_buffer(Py_buffer* buf, object exporter, const TensorView* v,
                     int64_t* byte_strides, int flags, BufferLayout* layout) except -1:
    """Fills ``buf`` for ``__getbuffer__``; ``layout`` holds what earlier exports
    of ``v`` measured and ``byte_strides`` (room for v.ndim values) v's strides
    in bytes: both are made here on the first export, in one call into the
    core.  The checks run in the same order on every export."""
    if (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE and v.readonly:
        raise BufferError("a writable buffer was requested but the array is read-only")
    if not layout.known:
        if v.device.device_type != kDLCPU:
            require_host_memory(v.device, b"export the data through the buffer protocol")
        measure_buffer_layout(v[0], byte_strides, layout)
    if v.device.device_type != kDLCPU:
        synchronize_for_host_read(v)  # CUDA hook: pinned/managed memory
    cdef const char* fmt = layout.format
    cdef bint simple = (flags & PyBUF_ND) != PyBUF_ND
    cdef bint c_contig = layout.c_contiguous
    if fmt == NULL and not (simple and c_contig):
        return _raise_no_format(v)
    if (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS and not c_contig:
        raise BufferError("a C-contiguous buffer was requested but the array is not C-contiguous")
    if (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS and not layout.f_contiguous:
        raise BufferError(
            "a Fortran-contiguous buffer was requested but the array is not Fortran-contiguous")
    if (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS and not (
            c_contig or layout.f_contiguous):
        raise BufferError("a contiguous buffer was requested but the array is not contiguous")
    if (flags & PyBUF_STRIDES) != PyBUF_STRIDES and not c_contig:
        raise BufferError(
            "the consumer did not ask for strides but the array is not C-contiguous")
    if layout.len < 0:
        # OverflowError for a broadcast view of more than int64 bytes: a wrapped
        # len would let consumers read past the memory.
        view_nbytes(v[0])
    buf.buf = (<char*>v.data) + v.byte_offset
    buf.len = layout.len
    buf.readonly = 1 if v.readonly else 0
    buf.suboffsets = NULL
    buf.internal = NULL
    if simple:
        # Plain bytes view: one dimension, no shape, unsigned-byte items.
        buf.ndim = 1
        buf.itemsize = 1
        buf.format = NULL
        if (flags & PyBUF_FORMAT) == PyBUF_FORMAT:
            buf.format = b"B"
        buf.shape = NULL
        buf.strides = NULL
    else:
        buf.ndim = v.ndim
        buf.itemsize = layout.itemsize
        buf.format = NULL
        if (flags & PyBUF_FORMAT) == PyBUF_FORMAT:
            buf.format = <char*>fmt
        buf.shape = <Py_ssize_t*>v.shape
        buf.strides = NULL
        if (flags & PyBUF_STRIDES) == PyBUF_STRIDES:
            buf.strides = <Py_ssize_t*>byte_strides
    # Called from __getbuffer__, where Cython pre-set obj to None; this
    # assignment swaps the references.
    buf.obj = exporter
    return 0
