#include "dlpackarray/python_arrow_shim.hpp"

#include <cstdlib>

#include "dlpackarray/arrow_abi.hpp"
#include "dlpackarray/python_shim.hpp"
#include "python_thread_state.hpp"

namespace dla::py {

namespace {

const char* capsule_name(ArrowCapsuleKind kind) {
  switch (kind) {
    case kArrowSchemaCapsule: return kCapsuleArrowSchema;
    case kArrowArrayCapsule: return kCapsuleArrowArray;
    case kArrowStreamCapsule: return kCapsuleArrowStream;
    case kArrowDeviceArrayCapsule: return kCapsuleArrowDeviceArray;
    case kArrowDeviceStreamCapsule: return kCapsuleArrowDeviceStream;
  }
  return nullptr;
}

// malloc'ed with only the release callback cleared (NULL: "not filled"), not
// calloc'ed: glibc's calloc bypasses its per-thread cache (and a malloc plus
// memset is folded back into calloc), which cost more than the rest of the
// export on this hot path.  Plain malloc and free, not operator new and
// delete: the nothrow operator new adds two calls on every capsule.  Every
// export fill (arrow_bridge.hpp) writes every field, release last; until
// then the destructor reads nothing but release, so the other fields need
// no zeroing.
template <class Struct>
void clear_release(Struct* s) {
  s->release = nullptr;
}

void clear_release(ArrowDeviceArray* s) { s->array.release = nullptr; }

template <class Struct>
void* new_struct() {
  auto* s = static_cast<Struct*>(std::malloc(sizeof(Struct)));
  if (s != nullptr) clear_release(s);
  return s;
}

void* new_struct(ArrowCapsuleKind kind) {
  switch (kind) {
    case kArrowSchemaCapsule: return new_struct<ArrowSchema>();
    case kArrowArrayCapsule: return new_struct<ArrowArray>();
    case kArrowStreamCapsule: return new_struct<ArrowArrayStream>();
    case kArrowDeviceArrayCapsule: return new_struct<ArrowDeviceArray>();
    case kArrowDeviceStreamCapsule: return new_struct<ArrowDeviceArrayStream>();
  }
  return nullptr;
}

// Capsule destructors (GIL held).  The struct's release is called only while
// it is still set: a consumer that moved the struct out set it to NULL.  An
// in-flight exception survives, as the release may run Python code.
template <class Struct>
void release_struct(Struct* s) {
  if (s->release != nullptr) s->release(s);
}

void release_struct(ArrowDeviceArray* s) {
  if (s->array.release != nullptr) s->array.release(&s->array);
}

template <class Struct>
void destroy(PyObject* capsule, const char* name) {
  // A failed GetPointer's error is dropped with whatever the release left.
  with_error_set_aside([capsule, name] {
    auto* s = static_cast<Struct*>(PyCapsule_GetPointer(capsule, name));
    if (s != nullptr) {
      release_struct(s);
      std::free(s);
    }
  });
}

void schema_destructor(PyObject* c) { destroy<ArrowSchema>(c, kCapsuleArrowSchema); }
void array_destructor(PyObject* c) { destroy<ArrowArray>(c, kCapsuleArrowArray); }
void stream_destructor(PyObject* c) { destroy<ArrowArrayStream>(c, kCapsuleArrowStream); }
void device_array_destructor(PyObject* c) {
  destroy<ArrowDeviceArray>(c, kCapsuleArrowDeviceArray);
}
void device_stream_destructor(PyObject* c) {
  destroy<ArrowDeviceArrayStream>(c, kCapsuleArrowDeviceStream);
}

PyCapsule_Destructor destructor_for(ArrowCapsuleKind kind) {
  switch (kind) {
    case kArrowSchemaCapsule: return schema_destructor;
    case kArrowArrayCapsule: return array_destructor;
    case kArrowStreamCapsule: return stream_destructor;
    case kArrowDeviceArrayCapsule: return device_array_destructor;
    case kArrowDeviceStreamCapsule: return device_stream_destructor;
  }
  return nullptr;
}

}  // namespace

HeldArrowArray::~HeldArrowArray() {
  if (device_array.array.release == nullptr) return;
  with_error_set_aside([this] { device_array.array.release(&device_array.array); });
}

PyObject* new_arrow_capsule(ArrowCapsuleKind kind, void** out) {
  const char* name = capsule_name(kind);
  if (name == nullptr) {
    PyErr_SetString(PyExc_ValueError, "unknown Arrow capsule kind");
    return nullptr;
  }
  void* s = new_struct(kind);
  if (s == nullptr) return PyErr_NoMemory();
  PyObject* capsule = PyCapsule_New(s, name, destructor_for(kind));
  if (capsule == nullptr) {
    std::free(s);
  } else if (out != nullptr) {
    *out = s;
  }
  return capsule;
}

void release_arrow_keepalive(void* py_object) {
  auto* obj = static_cast<PyObject*>(py_object);
#ifndef Py_GIL_DISABLED
  // The common case, a consumer releasing on the exporting thread while the
  // DLPackArray lives on: dropping a reference that is not the last runs no
  // code, so it needs neither the shutdown gate nor the error fetch/restore.
  if (obj != nullptr && holds_gil() && Py_REFCNT(obj) > 1) {
    Py_DECREF(obj);
    return;
  }
#endif
  release_reference(obj);
}

}  // namespace dla::py
