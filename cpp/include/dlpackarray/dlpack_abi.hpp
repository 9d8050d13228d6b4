// DLPack 1.3 ABI, declared by this project from the published layout facts
// (see docs/abi.md).  Field order is memory order; tests/abi/ checks every
// sizeof/offsetof/enum value against an official dlpack.h found in an
// installed package.  Declared inside namespace dla so that a translation unit
// may include both this header and an official dlpack.h.
#pragma once

#include <cstdint>

namespace dla {

inline constexpr uint32_t kDLPackMajorVersion = 1;
inline constexpr uint32_t kDLPackMinorVersion = 3;

enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18,
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
  kDLFloat8_e3m4 = 7,
  kDLFloat8_e4m3 = 8,
  kDLFloat8_e4m3b11fnuz = 9,
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e4m3fnuz = 11,
  kDLFloat8_e5m2 = 12,
  kDLFloat8_e5m2fnuz = 13,
  kDLFloat8_e8m0fnu = 14,
  kDLFloat6_e2m3fn = 15,
  kDLFloat6_e3m2fn = 16,
  kDLFloat4_e2m1fn = 17,
};

inline constexpr uint64_t kFlagReadOnly = 1ULL << 0;
inline constexpr uint64_t kFlagIsCopied = 1ULL << 1;
inline constexpr uint64_t kFlagIsSubbyteTypePadded = 1ULL << 2;

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL only from pre-1.2 producers
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// Everything up to `flags` must stay stable across minor versions so that a
// consumer that cannot read a tensor can still call its deleter.
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  DLPackExchangeAPIHeader* prev_api;
};

using DLPackSetError = void (*)(void* error_ctx, const char* kind, const char* message);
using DLPackManagedTensorAllocator = int (*)(DLTensor* prototype, DLManagedTensorVersioned** out,
                                             void* error_ctx, DLPackSetError SetError);
using DLPackManagedTensorFromPyObjectNoSync = int (*)(void* py_object,
                                                      DLManagedTensorVersioned** out);
using DLPackDLTensorFromPyObjectNoSync = int (*)(void* py_object, DLTensor* out);
using DLPackCurrentWorkStream = int (*)(DLDeviceType device_type, int32_t device_id,
                                        void** out_current_stream);
using DLPackManagedTensorToPyObjectNoSync = int (*)(DLManagedTensorVersioned* tensor,
                                                    void** out_py_object);

struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;  // optional
  DLPackCurrentWorkStream current_work_stream;
};

// Capsule names must be static strings: consumers compare and keep them.
inline constexpr const char* kCapsuleLegacy = "dltensor";
inline constexpr const char* kCapsuleLegacyUsed = "used_dltensor";
inline constexpr const char* kCapsuleVersioned = "dltensor_versioned";
inline constexpr const char* kCapsuleVersionedUsed = "used_dltensor_versioned";
inline constexpr const char* kCapsuleExchangeApi = "dlpack_exchange_api";

}  // namespace dla
