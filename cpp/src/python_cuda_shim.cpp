// The GIL side of dla::cuda::BlockingCall: a blocking CUDA driver call made
// by a thread holding the GIL releases it for the call's duration, whoever
// the caller is (Cython code, a capsule deleter, an Arrow release callback).
// Installed when the core library loads; the core itself has no Python.h.
#include <Python.h>

#include "dlpackarray/cuda_driver.hpp"

namespace dla::py {
namespace {

// Whether this thread holds the GIL now (its thread state is attached).
// 3.12 and older have no public unchecked getter; 3.11 and older keep one
// current state per runtime, which must be this thread's own.
bool attached() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked() != nullptr;
#elif PY_VERSION_HEX >= 0x030C0000
  return _PyThreadState_UncheckedGet() != nullptr;
#else
  PyThreadState* current = _PyThreadState_UncheckedGet();
  return current != nullptr && current == PyGILState_GetThisThreadState();
#endif
}

bool finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Not during finalization: a thread that gives the GIL up then may never get
// it back (CPython ends it), and the caller would not return.
void* release_gil() noexcept {
  if (!Py_IsInitialized() || finalizing() || !attached()) return nullptr;
  return PyEval_SaveThread();
}

void reacquire_gil(void* token) { PyEval_RestoreThread(static_cast<PyThreadState*>(token)); }

const bool g_installed = [] {
  cuda::set_blocking_hooks(cuda::BlockingHooks{release_gil, reacquire_gil});
  return true;
}();

}  // namespace
}  // namespace dla::py
