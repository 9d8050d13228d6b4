#include "dlpackarray/python_shim.hpp"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <thread>

#include "dlpackarray/errors.hpp"
#include "dlpackarray/managed_tensor.hpp"
#include "managed_tensor_read.hpp"
#include "memory_recycling.hpp"
#include "python_thread_state.hpp"

namespace dla::py {

namespace {

// Managed-tensor blocks of exported capsules are recycled: every exchange
// makes and drops one, and a pool avoids a malloc/free pair per call.  Every
// block is at least kPooledBytes long, so any returned block can serve any
// request of up to kPooledNdim dimensions whatever its tensor's ndim says.
// The pool is touched only with the GIL held, which serialises it; it is off
// without a GIL and under AddressSanitizer (memory_recycling.hpp).
constexpr int32_t kPooledNdim = 4;
constexpr int kPoolCapacity = 64;
#ifdef Py_GIL_DISABLED
constexpr bool kPoolEnabled = false;  // no GIL to guard the pool
#else
constexpr bool kPoolEnabled = kRecycleMemory;
#endif
void* g_pool[kPoolCapacity];
int g_pool_size = 0;

constexpr size_t kPooledBytes = versioned_block_size(kPooledNdim) > legacy_block_size(kPooledNdim)
                                    ? versioned_block_size(kPooledNdim)
                                    : legacy_block_size(kPooledNdim);

// GIL held.  Returns NULL with MemoryError set on failure.
void* take_block(size_t needed) {
  if (kPoolEnabled && needed <= kPooledBytes && g_pool_size > 0) return g_pool[--g_pool_size];
  const size_t n = needed > kPooledBytes ? needed : kPooledBytes;
  void* block = std::malloc(n);
  if (block == nullptr) PyErr_NoMemory();
  return block;
}

// GIL held.
void give_block(void* block) {
  if (kPoolEnabled && g_pool_size < kPoolCapacity) {
    g_pool[g_pool_size++] = block;
  } else {
    std::free(block);
  }
}

// -- the shutdown gate ---------------------------------------------------------
//
// A thread that does not hold the GIL (a foreign C thread, or a Python thread
// in a GIL-released call) may run a release at any time, interpreter shutdown
// included.  Taking the GIL then is unsafe whatever is checked first:
// Py_IsInitialized / _Py_IsFinalizing are only snapshots, and between the
// check and PyGILState_Ensure the main thread can start finalizing (the thread
// is then ended with pthread_exit inside take_gil, an abort through any
// noexcept frame; 3.14 hangs it forever instead) or finish it
// (PyGILState_Ensure then builds a thread state for a NULL or freed
// interpreter: a segfault).
// Py_AddPendingCall is no way out: it too reads the interpreter (freed after
// finalization), its queue holds 32 calls, and only one thread runs them.
//
// So the library keeps its own gate, closed by an `atexit` callback: atexit
// callbacks run while the interpreter is still whole, after the non-daemon
// threads are joined and before finalization starts (Py_AtExit callbacks come
// too late, after the teardown).  A release from a thread without the GIL
// enters Python only through the gate: it counts itself in (g_in_python), then
// looks at the gate; the closer shuts the gate, then waits until the count is
// zero, with the GIL released so that the releases inside can take it and
// finish.  Both sides use sequentially consistent operations, so either the
// closer sees the release counted in (and waits for it), or the release sees
// the gate shut (and leaks, touching nothing).  After the gate is shut no
// thread without the GIL ever calls into CPython again; what it was to drop is
// leaked, as NumPy does at shutdown.  Releases by a thread that holds the GIL
// (the main thread during finalization) still run: that thread owns the
// interpreter, however far its teardown has gone.
//
// The wait is bounded (kDrainLimit): a release can only be slow when dropping
// the reference runs a finalizer that blocks.  A release still inside after
// that is back to CPython's own rules (ended by pthread_exit when it next
// waits for the GIL), which is why no frame between a release callback's
// entry and PyGILState_Ensure is noexcept: a forced unwind through ordinary
// frames ends the thread instead of aborting the process.  Nothing there may
// catch the unwind (abi::__forced_unwind) without rethrowing it.
std::atomic<bool> g_gate_open{true};
std::atomic<int64_t> g_in_python{0};
constexpr auto kDrainLimit = std::chrono::seconds(5);

// A fork's child has only the forking thread: whatever the parent's threads
// had counted in is not in flight there.
void reset_gate_in_child() noexcept { g_in_python.store(0); }

// Scope of one release inside the gate; counts itself out on every exit,
// the forced unwind of a thread ended by CPython included.
class GatePass {
 public:
  GatePass() noexcept {
    g_in_python.fetch_add(1);
    open_ = g_gate_open.load();
    if (!open_) g_in_python.fetch_sub(1);
  }
  ~GatePass() {
    if (open_) g_in_python.fetch_sub(1);
  }
  GatePass(const GatePass&) = delete;
  GatePass& operator=(const GatePass&) = delete;
  bool open() const noexcept { return open_; }

 private:
  bool open_;
};

// The atexit callback (GIL held): shuts the gate, then lets the releases
// already inside finish.
PyObject* close_gate(PyObject*, PyObject*) {
  g_gate_open.store(false);
  if (g_in_python.load() != 0) {
    Py_BEGIN_ALLOW_THREADS;
    const auto deadline = std::chrono::steady_clock::now() + kDrainLimit;
    while (g_in_python.load() != 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    Py_END_ALLOW_THREADS;
  }
  Py_RETURN_NONE;
}

PyMethodDef g_close_gate_def = {
    "close_release_gate", close_gate, METH_NOARGS,
    "dlpackarray: from now on, releases by threads without the GIL leak instead of entering "
    "Python (registered with atexit)."};

// Runs `release` with the GIL taken by this thread, which does not hold it,
// keeping an in-flight exception intact.  Returns false, running nothing,
// when the gate is shut or the interpreter is gone or finalizing: the caller
// leaks instead.  The GIL is taken through the re-entrant PyGILState_Ensure
// (holds_gil() can answer no for a sub-interpreter's thread that holds it).
// Not noexcept: see the shutdown gate above.
template <class Release>
bool run_taking_gil(Release&& release) {
  GatePass pass;
  if (!pass.open()) return false;
  // Second lines of defence only (racy snapshots): an embedder that finalizes
  // without running atexit callbacks, or the drain's time limit passed.
  if (!Py_IsInitialized()) return false;
  if (interpreter_finalizing() && !gil_check()) return false;
  PyGILState_STATE state = PyGILState_Ensure();
  with_error_set_aside(release);
  PyGILState_Release(state);
  return true;
}

// Runs `release` with the GIL held, from any thread; false as above.
template <class Release>
bool run_holding_gil(Release&& release) {
  if (!holds_gil()) return run_taking_gil(release);
  with_error_set_aside(release);
  return true;
}

// GIL held.  Drops the owner reference and recycles the block.  Only the
// last reference can run code (finalizers, weakref callbacks), so only then
// is an in-flight exception set aside: every export's capsule or consumer
// ends here, and the fetch/restore pair was a third of its cost.  (Without
// the GIL another thread may drop a reference at the same time, so the
// count proves nothing there.)  Inlined into the deleters: every consumed
// export ends here.
[[gnu::always_inline]] inline void release_holding_gil(PyObject* owner, void* block) {
#ifdef Py_GIL_DISABLED
  constexpr bool kCountIsExact = false;
#else
  constexpr bool kCountIsExact = true;
#endif
  if (owner == nullptr || (kCountIsExact && Py_REFCNT(owner) > 1)) {
    Py_XDECREF(owner);
  } else {
    with_error_set_aside([owner] { Py_DECREF(owner); });
  }
  give_block(block);
}

// Drops the owner reference and recycles the block, from any thread; with no
// usable interpreter the owner is leaked and the block freed directly.  Not
// noexcept: see run_holding_gil.
[[gnu::noinline]] void release_taking_gil(PyObject* owner, void* block) {
  const bool done = run_taking_gil([&] {
    Py_XDECREF(owner);
    give_block(block);
  });
  if (!done) std::free(block);
}

[[gnu::always_inline]] inline void release_owner_and_block(PyObject* owner, void* block) {
  if (holds_gil()) {
    // The common case (a consumer on the thread that made the export):
    // skips PyGILState_Ensure/Release and their thread-local lookups.
    release_holding_gil(owner, block);
    return;
  }
  release_taking_gil(owner, block);
}

// The two managed-tensor structs share every capsule rule; only their
// capsule names differ.
template <class Tensor>
struct CapsuleNames;
template <>
struct CapsuleNames<DLManagedTensorVersioned> {
  static constexpr const char* unused = kCapsuleVersioned;
  static constexpr const char* used = kCapsuleVersionedUsed;
};
template <>
struct CapsuleNames<DLManagedTensor> {
  static constexpr const char* unused = kCapsuleLegacy;
  static constexpr const char* used = kCapsuleLegacyUsed;
};

// The deleter of the tensors we export: the owner reference and the block.
template <class Tensor>
void owner_deleter(Tensor* self) {
  if (self == nullptr) return;
  release_owner_and_block(static_cast<PyObject*>(self->manager_ctx), self);
}

// A foreign deleter may run Python code: the caller's error is set aside.
template <class Tensor>
void call_deleter(Tensor* m) {
  if (m == nullptr || m->deleter == nullptr) return;
  with_error_set_aside([m] { m->deleter(m); });
}

// True while `capsule` still carries the unused name `expected`.  Our own
// capsules are created with the very pointer `expected`, so the common case
// is a pointer comparison; strcmp covers a name re-set by someone else.  A
// consumer's "used_..." name differs in its first character, which decides
// without a call into strcmp on every consumed export.
bool still_unused(PyObject* capsule, const char* expected) {
  const char* name = PyCapsule_GetName(capsule);
  return name == expected ||
         (name != nullptr && name[0] == expected[0] && std::strcmp(name, expected) == 0);
}

// Capsule destructors run when the capsule dies.  The deleter is called only
// while the capsule still has its unused name: a consumer that renamed it
// to used_* owns the tensor and calls the deleter itself.  The managed tensor
// is also stored as the capsule's context, so this hot path (every export
// whose capsule is dropped or consumed) does no name validation twice.
template <class Tensor>
void unused_capsule_destructor(PyObject* capsule) {
  if (!still_unused(capsule, CapsuleNames<Tensor>::unused)) return;
  auto* m = static_cast<Tensor*>(PyCapsule_GetContext(capsule));
  if (m == nullptr || m->deleter == nullptr) return;
  if (m->deleter == owner_deleter<Tensor>) {
    // Ours, and a capsule destructor runs with the GIL held: drop the owner
    // directly instead of going through the any-thread release path.
    release_holding_gil(static_cast<PyObject*>(m->manager_ctx), m);
    return;
  }
  with_error_set_aside([m] { m->deleter(m); });
}

// Destructor of a capsule a consumer adopted: the name says "used", and the
// tensor is ours to delete.  Whoever installs it also stores the tensor as
// the capsule's context (the producer's context is no longer read by anyone:
// its destructor was replaced with this one), so the destructor reads it
// back without GetPointer's name comparison.
template <class Tensor>
void consumed_capsule_destructor(PyObject* capsule) {
  with_error_set_aside([capsule] {
    auto* m = static_cast<Tensor*>(PyCapsule_GetContext(capsule));
    if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  });
}

// Makes `capsule` (named used_*, holding `m`) delete `m` when it dies.
template <class Tensor>
void adopt_as_consumed(PyObject* capsule, Tensor* m) {
  PyCapsule_SetContext(capsule, m);
  PyCapsule_SetDestructor(capsule, consumed_capsule_destructor<Tensor>);
}

// The consumer's reading of a managed tensor it took over, inline
// (managed_tensor_read.hpp; the legacy struct has no flags, so nothing is
// ever marked copied).
void read_managed(const DLManagedTensorVersioned& m, TensorView* out, bool* copied) {
  detail::read_managed(m, out, copied);
}
void read_managed(const DLManagedTensor& m, TensorView* out, bool*) {
  detail::read_managed(m, out);
}

// Renaming first transfers ownership: the producer's destructor no longer
// calls the deleter, so on refusal it runs here, once, and never later.
template <class Tensor>
void take_over(PyObject* capsule, Tensor* m, TensorView* out, bool* copied) {
  PyCapsule_SetName(capsule, CapsuleNames<Tensor>::used);
  try {
    read_managed(*m, out, copied);
  } catch (...) {
    call_deleter(m);
    throw;
  }
  adopt_as_consumed(capsule, m);
}

template <class Tensor>
PyObject* adopt_managed(Tensor* m, const char* what) noexcept {
  if (m == nullptr) {
    PyErr_Format(PyExc_ValueError, "NULL %s pointer", what);
    return nullptr;
  }
  PyObject* capsule = PyCapsule_New(m, CapsuleNames<Tensor>::used, nullptr);
  if (capsule == nullptr) {
    call_deleter(m);
    return nullptr;
  }
  adopt_as_consumed(capsule, m);
  return capsule;
}

// The capsule of a tensor we just built; on failure the tensor is freed once
// and nothing else is.
template <class Tensor>
PyObject* capsule_for_export(Tensor* m) {
  PyObject* capsule =
      PyCapsule_New(m, CapsuleNames<Tensor>::unused, unused_capsule_destructor<Tensor>);
  if (capsule == nullptr || PyCapsule_SetContext(capsule, m) != 0) {
    if (capsule != nullptr) {
      // Destroy without the destructor reaching the tensor, then free it once.
      PyCapsule_SetName(capsule, CapsuleNames<Tensor>::used);
      Py_DECREF(capsule);
    }
    owner_deleter(m);
    return nullptr;
  }
  return capsule;
}

}  // namespace

bool consume_dlpack_capsule(PyObject* capsule, TensorView* out, bool* copied) {
  *copied = false;
  if (!PyCapsule_CheckExact(capsule)) return false;
  // An exact capsule always holds a pointer, and GetPointer with the name it
  // was just compared with always matches.
  const char* name = PyCapsule_GetName(capsule);
  if (name == nullptr) return false;
  void* versioned = nullptr;
  if (std::strcmp(name, kCapsuleVersioned) == 0) versioned = PyCapsule_GetPointer(capsule, name);
  if (versioned != nullptr) {
    // One call site: take_over and the read inline into this function.
    take_over(capsule, static_cast<DLManagedTensorVersioned*>(versioned), out, copied);
    return true;
  }
  if (std::strcmp(name, kCapsuleLegacy) == 0) {
    take_over(capsule, static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, name)), out,
              copied);
    return true;
  }
  return false;
}

PyObject* adopt_managed_versioned(DLManagedTensorVersioned* m) noexcept {
  return adopt_managed(m, "DLManagedTensorVersioned");
}

PyObject* adopt_managed_legacy(DLManagedTensor* m) noexcept {
  return adopt_managed(m, "DLManagedTensor");
}

void release_adopted_capsule(PyObject* capsule) {
  with_error_set_aside([capsule] {
    PyCapsule_Destructor d = PyCapsule_GetDestructor(capsule);
    if (d == consumed_capsule_destructor<DLManagedTensorVersioned> ||
        d == consumed_capsule_destructor<DLManagedTensor>) {
      PyCapsule_SetDestructor(capsule, nullptr);
      d(capsule);
    }
  });
}

int install_shutdown_gate() noexcept {
  // Only the main interpreter's exit ends the process; a sub-interpreter's
  // atexit callbacks would shut the gate for everyone while Python lives on.
  if (PyInterpreterState_Get() != main_interpreter()) return 0;
  static bool fork_handler_set = false;
  if (!fork_handler_set) {
    if (pthread_atfork(nullptr, nullptr, reset_gate_in_child) != 0) {
      PyErr_SetString(PyExc_RuntimeError, "dlpackarray: pthread_atfork failed");
      return -1;
    }
    fork_handler_set = true;
  }
  PyObject* close = PyCFunction_New(&g_close_gate_def, nullptr);
  if (close == nullptr) return -1;
  PyObject* atexit = PyImport_ImportModule("atexit");
  PyObject* done =
      atexit == nullptr ? nullptr : PyObject_CallMethod(atexit, "register", "O", close);
  Py_XDECREF(atexit);
  Py_DECREF(close);
  if (done == nullptr) return -1;
  Py_DECREF(done);
  // Open again for an interpreter initialised after an earlier one ended in
  // this process (embedding).
  g_gate_open.store(true);
  return 0;
}

void raise_py_error() {
  try {
    throw;
  } catch (const Error& e) {
    PyObject* type = PyExc_RuntimeError;
    switch (e.kind()) {
      case ErrorKind::Buffer: type = PyExc_BufferError; break;
      case ErrorKind::Value: type = PyExc_ValueError; break;
      case ErrorKind::Type: type = PyExc_TypeError; break;
      case ErrorKind::NotImplemented: type = PyExc_NotImplementedError; break;
      case ErrorKind::Overflow: type = PyExc_OverflowError; break;
      case ErrorKind::Memory: type = PyExc_MemoryError; break;
      case ErrorKind::Index: type = PyExc_IndexError; break;
    }
    PyErr_SetString(type, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception in dlpackarray");
  }
}

void release_reference(PyObject* obj) {
  if (obj == nullptr) return;
  run_holding_gil([&] { Py_DECREF(obj); });  // leaks when no interpreter can take it
}

void call_versioned_deleter(DLManagedTensorVersioned* m) { call_deleter(m); }

void call_legacy_deleter(DLManagedTensor* m) { call_deleter(m); }

DLManagedTensorVersioned* new_versioned_managed(const TensorView& v, uint64_t flags,
                                                PyObject* owner) {
  void* block = take_block(versioned_block_size(v.ndim));
  if (block == nullptr) return nullptr;
  Py_XINCREF(owner);
  return init_versioned(block, v, flags, owner, owner_deleter<DLManagedTensorVersioned>);
}

PyObject* new_versioned_capsule(const TensorView& v, uint64_t flags, PyObject* owner) {
  DLManagedTensorVersioned* m = new_versioned_managed(v, flags, owner);
  if (m == nullptr) return nullptr;
  return capsule_for_export(m);
}

PyObject* new_legacy_capsule(const TensorView& v, PyObject* owner) {
  void* block = take_block(legacy_block_size(v.ndim));
  if (block == nullptr) return nullptr;
  Py_XINCREF(owner);
  return capsule_for_export(init_legacy(block, v, owner, owner_deleter<DLManagedTensor>));
}

}  // namespace dla::py
