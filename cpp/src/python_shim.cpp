#include "dlpackarray/python_shim.hpp"

#include <exception>
#include <new>

#include "dlpackarray/errors.hpp"
#include "dlpackarray/managed_tensor.hpp"

namespace dla::py {

namespace {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

void versioned_owner_deleter(DLManagedTensorVersioned* self) {
  if (self == nullptr) return;
  release_reference(static_cast<PyObject*>(self->manager_ctx));
  free_managed_block(self);
}

void legacy_owner_deleter(DLManagedTensor* self) {
  if (self == nullptr) return;
  release_reference(static_cast<PyObject*>(self->manager_ctx));
  free_managed_block(self);
}

// Capsule destructors run when the capsule dies.  The deleter is called only
// while the capsule still has its unused name: a consumer that renamed it
// to used_* owns the tensor and calls the deleter itself.
void versioned_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleVersioned)) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  auto* m =
      static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kCapsuleVersioned));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  PyErr_Restore(type, value, tb);
}

void legacy_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleLegacy)) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleLegacy));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  PyErr_Restore(type, value, tb);
}

}  // namespace

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

void release_reference(PyObject* obj) noexcept {
  if (obj == nullptr) return;
  if (!Py_IsInitialized()) return;  // interpreter gone: leaking is the only safe choice
  if (PyGILState_Check()) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    Py_DECREF(obj);
    PyErr_Restore(type, value, tb);
    return;
  }
  // A foreign thread must not take the GIL of a finalizing interpreter: it
  // would hang or be killed.  Leak instead.
  if (interpreter_finalizing()) return;
  PyGILState_STATE state = PyGILState_Ensure();
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  Py_DECREF(obj);
  PyErr_Restore(type, value, tb);
  PyGILState_Release(state);
}

void call_versioned_deleter(DLManagedTensorVersioned* m) noexcept {
  if (m == nullptr || m->deleter == nullptr) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  m->deleter(m);
  PyErr_Restore(type, value, tb);
}

void call_legacy_deleter(DLManagedTensor* m) noexcept {
  if (m == nullptr || m->deleter == nullptr) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  m->deleter(m);
  PyErr_Restore(type, value, tb);
}

DLManagedTensorVersioned* new_versioned_managed(const TensorView& v, uint64_t flags,
                                                PyObject* owner) {
  DLManagedTensorVersioned* m = nullptr;
  try {
    m = new_versioned(v, flags, owner, versioned_owner_deleter);
  } catch (...) {
    raise_py_error();
    return nullptr;
  }
  Py_XINCREF(owner);
  return m;
}

PyObject* new_versioned_capsule(const TensorView& v, uint64_t flags, PyObject* owner) {
  DLManagedTensorVersioned* m = new_versioned_managed(v, flags, owner);
  if (m == nullptr) return nullptr;
  PyObject* capsule = PyCapsule_New(m, kCapsuleVersioned, versioned_capsule_destructor);
  if (capsule == nullptr) versioned_owner_deleter(m);
  return capsule;
}

PyObject* new_legacy_capsule(const TensorView& v, PyObject* owner) {
  DLManagedTensor* m = nullptr;
  try {
    m = new_legacy(v, owner, legacy_owner_deleter);
  } catch (...) {
    raise_py_error();
    return nullptr;
  }
  Py_XINCREF(owner);
  PyObject* capsule = PyCapsule_New(m, kCapsuleLegacy, legacy_capsule_destructor);
  if (capsule == nullptr) legacy_owner_deleter(m);
  return capsule;
}

}  // namespace dla::py
