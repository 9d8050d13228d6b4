// Reading single elements as host scalars: the dtype-level decoding behind
// DLPackArray.item(), tolist() and the 0-d conversions (float(), int(), ...).
// Nothing here touches Python; the bindings turn a Scalar into a Python object.
#pragma once

#include <cstdint>

#include "dlpackarray/dlpack_abi.hpp"
#include "dlpackarray/tensor_view.hpp"

namespace dla {

// One decoded element.  Exactly one member group is meaningful, as `kind` says;
// every floating-point dtype (float16, bfloat16, float8 variants) widens
// exactly to double, complex64 to two doubles.
struct Scalar {
  enum Kind : int32_t { kBool = 0, kInt = 1, kUInt = 2, kFloat = 3, kComplex = 4 };
  int32_t kind = kInt;
  int64_t i = 0;      // kBool (0 or 1), kInt
  uint64_t u = 0;     // kUInt
  double real = 0.0;  // kFloat, kComplex
  double imag = 0.0;  // kComplex
};

// Decodes the element stored at `p` (host memory, any alignment).  Throws
// TypeError for dtypes this package does not support.
Scalar load_scalar(DLDataType dt, const void* p);

// Exact widening of the narrow floating-point formats to double, NaN and
// infinities included (the encodings follow ml_dtypes / the OCP FP8 spec).
double float16_to_double(uint16_t bits);
double bfloat16_to_double(uint16_t bits);
// `code` is one of the kDLFloat8_* codes; TypeError otherwise.
double float8_to_double(uint8_t code, uint8_t bits);

// Address of the element at `index` (v.ndim entries, each in [0, shape[i])).
// v must be validated: every such address lies inside its extent, so the byte
// arithmetic cannot overflow.
const void* element_address(const TensorView& v, const int64_t* index);

// Replaces a possibly negative index into dimension `axis` by its position;
// IndexError names the axis and its size when it is outside [-size, size).
int64_t normalize_index(const TensorView& v, int32_t axis, int64_t i);

// Unravels a C-order flat index (negative counts from the end) into v.ndim
// entries of `index`; IndexError when outside [-size, size).
void unravel_flat_index(const TensorView& v, int64_t flat, int64_t* index);

}  // namespace dla
