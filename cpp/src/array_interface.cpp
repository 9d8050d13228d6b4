#include "dlpackarray/array_interface.hpp"

#include <cstdlib>
#include <string>

#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"
#include "dlpackarray/rules.hpp"

namespace dla {

namespace {

std::string kind_text(char kind) {
  if (kind >= 0x20 && kind < 0x7f) return "'" + std::string(1, kind) + "'";
  return "(byte " + std::to_string(int(static_cast<unsigned char>(kind))) + ")";
}

// Natural alignment of one element (a complex number aligns like its parts).
int64_t element_alignment(DLDataType dt) {
  const int64_t size = dt.bits / 8;
  return dt.code == kDLComplex ? size / 2 : size;
}

}  // namespace

void view_from_array_struct(const ArrayInterfaceStruct& s, TensorView* out) {
  if (s.two != 2) {
    fail(ErrorKind::Value, "__array_struct__ is not a PyArrayInterface: its 'two' field is " +
                               std::to_string(s.two) + ", not 2");
  }
  if (s.nd < 0 || s.nd > kMaxNdim) {
    fail(ErrorKind::Value, "__array_struct__ has nd = " + std::to_string(s.nd) +
                               "; the supported range is 0.." + std::to_string(kMaxNdim));
  }
  if (s.nd > 0 && s.shape == nullptr) {
    fail(ErrorKind::Value,
         "__array_struct__ has nd = " + std::to_string(s.nd) + " but a NULL shape pointer");
  }
  if (s.itemsize <= 0) {
    fail(ErrorKind::Value,
         "__array_struct__ has itemsize " + std::to_string(s.itemsize) + "; it must be positive");
  }
  const char k = s.typekind;
  if (k != 'b' && k != 'i' && k != 'u' && k != 'f' && k != 'c') {
    // A NumPy kind DLPack cannot carry is unsupported data (BufferError);
    // any other byte is a malformed struct.
    fail_unsupported_kind("__array_struct__", k);
    fail(ErrorKind::Type, "__array_struct__ typekind " + kind_text(k) +
                              " has no DLPack equivalent; only bool ('b'), integer ('i', 'u'), "
                              "float ('f') and complex ('c') data can be exchanged");
  }
  if (s.itemsize > 1 && !(s.flags & kArrayNotSwapped)) {
    fail(ErrorKind::Buffer,
         "__array_struct__ data is byte-swapped (NOTSWAPPED flag not set); DLPack data must be "
         "in native byte order");
  }
  // Byte order is settled above, so '=' (native) is exact here.
  const std::string typestr =
      std::string(s.itemsize == 1 ? "|" : "=") + k + std::to_string(s.itemsize);
  TensorView v;
  v.dtype = dtype_from_typestr(typestr.c_str());
  v.data = s.data;
  v.byte_offset = 0;
  v.set_ndim(s.nd);
  v.device = DLDevice{kDLCPU, 0};
  v.readonly = !(s.flags & kArrayWriteable);
  v.ready_stream = nullptr;
  for (int32_t i = 0; i < v.ndim; ++i) v.shape[i] = int64_t(s.shape[i]);
  if (s.strides != nullptr) {
    int64_t bytes[kMaxNdim];
    for (int32_t i = 0; i < v.ndim; ++i) bytes[i] = int64_t(s.strides[i]);
    set_strides_from_bytes(v, bytes, "__array_struct__");
  } else {
    set_c_strides(v);
  }
  validate(v);
  *out = v;
}

int array_struct_flags(const TensorView& v) {
  int flags = kArrayNotSwapped;
  if (!v.readonly) flags |= kArrayWriteable;
  if (is_c_contiguous(v)) flags |= kArrayCContiguous;
  if (is_f_contiguous(v)) flags |= kArrayFContiguous;
  const int64_t align = element_alignment(v.dtype);
  bool aligned = (uintptr_t(v.data) + v.byte_offset) % uint64_t(align) == 0;
  for (int32_t i = 0; aligned && i < v.ndim; ++i) {
    if (stride_is_used(v, i) && byte_stride(v, i) % align != 0) aligned = false;
  }
  if (aligned) flags |= kArrayAligned;
  return flags;
}

ArrayInterfaceStruct* new_array_struct(const TensorView& v) {
  const std::string typestr = typestr_from_dtype(v.dtype);
  if (typestr.empty()) {
    fail(ErrorKind::Buffer,
         "dtype " + dtype_name(v.dtype) +
             " has no array-interface typestr; export it through DLPack instead");
  }
  const int64_t itemsize = dtype_itemsize(v.dtype);
  const size_t n = size_t(v.ndim);
  static_assert(sizeof(ArrayInterfaceStruct) % alignof(intptr_t) == 0,
                "arrays must follow aligned");
  void* block = std::malloc(sizeof(ArrayInterfaceStruct) + 2 * n * sizeof(intptr_t) + 1);
  if (block == nullptr) fail(ErrorKind::Memory, "could not allocate a PyArrayInterface");
  auto* s = static_cast<ArrayInterfaceStruct*>(block);
  auto* arrays =
      reinterpret_cast<intptr_t*>(static_cast<char*>(block) + sizeof(ArrayInterfaceStruct));
  s->two = 2;
  s->nd = v.ndim;
  s->typekind = typestr[1];
  s->itemsize = int(itemsize);
  s->flags = array_struct_flags(v);
  s->shape = arrays;
  s->strides = arrays + n;
  for (size_t i = 0; i < n; ++i) {
    s->shape[i] = intptr_t(v.shape[i]);
    s->strides[i] = intptr_t(byte_stride(v, int32_t(i)));
  }
  s->data = v.data == nullptr ? nullptr : static_cast<char*>(v.data) + v.byte_offset;
  s->descr = nullptr;
  return s;
}

void free_array_struct(ArrayInterfaceStruct* s) noexcept { std::free(s); }

}  // namespace dla
