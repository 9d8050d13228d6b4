// The one Python-facing part of the C++ core: capsule builders, deleters
// that are safe on any thread and at shutdown, and the single place where C++
// errors become Python exceptions.
#pragma once

#include <Python.h>

#include <cstdint>

#include "dlpackarray/dlpack_abi.hpp"
#include "dlpackarray/tensor_view.hpp"

namespace dla::py {

// Cython `except +raise_py_error` handler: maps the in-flight C++ exception
// to BufferError/ValueError/TypeError/NotImplementedError/OverflowError/
// MemoryError (dla::Error) or RuntimeError (anything else).
void raise_py_error();

// New "dltensor_versioned" / "dltensor" capsule describing `v`; the managed
// tensor holds a strong reference to `owner` until its deleter runs.
// Returns NULL with a Python exception set on failure.
PyObject* new_versioned_capsule(const TensorView& v, uint64_t flags, PyObject* owner);
PyObject* new_legacy_capsule(const TensorView& v, PyObject* owner);

// Managed tensors whose manager_ctx is a strong reference to a Python
// object (exposed for the C-level API issue and for tests).
DLManagedTensorVersioned* new_versioned_managed(const TensorView& v, uint64_t flags,
                                                PyObject* owner);

// Drops a strong reference from any thread: takes the GIL when needed, keeps
// an in-flight exception intact, and leaks instead of touching an
// interpreter that is shutting down or gone.
//
// This and the functions below that run deleters are deliberately not
// noexcept: should a thread still be waiting for the GIL when the interpreter
// finalizes (only past the shutdown gate's time limit, see
// install_shutdown_gate), CPython ends it with pthread_exit, a forced unwind,
// and an unwind that reaches a noexcept frame aborts the process
// (std::terminate).  They neither throw nor catch anything themselves.
void release_reference(PyObject* obj);

// The shutdown gate of every release made by a thread without the GIL (DLPack
// deleters, Arrow keepalives; python_shim.cpp says why): opens it and
// registers with `atexit` the callback that shuts it and waits (bounded) for
// the releases already inside Python.  Once it is shut, such releases leak
// instead of entering Python.  Called once at import (main interpreter only;
// elsewhere a no-op).  Returns -1 with an exception set on failure.
int install_shutdown_gate() noexcept;

// Consumes a "dltensor_versioned" / "dltensor" capsule exactly once: renames
// it "used_*", reads its tensor (view_from_managed) and adopts it, so that
// the capsule itself owns the memory from then on.  On a refused tensor the
// deleter has run and the dla::Error propagates (the capsule, renamed, stays
// inert).  Returns false, touching nothing, when `capsule` is not an exact
// capsule with one of the two names (the caller says which problem it is).
bool consume_dlpack_capsule(PyObject* capsule, TensorView* out, bool* copied);

// Makes a managed tensor handed over in C (the exchange API, the C API) the
// property of a new "used_dltensor[_versioned]" capsule with the destructor of
// an adopted capsule: the same owner object, released by the same
// release_adopted_capsule(), as a consumed capsule.  Ownership passes even on
// failure: the deleter has then run and NULL is returned with an exception set.
PyObject* adopt_managed_versioned(DLManagedTensorVersioned* m) noexcept;
PyObject* adopt_managed_legacy(DLManagedTensor* m) noexcept;

// Undoes an adoption when the import fails afterwards: the tensor's deleter
// runs now, and the capsule (still "used") no longer owns anything.
void release_adopted_capsule(PyObject* capsule);

// Calls the deleter of a consumed managed tensor (may be NULL), preserving an
// in-flight exception.
void call_versioned_deleter(DLManagedTensorVersioned* m);
void call_legacy_deleter(DLManagedTensor* m);

}  // namespace dla::py
