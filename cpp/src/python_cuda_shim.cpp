// The GIL side of dla::cuda::BlockingCall: a blocking CUDA driver call made
// by a thread holding the GIL releases it for the call's duration, whoever
// the caller is (Cython code, a capsule deleter, an Arrow release callback).
// Installed when the core library loads; the core itself has no Python.h.
#include <Python.h>

#include "dlpackarray/cuda_driver.hpp"
#include "python_thread_state.hpp"

namespace dla::py {
namespace {

// Not during finalization: a thread that gives the GIL up then may never get
// it back (CPython ends it), and the caller would not return.
void* release_gil() noexcept {
  if (!Py_IsInitialized() || interpreter_finalizing() || !holds_gil()) return nullptr;
  return PyEval_SaveThread();
}

void reacquire_gil(void* token) { PyEval_RestoreThread(static_cast<PyThreadState*>(token)); }

const bool g_installed = [] {
  cuda::set_blocking_hooks(cuda::BlockingHooks{release_gil, reacquire_gil});
  return true;
}();

}  // namespace
}  // namespace dla::py
