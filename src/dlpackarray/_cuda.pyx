# cython: language_level=3, boundscheck=False, wraparound=False
"""CUDA: stream ordering, device copies and ``__cuda_array_interface__`` (docs/cuda.md).

The driver is loaded on first need (cpp/src/cuda_driver.cpp); importing this
module loads nothing.
"""
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint64_t, uintptr_t
from libcpp cimport bool as cbool
from libcpp.string cimport string

from dlpackarray._raw_call cimport raise_pending, steal, vectorcall_method
from dlpackarray.abi cimport (
    DLDevice, DLDeviceType, kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged,
)
from dlpackarray.core cimport (
    TensorView, byte_stride, dtype_from_typestr, is_c_contiguous, raise_py_error,
    set_strides_from_bytes, typestr_from_dtype, validate, view_size,
)

cdef extern from "Python.h":
    bint PyLong_Check(PyObject* o)
    bint PyTuple_CheckExact(object o)
    Py_ssize_t PyTuple_GET_SIZE(object o)
    PyObject* PyTuple_GET_ITEM(object o, Py_ssize_t i)
    void _decref "Py_DECREF"(PyObject* o)


cdef extern from "dlpackarray/cuda_exchange.hpp" namespace "dla::cuda":
    ctypedef unsigned long long CUdeviceptr
    ctypedef void* CUevent
    cbool is_cuda_family(DLDevice d)
    void* stream_from_int(uint64_t value)
    void* per_thread_stream()
    DLDevice device_of_pointer(const void* ptr) except +raise_py_error
    void order_streams(int device_id, void* ready, void* consumer) except +raise_py_error
    void synchronize_for_host(const TensorView& v) except +raise_py_error
    void synchronize_device(int device_id) except +raise_py_error
    void copy_device_to_host(const TensorView& src, void* dst) nogil except +raise_py_error
    CUdeviceptr copy_on_device(const TensorView& src) except +raise_py_error
    CUdeviceptr copy_host_to_device(int device_id, const void* src,
                                    int64_t nbytes) nogil except +raise_py_error
    void free_device(int device_id, CUdeviceptr p)
    void wait_event_on_host(int device_id, CUevent event) nogil except +raise_py_error
    cbool driver_loaded()
    cbool driver_available()
    void reset_driver_for_tests()
    string driver_path() except +raise_py_error


cdef class DeviceOwner:
    def __dealloc__(self):
        if self.ptr != 0:
            free_device(self.device_id, self.ptr)
            self.ptr = 0


cdef bint is_cuda_device(DLDevice d) noexcept:
    """CUDA memory the host cannot address (kDLCUDA)."""
    return d.device_type == kDLCUDA


cdef bint is_cuda_stream_device(DLDevice d) noexcept:
    """Device types whose DLPack stream values are CUDA streams."""
    return is_cuda_family(d)


# Ready tokens (TensorView::ready_stream, docs/cuda.md "Stream rules"):
#   NULL       nothing is pending: no stream needs to wait, no host sync;
#   _LEGACY    ready on the legacy default stream (CU_STREAM_LEGACY, 0x1);
#   a handle   ready on that CUstream.
# Never the per-thread default stream (0x2): that value names a different
# stream in every thread, so a token holding it would compare equal across
# threads that share nothing.  Stream value 2 is resolved in the calling
# thread when it is given (ordered into or out of the legacy stream there).
cdef void* _LEGACY = <void*><uintptr_t>1


cdef inline void* _token_of(object value):
    """The ready token for DLPack/CAI stream value 1 or > 2."""
    if value == 1:
        return _LEGACY
    return <void*><uintptr_t><uint64_t>value


cdef inline void* _consumer_handle(object stream):
    # None is the consumer's legacy default stream (DLPack spec table); 2 is
    # CU_STREAM_PER_THREAD, which the driver resolves in the calling thread.
    if stream is None:
        return _LEGACY
    return stream_from_int(<uint64_t>stream)


cdef inline bint _host_accessible(DLDevice d) noexcept:
    return d.device_type == kDLCUDAHost or d.device_type == kDLCUDAManaged


cdef int order_for_consumer(const TensorView* v, object stream) except -1:
    """Makes ``v``'s data safe for a consumer on ``stream`` (validated, not -1).

    Pinned and managed memory exported with ``stream=None`` may be read by
    the host (``np.from_dlpack`` passes no stream): the host waits for it,
    which also serves a consumer on the legacy stream.
    """
    if v.ready_stream == NULL:
        return 0  # nothing pending
    if stream is None and _host_accessible(v.device):
        synchronize_for_host(v[0])
        return 0
    order_streams(v.device.device_id, v.ready_stream, _consumer_handle(stream))
    return 0


cdef int synchronize_for_host_read(const TensorView* v) except -1:
    """Blocks until host-accessible CUDA memory (pinned, managed) is ready."""
    if _host_accessible(v.device) and v.ready_stream != NULL:
        synchronize_for_host(v[0])
    return 0


cdef int wait_arrow_sync_event(DLDevice d, void* sync_event) except -1:
    """Blocks until an imported Arrow device array's ``sync_event`` (a
    ``CUevent*``, NULL: nothing to wait for) has fired."""
    # The host waits, once, with the GIL released, rather than a stream: a
    # view's ready token is a stream, and the only one dlpackarray could make
    # wait (cuStreamWaitEvent) is the legacy default stream, which would
    # serialise every blocking stream behind the producer's work.  After the
    # wait nothing is pending, which a NULL token says.
    cdef CUevent event
    if sync_event == NULL:
        return 0
    event = (<CUevent*>sync_event)[0]
    with nogil:
        wait_event_on_host(d.device_id, event)
    return 0


cdef int copy_device_to_host_into(const TensorView* src, void* dst) except -1:
    with nogil:
        copy_device_to_host(src[0], dst)
    return 0


cdef DeviceOwner copy_on_device_into(const TensorView* src, TensorView* dst, object source):
    """Dense C-ordered copy of ``src`` on its own device, ready on its ready stream.

    ``source`` (the owner of ``src``'s memory) stays alive as long as the
    copy does: the copy is only enqueued here, and its completion is known
    once the copy's memory is freed (cuMemFree waits for the device).
    """
    cdef DeviceOwner owner = DeviceOwner.__new__(DeviceOwner)
    cdef int i
    cdef int64_t step
    owner.device_id = src.device.device_id
    owner.source = source
    owner.ptr = copy_on_device(src[0])
    dst[0] = src[0]
    if dst.ready_stream == NULL:
        # The copy itself is pending on the stream it ran on (the legacy one).
        dst.ready_stream = _LEGACY
    dst.data = <void*><uintptr_t>owner.ptr
    dst.byte_offset = 0
    dst.readonly = False
    step = 1
    for i in range(dst.ndim - 1, -1, -1):
        dst.strides[i] = step
        step *= dst.shape[i] if dst.shape[i] > 0 else 1
    return owner


cdef DeviceOwner copy_host_bytes_to_device(const void* src, Py_ssize_t nbytes, int device_id):
    """A new allocation on CUDA device ``device_id`` holding ``nbytes`` host
    bytes from ``src``, ready on every stream (the host waited for the copy)."""
    cdef DeviceOwner owner = DeviceOwner.__new__(DeviceOwner)
    owner.device_id = device_id
    with nogil:
        owner.ptr = copy_host_to_device(device_id, src, nbytes)
    return owner


cdef int _check_stream_value(DLDevice device, object stream) except -1:
    if stream is None:
        return 0
    if not isinstance(stream, int):
        raise TypeError(f"stream must be None or an int, got {type(stream).__name__}")
    if stream == -1:
        return 0
    if device.device_type == kDLCPU:
        raise ValueError(
            f"stream={stream!r} is not valid for CPU data: only None or -1 may be passed")
    if stream < -1:
        raise ValueError(f"stream must be >= -1, got {stream}")
    if stream == 0 and is_cuda_family(device):
        raise ValueError("stream=0 is ambiguous for CUDA and disallowed by the DLPack spec; "
                         "use 1 for the legacy default stream or 2 for per-thread")
    if stream >= 2 ** 64:
        raise ValueError(f"stream={stream} is not a valid stream handle")
    return 0


cdef str _DLPACK_DEVICE_NAME = "__dlpack_device__"


cdef int _device_of_producer(object producer, bint required, DLDevice* out) except -1:
    """``producer.__dlpack_device__()``, checked, into ``out``: 1 when it
    answered, 0 when it has none and ``required`` is false, or then when
    asking it fails with any Exception (nothing was asked of this producer:
    its own __dlpack__ call says what it can export, as before streams were
    requested)."""
    cdef PyObject* args[1]
    cdef PyObject* r
    cdef PyObject* kind
    cdef PyObject* index
    args[0] = <PyObject*>producer
    # One call without a bound method (every DLPack import of a non-ndarray
    # asks this; getattr + call built and freed a method object each time, a
    # third of the query's cost), made raw: only a failure enters a handler
    # (_raw_call.pxd).
    r = vectorcall_method(_DLPACK_DEVICE_NAME, args, 1, NULL)
    if r != NULL:
        if PyTuple_CheckExact(<object>r) and PyTuple_GET_SIZE(<object>r) == 2:
            kind = PyTuple_GET_ITEM(<object>r, 0)
            index = PyTuple_GET_ITEM(<object>r, 1)
            if PyLong_Check(kind) and PyLong_Check(index):
                # What _checked_device accepts, read without item calls or a
                # tuple object kept (an int too large for C raises here).
                try:  # finally, not except: no exception state saved on success
                    out.device_type = <DLDeviceType><int><object>kind
                    out.device_id = <int><object>index
                finally:
                    _decref(r)
                return 1
    return _device_query_slow(producer, required, r, out)


cdef int _device_query_slow(object producer, bint required, PyObject* r,
                            DLDevice* out) except -1:
    """_device_of_producer's slow paths: the query failed (``r`` NULL, its
    error still set) or answered something to check (``r`` a new reference,
    taken here).  An error propagates when required, else means "none"."""
    device = None if r == NULL else steal(r)
    try:
        if r == NULL:
            device = _device_query_failed(producer, required)
            if device is None:
                return 0
        device = _checked_device(device)
    except Exception:
        if required:
            raise
        return 0
    out.device_type = <DLDeviceType><int>device[0]
    out.device_id = <int>device[1]
    return 1


cdef object _device_query_failed(object producer, bint required):
    """The error path of _device_of_producer's query, its error still set."""
    try:
        raise_pending()
    except (AttributeError, TypeError):
        # Missing, or set to None (not callable): "has none", as getattr's
        # default said.  An error raised by the method itself propagates.
        if getattr(producer, _DLPACK_DEVICE_NAME, None) is not None:
            raise
        if not required:
            return None
        raise TypeError(
            f"a stream needs the producer's __dlpack_device__ to know what it means (DLPack "
            f"spec), and '{type(producer).__name__}' has none") from None


cdef object _checked_device(object device):
    if (not isinstance(device, tuple) or len(<tuple>device) != 2
            or not isinstance(device[0], int) or not isinstance(device[1], int)):
        raise TypeError(f"__dlpack_device__() must return (device_type, device_id), got "
                        f"{device!r}")
    return device


cdef object producer_stream_argument(object producer, object stream, object dl_device,
                                     bint host_only, int* pinned_device):
    """The ``stream`` to pass to ``producer.__dlpack__`` (None: none passed).

    A CUDA producer is always asked with a stream, so that its pending work
    is ordered before ours whatever its default (torch's is -1: no
    synchronisation at all; CuPy's is the legacy stream): the consumer's
    ``stream``, or 1 (the legacy default stream) for ``None`` and for 2
    (torch refuses 2, and a per-thread stream cannot be a shared token;
    adopt_consumer_stream orders it after the legacy stream).  Pinned memory
    (``CUDA_HOST``) gets no stream, -1 excepted: torch calls it CPU data and
    raises AssertionError for any other; ready_after_request synchronises
    its device instead.  A request for CPU data (``dl_device``) passes none:
    the producer must then synchronise itself (DLPack spec).  ``host_only``:
    the producer's type is known to export CPU data only (no query).
    ``pinned_device`` is set to the device id of a producer that reports
    pinned memory and is not asked with -1 (else -1): ready_after_request
    waits for that device even when the capsule calls the data CPU.
    """
    cdef DLDevice d
    pinned_device[0] = -1
    if stream is not None and not isinstance(stream, int):
        raise TypeError(f"stream must be None or an int, got {type(stream).__name__}")
    if stream is None and host_only:
        return None
    if not _device_of_producer(producer, stream is not None, &d):
        return None
    if stream is not None:
        _check_stream_value(d, stream)  # None is valid everywhere
    if d.device_type == kDLCPU:
        return None
    if not is_cuda_family(d):
        return stream  # another runtime's streams: the consumer's value as given
    if stream is not None and stream == -1:
        return -1
    if d.device_type == kDLCUDAHost:
        pinned_device[0] = d.device_id
        return None
    if dl_device is not None and (<tuple>dl_device)[0] == kDLCPU:
        return None
    if stream is None or stream == 2:
        return 1
    return stream


cdef int ready_after_request(TensorView* v, object stream_arg, int pinned_device) except -1:
    """Sets the token of data a DLPack producer exported for ``stream_arg``.

    Returns 1 when the producer reported pinned memory (``pinned_device``,
    from producer_stream_argument) and its capsule calls the data CPU, as
    torch's does: the device is waited for here and the consumer's stream
    was already checked against the pinned device (a CPU view would refuse
    it); else 0.

    The producer made the data ready on the stream it was given.  Given
    none (or a DLPack 1.0-era producer without ``__dlpack_device__``), its
    CUDA data is taken as ready on the legacy stream, the spec's meaning of
    None, and its pinned memory is waited for on the host: nothing says on
    which stream its work is, so the whole device is synchronised once.
    """
    if pinned_device >= 0 and v.device.device_type == kDLCPU:
        # torch: __dlpack_device__ says CUDA_HOST, the capsule says CPU, and a
        # non-blocking copy into the tensor may still be running.  Without a
        # driver no work can be pending (nor was the memory pinned by CUDA).
        if view_size(v[0]) != 0 and driver_available():
            synchronize_device(pinned_device)
        return 1
    if not is_cuda_family(v.device):
        return 0
    if stream_arg is None:
        if v.device.device_type == kDLCUDAHost:
            if view_size(v[0]) != 0:
                synchronize_device(v.device.device_id)
            v.ready_stream = NULL
            return 0
        return ready_after_bare_capsule(v)
    if stream_arg == -1:
        v.ready_stream = NULL  # the consumer takes charge (DLPack: no synchronisation)
    else:
        v.ready_stream = _token_of(stream_arg)
    return 0


cdef int ready_after_bare_capsule(TensorView* v) except -1:
    """A capsule carries no stream: its CUDA data is taken as ready on the
    legacy stream (the DLPack default), unless no driver can be loaded, when
    nothing can be pending."""
    if is_cuda_family(v.device) and v.ready_stream == NULL and driver_available():
        v.ready_stream = _LEGACY
    return 0


cdef int adopt_consumer_stream(TensorView* v, object stream, bint moved) except -1:
    """After any import with ``stream=S``: makes the data ready on S.

    A DLPack producer was asked to do that itself (then S already is the
    ready stream and nothing happens); for a CUDA array interface, a capsule
    or another DLPackArray, S is ordered after the data's ready stream here.
    S = 2 is ordered in the calling thread and the token kept (a per-thread
    stream is no token).  ``moved``: the import changed the device (a device
    request), so a stream checked against the source's device is not
    re-checked against the CPU.
    """
    if stream is None:
        return 0
    if not (moved and v.device.device_type == kDLCPU):
        _check_stream_value(v.device, stream)
    if stream == -1 or not is_cuda_family(v.device) or v.ready_stream == NULL:
        return 0
    order_for_consumer(v, stream)
    if stream != 2:
        v.ready_stream = _token_of(stream)
    return 0


cdef tuple _int_tuple(object value, str field):
    if not isinstance(value, tuple) or not all([isinstance(x, int) for x in value]):
        raise TypeError(f"__cuda_array_interface__['{field}'] must be a tuple of ints, got "
                        f"{value!r}")
    return <tuple>value


cdef object view_from_cuda_array_interface(object obj, object iface, TensorView* out):
    """Fills ``out`` from a CUDA array interface (versions 2 and 3); returns the owner."""
    cdef int i
    cdef int64_t byte_strides[64]
    if not isinstance(iface, dict):
        raise TypeError(f"__cuda_array_interface__ must be a dict, got {type(iface).__name__}")
    version = iface.get("version")
    if version not in (2, 3) or not isinstance(version, int):
        raise ValueError(f"__cuda_array_interface__ version {version!r} is not supported "
                         "(versions 2 and 3 are)")
    if iface.get("mask") is not None:
        raise BufferError("__cuda_array_interface__ with a mask is not supported: DLPackArray "
                          "holds unmasked data only")
    for key in ("shape", "typestr", "data"):
        if key not in iface:
            raise ValueError(f"__cuda_array_interface__ lacks the required key '{key}'")
    shape = _int_tuple(iface["shape"], "shape")
    typestr = iface["typestr"]
    if not isinstance(typestr, str):
        raise TypeError(f"__cuda_array_interface__['typestr'] must be a str, got {typestr!r}")
    if not typestr.isascii() or "\0" in typestr:
        # The parser reads ASCII up to a NUL: anything else is malformed, as
        # for __array_interface__'s typestr.
        raise TypeError(f"__cuda_array_interface__ has an invalid typestr {typestr!r}")
    data = iface["data"]
    if (not isinstance(data, tuple) or len(<tuple>data) != 2 or not isinstance(data[0], int)
            or not isinstance(data[1], bool)):
        raise TypeError("__cuda_array_interface__['data'] must be (pointer: int, readonly: "
                        f"bool), got {data!r}")
    if data[0] < 0 or data[0] >= 2 ** 64:
        raise ValueError(f"__cuda_array_interface__ pointer {data[0]} is out of range")
    strides = iface.get("strides")
    if strides is not None:
        strides = _int_tuple(strides, "strides")
        if len(strides) != len(shape):
            raise ValueError(f"__cuda_array_interface__ has {len(strides)} strides for "
                             f"{len(shape)} dimensions")
    stream = iface.get("stream") if version >= 3 else None
    if stream is not None:
        if not isinstance(stream, int) or isinstance(stream, bool):
            raise TypeError(f"__cuda_array_interface__['stream'] must be None or an int, got "
                            f"{stream!r}")
        if stream == 0:
            raise ValueError("__cuda_array_interface__['stream'] = 0 is invalid (the spec "
                             "disallows it: 1 is the legacy default stream, 2 per-thread)")
        if stream < 0 or stream >= 2 ** 64:
            raise ValueError(f"__cuda_array_interface__['stream'] = {stream} is not a stream")
    if len(shape) > 64:
        raise ValueError(f"__cuda_array_interface__ has {len(shape)} dimensions; at most 64 "
                         "are supported")
    out.set_ndim(len(shape))
    for i in range(out.ndim):
        out.shape[i] = shape[i]
    out.dtype = dtype_from_typestr(typestr.encode())
    if strides is not None:
        for i in range(out.ndim):
            byte_strides[i] = strides[i]
        set_strides_from_bytes(out[0], byte_strides, "__cuda_array_interface__")
    else:
        set_strides_from_bytes(out[0], NULL, "__cuda_array_interface__")
    out.data = <void*><uintptr_t>data[0]
    out.byte_offset = 0
    out.readonly = data[1]
    out.device.device_type = kDLCPU
    out.device.device_id = 0
    validate(out[0])  # shape, strides and extent, before asking the driver anything
    if view_size(out[0]) == 0 and data[0] == 0:
        # Size-0 arrays carry data 0 (the spec): no pointer to ask about.
        out.device.device_type = kDLCUDA
    else:
        out.device = device_of_pointer(out.data)
    out.ready_stream = NULL
    if stream is None:
        return obj  # CAI v3: no synchronisation needed
    if stream != 2:
        out.ready_stream = _token_of(stream)
    elif view_size(out[0]) != 0:
        # The exporter's per-thread stream is this thread's: resolved here,
        # where that value means it, by ordering the legacy stream after it.
        order_streams(out.device.device_id, per_thread_stream(), _LEGACY)
        out.ready_stream = _LEGACY
    return obj


cdef dict export_cuda_array_interface(const TensorView* v, tuple shape):
    cdef int i
    if not is_cuda_family(v.device):
        raise AttributeError(
            "__cuda_array_interface__ describes CUDA memory only; this array lives on device "
            f"type {<int>v.device.device_type}")
    try:
        typestr = typestr_from_dtype(v.dtype).decode()
    except TypeError as e:
        raise AttributeError(f"__cuda_array_interface__ cannot describe this dtype: {e}") from None
    strides = None
    if not is_c_contiguous(v[0]):
        strides = tuple([byte_stride(v[0], i) for i in range(v.ndim)])
    # CAI v3: None when nothing is pending, so consumers do not synchronise
    # for nothing; 1 the legacy stream; never 2 (a token never holds it).
    stream = None if v.ready_stream == NULL else <uintptr_t>v.ready_stream
    ptr = <uintptr_t>v.data + v.byte_offset if view_size(v[0]) != 0 else 0
    return {"shape": shape, "typestr": typestr, "descr": [("", typestr)],
            "data": (ptr, bool(v.readonly)), "strides": strides, "version": 3,
            "stream": stream}


def _driver_state():
    """Private (tests): ``(loaded, path)`` of the CUDA driver this process uses."""
    return bool(driver_loaded()), driver_path().decode(errors="replace")


def _driver_available():
    """Private (tests, docs): whether the CUDA driver can be loaded (loads it)."""
    return bool(driver_available())


def _reset_driver():
    """Private (tests): forget the loaded driver; the next use reads
    ``DLPACKARRAY_CUDA_DRIVER`` again."""
    reset_driver_for_tests()
