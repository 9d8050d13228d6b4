# cython: language_level=3, boundscheck=False, wraparound=False
"""PEP 3118 buffer protocol: import a Py_buffer as a view, export a view."""
from cpython.buffer cimport (
    PyBUF_ANY_CONTIGUOUS, PyBUF_C_CONTIGUOUS, PyBUF_F_CONTIGUOUS, PyBUF_FORMAT,
    PyBUF_ND, PyBUF_RECORDS_RO, PyBUF_STRIDES, PyBUF_WRITABLE, PyBuffer_Release,
    PyObject_GetBuffer, Py_buffer,
)
from libc.stdint cimport int64_t

from dlpackarray.abi cimport kDLCPU
from dlpackarray._cuda cimport synchronize_for_host_read
from dlpackarray.core cimport (
    TensorView, device_is_host_accessible, dtype_from_pep3118, dtype_itemsize, dtype_name,
    is_c_contiguous, is_f_contiguous, kMaxNdim, pep3118_from_dtype, set_strides_from_bytes,
    validate, validate_within, view_nbytes,
)


cdef class BufferOwner:
    def __dealloc__(self):
        if self.acquired:
            self.acquired = False
            # Hand the exporter's reference back to the Py_buffer: releasing
            # calls its bf_releasebuffer and drops that reference.
            self.buf.obj = self.source
            PyBuffer_Release(&self.buf)


cdef BufferOwner acquire_buffer(object obj, int flags):
    """``PyObject_GetBuffer(obj, flags)`` into a new owner, following the
    owner's reference protocol (exporter moved to ``source``)."""
    cdef BufferOwner owner = BufferOwner.__new__(BufferOwner)
    PyObject_GetBuffer(obj, &owner.buf, flags)
    owner.acquired = True
    owner.source = owner.buf.obj
    owner.buf.obj = None
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
    owner.acquired = True
    # Py_buffer.obj is an owned reference (Cython refcounts the field): move
    # it to `source`, leaving None in its place until __dealloc__.
    owner.source = owner.buf.obj
    owner.buf.obj = None
    cdef Py_buffer* b = &owner.buf
    cdef int i
    if b.suboffsets != NULL:
        for i in range(b.ndim):
            if b.suboffsets[i] >= 0:
                raise BufferError(
                    f"{type(obj).__name__} exports an indirect (PIL-style) buffer with "
                    "suboffsets; DLPack can only describe strided memory")
    if b.ndim < 0 or b.ndim > kMaxNdim:
        raise BufferError(
            f"{type(obj).__name__} exports a buffer with ndim {b.ndim}; "
            f"at most {kMaxNdim} dimensions are supported")
    out.dtype = dtype_from_pep3118(b.format, b.itemsize)
    out.data = b.buf
    out.byte_offset = 0
    out.set_ndim(b.ndim)
    out.device.device_type = kDLCPU
    out.device.device_id = 0
    out.readonly = b.readonly != 0
    out.ready_stream = NULL
    cdef int64_t itemsize = b.itemsize
    cdef int64_t byte_strides[64]
    cdef bint contiguous = True
    if b.ndim == 1 and b.shape == NULL:
        out.shape[0] = b.len // itemsize
    else:
        for i in range(b.ndim):
            out.shape[i] = b.shape[i]
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


cdef int fill_buffer(Py_buffer* buf, object exporter, const TensorView* v,
                     Py_ssize_t* byte_strides, int flags) except -1:
    """Fills ``buf`` for ``__getbuffer__``; ``byte_strides`` holds v's strides in bytes."""
    if (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE and v.readonly:
        raise BufferError("a writable buffer was requested but the array is read-only")
    if not device_is_host_accessible(v.device):
        raise BufferError(
            "the buffer protocol can only export host memory; this array lives on "
            f"device type {<int>v.device.device_type}; for a host copy use "
            "DLPackArray(x, device='cpu')")
    if v.device.device_type != kDLCPU:
        synchronize_for_host_read(v)  # CUDA hook: pinned/managed memory
    cdef const char* fmt = pep3118_from_dtype(v.dtype)
    cdef bint simple = (flags & PyBUF_ND) != PyBUF_ND
    cdef bint c_contig = is_c_contiguous(v[0])
    if fmt == NULL and not (simple and c_contig):
        raise BufferError(
            f"dtype {dtype_name(v.dtype).decode()} has no PEP 3118 format code; export it "
            "through DLPack instead")
    if (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS and not c_contig:
        raise BufferError("a C-contiguous buffer was requested but the array is not C-contiguous")
    if (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS and not is_f_contiguous(v[0]):
        raise BufferError(
            "a Fortran-contiguous buffer was requested but the array is not Fortran-contiguous")
    if (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS and not (
            c_contig or is_f_contiguous(v[0])):
        raise BufferError("a contiguous buffer was requested but the array is not contiguous")
    if (flags & PyBUF_STRIDES) != PyBUF_STRIDES and not c_contig:
        raise BufferError(
            "the consumer did not ask for strides but the array is not C-contiguous")
    cdef int64_t itemsize = dtype_itemsize(v.dtype)
    buf.buf = (<char*>v.data) + v.byte_offset
    # OverflowError for a broadcast view of more than int64 bytes: a wrapped
    # len would let consumers read past the memory.
    buf.len = view_nbytes(v[0])
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
        buf.itemsize = itemsize
        buf.format = NULL
        if (flags & PyBUF_FORMAT) == PyBUF_FORMAT:
            buf.format = <char*>fmt
        buf.shape = <Py_ssize_t*>v.shape
        buf.strides = NULL
        if (flags & PyBUF_STRIDES) == PyBUF_STRIDES:
            buf.strides = byte_strides
    # Called from __getbuffer__, where Cython pre-set obj to None; this
    # assignment swaps the references.
    buf.obj = exporter
    return 0
