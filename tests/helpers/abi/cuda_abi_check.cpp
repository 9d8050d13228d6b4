// Compile-only check (tests/cuda/test_cuda_abi.py): the CUDA driver types, enum
// values, struct layout and entry-point signatures declared in
// cuda_driver.hpp match the CUDA Toolkit's cuda.h.
#include <cuda.h>

#include <cstddef>
#include <type_traits>

#include "dlpackarray/cuda_driver.hpp"

namespace c = dla::cuda;

// Handles are the very same types; plain integers match in size.
static_assert(std::is_same_v<c::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<c::CUcontext, ::CUcontext>);
static_assert(std::is_same_v<c::CUstream, ::CUstream>);
static_assert(std::is_same_v<c::CUevent, ::CUevent>);
static_assert(std::is_same_v<c::CUarray, ::CUarray>);
static_assert(std::is_same_v<c::CUdevice, ::CUdevice>);
static_assert(sizeof(c::CUresult) == sizeof(::CUresult));
static_assert(sizeof(int) == sizeof(::CUpointer_attribute));
static_assert(sizeof(int) == sizeof(::CUmemorytype));

static_assert(c::kSuccess == CUDA_SUCCESS);
static_assert(c::kErrorInvalidValue == CUDA_ERROR_INVALID_VALUE);
static_assert(c::kErrorOutOfMemory == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(c::kErrorDeinitialized == CUDA_ERROR_DEINITIALIZED);
static_assert(c::kDeviceAttributeMaxPitch == CU_DEVICE_ATTRIBUTE_MAX_PITCH);
static_assert(sizeof(int) == sizeof(::CUdevice_attribute));
static_assert(c::kErrorNoDevice == CUDA_ERROR_NO_DEVICE);
static_assert(c::kPointerAttributeContext == CU_POINTER_ATTRIBUTE_CONTEXT);
static_assert(c::kPointerAttributeMemoryType == CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
static_assert(c::kPointerAttributeIsManaged == CU_POINTER_ATTRIBUTE_IS_MANAGED);
static_assert(c::kPointerAttributeDeviceOrdinal == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
static_assert(c::kMemoryTypeHost == CU_MEMORYTYPE_HOST);
static_assert(c::kMemoryTypeDevice == CU_MEMORYTYPE_DEVICE);
static_assert(c::kMemoryTypeUnified == CU_MEMORYTYPE_UNIFIED);
static_assert(c::kEventDisableTiming == CU_EVENT_DISABLE_TIMING);

#define DLA_SAME_FIELD(f)                                                  \
  static_assert(offsetof(c::Memcpy2D, f) == offsetof(::CUDA_MEMCPY2D, f)); \
  static_assert(sizeof(c::Memcpy2D::f) == sizeof(::CUDA_MEMCPY2D::f))
static_assert(sizeof(c::Memcpy2D) == sizeof(::CUDA_MEMCPY2D));
DLA_SAME_FIELD(srcXInBytes);
DLA_SAME_FIELD(srcY);
DLA_SAME_FIELD(srcMemoryType);
DLA_SAME_FIELD(srcHost);
DLA_SAME_FIELD(srcDevice);
DLA_SAME_FIELD(srcArray);
DLA_SAME_FIELD(srcPitch);
DLA_SAME_FIELD(dstXInBytes);
DLA_SAME_FIELD(dstY);
DLA_SAME_FIELD(dstMemoryType);
DLA_SAME_FIELD(dstHost);
DLA_SAME_FIELD(dstDevice);
DLA_SAME_FIELD(dstArray);
DLA_SAME_FIELD(dstPitch);
DLA_SAME_FIELD(WidthInBytes);
DLA_SAME_FIELD(Height);

// Same arity, and each parameter and the result of the same size and kind
// (pointer or not); enums are declared as int on our side.
template <class A, class B>
struct SameAbi : std::false_type {};
template <class R1, class... A1, class R2, class... A2>
struct SameAbi<R1 (*)(A1...), R2 (*)(A2...)>
    : std::bool_constant<
          sizeof...(A1) == sizeof...(A2) && sizeof(R1) == sizeof(R2) &&
          ((sizeof(A1) == sizeof(A2) && std::is_pointer_v<A1> == std::is_pointer_v<A2>) && ...)> {};

#define DLA_SAME_SIGNATURE(name) \
  static_assert(SameAbi<decltype(c::DriverTable::name), decltype(&::name)>::value, #name)
DLA_SAME_SIGNATURE(cuInit);
DLA_SAME_SIGNATURE(cuDriverGetVersion);
DLA_SAME_SIGNATURE(cuDeviceGet);
DLA_SAME_SIGNATURE(cuDevicePrimaryCtxRetain);
DLA_SAME_SIGNATURE(cuCtxPushCurrent_v2);
DLA_SAME_SIGNATURE(cuCtxPopCurrent_v2);
DLA_SAME_SIGNATURE(cuPointerGetAttribute);
DLA_SAME_SIGNATURE(cuEventCreate);
DLA_SAME_SIGNATURE(cuEventRecord);
DLA_SAME_SIGNATURE(cuStreamWaitEvent);
DLA_SAME_SIGNATURE(cuEventDestroy_v2);
DLA_SAME_SIGNATURE(cuEventSynchronize);
DLA_SAME_SIGNATURE(cuStreamSynchronize);
DLA_SAME_SIGNATURE(cuCtxSynchronize);
DLA_SAME_SIGNATURE(cuMemcpy2DAsync_v2);
DLA_SAME_SIGNATURE(cuMemAlloc_v2);
DLA_SAME_SIGNATURE(cuMemFree_v2);
DLA_SAME_SIGNATURE(cuGetErrorName);
DLA_SAME_SIGNATURE(cuMemcpyDtoHAsync_v2);
DLA_SAME_SIGNATURE(cuMemcpyDtoDAsync_v2);
DLA_SAME_SIGNATURE(cuPointerGetAttributes);
DLA_SAME_SIGNATURE(cuDeviceGetAttribute);
DLA_SAME_SIGNATURE(cuStreamGetCtx);
DLA_SAME_SIGNATURE(cuCtxSynchronize);

// The symbol names we dlsym are the ones cuda.h's API macros select.
#define DLA_STR(x) #x
#define DLA_XSTR(x) DLA_STR(x)
constexpr bool same_text(const char* a, const char* b) {
  return *a == *b && (*a == '\0' || same_text(a + 1, b + 1));
}
static_assert(same_text(DLA_XSTR(cuMemAlloc), "cuMemAlloc_v2"));
static_assert(same_text(DLA_XSTR(cuMemFree), "cuMemFree_v2"));
static_assert(same_text(DLA_XSTR(cuMemcpy2DAsync), "cuMemcpy2DAsync_v2"));
static_assert(same_text(DLA_XSTR(cuCtxPushCurrent), "cuCtxPushCurrent_v2"));
static_assert(same_text(DLA_XSTR(cuCtxPopCurrent), "cuCtxPopCurrent_v2"));
static_assert(same_text(DLA_XSTR(cuEventDestroy), "cuEventDestroy_v2"));
static_assert(same_text(DLA_XSTR(cuEventRecord), "cuEventRecord"));
static_assert(same_text(DLA_XSTR(cuStreamWaitEvent), "cuStreamWaitEvent"));
static_assert(same_text(DLA_XSTR(cuStreamSynchronize), "cuStreamSynchronize"));
static_assert(same_text(DLA_XSTR(cuCtxSynchronize), "cuCtxSynchronize"));
static_assert(same_text(DLA_XSTR(cuEventSynchronize), "cuEventSynchronize"));
static_assert(same_text(DLA_XSTR(cuMemcpyDtoHAsync), "cuMemcpyDtoHAsync_v2"));
static_assert(same_text(DLA_XSTR(cuMemcpyDtoDAsync), "cuMemcpyDtoDAsync_v2"));
static_assert(same_text(DLA_XSTR(cuStreamGetCtx), "cuStreamGetCtx"));
static_assert(same_text(DLA_XSTR(cuPointerGetAttributes), "cuPointerGetAttributes"));
static_assert(same_text(DLA_XSTR(cuDeviceGetAttribute), "cuDeviceGetAttribute"));

int main() { return 0; }
