// Questions about the calling thread and the interpreter that the Python-facing
// shims ask before touching the GIL; one definition for python_shim.cpp and
// python_cuda_shim.cpp.  Internal: Python.h must already be included.
#ifndef DLPACKARRAY_PYTHON_THREAD_STATE_HPP_
#define DLPACKARRAY_PYTHON_THREAD_STATE_HPP_

namespace dla::py {

inline bool interpreter_finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Whether this thread holds the GIL now.  3.12+ keeps the current thread
// state per thread, NULL while detached; 3.11 and older keep one per runtime,
// the holder's, so it must also be this thread's own.  Unlike
// PyGILState_Check this stays exact when sub-interpreters have switched that
// check off.
inline bool holds_gil() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked() != nullptr;
#elif PY_VERSION_HEX >= 0x030C0000
  return _PyThreadState_UncheckedGet() != nullptr;
#else
  // The holder's state is this thread's when it carries this thread's id
  // (set by CPython on the thread the state is made for).  Cheaper than
  // PyGILState_GetThisThreadState's thread-local lookup on every release, and
  // also right for a sub-interpreter's thread, which that lookup misses.
  PyThreadState* current = _PyThreadState_UncheckedGet();
  return current != nullptr && current->thread_id == PyThread_get_thread_ident();
#endif
}

}  // namespace dla::py

#endif  // DLPACKARRAY_PYTHON_THREAD_STATE_HPP_
