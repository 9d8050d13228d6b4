// Compile-time proof that the DLPack declarations the C++ core uses
// (cpp/include/dlpackarray/dlpack_abi.hpp: the public C declarations of
// dlpack_abi.h, seen as dla:: names, plus the core's constants) have exactly
// the layout and constants of an official dlpack.h.  Compiled by
// tests/dlpack/test_abi_layout.py with -fsyntax-only; any mismatch is a static_assert
// failure naming the field.
//
// Both declare the same global C names behind the same include guard, so ours
// come first and the official header is then read into namespace `official`
// with the guard and its macros cleared (the C library headers it includes are
// already in, so their guards keep them out of the namespace).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dlpackarray/dlpack_abi.hpp"

#ifndef DLPACKARRAY_DECLARES_DLPACK
#error "dlpack_abi.hpp did not use dlpackarray's own declarations"
#endif

// The core's names are the C declarations themselves, not copies.
static_assert(std::is_same_v<dla::DLTensor, ::DLTensor>);
static_assert(std::is_same_v<dla::DLManagedTensorVersioned, ::DLManagedTensorVersioned>);
static_assert(std::is_same_v<dla::DLPackExchangeAPI, ::DLPackExchangeAPI>);

constexpr uint64_t kOurMajorMacro = DLPACK_MAJOR_VERSION;
constexpr uint64_t kOurMinorMacro = DLPACK_MINOR_VERSION;
constexpr uint64_t kOurReadOnlyMacro = DLPACK_FLAG_BITMASK_READ_ONLY;
constexpr uint64_t kOurIsCopiedMacro = DLPACK_FLAG_BITMASK_IS_COPIED;
constexpr uint64_t kOurSubbyteMacro = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
#undef DLPACK_DLPACK_H_
#undef DLPACK_MAJOR_VERSION
#undef DLPACK_MINOR_VERSION
#undef DLPACK_FLAG_BITMASK_READ_ONLY
#undef DLPACK_FLAG_BITMASK_IS_COPIED
#undef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED

namespace official {
#include <dlpack/dlpack.h>
}  // namespace official

#if DLPACK_MAJOR_VERSION != 1 || DLPACK_MINOR_VERSION != 3
#error "this check is written against an official DLPack 1.3 header"
#endif

#define SAME_SIZE(T)                                                              \
  static_assert(sizeof(official::T) == sizeof(dla::T), "sizeof(" #T ") differs"); \
  static_assert(alignof(official::T) == alignof(dla::T), "alignof(" #T ") differs")
#define SAME_FIELD(T, f)                                         \
  static_assert(offsetof(official::T, f) == offsetof(dla::T, f), \
                "offsetof(" #T "." #f ") differs");              \
  static_assert(sizeof(official::T::f) == sizeof(dla::T::f), "sizeof(" #T "." #f ") differs")
#define SAME_VALUE(ours, theirs) \
  static_assert(static_cast<uint64_t>(ours) == static_cast<uint64_t>(theirs), #ours " != " #theirs)
#define SAME_ENUM(name) SAME_VALUE(dla::name, official::name)

// Versions and flags.
SAME_VALUE(dla::kDLPackMajorVersion, DLPACK_MAJOR_VERSION);
SAME_VALUE(dla::kDLPackMinorVersion, DLPACK_MINOR_VERSION);
SAME_VALUE(dla::kFlagReadOnly, DLPACK_FLAG_BITMASK_READ_ONLY);
SAME_VALUE(dla::kFlagIsCopied, DLPACK_FLAG_BITMASK_IS_COPIED);
SAME_VALUE(dla::kFlagIsSubbyteTypePadded, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
// The C macros of dlpack_abi.h (what C and Cython consumers read).
SAME_VALUE(kOurMajorMacro, DLPACK_MAJOR_VERSION);
SAME_VALUE(kOurMinorMacro, DLPACK_MINOR_VERSION);
SAME_VALUE(kOurReadOnlyMacro, DLPACK_FLAG_BITMASK_READ_ONLY);
SAME_VALUE(kOurIsCopiedMacro, DLPACK_FLAG_BITMASK_IS_COPIED);
SAME_VALUE(kOurSubbyteMacro, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);

// Device types.
static_assert(sizeof(official::DLDeviceType) == sizeof(dla::DLDeviceType),
              "DLDeviceType size differs");
SAME_ENUM(kDLCPU);
SAME_ENUM(kDLCUDA);
SAME_ENUM(kDLCUDAHost);
SAME_ENUM(kDLOpenCL);
SAME_ENUM(kDLVulkan);
SAME_ENUM(kDLMetal);
SAME_ENUM(kDLVPI);
SAME_ENUM(kDLROCM);
SAME_ENUM(kDLROCMHost);
SAME_ENUM(kDLExtDev);
SAME_ENUM(kDLCUDAManaged);
SAME_ENUM(kDLOneAPI);
SAME_ENUM(kDLWebGPU);
SAME_ENUM(kDLHexagon);
SAME_ENUM(kDLMAIA);
SAME_ENUM(kDLTrn);

// Data type codes (stored in DLDataType.code, a uint8_t in both headers).
SAME_ENUM(kDLInt);
SAME_ENUM(kDLUInt);
SAME_ENUM(kDLFloat);
SAME_ENUM(kDLOpaqueHandle);
SAME_ENUM(kDLBfloat);
SAME_ENUM(kDLComplex);
SAME_ENUM(kDLBool);
SAME_ENUM(kDLFloat8_e3m4);
SAME_ENUM(kDLFloat8_e4m3);
SAME_ENUM(kDLFloat8_e4m3b11fnuz);
SAME_ENUM(kDLFloat8_e4m3fn);
SAME_ENUM(kDLFloat8_e4m3fnuz);
SAME_ENUM(kDLFloat8_e5m2);
SAME_ENUM(kDLFloat8_e5m2fnuz);
SAME_ENUM(kDLFloat8_e8m0fnu);
SAME_ENUM(kDLFloat6_e2m3fn);
SAME_ENUM(kDLFloat6_e3m2fn);
SAME_ENUM(kDLFloat4_e2m1fn);

// Structs, field by field.
SAME_SIZE(DLPackVersion);
SAME_FIELD(DLPackVersion, major);
SAME_FIELD(DLPackVersion, minor);

SAME_SIZE(DLDevice);
SAME_FIELD(DLDevice, device_type);
SAME_FIELD(DLDevice, device_id);

SAME_SIZE(DLDataType);
SAME_FIELD(DLDataType, code);
SAME_FIELD(DLDataType, bits);
SAME_FIELD(DLDataType, lanes);

SAME_SIZE(DLTensor);
SAME_FIELD(DLTensor, data);
SAME_FIELD(DLTensor, device);
SAME_FIELD(DLTensor, ndim);
SAME_FIELD(DLTensor, dtype);
SAME_FIELD(DLTensor, shape);
SAME_FIELD(DLTensor, strides);
SAME_FIELD(DLTensor, byte_offset);

SAME_SIZE(DLManagedTensor);
SAME_FIELD(DLManagedTensor, dl_tensor);
SAME_FIELD(DLManagedTensor, manager_ctx);
SAME_FIELD(DLManagedTensor, deleter);

SAME_SIZE(DLManagedTensorVersioned);
SAME_FIELD(DLManagedTensorVersioned, version);
SAME_FIELD(DLManagedTensorVersioned, manager_ctx);
SAME_FIELD(DLManagedTensorVersioned, deleter);
SAME_FIELD(DLManagedTensorVersioned, flags);
SAME_FIELD(DLManagedTensorVersioned, dl_tensor);

SAME_SIZE(DLPackExchangeAPIHeader);
SAME_FIELD(DLPackExchangeAPIHeader, version);
SAME_FIELD(DLPackExchangeAPIHeader, prev_api);

SAME_SIZE(DLPackExchangeAPI);
SAME_FIELD(DLPackExchangeAPI, header);
SAME_FIELD(DLPackExchangeAPI, managed_tensor_allocator);
SAME_FIELD(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync);
SAME_FIELD(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync);
SAME_FIELD(DLPackExchangeAPI, dltensor_from_py_object_no_sync);
SAME_FIELD(DLPackExchangeAPI, current_work_stream);

// Capsule names are part of the Python ABI.
constexpr bool same_string(const char* a, const char* b) {
  return *a == *b && (*a == '\0' || same_string(a + 1, b + 1));
}
static_assert(same_string(dla::kCapsuleLegacy, "dltensor"), "legacy capsule name");
static_assert(same_string(dla::kCapsuleLegacyUsed, "used_dltensor"), "used legacy name");
static_assert(same_string(dla::kCapsuleVersioned, "dltensor_versioned"), "versioned name");
static_assert(same_string(dla::kCapsuleVersionedUsed, "used_dltensor_versioned"),
              "used versioned name");
static_assert(same_string(dla::kCapsuleExchangeApi, "dlpack_exchange_api"),
              "exchange API capsule name");

// Negative control used by the test: proves a mismatch does fail to compile.
#ifdef DLA_ABI_CHECK_MUST_FAIL
SAME_VALUE(dla::kDLPackMinorVersion + 1, DLPACK_MINOR_VERSION);
#endif
