# cython: language_level=3, boundscheck=False, wraparound=False
"""DLPack capsules: consume (import) and produce (export) per the Python spec."""
from cpython.long cimport PyLong_AsLongAndOverflow
from cpython.object cimport PyObject, PyTypeObject
from cpython.pycapsule cimport PyCapsule_CheckExact, PyCapsule_GetName
from libc.stdint cimport uint64_t

from dlpackarray.abi cimport (
    DLDevice, kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM, kDLROCMHost,
)
from dlpackarray.core cimport (
    kDLPackMajorVersion, kDLPackMinorVersion, kFlagIsCopied, kFlagReadOnly,
)
from dlpackarray.core cimport (
    CopyMode, TensorView, kProducer, new_legacy_capsule,
    new_versioned_capsule, DeviceRoute, kRouteCopyToHost, kRouteRelabelHost, kRouteSame,
    release_adopted_capsule, route_device_request,
)
from dlpackarray._raw_call cimport raise_pending, steal, vectorcall_method
from dlpackarray._internal cimport (
    _PyType_Lookup, copy_to_heap, device_tuple, parse_copy, parse_device,
)
from dlpackarray._internal cimport (
    copy_on_device_into, is_cuda_device, is_cuda_stream_device, order_for_consumer,
    synchronize_for_host_read,
)

# What a consumer asks producers for: the newest version we understand.
cdef tuple _MAX_VERSION = (int(kDLPackMajorVersion), int(kDLPackMinorVersion))
cdef object _OUR_MAJOR = int(kDLPackMajorVersion)
cdef str _DLPACK_NAME = "__dlpack__"
cdef tuple _KWNAMES_MAX_VERSION = ("max_version",)


cdef bint is_dlpack_capsule(object obj):
    return PyCapsule_CheckExact(obj)


cdef int raise_not_dlpack(object capsule) except -1:
    if not PyCapsule_CheckExact(capsule):
        # e.g. a producer whose __dlpack__ returned something else.
        raise TypeError(
            f"expected a DLPack PyCapsule, got a '{type(capsule).__name__}' object")
    cdef const char* name = PyCapsule_GetName(capsule)
    pyname = None if name == NULL else name.decode(errors="replace")
    if pyname in ("used_dltensor", "used_dltensor_versioned"):
        raise ValueError(
            f"this DLPack capsule ('{pyname}') has already been consumed; a capsule can "
            "be consumed only once")
    raise TypeError(
        f"a PyCapsule named {pyname!r} is not a DLPack tensor capsule "
        "(expected 'dltensor' or 'dltensor_versioned')")


cdef void release_adopted(object capsule) noexcept:
    """Undoes view_from_capsule's adoption when the import fails later.

    Any module may call release_adopted_capsule directly: the shim is linked
    once (libdlpackarray_core), so every module recognises the destructor.
    """
    release_adopted_capsule(capsule)


# The keywords of __dlpack__ a consumer may pass, as bits of a mask.
cdef enum:
    _KW_STREAM = 1
    _KW_MAX_VERSION = 2
    _KW_DL_DEVICE = 4
    _KW_COPY = 8
    # The signature does not say (none to inspect, or **kwargs).
    _KW_UNKNOWN = -1

cdef dict _KEYWORD_BITS = {
    "stream": _KW_STREAM, "max_version": _KW_MAX_VERSION, "dl_device": _KW_DL_DEVICE,
    "copy": _KW_COPY}

# type -> (the __dlpack__ found on it, the keyword mask of its signature).
# The function is kept to notice a class whose __dlpack__ was replaced; the
# bound keeps classes made in a loop from piling up (each entry holds its type).
cdef dict _KEYWORDS_BY_TYPE = {}
cdef Py_ssize_t _KEYWORDS_CACHE_MAX = 256


cdef int _mask_of_signature(object func) except -2:
    """The keywords ``func`` (a ``__dlpack__`` as found on its class) takes by
    name, or _KW_UNKNOWN.  Positional-only parameters do not count: the
    consumer passes keywords."""
    cdef int mask = 0
    try:
        import inspect
        params = inspect.signature(func).parameters.values()
        for p in params:
            if p.kind == p.VAR_KEYWORD:
                return _KW_UNKNOWN
            if p.kind == p.POSITIONAL_OR_KEYWORD or p.kind == p.KEYWORD_ONLY:
                mask |= _KEYWORD_BITS.get(p.name, 0)
    except Exception:
        # No signature to read (a C method without a text signature, an
        # object whose __signature__ fails): fall back to the fixed order.
        return _KW_UNKNOWN
    return mask


cdef int _keywords_taken(type t) except -2:
    """The __dlpack__ keywords instances of ``t`` take, inspected once per type."""
    cdef PyObject* found = _PyType_Lookup(<PyTypeObject*>t, <PyObject*>_DLPACK_NAME)
    if found == NULL:
        return _KW_UNKNOWN
    func = <object>found
    entry = _KEYWORDS_BY_TYPE.get(t)
    if entry is not None and (<tuple>entry)[0] is func:
        return (<tuple>entry)[1]
    cdef int mask = _mask_of_signature(func)
    if len(_KEYWORDS_BY_TYPE) >= _KEYWORDS_CACHE_MAX:
        _KEYWORDS_BY_TYPE.clear()
    _KEYWORDS_BY_TYPE[t] = (func, mask)
    return mask


cdef bint takes_max_version(type t) except -1:
    cdef int taken = _keywords_taken(t)
    return taken != _KW_UNKNOWN and (taken & _KW_MAX_VERSION) != 0


cdef object _call_dlpack(object obj, object stream, object max_version, object dl_device,
                         object copy, bint with_device_copy):
    if stream is None:
        if with_device_copy:
            return obj.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)
        return obj.__dlpack__(max_version=max_version)
    if with_device_copy:
        return obj.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                              copy=copy)
    return obj.__dlpack__(stream=stream, max_version=max_version)


cdef PyObject* request_common(object obj) noexcept:
    """``obj.__dlpack__(max_version=(1, 3))``, the common request, made raw.

    One vectorcall with a constant kwnames tuple (a Python-level keyword call
    would build a dict per call).  A new reference, or NULL with the
    producer's error set: request_capsule(..., pending=True) then takes that
    error as this call's (_raw_call.pxd: no handler entered on success).
    """
    cdef PyObject* args[2]
    args[0] = <PyObject*>obj
    args[1] = <PyObject*>_MAX_VERSION
    return vectorcall_method(_DLPACK_NAME, args, 1, <PyObject*>_KWNAMES_MAX_VERSION)


cdef object request_capsule(object obj, object dl_device, object copy, object stream=None,
                            bint pending=False):
    """Calls ``obj.__dlpack__`` as a spec consumer, newest signature first.

    The spec's fallback for producers that predate a keyword is to call again
    without it.  Whether a TypeError means "unknown keyword" is decided from
    the producer's signature (inspected once per type), never from the
    error's text, which a producer words as it likes (or which names its
    class): a producer whose signature takes every keyword passed raised its
    own refusal, raised as is; otherwise it is called once more with the
    keywords it takes, so a DLPack 1.0 producer without ``dl_device``/``copy``
    still returns a versioned capsule (read-only data, flags).  Where the
    signature does not say (``**kwargs``, C methods without a text signature)
    the retry order is fixed: ``max_version`` only, then none.  ``stream`` is
    passed in every call (as old as the protocol).  The caller applies
    ``dl_device``/``copy`` itself to whatever comes back.  The error raised is
    the last call's, raised once and without the refused calls chained to it.
    ``pending``: the caller made the common request (request_common) and it
    failed, its error still set; it is taken here as the first call's.
    """
    cdef PyObject* r = NULL
    cdef bint with_device_copy = dl_device is not None or copy is not None
    cdef int taken, asked
    if not with_device_copy and stream is None:
        if not pending:
            r = request_common(obj)
            if r != NULL:
                return steal(r)
        try:
            raise_pending()
        except TypeError as e:
            error = e
    else:
        try:
            return _call_dlpack(obj, stream, _MAX_VERSION, dl_device, copy, with_device_copy)
        except TypeError as e:
            error = e
    # Outside the handlers from here: a retry's error is not chained to the
    # refused call's.
    taken = _keywords_taken(type(obj))
    if taken != _KW_UNKNOWN:
        asked = _KW_MAX_VERSION
        if with_device_copy:
            asked |= _KW_DL_DEVICE | _KW_COPY
        if stream is not None:
            asked |= _KW_STREAM
        if asked & ~taken == 0:
            raise error  # the producer's own refusal
        kwargs = {}
        if stream is not None:
            kwargs["stream"] = stream
        if taken & _KW_MAX_VERSION:
            kwargs["max_version"] = _MAX_VERSION
        if with_device_copy and taken & _KW_DL_DEVICE:
            kwargs["dl_device"] = dl_device
        if with_device_copy and taken & _KW_COPY:
            kwargs["copy"] = copy
        try:
            return obj.__dlpack__(**kwargs)
        except TypeError as e:
            error = e
        raise error
    if with_device_copy:
        try:
            return _call_dlpack(obj, stream, _MAX_VERSION, None, None, False)
        except TypeError as e:
            error = e
    try:
        # A producer older than DLPack 1.0 knows no keyword but ``stream``.
        if stream is None:
            return obj.__dlpack__()
        return obj.__dlpack__(stream=stream)
    except TypeError as e:
        error = e
    raise error


cdef bint is_versioned_request(object max_version) except -1:
    """Whether ``max_version`` asks for the versioned struct (TypeError if malformed)."""
    if max_version is None:
        return False
    if type(max_version) is not tuple or len(<tuple>max_version) != 2:
        raise TypeError(f"max_version must be None or a (major, minor) tuple, got {max_version!r}")
    major = (<tuple>max_version)[0]
    if not isinstance(major, int) or not isinstance((<tuple>max_version)[1], int):
        raise TypeError(f"max_version must hold two ints, got {max_version!r}")
    if major is _OUR_MAJOR:
        # CPython's small-int cache makes every 1 this very object: nearly
        # every request is decided by a pointer comparison.
        return True
    # Spec: major >= ours -> our versioned struct; an older major gets the
    # legacy struct, which this producer still supports.  Compared as C ints
    # (no temporary int object on every export); a huge major is just "newer".
    cdef int overflow = 0
    cdef long major_c = PyLong_AsLongAndOverflow(major, &overflow)
    if overflow != 0:
        return overflow > 0
    return major_c >= kDLPackMajorVersion


cdef bint _check_stream(DLDevice device, object stream) except -1:
    """Checks ``stream`` for data the consumer will use on ``device``.

    Returns whether the consumer's stream must be ordered after the data's
    ready stream (CUDA data, any stream but -1; None is the legacy default
    stream).  Other device runtimes are not loaded: a real stream on their
    data raises BufferError rather than hand out memory that may not be ready
    on it.
    """
    if stream is not None and type(stream) is not int and not isinstance(stream, int):
        raise TypeError(f"stream must be None or an int, got {type(stream).__name__}")
    if stream is not None and stream == -1:
        return False
    if stream is None:
        return is_cuda_stream_device(device)
    if device.device_type == kDLCPU:
        # Spec: CPU data takes no stream; anything else is a wrong argument.
        raise ValueError(
            f"stream={stream!r} is not valid for CPU data: only None or -1 may be passed")
    if stream < -1:
        raise ValueError(f"stream must be >= -1, got {stream}")
    if stream == 0 and (device.device_type == kDLCUDA or device.device_type == kDLCUDAHost
                        or device.device_type == kDLCUDAManaged):
        raise ValueError("stream=0 is ambiguous for CUDA and disallowed by the DLPack spec; "
                         "use 1 for the legacy default stream or 2 for per-thread")
    if (stream == 1 or stream == 2) and (device.device_type == kDLROCM
                                         or device.device_type == kDLROCMHost):
        raise ValueError(f"stream={stream} is not supported for ROCm data")
    # --- CUDA hook (docs/cuda.md): CUDA streams are ordered by _cuda.pyx.
    if is_cuda_stream_device(device):
        if stream >= 2 ** 64:
            raise ValueError(f"stream={stream} is not a valid CUDA stream handle")
        return True
    # --- end CUDA hook
    raise BufferError(
        f"stream={stream} asks dlpackarray to make data on device {device_tuple(device)} ready "
        "on that stream, but synchronization is not available for this device (dlpackarray "
        "loads the CUDA driver only); pass stream=None to receive the data as its producer "
        "handed it over, or -1")


cdef object export_capsule(const TensorView* v, object owner, object stream,
                           object max_version, object dl_device, object copy):
    """``__dlpack__`` for a view whose memory ``owner`` keeps alive."""
    cdef bint versioned = is_versioned_request(max_version)
    # A view with a ready stream (CUDA) is ordered even for stream=None.
    if (stream is not None or dl_device is not None or copy is not None
            or v.ready_stream != NULL):
        return _export_requested(v, owner, stream, versioned, dl_device, copy)
    return _new_capsule(v, owner, versioned, 0)


cdef inline object _new_capsule(const TensorView* v, object owner, bint versioned,
                                uint64_t flags):
    if v.readonly:
        if not versioned:
            # Like NumPy: the legacy struct has no read-only flag, so handing
            # out read-only memory through it would invite writes.
            raise BufferError(
                "cannot export read-only data as a legacy DLPack capsule; call "
                "__dlpack__(max_version=(1, 0)) or newer to receive it with the READ_ONLY flag")
        flags |= kFlagReadOnly
    if versioned:
        return new_versioned_capsule(v[0], flags, <PyObject*>owner)
    return new_legacy_capsule(v[0], <PyObject*>owner)


cdef object _export_requested(const TensorView* v, object owner, object stream, bint versioned,
                              object dl_device, object copy):
    """The export path when the consumer passed stream, dl_device or copy."""
    cdef uint64_t flags = 0
    cdef TensorView copied
    cdef TensorView on_host
    cdef DLDevice target
    cdef CopyMode mode = <CopyMode>parse_copy(copy)
    cdef DeviceRoute route = kRouteSame
    target = v.device
    if dl_device is not None:
        # The device rule (rules.hpp), shared with the consumer side.
        target = parse_device(dl_device)
        route = route_device_request(v.device, target, mode, kProducer)
    # The stream belongs to the consumer, on the device it asked for.
    cdef bint order = _check_stream(target, stream)
    cdef bint to_host = route == kRouteCopyToHost
    if to_host:
        copy = True  # CUDA device -> host: copy_to_heap copies through the driver
    elif route == kRouteRelabelHost:
        # Host-accessible memory (pinned/managed) is readable as CPU data
        # without a copy once its producer's work is done.
        synchronize_for_host_read(v)
        on_host = v[0]
        on_host.device = target
        on_host.ready_stream = NULL
        v = &on_host
    if copy is True:
        if is_cuda_device(v.device) and not to_host:
            # CUDA hook: a copy on the device, ready on the data's ready stream;
            # the source's owner lives as long as the (enqueued) copy.
            owner = copy_on_device_into(v, &copied, owner)
        else:
            owner = copy_to_heap(v, &copied)
        flags |= kFlagIsCopied
        v = &copied
    if order and is_cuda_stream_device(v.device):
        # (A host copy of pinned/managed memory is ready already: no ordering.
        # Pinned/managed memory for stream=None, as np.from_dlpack asks: the
        # host waits for it.)
        order_for_consumer(v, stream)
    return _new_capsule(v, owner, versioned, flags)
