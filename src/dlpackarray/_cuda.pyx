# cython: language_level=3, boundscheck=False, wraparound=False
"""CUDA: stream ordering, device copies and ``__cuda_array_interface__`` (docs/cuda.md).

The driver is loaded on first need (cpp/src/cuda_driver.cpp); importing this
module loads nothing.
"""
from libc.stdint cimport int64_t, uint64_t, uintptr_t
from libcpp cimport bool as cbool
from libcpp.string cimport string

from dlpackarray.abi cimport (
    DLDevice, DLDeviceType, kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged,
)
from dlpackarray.core cimport (
    TensorView, byte_stride, dtype_from_typestr, is_c_contiguous, raise_py_error,
    set_strides_from_bytes, typestr_from_dtype, validate, view_size,
)

cdef extern from "dlpackarray/cuda_exchange.hpp" namespace "dla::cuda":
    ctypedef unsigned long long CUdeviceptr
    ctypedef void* CUevent
    cbool is_cuda_family(DLDevice d)
    void* stream_from_int(uint64_t value)
    void* per_thread_stream()
    DLDevice device_of_pointer(const void* ptr) except +raise_py_error
    void order_streams(int device_id, void* ready, void* consumer) except +raise_py_error
    void synchronize_for_host(const TensorView& v) except +raise_py_error
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


cdef inline void* _consumer_handle(object stream):
    # None is the consumer's legacy default stream (DLPack spec table).
    if stream is None:
        return NULL
    return stream_from_int(<uint64_t>stream)


cdef int order_for_consumer(const TensorView* v, object stream) except -1:
    """Makes the consumer's ``stream`` (validated, not -1) wait for ``v``'s data."""
    order_streams(v.device.device_id, v.ready_stream, _consumer_handle(stream))
    return 0


cdef int synchronize_for_host_read(const TensorView* v) except -1:
    """Blocks until host-accessible CUDA memory (pinned, managed) is ready."""
    if v.device.device_type == kDLCUDAHost or v.device.device_type == kDLCUDAManaged:
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


cdef DeviceOwner copy_on_device_into(const TensorView* src, TensorView* dst):
    """Dense C-ordered copy of ``src`` on its own device, ready on its ready stream."""
    cdef DeviceOwner owner = DeviceOwner.__new__(DeviceOwner)
    cdef int i
    cdef int64_t step
    owner.device_id = src.device.device_id
    owner.ptr = copy_on_device(src[0])
    dst[0] = src[0]
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


cdef object consumer_stream_argument(object producer, object stream):
    """The ``stream`` to pass to ``producer.__dlpack__`` for a consumer ``stream``.

    Asks the producer's ``__dlpack_device__`` first (DLPack: the consumer
    picks a stream valid for the producer's device).  CPU producers get
    ``None``.
    """
    cdef DLDevice d
    if stream is None:
        return None
    query = getattr(producer, "__dlpack_device__", None)
    if query is None:
        raise TypeError(
            f"stream={stream!r} needs the producer's __dlpack_device__ to know what the stream "
            f"means (DLPack spec), and '{type(producer).__name__}' has none")
    device = query()
    if (not isinstance(device, tuple) or len(<tuple>device) != 2
            or not isinstance(device[0], int) or not isinstance(device[1], int)):
        raise TypeError(f"__dlpack_device__() must return (device_type, device_id), got "
                        f"{device!r}")
    d.device_type = <DLDeviceType><int>device[0]
    d.device_id = <int>device[1]
    _check_stream_value(d, stream)
    if d.device_type == kDLCPU:
        return None
    return stream


cdef int set_ready_stream(TensorView* v, object stream) except -1:
    """After an import with consumer ``stream``: the producer made the data ready there."""
    if stream is None or stream == -1 or not is_cuda_family(v.device):
        return 0
    v.ready_stream = stream_from_int(<uint64_t>stream)
    return 0


cdef int adopt_consumer_stream(TensorView* v, object stream, bint moved) except -1:
    """After any import with ``stream=S``: makes the data ready on S.

    A DLPack producer was asked to do that itself (then S already is the
    ready stream and nothing happens); for a CUDA array interface, a capsule
    or another DLPackArray, S is ordered after the data's ready stream here.
    ``moved``: the import changed the device (a device request), so a stream
    checked against the source's device is not re-checked against the CPU.
    """
    if stream is None:
        return 0
    if not (moved and v.device.device_type == kDLCPU):
        _check_stream_value(v.device, stream)
    if stream == -1 or not is_cuda_family(v.device):
        return 0
    order_for_consumer(v, stream)
    v.ready_stream = stream_from_int(<uint64_t>stream)
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
    out.ready_stream = NULL if stream is None else stream_from_int(<uint64_t>stream)
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
    if v.ready_stream == NULL:
        stream = 1  # ready on the legacy default stream
    elif v.ready_stream == per_thread_stream():
        stream = 2
    else:
        stream = <uintptr_t>v.ready_stream
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
