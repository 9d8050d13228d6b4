# cython: language_level=3
# The DLPack 1.3 ABI, dlpackarray/dlpack_abi.h (valid C and C++; the official
# header's names, global in C): the one Cython declaration of it.  The C API
# (c_api.pxd, ``cimport dlpackarray``) and the package's own modules cimport
# it from here.  Other Cython projects: ``from dlpackarray.abi cimport
# DLTensor``, with ``dlpackarray.get_include()`` on the include path.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef extern from "dlpackarray/dlpack_abi.h":
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


# The error callback a DLPackManagedTensorAllocator receives (the header
# spells its type inline, so this typedef is Cython's own).
ctypedef void (*DLPackSetError)(void* error_ctx, const char* kind, const char* message) noexcept
