/* Prints the layout of the DLPack declarations a C (or C++) translation unit
 * sees: every sizeof/alignof/offsetof and constant, one per line.  Built by
 * tests/dlpack/test_abi_layout.py twice, against an official dlpack.h
 * (-DDLA_USE_OFFICIAL) and against dlpackarray/dlpackarray.h alone, which
 * must print the same lines. */
#include <stddef.h>
#include <stdio.h>

#ifdef DLA_USE_OFFICIAL
#include <dlpack/dlpack.h>
#else
#include "dlpackarray/dlpackarray.h"
#ifndef DLPACKARRAY_DECLARES_DLPACK
#error "dlpackarray.h did not declare the DLPack ABI itself"
#endif
#endif

#ifdef __cplusplus
#define ALIGNOF(T) alignof(T)
#else
#define ALIGNOF(T) _Alignof(T)
#endif
#define TYPE(T) printf("%s size=%zu align=%zu\n", #T, sizeof(T), (size_t)ALIGNOF(T))
#define FIELD(T, f) \
  printf("%s.%s offset=%zu size=%zu\n", #T, #f, offsetof(T, f), sizeof(((T*)0)->f))
#define VALUE(v) printf("%s=%llu\n", #v, (unsigned long long)(v))

int main(void) {
  VALUE(DLPACK_MAJOR_VERSION);
  VALUE(DLPACK_MINOR_VERSION);
  VALUE(DLPACK_FLAG_BITMASK_READ_ONLY);
  VALUE(DLPACK_FLAG_BITMASK_IS_COPIED);
  VALUE(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  TYPE(DLDeviceType);
  VALUE(kDLCPU);
  VALUE(kDLCUDA);
  VALUE(kDLCUDAHost);
  VALUE(kDLOpenCL);
  VALUE(kDLVulkan);
  VALUE(kDLMetal);
  VALUE(kDLVPI);
  VALUE(kDLROCM);
  VALUE(kDLROCMHost);
  VALUE(kDLExtDev);
  VALUE(kDLCUDAManaged);
  VALUE(kDLOneAPI);
  VALUE(kDLWebGPU);
  VALUE(kDLHexagon);
  VALUE(kDLMAIA);
  VALUE(kDLTrn);
  VALUE(kDLInt);
  VALUE(kDLUInt);
  VALUE(kDLFloat);
  VALUE(kDLOpaqueHandle);
  VALUE(kDLBfloat);
  VALUE(kDLComplex);
  VALUE(kDLBool);
  VALUE(kDLFloat8_e3m4);
  VALUE(kDLFloat8_e4m3);
  VALUE(kDLFloat8_e4m3b11fnuz);
  VALUE(kDLFloat8_e4m3fn);
  VALUE(kDLFloat8_e4m3fnuz);
  VALUE(kDLFloat8_e5m2);
  VALUE(kDLFloat8_e5m2fnuz);
  VALUE(kDLFloat8_e8m0fnu);
  VALUE(kDLFloat6_e2m3fn);
  VALUE(kDLFloat6_e3m2fn);
  VALUE(kDLFloat4_e2m1fn);
  TYPE(DLPackVersion);
  FIELD(DLPackVersion, major);
  FIELD(DLPackVersion, minor);
  TYPE(DLDevice);
  FIELD(DLDevice, device_type);
  FIELD(DLDevice, device_id);
  TYPE(DLDataType);
  FIELD(DLDataType, code);
  FIELD(DLDataType, bits);
  FIELD(DLDataType, lanes);
  TYPE(DLTensor);
  FIELD(DLTensor, data);
  FIELD(DLTensor, device);
  FIELD(DLTensor, ndim);
  FIELD(DLTensor, dtype);
  FIELD(DLTensor, shape);
  FIELD(DLTensor, strides);
  FIELD(DLTensor, byte_offset);
  TYPE(DLManagedTensor);
  FIELD(DLManagedTensor, dl_tensor);
  FIELD(DLManagedTensor, manager_ctx);
  FIELD(DLManagedTensor, deleter);
  TYPE(DLManagedTensorVersioned);
  FIELD(DLManagedTensorVersioned, version);
  FIELD(DLManagedTensorVersioned, manager_ctx);
  FIELD(DLManagedTensorVersioned, deleter);
  FIELD(DLManagedTensorVersioned, flags);
  FIELD(DLManagedTensorVersioned, dl_tensor);
  TYPE(DLPackExchangeAPIHeader);
  FIELD(DLPackExchangeAPIHeader, version);
  FIELD(DLPackExchangeAPIHeader, prev_api);
  TYPE(DLPackExchangeAPI);
  FIELD(DLPackExchangeAPI, header);
  FIELD(DLPackExchangeAPI, managed_tensor_allocator);
  FIELD(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync);
  FIELD(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync);
  FIELD(DLPackExchangeAPI, dltensor_from_py_object_no_sync);
  FIELD(DLPackExchangeAPI, current_work_stream);
  return 0;
}
