// Questions about the calling thread and the interpreter that the Python-facing
// shims ask before touching the GIL, and the setting aside of its error
// indicator; one definition for python_shim.cpp, python_arrow_shim.cpp and
// python_cuda_shim.cpp.  Internal: Python.h must already be included.
#ifndef DLPACKARRAY_PYTHON_THREAD_STATE_HPP_
#define DLPACKARRAY_PYTHON_THREAD_STATE_HPP_

namespace dla::py {

inline int gil_check() noexcept { return PyGILState_Check(); }
inline PyInterpreterState* main_interpreter() noexcept { return PyInterpreterState_Main(); }

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
// PyGILState_Check it does not answer yes for every thread once
// sub-interpreters have switched that check off; on 3.10/3.11 it answers no
// for a thread running a sub-interpreter's state over its main one (the
// caller then takes the GIL through PyGILState_Ensure, which 3.11 documents
// as unsupported there; the Cython modules refuse to load in a
// sub-interpreter anyway).
inline bool holds_gil() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked() != nullptr;
#elif PY_VERSION_HEX >= 0x030C0000
  return _PyThreadState_UncheckedGet() != nullptr;
#else
  // The holder's state is this thread's when it is the one CPython registered
  // for this thread.  Only the two pointers are compared: a thread without the
  // GIL must never read through `current`, which belongs to whichever thread
  // holds the GIL and is freed when that thread's PyGILState_Release drops its
  // last hold (tests/lifetime/test_soak.py, run under ASan, races exactly that).
  PyThreadState* current = _PyThreadState_UncheckedGet();
  return current != nullptr && current == PyGILState_GetThisThreadState();
#endif
}

// Runs `run` (GIL held) with the thread's error indicator set aside.  Code that
// may run while an exception propagates (a capsule, owner or deleter dropped
// during unwinding) must neither clear that exception nor leave one of its
// own (a failed lookup, a producer's deleter that set one).  Nearly always
// nothing is pending, and then a check and a clear stand in for saving and
// restoring three slots (~40 instructions of every release).
template <class Run>
[[gnu::always_inline]] inline void with_error_set_aside(Run&& run) {
  if (PyErr_Occurred() == nullptr) {
    run();
    if (PyErr_Occurred() != nullptr) PyErr_Clear();
    return;
  }
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  run();
  PyErr_Restore(type, value, tb);  // drops whatever run() left
}

}  // namespace dla::py

#endif  // DLPACKARRAY_PYTHON_THREAD_STATE_HPP_
