# cython: language_level=3
# ``cimport dlpackarray`` for other Cython projects, in C or C++ mode: the
# DLPack ABI structs, the DLPackArray type (opaque) and the C API functions,
# all from dlpackarray/dlpackarray.h (see docs/c_api.md).  Compile with
# ``dlpackarray.get_include()`` on the include path; nothing is linked.
from dlpackarray.c_api cimport (
    DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION,
    DLPACKARRAY_C_API_MAJOR, DLPACKARRAY_C_API_MINOR, DLPACKARRAY_COPY_ALWAYS,
    DLPACKARRAY_COPY_IF_NEEDED, DLPACKARRAY_COPY_NEVER, DLDataType, DLDataTypeCode, DLDevice,
    DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLPackArray, DLPackArray_AsContiguous,
    DLPackArray_Check, DLPackArray_Converter, DLPackArray_DataDeleter, DLPackArray_Empty,
    DLPackArray_FromData, DLPackArray_FromManagedLegacy, DLPackArray_FromManagedVersioned,
    DLPackArray_FromObject, DLPackArray_FromObjectOnStream, DLPackArray_GetDLTensor,
    DLPackArray_IsContiguous, DLPackArray_ToCapsule, DLPackArray_ToManagedVersioned,
    DLPackArray_Type, DLPackCurrentWorkStream, DLPackDLTensorFromPyObjectNoSync,
    DLPackExchangeAPI, DLPackExchangeAPIHeader, DLPackManagedTensorAllocator,
    DLPackManagedTensorFromPyObjectNoSync, DLPackManagedTensorToPyObjectNoSync, DLPackVersion,
    DLTensor, import_dlpackarray, kDLBfloat, kDLBool, kDLComplex, kDLCPU, kDLCUDA, kDLCUDAHost,
    kDLCUDAManaged, kDLExtDev, kDLFloat, kDLFloat4_e2m1fn, kDLFloat6_e2m3fn, kDLFloat6_e3m2fn,
    kDLFloat8_e3m4, kDLFloat8_e4m3, kDLFloat8_e4m3b11fnuz, kDLFloat8_e4m3fn, kDLFloat8_e4m3fnuz,
    kDLFloat8_e5m2, kDLFloat8_e5m2fnuz, kDLFloat8_e8m0fnu, kDLHexagon, kDLInt, kDLMAIA, kDLMetal,
    kDLOneAPI, kDLOpaqueHandle, kDLOpenCL, kDLROCM, kDLROCMHost, kDLTrn, kDLUInt, kDLVPI,
    kDLVulkan, kDLWebGPU,
)
