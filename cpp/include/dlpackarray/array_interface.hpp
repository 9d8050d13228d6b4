// The C side of NumPy's array interface (version 3): the PyArrayInterface
// struct carried by `__array_struct__` capsules, declared here from NumPy's
// documented layout so the package needs no NumPy headers, plus the checks
// that turn one into a TensorView and the builder for our own export.
#pragma once

#include <cstdint>

#include "dlpackarray/tensor_view.hpp"

namespace dla {

// Layout of NumPy's PyArrayInterface ("numpy/ndarraytypes.h"): field order is
// memory order, `shape`/`strides` are Py_intptr_t arrays, `descr` a PyObject*
// that is only meaningful when kArrHasDescr is set.
struct ArrayInterfaceStruct {
  int two;  // always 2: the sanity check of the protocol
  int nd;
  char typekind;  // typestr kind character: 'b', 'i', 'u', 'f', 'c', ...
  int itemsize;
  int flags;
  intptr_t* shape;
  intptr_t* strides;  // bytes; NULL means C-contiguous
  void* data;         // first element
  void* descr;
};

// NPY_ARRAY_* flag values used by the struct (documented NumPy constants).
inline constexpr int kArrayCContiguous = 0x0001;
inline constexpr int kArrayFContiguous = 0x0002;
inline constexpr int kArrayAligned = 0x0100;
inline constexpr int kArrayNotSwapped = 0x0200;
inline constexpr int kArrayWriteable = 0x0400;
inline constexpr int kArrHasDescr = 0x0800;

// Reads every field except `descr` (the Python side checks it) into a
// validated host view.  The memory length is unknown, so only the extent's
// arithmetic can be checked.  Throws ValueError/TypeError/BufferError/
// OverflowError naming the bad field.
void view_from_array_struct(const ArrayInterfaceStruct& s, TensorView* out);

// NPY_ARRAY_* flags describing v (contiguity, alignment, writability).
int array_struct_flags(const TensorView& v);

// One malloc'd block holding the struct and its shape/strides arrays,
// describing v (data = v.data + v.byte_offset, descr NULL).  Throws
// BufferError when the array interface cannot express v's dtype, and
// MemoryError.  Free with free_array_struct().
ArrayInterfaceStruct* new_array_struct(const TensorView& v);
void free_array_struct(ArrayInterfaceStruct* s) noexcept;

}  // namespace dla
