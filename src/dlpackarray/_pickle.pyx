# cython: language_level=3, boundscheck=False, wraparound=False
"""Pickling, copying and Dask sizing of DLPackArray (docs/processes.md).

A pickled array is the contiguous span of bytes its elements cover (never its
logical size: a broadcast array ships its few real bytes) plus the layout that
places the elements in that span -- unless the span holds more than twice the
elements' own bytes (a strided view with wide gaps), which ships a C-contiguous
copy of the elements instead.  ``rebuild`` imports the span through the
validated ``from_buffer`` path, so a pickle that does not fit its bytes raises
instead of producing an out-of-bounds view.

Subclasses keep their type and their instance state (``__getstate__``, as
pickle's default reduction would): the span and layout are rebuilt as a plain
array and moved into an instance of the class made by ``DLPackArray.__new__``
(its own ``__new__`` and ``__init__`` are not called, as pickle's default
reduction does not call ``__init__``).
"""
cimport cython
from copy import deepcopy as _deepcopy
from pickle import PickleBuffer as _PickleBuffer

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport uintptr_t

from dlpackarray.abi cimport DLDeviceType, kDLCPU, kDLCUDA, kDLUInt
from dlpackarray.core cimport (
    Extent, TensorView, byte_stride, device_is_host_accessible, device_text, validate,
)
from dlpackarray._internal cimport DLPackArray, mark_ready, wrap_view
from dlpackarray._internal cimport view_from_typed_buffer
from dlpackarray._internal cimport BufferOwner
from dlpackarray._internal cimport copy_to_heap
from dlpackarray._internal cimport (
    DeviceOwner, copy_host_bytes_to_device, copy_on_device_into, is_cuda_device,
    synchronize_for_host_read,
)

#: The layout of ``rebuild``'s arguments.  A pickle names its version first, so
#: a future layout can still read this one and this one refuses a newer one.
FORMAT_VERSION = 1

cdef tuple _HOST = (int(kDLCPU), 0)


cdef int _span_of(const TensorView* v, const Extent* e, TensorView* span) except -1:
    """``span``: the bytes ``[lo, hi)`` that ``v``'s elements cover, as 1-D uint8
    on ``v``'s device (host and CUDA data are addresses, never opaque handles)."""
    span.set_ndim(1)
    span.shape[0] = e.hi - e.lo
    span.strides[0] = 1
    span.dtype.code = kDLUInt
    span.dtype.bits = 8
    span.dtype.lanes = 1
    span.data = <void*>(<uintptr_t>v.data + <uintptr_t>v.byte_offset + <uintptr_t>e.lo)
    span.byte_offset = 0
    span.device = v.device
    span.readonly = v.readonly
    span.ready_stream = v.ready_stream
    return 0


@cython.final
cdef class _WritableBytes:
    """Pickles ``data`` (bytes) as ``bytearray(data)``: protocols 2-4 have no
    bytearray opcode, and bytearray's own reduction copies it into a bytes
    object first; this saves that copy."""
    cdef bytes data

    def __reduce__(self):
        return (bytearray, (self.data,))


def reduce_array(DLPackArray a not None, int protocol):
    """``a.__reduce_ex__(protocol)``: ``(rebuild, args)``.

    Protocol 5 hands pickle a :class:`pickle.PickleBuffer` of the span
    (out-of-band with a ``buffer_callback``, else written in-band as bytes or
    bytearray by its writability); older protocols carry ``bytes`` (read-only
    arrays) or ``bytes`` that unpickle as a ``bytearray`` (writable ones).
    CUDA device data is copied to the host first; pinned and managed memory
    is read once it is ready.
    """
    cdef TensorView* v = &a._view
    cdef TensorView span, host, dense
    cdef Extent e = validate(v[0])
    cdef int i
    cdef Py_ssize_t n
    cdef _WritableBytes writable
    cdef bint on_host = True  # whether v's bytes are host memory, ready to read
    device = _HOST
    span_owner = a.owner
    if is_cuda_device(v.device):
        device = (int(kDLCUDA), int(v.device.device_id))
        on_host = False
    elif not device_is_host_accessible(v.device):
        raise BufferError(
            f"cannot pickle a DLPackArray on {device_text(v.device).decode()}: only host "
            "memory and CUDA device memory can leave the process")
    elif v.device.device_type != kDLCPU:
        synchronize_for_host_read(v)
    if _ships_a_copy(&e):
        # The gaps would outweigh the elements: ship the elements alone, C
        # ordered (what NumPy ships for every non-contiguous array), copied to
        # the host as CUDA data always is to travel.
        span_owner = copy_to_heap(v, &dense)  # waits for a device copy
        dense.readonly = v.readonly
        v = &dense
        e = validate(v[0])
        on_host = True
    _span_of(v, &e, &span)
    if e.size == 0:
        # Nothing to ship; the span may have no address at all.
        payload = b"" if v.readonly else bytearray()
    else:
        if not on_host:
            span_owner = copy_to_heap(&span, &host)  # waits for the device copy
            host.readonly = v.readonly
            span = host
        else:
            span.device.device_type = kDLCPU
            span.device.device_id = 0
            span.ready_stream = NULL  # read below, after the wait above
        if protocol >= 5:
            payload = _PickleBuffer(wrap_view(&span, span_owner))
        else:
            n = <Py_ssize_t>span.shape[0]
            payload = PyBytes_FromStringAndSize(<char*>span.data, n)
            if not v.readonly:
                writable = _WritableBytes.__new__(_WritableBytes)
                writable.data = payload
                payload = writable
    strides = tuple([byte_stride(v[0], i) for i in range(v.ndim)])
    args = (FORMAT_VERSION, payload, a.dtype.name, a.shape, strides, -e.lo, bool(v.readonly),
            device)
    if type(a) is DLPackArray:
        return (rebuild, args)
    return (rebuild_as, (type(a),) + args, _state_of(a))


cdef bint _ships_a_copy(const Extent* e) noexcept:
    """Whether a pickle carries a dense copy rather than the span: when the span
    is more than twice the elements' bytes.  Up to that, the span goes as it is
    (zero-copy out-of-band with protocol 5), so dense layouts in any axis order
    and views with modest gaps (every other element) are never copied, and a
    pickle is never more than twice its elements' bytes.  A broadcast view's
    span is smaller than its elements' bytes (or their count overflows
    int64, nbytes -1): it always ships the span.  (Both byte counts fit in
    int64, so their difference does; twice nbytes might not.)"""
    return e.size != 0 and e.nbytes >= 0 and (e.hi - e.lo) - e.nbytes > e.nbytes


cdef int _check_int_tuple(object value, str what) except -1:
    if type(value) is not tuple:
        raise TypeError(f"cannot unpickle a DLPackArray: {what} must be a tuple, got "
                        f"{type(value).__name__}")
    for item in <tuple>value:
        if type(item) is not int:
            raise TypeError(f"cannot unpickle a DLPackArray: {what} must hold ints, got "
                            f"{item!r}")
    return 0


#: The classes ``rebuild`` raises (its docstring), in the order a subclass of
#: more than one of them is matched.
cdef tuple _DOCUMENTED = (BufferError, OverflowError, TypeError, ValueError)


cdef type _documented_class(BaseException exc):
    for cls in _DOCUMENTED:
        if isinstance(exc, cls):
            return cls
    return TypeError  # not reached: only _DOCUMENTED instances are caught


def rebuild(version, data, dtype, shape, strides, offset, readonly, device):
    """Reconstruct a pickled :class:`DLPackArray` (what pickles call; not API).

    Parameters
    ----------
    version : int
        :data:`FORMAT_VERSION` of the pickling side.
    data : buffer-protocol object
        The span of bytes the elements cover (a ``PickleBuffer``, the buffer
        handed to ``pickle.loads``, bytes or bytearray); viewed, not copied.
    dtype : str
        The element type's name.
    shape, strides : tuple of int
        Strides in bytes, as the span is laid out.
    offset : int
        Bytes from the start of ``data`` to the first element.
    readonly : bool
        The result is read-only when this is true or ``data`` is read-only.
    device : tuple of (int, int)
        ``(1, 0)`` for host memory; ``(2, n)``: copied onto CUDA device ``n``.

    Raises
    ------
    TypeError, ValueError, OverflowError, BufferError
        If the arguments are malformed or the layout reaches outside ``data``
        (every check of :meth:`DLPackArray.from_buffer`), or the device
        cannot be used here.
    """
    cdef TensorView v
    cdef DeviceOwner on_device
    cdef BufferOwner buf
    if type(version) is not int or version != FORMAT_VERSION:
        raise ValueError(f"cannot unpickle a DLPackArray of format version {version!r}: this "
                         f"dlpackarray reads version {FORMAT_VERSION}")
    if type(dtype) is not str:
        raise TypeError(f"cannot unpickle a DLPackArray: dtype must be a str, got {dtype!r}")
    _check_int_tuple(shape, "shape")
    _check_int_tuple(strides, "strides")
    if type(offset) is not int:
        raise TypeError(f"cannot unpickle a DLPackArray: offset must be an int, got {offset!r}")
    if type(readonly) is not bool:
        raise TypeError(f"cannot unpickle a DLPackArray: readonly must be a bool, got "
                        f"{readonly!r}")
    _check_int_tuple(device, "device")
    if len(<tuple>device) != 2 or not (device == _HOST or device[0] == kDLCUDA):
        raise ValueError(f"cannot unpickle a DLPackArray for device {device!r}: pickles hold "
                         "host data (1, 0) or CUDA device data (2, n)")
    try:
        owner = view_from_typed_buffer(data, dtype, shape, strides, offset, &v)
    except _DOCUMENTED as exc:
        # Reworded as the documented class it belongs to and chained: a
        # subclass (UnicodeError, a NumPy error) may take other constructor
        # arguments than one message.
        raise _documented_class(exc)(f"cannot unpickle a DLPackArray: {exc}") from exc
    if readonly:
        v.readonly = True
    if device == _HOST:
        return wrap_view(&v, owner)
    # CUDA: the whole span goes to the device, placed as it was in the buffer.
    buf = <BufferOwner>owner
    if not 0 <= device[1] <= 0x7fffffff:
        raise ValueError(f"cannot unpickle a DLPackArray for CUDA device {device[1]}")
    try:
        on_device = copy_host_bytes_to_device(buf.buf.buf, buf.buf.len, <int>device[1])
    except (BufferError, ValueError) as exc:
        raise BufferError(f"cannot unpickle a DLPackArray onto CUDA device {device[1]}: "
                          f"{exc}") from None
    v.data = <void*>(<uintptr_t>on_device.ptr + (<uintptr_t>v.data - <uintptr_t>buf.buf.buf))
    v.device.device_type = <DLDeviceType>kDLCUDA
    v.device.device_id = <int>device[1]
    v.ready_stream = NULL
    return wrap_view(&v, on_device)


def copy_array(DLPackArray a not None, memo=None):
    """``copy.copy(a)`` (``memo`` None) and ``copy.deepcopy(a, memo)``: a
    writable C-contiguous copy in memory of its own, on the same device for
    CUDA data (``ndarray.copy``).  A subclass's copy has its type and a copy of
    its instance state: shallow for ``copy.copy``, deep (through ``memo``) for
    ``copy.deepcopy``, as the copy module treats any other object."""
    cdef TensorView result
    if is_cuda_device(a._view.device):
        owner = copy_on_device_into(&a._view, &result, a)
    else:
        owner = copy_to_heap(&a._view, &result)
    if type(a) is DLPackArray:
        return wrap_view(&result, owner)
    y = _instance_of(type(a), &result, owner)
    state = _state_of(a)
    if memo is not None:
        memo[id(a)] = y  # before the state: it may refer back to ``a``
        state = _deepcopy(state, memo)
    _set_state(y, state)
    return y


def byte_extent(DLPackArray a not None):
    """Bytes of memory ``a``'s elements span (``dask.sizeof``): a broadcast
    array counts its real bytes, not its logical size."""
    cdef Extent e = validate(a._view)
    return e.hi - e.lo


# -- subclasses --------------------------------------------------------------------------
cdef DLPackArray _instance_of(type cls, const TensorView* v, object owner):
    """An instance of the DLPackArray subclass ``cls`` holding ``v``."""
    cdef DLPackArray y = DLPackArray.__new__(cls)
    y._view = v[0]
    y.owner = owner
    mark_ready(y)
    return y


cdef object _state_of(DLPackArray a):
    """The instance state pickle and copy would save for any other object: the
    class's ``__getstate__`` (object's gives the ``__dict__`` and slots, or
    None when there are none; before Python 3.11 object has none: the
    ``__dict__``)."""
    getstate = getattr(a, "__getstate__", None)
    if getstate is not None:
        return getstate()
    # Python 3.10: what object.__getstate__ gives from 3.11 on, the ``__dict__``
    # and, where the class declares __slots__, a dict of the slots that are set.
    d = getattr(a, "__dict__", None) or None
    slots = {}
    for name in _slot_names(type(a)):
        try:
            slots[name] = getattr(a, name)
        except AttributeError:
            pass
    return (d, slots) if slots else d


cdef list _slot_names(type cls):
    """The attribute names of every ``__slots__`` entry along ``cls``'s MRO,
    private names mangled as the class that declared them sees them."""
    names = []
    for klass in cls.__mro__:
        declared = klass.__dict__.get("__slots__")
        if declared is None:
            continue
        if isinstance(declared, str):
            declared = (declared,)
        for name in declared:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{klass.__name__.lstrip('_')}{name}"
            if name not in names:
                names.append(name)
    return names


cdef int _set_state(DLPackArray y, object state) except -1:
    """Restores ``state`` as pickle's BUILD opcode does: ``__setstate__`` when
    the class has one, else the ``__dict__`` and ``(dict, slots)`` updates."""
    if state is None:
        return 0
    setstate = getattr(y, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return 0
    slots = None
    if type(state) is tuple and len(<tuple>state) == 2:
        state, slots = state
    if state:
        (<object>y).__dict__.update(state)
    if slots:
        for name, value in slots.items():
            setattr(y, name, value)
    return 0


def rebuild_as(cls, *args):
    """Reconstruct a pickled instance of the DLPackArray subclass ``cls``
    (what pickles of subclasses call; not API).  ``args`` are :func:`rebuild`'s;
    pickle then restores the instance state."""
    if not (isinstance(cls, type) and issubclass(cls, DLPackArray)):
        raise TypeError(f"cannot unpickle a DLPackArray as {cls!r}: not a subclass of "
                        "DLPackArray")
    cdef DLPackArray base = rebuild(*args)
    return _instance_of(cls, &base._view, base.owner)
