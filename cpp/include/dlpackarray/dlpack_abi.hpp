// The C++ view of the DLPack 1.3 ABI.  The structs and enums are the public C
// declarations of dlpackarray/dlpack_abi.h (the one declaration of the ABI,
// checked against an official dlpack.h by tests/helpers/abi); this header only makes
// them visible as dla:: names and adds the constants the core spells in C++
// (versions, flags, capsule names).  Like nanoarrow.hpp over nanoarrow.h, it
// declares no layout of its own.
#pragma once

#include <cstdint>

#include "dlpackarray/dlpack_abi.h"

namespace dla {

using ::DLDataType;
using ::DLDataTypeCode;
using ::DLDevice;
using ::DLDeviceType;
using ::DLManagedTensor;
using ::DLManagedTensorVersioned;
using ::DLPackCurrentWorkStream;
using ::DLPackDLTensorFromPyObjectNoSync;
using ::DLPackExchangeAPI;
using ::DLPackExchangeAPIHeader;
using ::DLPackManagedTensorAllocator;
using ::DLPackManagedTensorFromPyObjectNoSync;
using ::DLPackManagedTensorToPyObjectNoSync;
using ::DLPackVersion;
using ::DLTensor;

using ::kDLCPU;
using ::kDLCUDA;
using ::kDLCUDAHost;
using ::kDLCUDAManaged;
using ::kDLExtDev;
using ::kDLHexagon;
using ::kDLMAIA;
using ::kDLMetal;
using ::kDLOneAPI;
using ::kDLOpenCL;
using ::kDLROCM;
using ::kDLROCMHost;
using ::kDLTrn;
using ::kDLVPI;
using ::kDLVulkan;
using ::kDLWebGPU;

using ::kDLBfloat;
using ::kDLBool;
using ::kDLComplex;
using ::kDLFloat;
using ::kDLFloat4_e2m1fn;
using ::kDLFloat6_e2m3fn;
using ::kDLFloat6_e3m2fn;
using ::kDLFloat8_e3m4;
using ::kDLFloat8_e4m3;
using ::kDLFloat8_e4m3b11fnuz;
using ::kDLFloat8_e4m3fn;
using ::kDLFloat8_e4m3fnuz;
using ::kDLFloat8_e5m2;
using ::kDLFloat8_e5m2fnuz;
using ::kDLFloat8_e8m0fnu;
using ::kDLInt;
using ::kDLOpaqueHandle;
using ::kDLUInt;

// The version the core produces and reads (DLPACK_MAJOR_VERSION is a macro of
// dlpack_abi.h or of an official header included first: both say 1.3).
inline constexpr uint32_t kDLPackMajorVersion = DLPACK_MAJOR_VERSION;
inline constexpr uint32_t kDLPackMinorVersion = DLPACK_MINOR_VERSION;

inline constexpr uint64_t kFlagReadOnly = DLPACK_FLAG_BITMASK_READ_ONLY;
inline constexpr uint64_t kFlagIsCopied = DLPACK_FLAG_BITMASK_IS_COPIED;
inline constexpr uint64_t kFlagIsSubbyteTypePadded = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;

// The error callback a DLPackManagedTensorAllocator receives (the C header
// spells its type inline).
using DLPackSetError = void (*)(void* error_ctx, const char* kind, const char* message);

// Capsule names must be static strings: consumers compare and keep them.
inline constexpr const char* kCapsuleLegacy = "dltensor";
inline constexpr const char* kCapsuleLegacyUsed = "used_dltensor";
inline constexpr const char* kCapsuleVersioned = "dltensor_versioned";
inline constexpr const char* kCapsuleVersionedUsed = "used_dltensor_versioned";
inline constexpr const char* kCapsuleExchangeApi = "dlpack_exchange_api";

}  // namespace dla
