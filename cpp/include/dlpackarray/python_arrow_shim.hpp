// Python-facing part of the Arrow bridge: PyCapsules holding Arrow C structs
// (allocated, their release cleared and wrapped before they are filled, so a
// failure midway neither leaks nor calls garbage) and the keepalive release
// that drops a Python reference from any thread.
#pragma once

#include <Python.h>

#include "dlpackarray/arrow_abi.hpp"

namespace dla::py {

// The Arrow array an import's owner holds (moved out of its capsule or
// stream), released when the owner dies.  A C++ member of ArrowArrayOwner,
// destroyed by Cython's generated tp_dealloc: the class needs no
// __dealloc__, whose saving and restoring of the error indicator every
// import paid.  The release sets an in-flight exception aside itself (an
// owner may die while one propagates, and a producer's release may run
// Python code), which costs one check when none is pending.
struct HeldArrowArray {
  ArrowDeviceArray device_array;
  HeldArrowArray() noexcept { device_array.array.release = nullptr; }
  HeldArrowArray(const HeldArrowArray&) = delete;
  HeldArrowArray& operator=(const HeldArrowArray&) = delete;
  ~HeldArrowArray();
};

enum ArrowCapsuleKind : int {
  kArrowSchemaCapsule = 0,
  kArrowArrayCapsule = 1,
  kArrowStreamCapsule = 2,
  kArrowDeviceArrayCapsule = 3,
  kArrowDeviceStreamCapsule = 4,
};

// A new capsule with the spec's name for `kind`, owning a struct whose release
// is NULL and whose other fields are unset: the caller's fill writes every
// field (arrow_bridge.hpp), or leaves release NULL on failure.  Its destructor
// calls the struct's release when it is still set (the consumer did not move
// it out) and frees the struct.  Returns NULL with an exception set on
// failure.  `out`, when given, gets the struct's address (sparing the caller
// PyCapsule_GetPointer's name check).
PyObject* new_arrow_capsule(ArrowCapsuleKind kind, void** out = nullptr);

// ArrowKeepalive release for a strong reference to a Python object: safe on
// any thread, with or without the GIL, and a leak (never a crash) once the
// interpreter shuts down.  Reuses release_reference and its shutdown gate
// (python_shim.hpp), and like it is not noexcept: every release callback of
// an Arrow export ends here, and a thread CPython ends inside must unwind.
void release_arrow_keepalive(void* py_object);

}  // namespace dla::py
