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
