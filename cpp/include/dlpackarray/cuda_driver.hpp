// The CUDA driver, loaded lazily with dlopen: dlpackarray links no CUDA
// library, so it installs and imports where there is no CUDA at all.  The
// handful of driver types used is declared here (checked against the
// Toolkit's cuda.h by tests/helpers/abi/cuda_abi_check.cpp when cuda.h exists).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dlpackarray/dlpack_abi.hpp"

// cuda.h declares its handles as pointers to these incomplete structs; using
// the same global names keeps our handle types identical to the Toolkit's.
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
struct CUarray_st;

namespace dla::cuda {

using CUresult = int;  // cudaError_enum: 0 is CUDA_SUCCESS
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT(runtime/int): cuda.h's type
using CUcontext = ::CUctx_st*;
using CUstream = ::CUstream_st*;
using CUevent = ::CUevent_st*;
using CUarray = ::CUarray_st*;

inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorInvalidValue = 1;
inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorDeinitialized = 4;
inline constexpr CUresult kErrorNoDevice = 100;

// CUdevice_attribute: the largest pitch cuMemcpy2D accepts.
inline constexpr int kDeviceAttributeMaxPitch = 11;

// CUpointer_attribute values.
inline constexpr int kPointerAttributeContext = 1;
inline constexpr int kPointerAttributeMemoryType = 2;
inline constexpr int kPointerAttributeIsManaged = 8;
inline constexpr int kPointerAttributeDeviceOrdinal = 9;

// CUmemorytype values.
inline constexpr int kMemoryTypeHost = 1;
inline constexpr int kMemoryTypeDevice = 2;
inline constexpr int kMemoryTypeUnified = 4;

inline constexpr unsigned kEventDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING

// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, the handles DLPack's stream
// values 1 and 2 and the CUDA array interface's stream values 1 and 2 name.
inline CUstream legacy_stream() noexcept { return reinterpret_cast<CUstream>(uintptr_t{1}); }
inline CUstream per_thread_stream() noexcept { return reinterpret_cast<CUstream>(uintptr_t{2}); }

// CUDA_MEMCPY2D (the _v2 layout, with size_t members).
struct Memcpy2D {
  size_t srcXInBytes;
  size_t srcY;
  int srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  size_t srcPitch;
  size_t dstXInBytes;
  size_t dstY;
  int dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  size_t dstPitch;
  size_t WidthInBytes;
  size_t Height;
};

// One entry per driver function used, named by the symbol libcuda.so.1
// exports (the _v2 names are what cuda.h's macros select).
struct DriverTable {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*cuCtxPushCurrent_v2)(CUcontext ctx);
  CUresult (*cuCtxPopCurrent_v2)(CUcontext* ctx);
  CUresult (*cuPointerGetAttribute)(void* data, int attribute, CUdeviceptr ptr);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventDestroy_v2)(CUevent event);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemcpy2DAsync_v2)(const Memcpy2D* copy, CUstream stream);
  CUresult (*cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuPointerGetAttributes)(unsigned count, int* attributes, void** data, CUdeviceptr ptr);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuStreamGetCtx)(CUstream stream, CUcontext* ctx);
  // Optional: better error messages when present.
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
};

// The table, loading the driver on first use: DLPACKARRAY_CUDA_DRIVER names
// the library when set (tests point it at a fake driver), else
// "libcuda.so.1".  Throws BufferError naming the library when it cannot be
// loaded or lacks an entry point, or cuInit fails (naming the driver's
// error); cuInit runs once, on first load.  In a child made by fork() after
// the driver was loaded it throws BufferError: a driver initialised in the
// parent cannot be used in a child (CUDA's rule; torch refuses the same).
const DriverTable& driver();

// Whether the driver is already loaded (no attempt to load it).
bool driver_loaded() noexcept;

// Whether driver() would succeed; loads it when possible.  Never throws.
bool driver_available() noexcept;

// Forgets the loaded table so the next driver() loads again, reading
// DLPACKARRAY_CUDA_DRIVER anew.  For tests only: callers must hold no
// handle obtained from the old driver.
void reset_driver_for_tests() noexcept;

// The library path last loaded (or attempted).
std::string driver_path();

// Throws "<what> failed: CUDA_ERROR_..." unless r is success: MemoryError
// for CUDA_ERROR_OUT_OF_MEMORY (what callers catch, as for CuPy's
// OutOfMemoryError), else BufferError.
void check(CUresult r, const char* what);

// The driver's name of error r ("CUDA_ERROR_INVALID_VALUE"), or "CUDA error
// <r>" when it has none.
std::string error_name(CUresult r);

// Whether the calling thread runs Python code with the GIL held: a blocking
// driver call releases it for its duration (BlockingCall).  The Python shim
// installs the hooks; the core holds no Python.h.
struct BlockingHooks {
  void* (*release)() noexcept;     // returns a token, NULL when nothing was released
  void (*reacquire)(void* token);  // runs only for a non-NULL token
};
void set_blocking_hooks(BlockingHooks hooks) noexcept;

// Held around every driver call that can block the host (stream, event and
// context synchronisation, cuMemFree): other Python threads run meanwhile,
// and a stream callback that needs the GIL cannot deadlock against us.
class BlockingCall {
 public:
  BlockingCall() noexcept;
  ~BlockingCall();
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;

 private:
  void* token_;
};

// True for the device types whose data is a CUDA pointer.
bool is_cuda_family(DLDevice d) noexcept;

// The CUDA stream that a DLPack / CUDA-array-interface stream integer names
// (1 -> legacy, 2 -> per-thread, other -> the handle itself).
void* stream_from_int(uint64_t value) noexcept;

// The primary context of device `ordinal`, retained once per device and kept
// for the process lifetime (what CUDA runtimes -- torch, CuPy, JAX -- use).
CUcontext primary_context(int ordinal);

// The context a stream belongs to: for the legacy (NULL, 1) and per-thread
// (2) handles, device `device_id`'s primary context; for any other handle
// the driver's answer (cuStreamGetCtx).  Work on a stream, and events
// recorded on it, must run in this context.
CUcontext stream_context(void* stream, int device_id);

// Makes `ctx` current for one scope (pushed, then popped).
class ContextScope {
 public:
  explicit ContextScope(CUcontext ctx);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  CUresult (*pop_)(CUcontext* ctx) = nullptr;  // set once pushed
};

// Makes the primary context of device `ordinal` current for one scope.
class DeviceScope : public ContextScope {
 public:
  explicit DeviceScope(int ordinal) : ContextScope(primary_context(ordinal)) {}
};

// CU_DEVICE_ATTRIBUTE_MAX_PITCH of device `ordinal` (asked once per device):
// the largest pitch a 2-D copy may use.
int64_t max_copy_pitch(int ordinal);

// What the driver says about a pointer: the DLPack device it lives on.
// Needs no current context (cuPointerGetAttributes).  Throws BufferError
// for a pointer CUDA does not know, or naming the driver's error.
DLDevice device_of_pointer(const void* ptr);

}  // namespace dla::cuda
