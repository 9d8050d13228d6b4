// Lazy dlopen of the CUDA driver and the entry-point table every CUDA call
// goes through.
#include "dlpackarray/cuda_driver.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "dlpackarray/errors.hpp"
#include "glibc_dl_compat.hpp"  // dlopen & co. at their pre-2.34 versions

namespace dla::cuda {
namespace {

constexpr const char* kDefaultLibrary = "libcuda.so.1";
constexpr int kMaxDevices = 64;

std::mutex g_mutex;
DriverTable g_table{};
bool g_loaded = false;
// Why the last load failed: not retried (a dlopen per call would be slow)
// until reset_driver_for_tests().
std::string g_failure;
void* g_handle = nullptr;
std::string g_path;
CUcontext g_contexts[kMaxDevices] = {};
int64_t g_max_pitch[kMaxDevices] = {};  // 0: not asked yet
// Set in a fork() child of a process that had loaded the driver.
bool g_forked_child = false;
BlockingHooks g_hooks{};

// fork() with g_mutex held by another thread would leave it locked forever
// in the child: the fork handlers take it around the fork.
void before_fork() { g_mutex.lock(); }
void after_fork_in_parent() { g_mutex.unlock(); }
void after_fork_in_child() {
  if (g_loaded) g_forked_child = true;
  g_mutex.unlock();
}

template <class F>
void bind(void* handle, const char* name, F& slot, bool required) {
  slot = reinterpret_cast<F>(dlsym(handle, name));
  if (slot == nullptr && required) {
    fail(ErrorKind::Buffer, "the CUDA driver '" + g_path + "' lacks the entry point " + name +
                                "; it is too old for dlpackarray");
  }
}

void load_locked() {
  const char* env = std::getenv("DLPACKARRAY_CUDA_DRIVER");
  g_path = (env != nullptr && env[0] != '\0') ? env : kDefaultLibrary;
  // RTLD_LOCAL: the driver's symbols must not resolve anyone else's.
  void* handle = dlopen(g_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    fail(ErrorKind::Buffer,
         "CUDA data needs the CUDA driver, which is not available: cannot "
         "load '" +
             g_path + "' (" + (why ? why : "unknown error") +
             "); install an NVIDIA driver or use host memory");
  }
  DriverTable t{};
  try {
    bind(handle, "cuInit", t.cuInit, true);
    bind(handle, "cuDriverGetVersion", t.cuDriverGetVersion, true);
    bind(handle, "cuDeviceGet", t.cuDeviceGet, true);
    bind(handle, "cuDevicePrimaryCtxRetain", t.cuDevicePrimaryCtxRetain, true);
    bind(handle, "cuCtxPushCurrent_v2", t.cuCtxPushCurrent_v2, true);
    bind(handle, "cuCtxPopCurrent_v2", t.cuCtxPopCurrent_v2, true);
    bind(handle, "cuPointerGetAttribute", t.cuPointerGetAttribute, true);
    bind(handle, "cuEventCreate", t.cuEventCreate, true);
    bind(handle, "cuEventRecord", t.cuEventRecord, true);
    bind(handle, "cuStreamWaitEvent", t.cuStreamWaitEvent, true);
    bind(handle, "cuEventDestroy_v2", t.cuEventDestroy_v2, true);
    bind(handle, "cuEventSynchronize", t.cuEventSynchronize, true);
    bind(handle, "cuStreamSynchronize", t.cuStreamSynchronize, true);
    bind(handle, "cuCtxSynchronize", t.cuCtxSynchronize, true);
    bind(handle, "cuMemcpy2DAsync_v2", t.cuMemcpy2DAsync_v2, true);
    bind(handle, "cuMemcpyDtoHAsync_v2", t.cuMemcpyDtoHAsync_v2, true);
    bind(handle, "cuMemcpyDtoDAsync_v2", t.cuMemcpyDtoDAsync_v2, true);
    bind(handle, "cuMemAlloc_v2", t.cuMemAlloc_v2, true);
    bind(handle, "cuMemFree_v2", t.cuMemFree_v2, true);
    bind(handle, "cuPointerGetAttributes", t.cuPointerGetAttributes, true);
    bind(handle, "cuDeviceGetAttribute", t.cuDeviceGetAttribute, true);
    bind(handle, "cuStreamGetCtx", t.cuStreamGetCtx, true);
    bind(handle, "cuGetErrorName", t.cuGetErrorName, false);
  } catch (...) {
    dlclose(handle);
    throw;
  }
  CUresult r = t.cuInit(0);
  if (r != kSuccess) {
    std::string name = "CUDA error " + std::to_string(r);
    const char* text = nullptr;
    if (t.cuGetErrorName != nullptr && t.cuGetErrorName(r, &text) == kSuccess && text != nullptr) {
      name = text;
    }
    dlclose(handle);
    fail(ErrorKind::Buffer,
         "the CUDA driver '" + g_path + "' loaded but cuInit failed: " + name + ": no usable GPU");
  }
  // Once per process.  A function-local static, not std::call_once: that
  // calls pthread_once, which is versioned GLIBC_2.34 on newer glibc and
  // would lift the wheel's manylinux tag (tests/packaging/test_glibc_versions.py).
  static const bool fork_handlers_installed =
      pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
  (void)fork_handlers_installed;
  g_table = t;
  g_handle = handle;
  g_loaded = true;
}

}  // namespace

const DriverTable& driver() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_forked_child) {
    fail(ErrorKind::Buffer,
         "CUDA cannot be used in a child process made by fork() after the parent used CUDA "
         "(the driver's state does not survive fork); start workers with the 'spawn' or "
         "'forkserver' method of multiprocessing");
  }
  if (!g_loaded) {
    if (!g_failure.empty()) fail(ErrorKind::Buffer, g_failure);
    try {
      load_locked();
    } catch (const Error& e) {
      g_failure = e.what();
      throw;
    }
  }
  return g_table;
}

bool driver_loaded() noexcept {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_loaded;
}

bool driver_available() noexcept {
  try {
    driver();
    return true;
  } catch (...) {
    return false;
  }
}

void reset_driver_for_tests() noexcept {
  std::lock_guard<std::mutex> lock(g_mutex);
  // The old library stays mapped: a handle from it may still be referenced
  // by an owner that has not been collected yet.
  g_loaded = false;
  g_failure.clear();
  g_table = DriverTable{};
  g_handle = nullptr;
  for (auto& c : g_contexts) c = nullptr;
  for (auto& p : g_max_pitch) p = 0;
}

std::string driver_path() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_path;
}

std::string error_name(CUresult r) {
  const char* text = nullptr;
  if (g_table.cuGetErrorName != nullptr && g_table.cuGetErrorName(r, &text) == kSuccess &&
      text != nullptr) {
    return text;
  }
  return "CUDA error " + std::to_string(r);
}

void check(CUresult r, const char* what) {
  if (r == kSuccess) return;
  fail(r == kErrorOutOfMemory ? ErrorKind::Memory : ErrorKind::Buffer,
       std::string(what) + " failed: " + error_name(r));
}

void set_blocking_hooks(BlockingHooks hooks) noexcept { g_hooks = hooks; }

BlockingCall::BlockingCall() noexcept
    : token_(g_hooks.release != nullptr ? g_hooks.release() : nullptr) {}

BlockingCall::~BlockingCall() {
  if (token_ != nullptr) g_hooks.reacquire(token_);
}

bool is_cuda_family(DLDevice d) noexcept {
  return d.device_type == kDLCUDA || d.device_type == kDLCUDAHost ||
         d.device_type == kDLCUDAManaged;
}

void* stream_from_int(uint64_t value) noexcept {
  if (value == 1) return nullptr;  // the legacy stream, as the view's default
  if (value == 2) return per_thread_stream();
  return reinterpret_cast<void*>(static_cast<uintptr_t>(value));
}

namespace {

void check_ordinal(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxDevices) {
    fail(ErrorKind::Value, "CUDA device id " + std::to_string(ordinal) + " is out of range");
  }
}

}  // namespace

CUcontext primary_context(int ordinal) {
  const DriverTable& t = driver();
  check_ordinal(ordinal);
  CUcontext ctx;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ctx = g_contexts[ordinal];
  }
  if (ctx == nullptr) {
    CUdevice dev = 0;
    check(t.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
    // Retained once and kept: the primary context is what CUDA runtimes
    // (torch, CuPy, JAX) use, so our work shares their context.
    check(t.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    std::lock_guard<std::mutex> lock(g_mutex);
    g_contexts[ordinal] = ctx;
  }
  return ctx;
}

CUcontext stream_context(void* stream, int device_id) {
  const auto value = reinterpret_cast<uintptr_t>(stream);
  if (value <= 2) return primary_context(device_id);
  CUcontext ctx = nullptr;
  check(driver().cuStreamGetCtx(static_cast<CUstream>(stream), &ctx),
        "cuStreamGetCtx (the context of a stream)");
  return ctx;
}

ContextScope::ContextScope(CUcontext ctx) {
  const DriverTable& t = driver();
  check(t.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent");
  pop_ = t.cuCtxPopCurrent_v2;
}

// Pops with the entry point it pushed with: driver() may throw by now (a
// reset, a fork), and a destructor must not.
ContextScope::~ContextScope() {
  if (pop_ != nullptr) {
    CUcontext popped = nullptr;
    pop_(&popped);
  }
}

int64_t max_copy_pitch(int ordinal) {
  const DriverTable& t = driver();
  check_ordinal(ordinal);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_max_pitch[ordinal] != 0) return g_max_pitch[ordinal];
  }
  CUdevice dev = 0;
  check(t.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  int pitch = 0;
  check(t.cuDeviceGetAttribute(&pitch, kDeviceAttributeMaxPitch, dev),
        "cuDeviceGetAttribute(MAX_PITCH)");
  if (pitch <= 0) fail(ErrorKind::Buffer, "the CUDA driver reports no usable copy pitch");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_max_pitch[ordinal] = pitch;
  return pitch;
}

DLDevice device_of_pointer(const void* ptr) {
  const DriverTable& t = driver();
  auto p = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
  // cuPointerGetAttributes needs no current context (cuPointerGetAttribute
  // may refuse without one) and answers "no memory type" for a pointer CUDA
  // does not know instead of failing.
  unsigned memory_type = 0;
  unsigned managed = 0;
  int ordinal = 0;
  int attributes[3] = {kPointerAttributeMemoryType, kPointerAttributeIsManaged,
                       kPointerAttributeDeviceOrdinal};
  void* data[3] = {&memory_type, &managed, &ordinal};
  CUresult r = t.cuPointerGetAttributes(3, attributes, data, p);
  if (r != kSuccess) {
    fail(ErrorKind::Buffer,
         "the CUDA driver cannot tell where the pointer in this __cuda_array_interface__ "
         "lives: cuPointerGetAttributes failed: " +
             error_name(r));
  }
  if (memory_type == 0) {
    fail(ErrorKind::Buffer,
         "the CUDA driver does not know the pointer in this __cuda_array_interface__ "
         "(cuPointerGetAttributes: no CUDA memory type; not memory of any CUDA allocation)");
  }
  DLDevice d{kDLCUDA, ordinal};
  if (managed != 0) {
    d.device_type = kDLCUDAManaged;
  } else if (memory_type == kMemoryTypeHost) {
    d.device_type = kDLCUDAHost;
  }
  return d;
}

}  // namespace dla::cuda
