# cython: language_level=3
# Cython declarations of the public C API, dlpackarray/dlpackarray.h (valid C
# and C++): ``cimport dlpackarray`` re-exports them.  Compile with
# ``dlpackarray.get_include()`` on the include path; nothing is linked.
# Call ``import_dlpackarray()`` at module level (the functions also load the
# table on first use, and raise its ImportError if that fails).  DLPackArray's
# fields are private: use the functions.
from libc.stdint cimport int32_t, int64_t
from cpython.object cimport PyObject, PyTypeObject

# The DLPack ABI is declared once, in abi.pxd; cimported here so that
# ``from dlpackarray.c_api cimport DLTensor`` (and ``cimport dlpackarray``)
# see it too.
from dlpackarray.abi cimport (
    DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLDataType,
    DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPackCurrentWorkStream, DLPackDLTensorFromPyObjectNoSync, DLPackExchangeAPI,
    DLPackExchangeAPIHeader, DLPackManagedTensorAllocator, DLPackManagedTensorFromPyObjectNoSync,
    DLPackManagedTensorToPyObjectNoSync, DLPackVersion, DLTensor, kDLBfloat, kDLBool, kDLComplex,
    kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLExtDev, kDLFloat, kDLFloat4_e2m1fn,
    kDLFloat6_e2m3fn, kDLFloat6_e3m2fn, kDLFloat8_e3m4, kDLFloat8_e4m3, kDLFloat8_e4m3b11fnuz,
    kDLFloat8_e4m3fn, kDLFloat8_e4m3fnuz, kDLFloat8_e5m2, kDLFloat8_e5m2fnuz, kDLFloat8_e8m0fnu,
    kDLHexagon, kDLInt, kDLMAIA, kDLMetal, kDLOneAPI, kDLOpaqueHandle, kDLOpenCL, kDLROCM,
    kDLROCMHost, kDLTrn, kDLUInt, kDLVPI, kDLVulkan, kDLWebGPU,
)


cdef extern from "dlpackarray/dlpackarray.h":
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
