#include "dlpackarray/python_arrow_shim.hpp"

#include <cstdlib>

#include "dlpackarray/arrow_abi.hpp"
#include "dlpackarray/python_shim.hpp"

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

size_t struct_size(ArrowCapsuleKind kind) {
  switch (kind) {
    case kArrowSchemaCapsule: return sizeof(ArrowSchema);
    case kArrowArrayCapsule: return sizeof(ArrowArray);
    case kArrowStreamCapsule: return sizeof(ArrowArrayStream);
    case kArrowDeviceArrayCapsule: return sizeof(ArrowDeviceArray);
    case kArrowDeviceStreamCapsule: return sizeof(ArrowDeviceArrayStream);
  }
  return 0;
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
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  auto* s = static_cast<Struct*>(PyCapsule_GetPointer(capsule, name));
  if (s == nullptr) {
    PyErr_Clear();
  } else {
    release_struct(s);
    std::free(s);
  }
  PyErr_Restore(type, value, tb);
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

PyObject* new_arrow_capsule(ArrowCapsuleKind kind) {
  const char* name = capsule_name(kind);
  if (name == nullptr) {
    PyErr_SetString(PyExc_ValueError, "unknown Arrow capsule kind");
    return nullptr;
  }
  void* s = std::calloc(1, struct_size(kind));  // release == NULL from the start
  if (s == nullptr) return PyErr_NoMemory();
  PyObject* capsule = PyCapsule_New(s, name, destructor_for(kind));
  if (capsule == nullptr) std::free(s);
  return capsule;
}

void release_arrow_keepalive(void* py_object) {
  release_reference(static_cast<PyObject*>(py_object));
}

}  // namespace dla::py
