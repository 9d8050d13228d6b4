# cython: language_level=3
# DLPack 1.3 ABI as declared in dlpackarray/dlpack_abi.hpp (namespace dla).
# Other Cython projects: ``from dlpackarray.abi cimport DLTensor``.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef extern from "dlpackarray/dlpack_abi.hpp" namespace "dla" nogil:
    const uint32_t kDLPackMajorVersion
    const uint32_t kDLPackMinorVersion

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

    const uint64_t kFlagReadOnly
    const uint64_t kFlagIsCopied
    const uint64_t kFlagIsSubbyteTypePadded

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

    const char* kCapsuleLegacy
    const char* kCapsuleLegacyUsed
    const char* kCapsuleVersioned
    const char* kCapsuleVersionedUsed
    const char* kCapsuleExchangeApi

    # The C exchange API (DLPack 1.2/1.3): a static table a producer type
    # publishes as ``type.__dlpack_c_exchange_api__``.
    ctypedef struct DLPackExchangeAPIHeader:
        DLPackVersion version
        DLPackExchangeAPIHeader* prev_api

    ctypedef void (*DLPackSetError)(void* error_ctx, const char* kind,
                                    const char* message) noexcept
    ctypedef int (*DLPackManagedTensorAllocator)(
        DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
        DLPackSetError SetError) noexcept
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
