# cython: language_level=3, boundscheck=False, wraparound=False
"""Pieces shared by every protocol module: dtype objects, devices, copies."""
cimport cython
from cpython.buffer cimport Py_buffer
from cpython.buffer cimport PyBUF_FULL_RO, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.object cimport PyObject, PyTypeObject, newfunc
from libc.stdint cimport int64_t

from dlpackarray.abi cimport DLDataType, DLDevice, DLDeviceType, kDLCPU
from dlpackarray.core cimport (
    TensorView, advise_huge_pages, aligned_allocate, aligned_free, dtype_from_name,
    dtype_from_typestr, dtype_itemsize, dtype_name, install_shutdown_gate, kCopyAlways,
    kCopyIfNeeded, kCopyNever, require_host_memory, set_c_strides, strided_copy_to_contiguous,
    view_nbytes, view_size,
)

from dlpackarray._internal cimport (
    copy_device_to_host_into, is_cuda_device, synchronize_for_host_read,
)

import os

from dlpackarray._devices import DLDeviceType as _PyDeviceType

# Every module that exports imports this one, so the shutdown gate is set up
# before the first export: releases made at interpreter exit by threads
# without the GIL leak instead of entering Python (python_shim.hpp,
# docs/reliability.md).
install_shutdown_gate()

cdef dict _dtype_cache = {}
cdef dict _device_cache = {}

# Copies above this many bytes release the GIL.
cdef int64_t _NOGIL_COPY_BYTES = 1 << 16

# Results smaller than this are never checked against the machine's memory
# (the check costs a system call; a small allocation fails fast by itself).
cdef int64_t _CHECKED_BYTES = 1 << 30
cdef object _physical_memory = None  # bytes; 0: unknown on this platform


cdef object memory_limit():
    """Bytes this process can ever hold: the machine's physical memory, or
    the address-space limit (``RLIMIT_AS``) when that is lower; 0 if unknown."""
    global _physical_memory
    if _physical_memory is None:
        try:
            _physical_memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            _physical_memory = 0
    limit = _physical_memory
    try:
        import resource  # POSIX only
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft >= 0 and (limit == 0 or soft < limit):
            limit = soft
    except (ImportError, AttributeError, OSError, ValueError):
        pass
    return limit


cdef int require_memory(object nbytes, object count, str what) except -1:
    """MemoryError, before anything is allocated, when a result of ``count``
    elements needs at least ``nbytes`` bytes and that is more than the process
    can ever hold (memory_limit): a broadcast view of 2**40 elements over one
    byte would otherwise allocate and fill until memory runs out, where NumPy
    fails at once.  Results that fit are left to the allocator."""
    if nbytes < _CHECKED_BYTES:
        return 0
    limit = memory_limit()
    if limit and nbytes > limit:
        raise MemoryError(
            f"{what} of {count} elements needs at least {nbytes} bytes, more than the "
            f"{limit} bytes this process can hold (physical memory or RLIMIT_AS); a "
            "broadcast array can be far larger than the memory it views")
    return 0


# DType(name) enters through its tp_new, patched in _fast_entries.pyx (_dtype_new).
@cython.final
cdef class DType:
    """DType(name)\n--\n\nA DLPack data type: ``code``, ``bits`` and ``lanes`` plus a readable name.

    ``DType(x)`` accepts a :class:`DType`, a name (``"float32"``) or alias
    (``"f4"``), a typestr (``"<f4"``), a NumPy dtype or scalar type (ml_dtypes
    ones too) or ``bool``/``int``/``float``/``complex``.

    Instances are interned and immutable: every spelling of a type gives the
    same object, so ``DType("f4") is a.dtype`` when ``a`` holds float32 data.
    Compares equal to another :class:`DType` or to its name (``"float32"``).
    """

    def __init__(self, name):
        # type.__call__ runs __init__ on the interned instance _dtype_new
        # returned; a later explicit call must not be able to change it.
        if dtype_object(parse_dtype(name)) is not self:
            raise TypeError("DType objects are immutable; call DType(name) for another type")

    @property
    def itemsize(self):
        """int: bytes per element."""
        return dtype_itemsize(self.dt)

    def __reduce__(self):
        return (DType, (self.name,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo, /):
        return self

    def __eq__(self, other):
        if isinstance(other, DType):
            return self is other
        if isinstance(other, str):
            try:
                return self is dtype_object(parse_dtype(other))
            except (TypeError, ValueError, BufferError):
                return False
        return NotImplemented

    def __hash__(self):
        return hash((self.code, self.bits, self.lanes))

    def __repr__(self):
        return f"DType('{self.name}')"

    def __str__(self):
        return self.name


# DType(name) returns the interned instance: its tp_new is patched with the
# other slots (_fast_entries.pyx, _dtype_new); this is the allocation it had.
cdef tuple _NO_ARGS = ()
cdef newfunc _dtype_alloc = (<PyTypeObject*>DType).tp_new


cdef DType dtype_object(DLDataType dt):
    cdef unsigned long key = (<unsigned long>dt.code << 24) | (<unsigned long>dt.bits << 16) \
        | dt.lanes
    cdef object found = _dtype_cache.get(key)
    if found is not None:
        return <DType>found
    return _new_dtype_object(dt, key)


cdef DType _new_dtype_object(DLDataType dt, unsigned long key):
    # Out of dtype_object: Cython declares the C++ string of the name at the
    # top of the function it is in, so every cached lookup (every x.dtype)
    # would construct and destroy one.
    cdef DType d = <DType>_dtype_alloc(DType, <PyObject*>_NO_ARGS, NULL)
    d.dt = dt
    d.code = dt.code
    d.bits = dt.bits
    d.lanes = dt.lanes
    d.name = dtype_name(dt).decode()
    # setdefault: under free threading two first lookups may race; one wins.
    return <DType>_dtype_cache.setdefault(key, d)


_PY_TYPE_NAMES = {bool: "bool", int: "int64", float: "float64", complex: "complex128"}


cdef bytes _name_bytes(str name):
    """``name`` for the C++ dtype tables, whose names and typestrs are ASCII
    without NUL: anything else (a lone surrogate, other non-ASCII text, an
    embedded NUL that C would read as the end) names no dtype, the same
    TypeError as any unknown name, instead of an encoding error."""
    if name.isascii() and "\0" not in name:
        return name.encode("ascii")
    raise TypeError(f"unknown dtype name {name!r}: dtype names are ASCII text without NUL "
                    "characters, such as 'float32', 'bfloat16' or '<f4'")


cdef DLDataType parse_dtype(object obj) except *:
    """DType, name, typestr, NumPy dtype/scalar type or Python scalar type -> DLDataType."""
    if isinstance(obj, DType):
        return (<DType>obj).dt
    return _parse_dtype_by_name(obj)


cdef DLDataType _parse_dtype_by_name(object obj) except *:
    # parse_dtype for everything but a DType, apart so that a DType (view(),
    # astype() and DType() of one) constructs no C++ string: Cython declares
    # the name's temporary at the top of the function it is in.
    if isinstance(obj, str):
        return dtype_from_name(_name_bytes(<str>obj))
    if obj in _PY_TYPE_NAMES:
        return dtype_from_name(_PY_TYPE_NAMES[obj].encode())
    kind = getattr(obj, "kind", None)
    typestr = getattr(obj, "str", None)
    if isinstance(kind, str) and isinstance(typestr, str):
        # A NumPy dtype: its typestr carries the byte order; extension dtypes
        # (ml_dtypes bfloat16/float8) are known by name.  ml_dtypes calls
        # float8_e5m2 kind "f" with typestr "<f1", which no NumPy type has.
        if kind in "biufc":
            try:
                return dtype_from_typestr(_name_bytes(typestr))
            except (TypeError, BufferError):
                if kind != "f":
                    raise
        return dtype_from_name(_name_bytes(str(getattr(obj, "name", ""))))
    dtype_attr = getattr(obj, "dtype", None)
    # A class's `dtype` is a descriptor (NumPy scalar types such as np.uint32
    # have a getset one), not a dtype: classes are known by __name__ below.
    if dtype_attr is not None and not isinstance(obj, type) and dtype_attr is not obj:
        return parse_dtype(dtype_attr)
    name = getattr(obj, "__name__", None)
    if isinstance(name, str):
        return dtype_from_name(_name_bytes(name))
    raise TypeError(f"cannot interpret {obj!r} as a dtype")


cdef int parse_copy(object copy) except -2:
    """The ``copy`` keyword (None/False/True) as a ``CopyMode`` value (-1/0/1);
    the one place it is validated."""
    if copy is None:
        return <int>kCopyIfNeeded
    if copy is True:
        return <int>kCopyAlways
    if copy is False:
        return <int>kCopyNever
    raise TypeError(f"copy must be None, True or False, got {copy!r}")


cdef tuple _CPU_DEVICE = (_PyDeviceType.CPU, 0)


cdef object device_tuple(DLDevice dev):
    # CPU is nearly every call (e.g. each torch.from_dlpack asks): no int key,
    # no dict lookup.
    if dev.device_type == kDLCPU and dev.device_id == 0:
        return _CPU_DEVICE
    # Unsigned: a (malformed) negative device type must not be left-shifted.
    cdef unsigned long long key = (
        (<unsigned long long><unsigned int>dev.device_type) << 32) | <unsigned int>dev.device_id
    found = _device_cache.get(key)
    if found is not None:
        return found
    try:
        dtype_enum = _PyDeviceType(dev.device_type)
    except ValueError:
        dtype_enum = int(dev.device_type)
    found = (dtype_enum, int(dev.device_id))
    _device_cache[key] = found
    return found


cdef DLDevice parse_device(object device) except *:
    """None/"cpu" -> CPU; a ``(device_type, device_id)`` pair as returned by
    ``__dlpack_device__``; or an object with ``__dlpack_device__``."""
    cdef DLDevice dev
    if device is None or device == "cpu":
        dev.device_type = kDLCPU
        dev.device_id = 0
        return dev
    if hasattr(device, "__dlpack_device__"):
        device = device.__dlpack_device__()
    if not isinstance(device, tuple) or len(device) != 2:
        raise TypeError(
            f"device must be None, 'cpu' or a (device_type, device_id) tuple, got {device!r}")
    dtype_, did = device
    if not isinstance(dtype_, int) or not isinstance(did, int):
        raise TypeError(f"device tuple must hold two ints, got {device!r}")
    if dtype_ < 1 or dtype_ > 0x7fffffff or did < 0 or did > 0x7fffffff:
        raise ValueError(f"invalid device {device!r}")
    dev.device_type = <DLDeviceType><int>dtype_
    dev.device_id = did
    return dev


cdef class HeapOwner:
    def __dealloc__(self):
        if self.ptr != NULL:
            aligned_free(self.ptr)
            self.ptr = NULL


cdef object copy_to_bytes(object exporter, const TensorView* src):
    """``bytes(exporter)``: the elements of ``src`` (exporter's view) in C order,
    copied once, straight into the new bytes object.  The buffer protocol is
    entered first (PyBUF_FULL_RO, what bytes() asks of a buffer), so what it
    refuses (device memory, dtypes without a format code) is refused with its
    error, and pinned or managed memory is waited for, as bytes() of the
    buffer would."""
    cdef Py_buffer buf
    cdef int64_t nbytes
    cdef char* dst
    PyObject_GetBuffer(exporter, &buf, PyBUF_FULL_RO)
    try:
        nbytes = view_nbytes(src[0])
        out = PyBytes_FromStringAndSize(NULL, nbytes)
        dst = PyBytes_AS_STRING(out)
        advise_huge_pages(dst, nbytes)  # untouched yet: first-touch faults of 2 MiB
        if nbytes >= _NOGIL_COPY_BYTES:
            with nogil:
                strided_copy_to_contiguous(src[0], dst)
        elif nbytes > 0:
            strided_copy_to_contiguous(src[0], dst)
        return out
    finally:
        PyBuffer_Release(&buf)


cdef HeapOwner copy_to_heap(const TensorView* src, TensorView* dst) except *:
    """Dense C-ordered host copy of ``src`` described by ``dst``."""
    # --- CUDA hook (docs/cuda.md): device memory is copied by the driver,
    # pinned/managed memory read once its ready stream is done.
    cdef bint on_device = is_cuda_device(src.device)
    if not on_device:
        require_host_memory(src.device, b"copy")
        if src.device.device_type != kDLCPU:
            synchronize_for_host_read(src)
    # --- end CUDA hook
    # OverflowError for a broadcast view whose copy would exceed int64 bytes;
    # never a short allocation.
    cdef int64_t nbytes = view_nbytes(src[0])
    if nbytes >= _CHECKED_BYTES:  # (no Python integers made for the common copy)
        require_memory(nbytes, view_size(src[0]), "a copy")
    cdef HeapOwner owner = HeapOwner.__new__(HeapOwner)
    owner.ptr = aligned_allocate(nbytes)
    owner.nbytes = nbytes
    if on_device:
        copy_device_to_host_into(src, owner.ptr)
    elif nbytes >= _NOGIL_COPY_BYTES:
        with nogil:
            strided_copy_to_contiguous(src[0], owner.ptr)
    else:
        strided_copy_to_contiguous(src[0], owner.ptr)
    dst[0] = src[0]
    dst.data = owner.ptr
    dst.byte_offset = 0
    dst.device.device_type = kDLCPU
    dst.device.device_id = 0
    dst.readonly = False
    dst.ready_stream = NULL
    set_c_strides(dst[0])
    return owner
