# cython: language_level=3, boundscheck=False, wraparound=False
"""C-level entry points: the public C API table (dlpackarray.h) and the
DLPack C exchange API table (``DLPackArray.__dlpack_c_exchange_api__``).

Every function follows CPython's convention (NULL or -1 with a Python
exception set) except where the exchange API says otherwise; core calls are
``except +raise_py_error``, so no C++ exception leaves this module.  Where the
two tables do the same thing they call the same function here.
"""
from cpython.object cimport PyObject, PyTypeObject
from cpython.pycapsule cimport PyCapsule_New
from cpython.ref cimport Py_CLEAR, Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from dlpackarray.abi cimport (
    DLDataType, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, kDLCUDA,
    kDLCUDAHost, kDLCUDAManaged,
    DLPackCurrentWorkStream, DLPackDLTensorFromPyObjectNoSync, DLPackExchangeAPI,
    DLPackManagedTensorAllocator, DLPackManagedTensorFromPyObjectNoSync,
    DLPackManagedTensorToPyObjectNoSync, DLPackSetError, DLTensor, kDLCPU,
)
from dlpackarray.core cimport (
    kCapsuleExchangeApi, kDLPackMajorVersion, kDLPackMinorVersion, kFlagReadOnly,
)
from dlpackarray.core cimport (
    Extent, TensorView, aligned_allocate, call_versioned_deleter, check_dtype_supported,
    is_c_contiguous, is_f_contiguous, new_versioned_managed, raise_py_error, set_c_strides,
    validate,
)
from dlpackarray._internal cimport (
    DLPackArray, check_ready, mark_ready, new_from_object, wrap_view,
)
from dlpackarray._internal cimport HeapOwner
from dlpackarray._internal cimport export_capsule
from dlpackarray._internal cimport (
    own_exchange_api, view_from_managed_legacy, view_from_managed_versioned,
)

cdef extern from *:
    """
    /* Sets a class attribute of a static extension type (what a class body
       would do) and invalidates the type's attribute cache. */
    static int dla_set_type_attr(PyTypeObject* t, PyObject* name, PyObject* value) {
      if (PyDict_SetItem(t->tp_dict, name, value) < 0) return -1;
      PyType_Modified(t);
      return 0;
    }
    /* Fails a call given NULL where it needs an object or an output pointer:
       -1 with an exception set.  CPython's convention (abstract.c): a NULL
       object usually comes from a call that failed, so its exception stays;
       otherwise SystemError names the function and the argument.  Callers
       test the pointer first, so a valid call pays one compare. */
    static int dla_null_argument(const char* function, const char* argument) {
      if (PyErr_Occurred() == NULL)
        PyErr_Format(PyExc_SystemError, "%s: %s is NULL", function, argument);
      return -1;
    }
    """
    int dla_set_type_attr(PyTypeObject* t, object name, object value) except -1
    # The same function, for callers that propagate (except -1) and for those
    # that return -1 themselves with the exception set (noexcept).
    int null_argument "dla_null_argument"(const char* function, const char* argument) except -1
    int set_null_argument "dla_null_argument"(const char* function,
                                              const char* argument) noexcept
    int PyObject_TypeCheck(object obj, PyTypeObject* t)
    int Py_CLEANUP_SUPPORTED

cdef extern from "dlpackarray/cuda_alloc.hpp":
    void* cuda_allocate "dla::cuda::allocate"(DLDevice d, int64_t nbytes) except +raise_py_error
    void cuda_release "dla::cuda::release"(DLDevice d, void* p) noexcept

cdef tuple _VERSIONED = (int(kDLPackMajorVersion), int(kDLPackMinorVersion))


# -- shared implementations ------------------------------------------------------
cdef inline DLPackArray _as_array(object obj):
    if not isinstance(obj, DLPackArray):
        raise TypeError(f"expected a dlpackarray.DLPackArray, got a '{type(obj).__name__}' object")
    check_ready(<DLPackArray>obj)
    return <DLPackArray>obj


cdef DLManagedTensorVersioned* _to_managed(DLPackArray a) except NULL:
    """A new owning DLPack 1.3 tensor of ``a``'s memory (exchange API and C API)."""
    check_ready(a)
    cdef uint64_t flags = kFlagReadOnly if a._view.readonly else 0
    return new_versioned_managed(a._view, flags, <PyObject*>a.owner)


cdef DLPackArray _from_managed(DLManagedTensorVersioned* m):
    """Adopts ``m`` (exchange API and C API); its deleter runs once in every case."""
    cdef TensorView v
    cdef bint copied = False
    owner = view_from_managed_versioned(m, &v, &copied)
    return wrap_view(&v, owner)


# -- the DLPack C exchange API (provider) -------------------------------------------
cdef int _ex_allocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                       DLPackSetError set_error) noexcept with gil:
    # Errors go through SetError (the consumer's channel), not a Python exception;
    # without a SetError the call is refused through the only channel left.
    if set_error == NULL:
        return set_null_argument("managed_tensor_allocator", "SetError")
    try:
        if out == NULL:
            raise SystemError("managed_tensor_allocator: out is NULL")
        out[0] = _to_managed(_allocate(prototype))
        return 0
    except BaseException as e:
        kind = type(e).__name__.encode()
        message = str(e).encode(errors="replace")
        set_error(error_ctx, kind, message)
        return -1


cdef DLPackArray _allocate(DLTensor* prototype):
    """A new C-contiguous CPU array with the prototype's ndim, shape and dtype."""
    if prototype == NULL:
        raise ValueError("NULL prototype")
    if prototype.device.device_type != kDLCPU:
        raise BufferError(
            f"dlpackarray allocates host memory only, not on device type "
            f"{<int>prototype.device.device_type}")
    if prototype.ndim > 0 and prototype.shape == NULL:
        raise ValueError("prototype has a NULL shape")
    return _empty(prototype.ndim, prototype.shape, prototype.dtype, prototype.device)


cdef class _DeviceAllocation:
    """Owner of one DLPackArray_Empty allocation on a CUDA-family device."""
    cdef void* ptr
    cdef DLDevice device

    def __dealloc__(self):
        if self.ptr != NULL:
            cuda_release(self.device, self.ptr)
            self.ptr = NULL


cdef inline bint _is_cuda_allocatable(DLDevice d) noexcept:
    return (d.device_type == kDLCUDA or d.device_type == kDLCUDAHost
            or d.device_type == kDLCUDAManaged)


cdef DLPackArray _empty(int32_t ndim, const int64_t* shape, DLDataType dtype, DLDevice device):
    """A new C-contiguous array of uninitialised memory (exchange allocator, C API Empty)."""
    cdef TensorView v
    cdef Extent extent
    cdef int32_t i
    cdef HeapOwner heap
    cdef _DeviceAllocation dev
    if device.device_type != kDLCPU and not _is_cuda_allocatable(device):
        raise BufferError(
            f"dlpackarray allocates host, CUDA, CUDA pinned and CUDA managed memory, not "
            f"memory of device type {<int>device.device_type}")
    v.set_ndim(ndim)  # ValueError outside 0..kMaxNdim
    for i in range(ndim):
        v.shape[i] = shape[i]
    v.dtype = dtype
    v.device = device
    check_dtype_supported(v.dtype)
    set_c_strides(v)
    # The overflow-checked byte count of the dense layout; validate() refuses a
    # NULL address for a non-empty view, and the extent does not depend on it.
    v.data = <void*>&extent
    extent = validate(v)
    if device.device_type == kDLCPU:
        heap = HeapOwner.__new__(HeapOwner)
        heap.ptr = aligned_allocate(extent.hi - extent.lo)
        heap.nbytes = extent.hi - extent.lo
        v.data = heap.ptr
        return wrap_view(&v, heap)
    dev = _DeviceAllocation.__new__(_DeviceAllocation)
    dev.device = device
    dev.ptr = cuda_allocate(device, extent.hi - extent.lo)
    v.data = dev.ptr
    return wrap_view(&v, dev)


cdef int _ex_from_py_object(void* py_object, DLManagedTensorVersioned** out) except -1:
    if py_object == NULL or out == NULL:
        return null_argument("managed_tensor_from_py_object_no_sync",
                             "py_object" if py_object == NULL else "out")
    obj = <object>py_object
    cdef DLPackArray a = <DLPackArray>obj if isinstance(obj, DLPackArray) else \
        new_from_object(obj, None, None)
    out[0] = _to_managed(a)
    return 0


cdef int _ex_to_py_object(DLManagedTensorVersioned* tensor, void** out_py_object) except -1:
    if out_py_object == NULL:
        call_versioned_deleter(tensor)  # the tensor was handed over: never leak it
        return null_argument("managed_tensor_to_py_object_no_sync", "out_py_object")
    a = _from_managed(tensor)
    Py_INCREF(a)
    out_py_object[0] = <void*><PyObject*>a
    return 0


cdef int _ex_dltensor_from_py_object(void* py_object, DLTensor* out) except -1:
    if py_object == NULL or out == NULL:
        return null_argument("dltensor_from_py_object_no_sync",
                             "py_object" if py_object == NULL else "out")
    cdef DLPackArray a = _as_array(<object>py_object)
    if a._view.readonly:
        # A bare DLTensor cannot say "read-only"; the managed tensor can.
        raise BufferError(
            "cannot lend read-only data as a bare DLTensor (it has no read-only flag); use "
            "managed_tensor_from_py_object_no_sync, which sets READ_ONLY")
    _borrow_dltensor(a, out)
    return 0


cdef void _borrow_dltensor(DLPackArray a, DLTensor* out) noexcept:
    # shape/strides point into the array's descriptor, which never changes.
    out.data = a._view.data
    out.device = a._view.device
    out.ndim = a._view.ndim
    out.dtype = a._view.dtype
    out.shape = a._view.shape if a._view.ndim > 0 else NULL
    out.strides = a._view.strides if a._view.ndim > 0 else NULL
    out.byte_offset = a._view.byte_offset


cdef int _ex_current_work_stream(DLDeviceType device_type, int32_t device_id,
                                 void** out_current_stream) noexcept nogil:
    # dlpackarray launches no work, so it has no stream of its own: NULL (the
    # spec's answer for CPU, the legacy default stream elsewhere).
    if out_current_stream == NULL:
        with gil:
            return set_null_argument("current_work_stream", "out_current_stream")
    out_current_stream[0] = NULL
    return 0


# -- the public C API (dlpackarray.h) ------------------------------------------------
ctypedef void (*DataDeleter)(void* ctx) noexcept

cdef class _DataDeleterOwner:
    """Owner of memory wrapped by DLPackArray_FromData with a deleter callback."""
    cdef DataDeleter deleter
    cdef void* ctx

    def __dealloc__(self):
        if self.deleter != NULL:
            self.deleter(self.ctx)
            self.deleter = NULL


cdef int _c_check(PyObject* obj) noexcept:
    if obj == NULL:
        return 0  # never fails: NULL is simply not an array (a pending error stays)
    return PyObject_TypeCheck(<object>obj, <PyTypeObject*>DLPackArray)


cdef object _c_from_object(PyObject* obj, int copy, PyObject* device):
    if obj == NULL:
        null_argument("DLPackArray_FromObject", "obj")
    if copy not in (-1, 0, 1):
        raise ValueError(f"copy must be DLPACKARRAY_COPY_IF_NEEDED/NEVER/ALWAYS, got {copy}")
    py_copy = None if copy == -1 else bool(copy)
    py_device = None if device == NULL else <object>device
    return new_from_object(<object>obj, py_copy, py_device)


cdef object _c_from_data(void* data, int32_t ndim, const int64_t* shape, const int64_t* strides,
                         DLDataType dtype, DLDevice device, int readonly, PyObject* owner,
                         DataDeleter deleter, void* deleter_ctx):
    cdef _DataDeleterOwner holder
    cdef int32_t i
    keepalive = None
    if deleter != NULL:
        # Owned from here on: every exit, error or not, ends with one call.
        holder = _DataDeleterOwner.__new__(_DataDeleterOwner)
        holder.deleter = deleter
        holder.ctx = deleter_ctx
        keepalive = holder
        if owner != NULL:
            raise ValueError("give an owner object or a deleter, not both")
    elif owner != NULL:
        keepalive = <object>owner
    if ndim > 0 and shape == NULL:
        raise ValueError(f"shape is NULL but ndim is {ndim}")
    # Filled in place (no descriptor copy): on any error below the new array
    # is dropped before anyone else has seen it.
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    cdef TensorView* v = &a._view
    v.set_ndim(ndim)
    for i in range(ndim):
        v.shape[i] = shape[i]
    v.data = data
    v.dtype = dtype
    v.device = device
    v.readonly = readonly != 0
    if strides == NULL:
        set_c_strides(v[0])
    else:
        for i in range(ndim):
            v.strides[i] = strides[i]
    validate(v[0])  # the dtype, shape, strides and address range, overflow-checked
    a.owner = keepalive
    mark_ready(a)
    return a


cdef object _c_from_managed_versioned(DLManagedTensorVersioned* m):
    return _from_managed(m)


cdef object _c_from_managed_legacy(DLManagedTensor* m):
    cdef TensorView v
    owner = view_from_managed_legacy(m, &v)
    return wrap_view(&v, owner)


cdef int _c_get_dltensor(PyObject* array, DLTensor* out, int* readonly) except -1:
    cdef DLPackArray a = _as_array(<object>array)
    _borrow_dltensor(a, out)
    if readonly != NULL:
        readonly[0] = a._view.readonly
    return 0


cdef DLManagedTensorVersioned* _c_to_managed_versioned(PyObject* array) except NULL:
    return _to_managed(_as_array(<object>array))


cdef object _c_to_capsule(PyObject* array, int versioned):
    cdef DLPackArray a = _as_array(<object>array)
    return export_capsule(&a._view, a.owner, None, _VERSIONED if versioned else None, None,
                          None)


# -- C API 1.1 -----------------------------------------------------------------------
cdef object _c_empty(int32_t ndim, const int64_t* shape, DLDataType dtype, DLDevice device):
    if ndim > 0 and shape == NULL:
        raise ValueError(f"shape is NULL but ndim is {ndim}")
    return _empty(ndim, shape, dtype, device)


cdef int _c_is_contiguous(PyObject* array, char order) except -1:
    if array == NULL:
        return null_argument("DLPackArray_IsContiguous", "array")
    cdef DLPackArray a = _as_array(<object>array)
    if order == b'C':
        return is_c_contiguous(a._view)
    if order == b'F':
        return is_f_contiguous(a._view)
    raise ValueError(f"order must be 'C' or 'F', got {chr(<unsigned char>order)!r}")


cdef object _c_as_contiguous(PyObject* array):
    if array == NULL:
        null_argument("DLPackArray_AsContiguous", "array")
    cdef DLPackArray a = _as_array(<object>array)
    if is_c_contiguous(a._view):
        return a
    # DLPackArray(a, copy=True): a dense C-ordered copy on a's own device.
    return new_from_object(a, True, None)


cdef int _c_converter(PyObject* obj, void* address) except 0:
    # PyArg_ParseTuple's O& contract: Py_CLEANUP_SUPPORTED on success, 0 with an
    # exception on failure, and a second call with obj == NULL (same address)
    # when a later argument fails, which must drop what the first one stored.
    cdef PyObject** slot = <PyObject**>address
    if obj == NULL:
        if slot != NULL:
            Py_CLEAR(slot[0])
        return 1
    if slot == NULL:
        null_argument("DLPackArray_Converter", "address")
    # An array passes through as it is, once it is ready: a converted argument
    # is read by the C caller, so one that is not is refused here (check_ready).
    result = _as_array(<object>obj) if isinstance(<object>obj, DLPackArray) else \
        new_from_object(<object>obj, None, None)
    Py_INCREF(result)
    slot[0] = <PyObject*>result
    return Py_CLEANUP_SUPPORTED


cdef object _c_from_object_on_stream(PyObject* obj, int copy, PyObject* device, int64_t stream):
    if obj == NULL:
        null_argument("DLPackArray_FromObjectOnStream", "obj")
    if copy not in (-1, 0, 1):
        raise ValueError(f"copy must be DLPACKARRAY_COPY_IF_NEEDED/NEVER/ALWAYS, got {copy}")
    py_copy = None if copy == -1 else bool(copy)
    py_device = None if device == NULL else <object>device
    # The constructor's own stream path (checks, producer call, adoption): one
    # implementation of the stream rules.
    return DLPackArray(<object>obj, copy=py_copy, device=py_device, stream=stream)


# NULL guards of the table entries taking an array (kept apart from the
# implementations above, which assume a valid object).
cdef int _c_get_dltensor_checked(PyObject* array, DLTensor* out, int* readonly) except -1:
    if array == NULL or out == NULL:
        return null_argument("DLPackArray_GetDLTensor", "array" if array == NULL else "out")
    return _c_get_dltensor(array, out, readonly)


cdef DLManagedTensorVersioned* _c_to_managed_versioned_checked(PyObject* array) except NULL:
    if array == NULL:
        null_argument("DLPackArray_ToManagedVersioned", "array")
    return _c_to_managed_versioned(array)


cdef object _c_to_capsule_checked(PyObject* array, int versioned):
    if array == NULL:
        null_argument("DLPackArray_ToCapsule", "array")
    return _c_to_capsule(array, versioned)


# Layout of DLPackArray_CAPI in dlpackarray.h (tests/capi/test_c_api_downstream.py
# calls every member through the header).
ctypedef struct CAPITable:
    uint32_t major
    uint32_t minor
    size_t size
    PyTypeObject* type
    void* check
    void* from_object
    void* from_data
    void* from_managed_versioned
    void* from_managed_legacy
    void* get_dltensor
    void* to_managed_versioned
    void* to_capsule
    # 1.1
    void* empty
    void* is_contiguous
    void* as_contiguous
    void* converter
    void* from_object_on_stream

cdef enum:
    C_API_MAJOR = 1
    C_API_MINOR = 1

cdef CAPITable _table
_table.major = C_API_MAJOR
_table.minor = C_API_MINOR
_table.size = sizeof(CAPITable)
_table.type = <PyTypeObject*>DLPackArray
_table.check = <void*>_c_check
_table.from_object = <void*>_c_from_object
_table.from_data = <void*>_c_from_data
_table.from_managed_versioned = <void*>_c_from_managed_versioned
_table.from_managed_legacy = <void*>_c_from_managed_legacy
_table.get_dltensor = <void*>_c_get_dltensor_checked
_table.to_managed_versioned = <void*>_c_to_managed_versioned_checked
_table.to_capsule = <void*>_c_to_capsule_checked
_table.empty = <void*>_c_empty
_table.is_contiguous = <void*>_c_is_contiguous
_table.as_contiguous = <void*>_c_as_contiguous
_table.converter = <void*>_c_converter
_table.from_object_on_stream = <void*>_c_from_object_on_stream

#: The C API table, loaded by ``import_dlpackarray()`` as ``dlpackarray._C_API``.
_C_API = PyCapsule_New(<void*>&_table, b"dlpackarray._C_API", NULL)

#: (major, minor) of the C API table.
C_API_VERSION = (int(C_API_MAJOR), int(C_API_MINOR))

cdef DLPackExchangeAPI* _api = own_exchange_api()
_api.header.version.major = kDLPackMajorVersion
_api.header.version.minor = kDLPackMinorVersion
_api.header.prev_api = NULL
_api.managed_tensor_allocator = <DLPackManagedTensorAllocator><void*>_ex_allocator
_api.managed_tensor_from_py_object_no_sync = \
    <DLPackManagedTensorFromPyObjectNoSync><void*>_ex_from_py_object
_api.managed_tensor_to_py_object_no_sync = \
    <DLPackManagedTensorToPyObjectNoSync><void*>_ex_to_py_object
_api.dltensor_from_py_object_no_sync = \
    <DLPackDLTensorFromPyObjectNoSync><void*>_ex_dltensor_from_py_object
_api.current_work_stream = <DLPackCurrentWorkStream><void*>_ex_current_work_stream

# DLPack 1.3 discovery: a capsule named "dlpack_exchange_api" on the type,
# pointing to one static table for the life of the process.
dla_set_type_attr(<PyTypeObject*>DLPackArray, "__dlpack_c_exchange_api__",
                  PyCapsule_New(<void*>_api, kCapsuleExchangeApi, NULL))
