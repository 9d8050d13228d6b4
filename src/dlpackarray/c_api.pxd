# cython: language_level=3
# Cython declarations of the public C API, dlpackarray/dlpackarray.h (valid C
# and C++): ``cimport dlpackarray`` re-exports them.  Compile with
# ``dlpackarray.get_include()`` on the include path; nothing is linked.
# Call ``import_dlpackarray()`` at module level (the functions also load the
# table on first use, and raise its ImportError if that fails).  DLPackArray's
# fields are private: use the functions.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from cpython.object cimport PyObject, PyTypeObject


cdef extern from "dlpackarray/dlpackarray.h":
    # -- DLPack 1.3 ABI (the official header's names, global in C) --------------
    enum:
        DLPACK_MAJOR_VERSION
        DLPACK_MINOR_VERSION
    const uint64_t DLPACK_FLAG_BITMASK_READ_ONLY
    const uint64_t DLPACK_FLAG_BITMASK_IS_COPIED
    const uint64_t DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED

    ctypedef enum DLDeviceType:
        kDLCPU
        kDLCUDA
        kDLCUDAHost
        kDLOpenCL
        kDLVulkan
        kDLMetal
        kDLVPI
        kDLROCM
        kDLROCMHost
        kDLExtDev
        kDLCUDAManaged
        kDLOneAPI
        kDLWebGPU
        kDLHexagon
        kDLMAIA
        kDLTrn

    ctypedef enum DLDataTypeCode:
        kDLInt
        kDLUInt
        kDLFloat
        kDLOpaqueHandle
        kDLBfloat
        kDLComplex
        kDLBool
        kDLFloat8_e3m4
        kDLFloat8_e4m3
        kDLFloat8_e4m3b11fnuz
        kDLFloat8_e4m3fn
        kDLFloat8_e4m3fnuz
        kDLFloat8_e5m2
        kDLFloat8_e5m2fnuz
        kDLFloat8_e8m0fnu
        kDLFloat6_e2m3fn
        kDLFloat6_e3m2fn
        kDLFloat4_e2m1fn

    ctypedef struct DLPackVersion:
        uint32_t major
        uint32_t minor

    ctypedef struct DLDevice:
        DLDeviceType device_type
        int32_t device_id

    ctypedef struct DLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes

    ctypedef struct DLTensor:
        void* data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset

    ctypedef struct DLManagedTensor:
        DLTensor dl_tensor
        void* manager_ctx
        void (*deleter)(DLManagedTensor*) noexcept

    ctypedef struct DLManagedTensorVersioned:
        DLPackVersion version
        void* manager_ctx
        void (*deleter)(DLManagedTensorVersioned*) noexcept
        uint64_t flags
        DLTensor dl_tensor

    # The C exchange API (DLPack 1.3): the static table a producer type
    # publishes as ``type.__dlpack_c_exchange_api__`` (a "dlpack_exchange_api"
    # capsule).
    ctypedef struct DLPackExchangeAPIHeader:
        DLPackVersion version
        DLPackExchangeAPIHeader* prev_api

    ctypedef int (*DLPackManagedTensorAllocator)(
        DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
        void (*SetError)(void* error_ctx, const char* kind, const char* message) noexcept
    ) noexcept
    ctypedef int (*DLPackManagedTensorFromPyObjectNoSync)(
        void* py_object, DLManagedTensorVersioned** out) noexcept
    ctypedef int (*DLPackManagedTensorToPyObjectNoSync)(
        DLManagedTensorVersioned* tensor, void** out_py_object) noexcept
    ctypedef int (*DLPackDLTensorFromPyObjectNoSync)(void* py_object, DLTensor* out) noexcept
    ctypedef int (*DLPackCurrentWorkStream)(
        DLDeviceType device_type, int32_t device_id, void** out_current_stream) noexcept

    ctypedef struct DLPackExchangeAPI:
        DLPackExchangeAPIHeader header
        DLPackManagedTensorAllocator managed_tensor_allocator
        DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync
        DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync
        DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync
        DLPackCurrentWorkStream current_work_stream

    # -- the dlpackarray C API ------------------------------------------------------
    enum:
        DLPACKARRAY_C_API_MAJOR
        DLPACKARRAY_C_API_MINOR
        DLPACKARRAY_COPY_IF_NEEDED
        DLPACKARRAY_COPY_NEVER
        DLPACKARRAY_COPY_ALWAYS

    # The type, opaque: typed variables and isinstance work, fields are private.
    ctypedef class dlpackarray._array.DLPackArray [object DLPackArrayObject, check_size ignore]:
        pass

    ctypedef void (*DLPackArray_DataDeleter)(void* ctx) noexcept

    # ImportError (naming both versions) when the installed table does not fit;
    # every function below loads the table itself on first use and raises it too.
    int import_dlpackarray() except -1
    PyTypeObject* DLPackArray_Type() except NULL
    # 1 or 0; a 0 from a failed first-use load comes with the ImportError set,
    # which ``except? 0`` raises here.
    bint DLPackArray_Check(object obj) except? 0
    # device: NULL for None.  New references, NULL (an exception) on failure.
    object DLPackArray_FromObject(object obj, int copy, PyObject* device)
    object DLPackArray_FromData(void* data, int32_t ndim, const int64_t* shape,
                                const int64_t* strides, DLDataType dtype, DLDevice device,
                                int readonly, PyObject* owner, DLPackArray_DataDeleter deleter,
                                void* deleter_ctx)
    object DLPackArray_FromManagedVersioned(DLManagedTensorVersioned* tensor)
    object DLPackArray_FromManagedLegacy(DLManagedTensor* tensor)
    int DLPackArray_GetDLTensor(object array, DLTensor* out, int* readonly) except -1
    DLManagedTensorVersioned* DLPackArray_ToManagedVersioned(object array) except NULL
    object DLPackArray_ToCapsule(object array, int versioned)
    # -- 1.1 --
    object DLPackArray_Empty(int32_t ndim, const int64_t* shape, DLDataType dtype,
                             DLDevice device)
    int DLPackArray_IsContiguous(object array, char order) except -1
    object DLPackArray_AsContiguous(object array)
    # For PyArg_ParseTuple's "O&" (PyObject*, not object: the cleanup call
    # passes NULL); Py_CLEANUP_SUPPORTED, or 0 with an exception.
    int DLPackArray_Converter(PyObject* obj, void* address) except 0
    object DLPackArray_FromObjectOnStream(object obj, int copy, PyObject* device, int64_t stream)
