# cython: language_level=3, boundscheck=False, wraparound=False
"""The Arrow PyCapsule interface, both ways (docs/arrow.md).

Export describes a view as Arrow C structs (schema, array, stream and their
device variants) inside the spec's PyCapsules; import reads any producer of
those capsules into a view.  The C++ core (arrow_bridge.hpp) does the layout
work; this module handles capsules, ownership and the Python-level rules.
"""
cimport cython
from cpython.pycapsule cimport (
    PyCapsule_CheckExact, PyCapsule_GetName, PyCapsule_GetPointer, PyCapsule_IsValid,
)
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int64_t
from libcpp.vector cimport vector

from dlpackarray.abi cimport DLDevice, DLDeviceType, kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged
from dlpackarray.core cimport TensorView, aligned_allocate, device_is_host_accessible
from dlpackarray._internal cimport HeapOwner, device_tuple, takes_max_version, type_has
from dlpackarray._internal cimport (
    is_cuda_stream_device, synchronize_for_host_read, wait_arrow_sync_event,
)

# Probed in this order on import (docs/arrow.md, "Import"); bit i of a type's
# arrow_methods mask says it has _ARROW_METHODS[i].
cdef tuple _ARROW_METHODS = (
    "__arrow_c_device_array__", "__arrow_c_array__", "__arrow_c_device_stream__",
    "__arrow_c_stream__",
)
cdef enum:
    _HAS_DEVICE_ARRAY = 1
    _HAS_ARRAY = 2
    _HAS_DEVICE_STREAM = 4
    _HAS_STREAM = 8


# -- export ------------------------------------------------------------------------

cdef int _copy_mode(object copy) except -2:
    if copy is None:
        return -1
    if copy is True:
        return 1
    if copy is False:
        return 0
    raise TypeError(f"copy must be None, True or False, got {copy!r}")


cdef int _check_kwargs(dict kwargs) except -1:
    # PyCapsule interface: future keywords default to None; any other value of
    # a keyword this producer does not know must be refused.
    if kwargs:
        unknown = sorted(name for name, value in kwargs.items() if value is not None)
        if unknown:
            raise NotImplementedError(
                f"unsupported keyword argument(s) {unknown} for the Arrow device interface; "
                "dlpackarray knows requested_schema and copy")
    return 0


cdef inline ArrowExport* _plan(const TensorView* v, object requested_schema, object copy,
                               bint device, bint schema_only) except NULL:
    cdef ArrowExportOptions opts
    opts.bit_packed_bool = False
    opts.nested_lists = False
    opts.requested_tensor = False
    opts.copy = _copy_mode(copy)
    opts.device = 1 if device else 0
    opts.schema_only = schema_only
    if not device and not schema_only:
        if not device_is_host_accessible(v.device):
            raise BufferError(
                f"data on device {device_tuple(v.device)} is not host memory, so the CPU Arrow "
                "methods cannot export it; device data is offered through "
                "__arrow_c_device_array__ and __arrow_c_device_stream__")
        # CPU consumers read pinned and managed memory as soon as they get
        # it: make it ready first, as every CPU protocol does (docs/cuda.md).
        synchronize_for_host_read(v)
    if requested_schema is not None:
        if not PyCapsule_IsValid(requested_schema, kCapsuleArrowSchema):
            raise TypeError(
                "requested_schema must be None or an 'arrow_schema' PyCapsule, got "
                f"{_describe(requested_schema)}")
        arrow_apply_request(
            (<ArrowSchema*>PyCapsule_GetPointer(requested_schema, kCapsuleArrowSchema))[0],
            v[0], &opts)
    return arrow_export_new(v[0], opts)


cdef str _describe(object obj):
    cdef const char* name
    if PyCapsule_CheckExact(obj):
        name = PyCapsule_GetName(obj)
        pyname = None if name == NULL else name.decode(errors="replace")
        return f"a PyCapsule named {pyname!r}"
    return f"a '{type(obj).__name__}' object"


cdef inline int _keep_alive(ArrowExport* ex, object owner, bint on_cuda) except -1:
    # A copy on the device is enqueued, not done: its source stays alive until
    # the copy's memory is freed (arrow_export_unref frees it first).
    if on_cuda or arrow_export_shares_memory(ex):
        # Dropped by the last Arrow struct's release, on whatever thread.
        Py_INCREF(owner)
        arrow_export_set_keepalive(ex, release_arrow_keepalive, <void*>owner)
    return 0


cdef object export_arrow_schema(const TensorView* v):
    cdef ArrowExport* ex = _plan(v, None, None, False, True)
    cdef void* s
    try:
        capsule = new_arrow_capsule(kArrowSchemaCapsule, &s)
        arrow_export_schema(ex, <ArrowSchema*>s)
    finally:
        arrow_export_unref(ex)
    return capsule


cdef object export_arrow(const TensorView* v, object owner, object requested_schema,
                         object copy, bint device, bint stream, dict kwargs):
    """The four data methods: (device) array pairs and (device) streams."""
    if kwargs is not None:
        _check_kwargs(kwargs)
    cdef ArrowExport* ex = _plan(v, requested_schema, copy, device, False)
    cdef void* s
    try:
        # (Host data, the common case, skips the call into _cuda.)
        _keep_alive(ex, owner,
                    v.device.device_type != kDLCPU and is_cuda_stream_device(v.device))
        if stream:
            if device:
                capsule = new_arrow_capsule(kArrowDeviceStreamCapsule, &s)
                arrow_export_device_stream(ex, <ArrowDeviceArrayStream*>s)
            else:
                capsule = new_arrow_capsule(kArrowStreamCapsule, &s)
                arrow_export_stream(ex, <ArrowArrayStream*>s)
            return capsule
        schema = new_arrow_capsule(kArrowSchemaCapsule, &s)
        arrow_export_schema(ex, <ArrowSchema*>s)
        if device:
            array = new_arrow_capsule(kArrowDeviceArrayCapsule, &s)
            arrow_export_device_array(ex, <ArrowDeviceArray*>s)
        else:
            array = new_arrow_capsule(kArrowArrayCapsule, &s)
            arrow_export_array(ex, <ArrowArray*>s)
        return schema, array
    finally:
        # The structs hold their own references; a failure above leaves none.
        arrow_export_unref(ex)


# -- import ------------------------------------------------------------------------

# One owner per import: kept on Cython's freelist between imports.
@cython.freelist(16)
cdef class ArrowArrayOwner:
    """Owns one imported Arrow array (moved out of its capsule or stream);
    releases it when the last view of its memory is gone."""
    # Constructed with its release NULL until an array is moved in, and
    # released by its C++ destructor (python_arrow_shim.hpp says why).
    cdef HeldArrowArray held


cdef class _SchemaHolder:
    """Releases a schema pulled from a stream, whatever happens after."""
    cdef ArrowSchema schema

    def __cinit__(self):
        self.schema.release = NULL

    def __dealloc__(self):
        if self.schema.release != NULL:
            self.schema.release(&self.schema)


cdef class _StreamHolder:
    cdef ArrowArrayStream stream
    cdef ArrowDeviceArrayStream dstream
    cdef bint device

    def __cinit__(self):
        self.stream.release = NULL
        self.dstream.release = NULL

    def __dealloc__(self):
        if self.stream.release != NULL:
            self.stream.release(&self.stream)
        if self.dstream.release != NULL:
            self.dstream.release(&self.dstream)


cdef int arrow_methods(type t) noexcept:
    """Which of _ARROW_METHODS instances of ``t`` get from their class, as a
    mask of _HAS_* bits (0: no Arrow protocol).  Looked up each call: the
    import caches it per type (_import.pyx)."""
    cdef int mask = 0, bit = 1
    for name in _ARROW_METHODS:
        if type_has(t, name):
            mask |= bit
        bit <<= 1
    return mask


# pyarrow's array classes whose own __dlpack__ agrees with the Arrow
# definition, checked route against route by tests/arrow/test_arrow_differential.py.
cdef tuple _PYARROW_DLPACK_TRUSTED = ("IntegerArray", "FloatingPointArray")

cdef extern from *:
    """
    /* Cython copies a C++ member through a temporary (two copies). */
    static inline void dla_arrow_set_view(dla::TensorView* dst, const dla::TensorView& src) {
      *dst = src;
    }
    """
    void dla_arrow_set_view(TensorView* dst, const TensorView& src)

cdef bint arrow_path_first(type t) except -1:
    """Whether an object of type ``t`` is read through its Arrow description
    although it also has ``__dlpack__``.

    A pyarrow array *is* Arrow data: its schema is the definition and its
    ``__dlpack__`` only one reading of it.  pyarrow 26 reads tensor
    extensions wrongly (the strides of permuted cells with three or more
    dimensions) and exports nulls inside tensor cells silently
    (docs/limitations.md), and refuses every other non-numeric array anyway.
    Only its plain integer and floating-point arrays keep the (faster)
    DLPack route, whose result the differential tests prove identical, and
    only where that route is versioned (pyarrow 26+).
    Other libraries' objects keep DLPack first: for an N-D object Arrow
    sees a column of rows.  The import caches the route this decides per
    type (_import.pyx).
    """
    if not type_has(t, "__arrow_c_array__"):
        return False
    is_pyarrow_array = trusted = False
    for base in t.__mro__:
        if getattr(base, "__module__", None) != "pyarrow.lib":
            continue
        name = getattr(base, "__name__", None)
        is_pyarrow_array = is_pyarrow_array or name == "Array"
        trusted = trusted or name in _PYARROW_DLPACK_TRUSTED
    # pyarrow before 26 exports unversioned capsules only, which cannot say
    # that Arrow data is read-only: its Arrow capsules do.
    return is_pyarrow_array and not (trusted and takes_max_version(t))


cdef int raise_arrow_data_error(object obj) except -1:
    """Raises the Arrow import's ValueError for ``obj`` (nulls, malformed
    data) when it has one; returns 0 otherwise.

    For a DLPack-only consumer whose producer also speaks Arrow and refused
    DLPack: the refusal names the producer's reason (pyarrow: its own
    "no nulls" TypeError), and nulls must get one error on every route.
    ``copy=False`` keeps the probe from copying anything.
    """
    cdef TensorView probe
    cdef bint copied = False
    cdef int methods = arrow_methods(type(obj))
    if not methods:
        return 0
    error = None
    try:
        view_from_arrow(obj, methods, &probe, &copied, False)
    except ValueError as e:
        error = e
    except Exception:
        return 0  # not Arrow data dlpackarray could read: the refusal stands
    if error is not None:
        raise error
    return 0


cdef extern from "Python.h":
    # Without Cython's error check: NULL (with an exception set) means "not a
    # capsule of that name", as a valid capsule never holds NULL.
    void* _capsule_get "PyCapsule_GetPointer"(object capsule, const char* name) noexcept
    void PyErr_Clear() noexcept


cdef inline void* _capsule_pointer(object capsule, const char* name,
                                   const char* method) except NULL:
    """The pointer of a capsule of that ``name``, which ``method`` returned (a C
    string: the import's hot path takes no reference for the error's words)."""
    # One call checks the type and the name (PyCapsule_IsValid first did both
    # twice on every import); the refusal is built out of line.
    cdef void* p = _capsule_get(capsule, name)
    if p == NULL:
        _refuse_capsule(capsule, name, method)
    return p


cdef int _refuse_capsule(object capsule, const char* name, const char* method) except -1:
    PyErr_Clear()
    raise TypeError(f"{method.decode()} returned {_describe(capsule)}; "
                    f"expected an {name.decode()!r} PyCapsule")


# Arrow device types (the same numbers as DLPack's) named in errors.
cdef dict _DEVICE_NAMES = {
    4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm", 11: "ROCm host",
    12: "ext_dev", 14: "oneAPI", 15: "WebGPU", 16: "Hexagon",
}


cdef DLDevice _device(ArrowDeviceType device_type, int64_t device_id) except *:
    cdef DLDevice dev
    if device_type == kDLCPU:
        # Arrow's CPU device has no id (-1); DLPack's is 0.  CPU data has no
        # sync event type, so there is nothing to wait on.
        dev.device_type = kDLCPU
        dev.device_id = 0
        return dev
    if device_type == kDLCUDA or device_type == kDLCUDAHost or device_type == kDLCUDAManaged:
        if device_id < 0 or device_id > 0x7FFFFFFF:
            raise ValueError(f"the Arrow device array names CUDA device id {device_id}; CUDA "
                             "device ids are 0 to 2**31 - 1")
        dev.device_type = <DLDeviceType>device_type
        dev.device_id = <int>device_id
        return dev
    name = _DEVICE_NAMES.get(device_type, "unknown")
    raise BufferError(
        f"the Arrow device array lives on device type {device_type} ({name}, id {device_id}); "
        "dlpackarray imports CPU (1) and CUDA (2, 3, 13) Arrow data only, whose sync_event it "
        "can wait on")


cdef int _wait_for_producer(ArrowDeviceArray* held, DLDevice dev) except -1:
    # C Device Data interface: a non-NULL sync_event must have fired before
    # the buffers are touched (here: before nulls are counted and the view
    # exists).  CPU arrays have no event type (the spec says NULL).  A
    # failure leaves the array with its owner, which releases it.
    if dev.device_type != kDLCPU:
        wait_arrow_sync_event(dev, held.sync_event)
    return 0


cdef inline int _check_pair(object result, bint device) except -1:
    if type(result) is not tuple or PyTuple_GET_SIZE(result) != 2:
        _refuse_pair(result, device)
    return 0


cdef int _refuse_pair(object result, bint device) except -1:
    raise TypeError(f"{_pair_method(device).decode()} must return a (schema, array) pair of "
                    f"PyCapsules, got {_describe(result)}")


cdef inline const char* _pair_method(bint device) noexcept:
    return b"__arrow_c_device_array__" if device else b"__arrow_c_array__"


cdef object _from_array_pair(object result, bint device, TensorView* out, bint* copied,
                             object copy):
    cdef ArrowTypeInfo info
    cdef ArrowArray* arr
    cdef ArrowDeviceArray* darr
    cdef int64_t bit_offset = 0
    cdef DLDevice dev
    _check_pair(result, device)
    # Borrowed from the tuple, which the caller holds: no references taken.
    cdef ArrowSchema* schema = <ArrowSchema*>_capsule_pointer(
        <object>PyTuple_GET_ITEM(result, 0), kCapsuleArrowSchema, _pair_method(device))
    cdef ArrowArrayOwner owner = ArrowArrayOwner.__new__(ArrowArrayOwner)
    cdef PyObject* array_capsule = PyTuple_GET_ITEM(result, 1)
    if device:
        darr = <ArrowDeviceArray*>_capsule_pointer(<object>array_capsule, kCapsuleArrowDeviceArray,
                                                   _pair_method(True))
        if darr.array.release == NULL:
            raise ValueError(
                f"the capsule from {_pair_method(True).decode()} has already been consumed")
        dev = _device(darr.device_type, darr.device_id)
        # Move: bitwise copy, then mark the source released so that the
        # capsule's destructor leaves it alone.
        owner.held.device_array = darr[0]
        darr.array.release = NULL
        _wait_for_producer(&owner.held.device_array, dev)
    else:
        arr = <ArrowArray*>_capsule_pointer(<object>array_capsule, kCapsuleArrowArray,
                                            _pair_method(False))
        if arr.release == NULL:
            raise ValueError(
                f"the capsule from {_pair_method(False).decode()} has already been consumed")
        dev.device_type = kDLCPU
        dev.device_id = 0
        owner.held.device_array.array = arr[0]
        owner.held.device_array.device_type = kDLCPU
        owner.held.device_array.device_id = -1
        owner.held.device_array.sync_event = NULL
        arr.release = NULL
    arrow_parse_schema(schema[0], &info)
    # Bound into the caller's descriptor (whose owner resets it on failure).
    arrow_bind_view(info, owner.held.device_array.array, dev, out, &bit_offset)
    # No row, no bit to unpack: as zero-copy as an empty stream.
    if not info.bit_packed or out.shape[0] == 0:
        return owner
    # (owner, a local, keeps the bits alive while they are unpacked)
    return _unpack_bits(info, dev, out, bit_offset, copied, copy)


cdef object _unpack_bits(const ArrowTypeInfo& info, DLDevice dev, TensorView* out,
                         int64_t bit_offset, bint* copied, object copy):
    # Out of _from_array_pair, so that its every import holds no C++ vector
    # (a heap block, here only for the unpacking) to construct and destroy.
    cdef vector[ArrowBinding] chunks
    chunks.resize(1)
    dla_arrow_set_view(&chunks[0].view, out[0])
    chunks[0].bit_offset = bit_offset
    chunks[0].bit_packed = True
    return _concatenate(info, chunks, dev, out, copied, copy, "holds bit-packed booleans")


cdef object _concatenate(const ArrowTypeInfo& info, const vector[ArrowBinding]& chunks,
                         DLDevice dev, TensorView* out, bint* copied, object copy, str why):
    cdef size_t i
    for i in range(chunks.size()):
        if chunks[i].view.shape[0] != 0 and not device_is_host_accessible(chunks[i].view.device):
            raise BufferError(
                f"the Arrow data ({arrow_describe(info).decode()}) {why} on device "
                f"{device_tuple(chunks[i].view.device)}; making one tensor of it needs a copy "
                "on the device, which dlpackarray does not make for Arrow data (import the "
                "chunks one by one, or combine them on the device first)")
    # Host-readable chunks (CPU, or pinned/managed memory whose events were
    # waited on) are copied into host memory.
    dev.device_type = kDLCPU
    dev.device_id = 0
    if copy is False:
        raise BufferError(
            f"the Arrow data ({arrow_describe(info).decode()}) {why}; making one tensor of it "
            "needs a copy and copy=False was given")
    cdef int64_t nbytes = arrow_concat_layout(info, chunks, dev, out)
    cdef HeapOwner heap = HeapOwner.__new__(HeapOwner)
    heap.ptr = aligned_allocate(nbytes)
    heap.nbytes = nbytes
    with nogil:
        arrow_concat(chunks, heap.ptr)
    out.data = heap.ptr
    copied[0] = True
    return heap


cdef str _stream_error(int rc, const char* message, str what):
    text = message.decode(errors="replace") if message != NULL else "no message"
    return f"the Arrow stream failed in {what} (error {rc}): {text}"


cdef int _check_callbacks(bint get_schema, bint get_next, bint get_last_error,
                          str method) except -1:
    # Called once the stream is ours (moved out, its release non-NULL), so that
    # refusing it still releases it, exactly once; nothing calls through NULL.
    missing = [name for name, present in (("get_schema", get_schema), ("get_next", get_next),
                                          ("get_last_error", get_last_error)) if not present]
    if missing:
        raise ValueError(
            f"the Arrow stream from {method} has a NULL {' and '.join(missing)} callback; the "
            "C stream interface requires get_schema, get_next, get_last_error and release")
    return 0


cdef object _from_stream(object obj, bint device, TensorView* out, bint* copied, object copy):
    cdef ArrowTypeInfo info
    cdef vector[ArrowBinding] chunks
    cdef ArrowArrayOwner chunk
    cdef DLDevice dev
    cdef int rc
    cdef void* ptr
    method = "__arrow_c_device_stream__" if device else "__arrow_c_stream__"
    capsule = obj.__arrow_c_device_stream__() if device else obj.__arrow_c_stream__()
    cdef _StreamHolder holder = _StreamHolder.__new__(_StreamHolder)
    cdef _SchemaHolder schema = _SchemaHolder.__new__(_SchemaHolder)
    if device:
        ptr = _capsule_pointer(capsule, kCapsuleArrowDeviceStream, b"__arrow_c_device_stream__")
        if (<ArrowDeviceArrayStream*>ptr).release == NULL:
            raise ValueError(f"the capsule from {method} has already been consumed")
        holder.dstream = (<ArrowDeviceArrayStream*>ptr)[0]
        (<ArrowDeviceArrayStream*>ptr).release = NULL
        _check_callbacks(holder.dstream.get_schema != NULL, holder.dstream.get_next != NULL,
                         holder.dstream.get_last_error != NULL, method)
        with nogil:
            rc = holder.dstream.get_schema(&holder.dstream, &schema.schema)
        if rc != 0:
            raise BufferError(_stream_error(
                rc, holder.dstream.get_last_error(&holder.dstream), "get_schema"))
    else:
        ptr = _capsule_pointer(capsule, kCapsuleArrowStream, b"__arrow_c_stream__")
        if (<ArrowArrayStream*>ptr).release == NULL:
            raise ValueError(f"the capsule from {method} has already been consumed")
        holder.stream = (<ArrowArrayStream*>ptr)[0]
        (<ArrowArrayStream*>ptr).release = NULL
        _check_callbacks(holder.stream.get_schema != NULL, holder.stream.get_next != NULL,
                         holder.stream.get_last_error != NULL, method)
        with nogil:
            rc = holder.stream.get_schema(&holder.stream, &schema.schema)
        if rc != 0:
            raise BufferError(_stream_error(
                rc, holder.stream.get_last_error(&holder.stream), "get_schema"))
    if schema.schema.release == NULL:
        raise ValueError(f"get_schema of the Arrow stream from {method} returned 0 (success) "
                         "but no schema: its release callback is NULL")
    arrow_parse_schema(schema.schema, &info)
    schema = None

    owners = []
    dev.device_type = kDLCPU
    dev.device_id = 0
    while True:
        chunk = ArrowArrayOwner.__new__(ArrowArrayOwner)
        # Producers may block or call back into Python from another thread.
        if device:
            with nogil:
                rc = holder.dstream.get_next(&holder.dstream, &chunk.held.device_array)
            if rc != 0:
                raise BufferError(_stream_error(
                    rc, holder.dstream.get_last_error(&holder.dstream), "get_next"))
            if chunk.held.device_array.array.release == NULL:
                break
            if chunk.held.device_array.device_type != holder.dstream.device_type:
                # C device stream interface: every chunk is on the stream's device type.
                raise ValueError(
                    f"the Arrow device stream from {method} announced device type "
                    f"{holder.dstream.device_type} but get_next returned an array on device "
                    f"type {chunk.held.device_array.device_type}")
            dev = _device(chunk.held.device_array.device_type, chunk.held.device_array.device_id)
            _wait_for_producer(&chunk.held.device_array, dev)
        else:
            with nogil:
                rc = holder.stream.get_next(&holder.stream, &chunk.held.device_array.array)
            if rc != 0:
                raise BufferError(_stream_error(
                    rc, holder.stream.get_last_error(&holder.stream), "get_next"))
            if chunk.held.device_array.array.release == NULL:
                break
        chunks.resize(chunks.size() + 1)
        arrow_bind_array(info, chunk.held.device_array.array, dev, &chunks[chunks.size() - 1])
        owners.append(chunk)
    holder = None  # chunks outlive their stream (C stream interface)

    cdef Py_ssize_t nonempty = 0, only = 0, i
    cdef bint bit_packed = False
    for i in range(<Py_ssize_t>chunks.size()):
        if chunks[i].view.shape[0] != 0:
            nonempty += 1
            only = i
            bit_packed = bit_packed or chunks[i].bit_packed
    if chunks.size() > 0 and nonempty <= 1 and not bit_packed:
        out[0] = chunks[only].view
        return owners[only]
    if nonempty <= 1:
        why = "holds bit-packed booleans" if bit_packed else "is empty"
        if not bit_packed:
            # No chunk at all: an empty tensor of the schema's shape, no copy.
            arrow_concat_layout(info, chunks, dev, out)
            out.readonly = True
            return None
    else:
        why = f"arrives in {nonempty} non-empty chunks"
    return _concatenate(info, chunks, dev, out, copied, copy, why)


cdef object view_from_arrow(object obj, int methods, TensorView* out, bint* copied, object copy):
    """Imports ``obj`` through the first Arrow method it has (_ARROW_METHODS;
    ``methods``: arrow_methods of its type).

    An object whose ``__arrow_c_array__`` refuses (a chunked nanoarrow Array
    has only a stream) is read through its stream instead.
    """
    copied[0] = False
    if methods & _HAS_DEVICE_ARRAY:
        return _from_array_pair(obj.__arrow_c_device_array__(), True, out, copied, copy)
    cdef bint has_device_stream = (methods & _HAS_DEVICE_STREAM) != 0
    if methods & _HAS_ARRAY:
        if not (methods & (_HAS_DEVICE_STREAM | _HAS_STREAM)):
            return _from_array_pair(obj.__arrow_c_array__(), False, out, copied, copy)
        try:
            result = obj.__arrow_c_array__()
        except (ValueError, TypeError, NotImplementedError):
            result = None  # the producer refused the contiguous form: read the stream
        if result is not None:
            return _from_array_pair(result, False, out, copied, copy)
    return _from_stream(obj, has_device_stream, out, copied, copy)
