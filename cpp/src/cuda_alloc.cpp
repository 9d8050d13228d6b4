// Fresh allocations on CUDA-family devices for DLPackArray_Empty.
#include "dlpackarray/cuda_alloc.hpp"

#include <mutex>
#include <string>

#include "dlpackarray/cuda_driver.hpp"
#include "dlpackarray/errors.hpp"
#include "glibc_dl_compat.hpp"  // dlopen & co. at their pre-2.34 versions

namespace dla::cuda {
namespace {

// Not in the shared DriverTable: only Empty needs them, and a driver too old
// to have them must not stop every other CUDA path from loading.
struct HostEntries {
  CUresult (*cuMemAllocHost_v2)(void** p, size_t bytes) = nullptr;
  CUresult (*cuMemFreeHost)(void* p) = nullptr;
  CUresult (*cuMemAllocManaged)(CUdeviceptr* p, size_t bytes, unsigned flags) = nullptr;
};

constexpr unsigned kMemAttachGlobal = 0x1;  // CU_MEM_ATTACH_GLOBAL

std::mutex g_mutex;
HostEntries g_entries;
std::string g_bound_path;  // the library g_entries came from

template <class F>
void bind(void* handle, const std::string& path, const char* name, F& slot) {
  slot = reinterpret_cast<F>(dlsym(handle, name));
  if (slot == nullptr) {
    fail(ErrorKind::Buffer,
         "the CUDA driver '" + path + "' lacks the entry point " + std::string(name));
  }
}

// Bound from the library driver() loaded (RTLD_NOLOAD: the same mapping,
// never a second load).  The handle is kept: the library stays mapped for
// the process, as cuda_driver.cpp keeps it (allocations may outlive a test's
// driver reset).  Returned by value: a test reset may rebind concurrently.
HostEntries host_entries() {
  driver();  // loads the driver, or throws BufferError naming it
  const std::string path = driver_path();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_bound_path != path) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle == nullptr) {
      fail(ErrorKind::Buffer, "the CUDA driver '" + path + "' is not loaded");
    }
    HostEntries e;
    bind(handle, path, "cuMemAllocHost_v2", e.cuMemAllocHost_v2);
    bind(handle, path, "cuMemFreeHost", e.cuMemFreeHost);
    bind(handle, path, "cuMemAllocManaged", e.cuMemAllocManaged);
    g_entries = e;
    g_bound_path = path;
  }
  return g_entries;
}

}  // namespace

void* allocate(DLDevice d, int64_t nbytes) {
  const size_t bytes = static_cast<size_t>(nbytes > 0 ? nbytes : 1);
  switch (d.device_type) {
    case kDLCUDA: {
      const DriverTable& t = driver();
      DeviceScope scope(d.device_id);
      CUdeviceptr p = 0;
      check(t.cuMemAlloc_v2(&p, bytes), "cuMemAlloc");
      return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
    }
    case kDLCUDAHost: {
      const HostEntries e = host_entries();
      DeviceScope scope(d.device_id);
      void* p = nullptr;
      check(e.cuMemAllocHost_v2(&p, bytes), "cuMemAllocHost");
      return p;
    }
    case kDLCUDAManaged: {
      const HostEntries e = host_entries();
      DeviceScope scope(d.device_id);
      CUdeviceptr p = 0;
      check(e.cuMemAllocManaged(&p, bytes, kMemAttachGlobal), "cuMemAllocManaged");
      return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
    }
    default:
      fail(ErrorKind::NotImplemented,
           "dlpackarray allocates host, CUDA, CUDA pinned and CUDA managed memory, not memory "
           "of device type " +
               std::to_string(static_cast<int>(d.device_type)));
  }
}

void release(DLDevice d, void* p) noexcept {
  try {
    DeviceScope scope(d.device_id);
    if (d.device_type == kDLCUDAHost) {
      host_entries().cuMemFreeHost(p);
    } else {
      driver().cuMemFree_v2(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)));
    }
  } catch (...) {
    // A driver that failed or is gone (process exit) took the memory with it.
  }
}

}  // namespace dla::cuda
