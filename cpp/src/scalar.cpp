#include "dlpackarray/scalar.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"

namespace dla {

namespace {

template <typename T>
T load(const void* p) {
  // memcpy: producers may hand out unaligned data (buffers at odd offsets).
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// How a small binary floating-point format spends its top exponent and its
// sign-bit-only pattern.
enum class Special {
  kIeee,  // all-ones exponent: infinity (mantissa 0) or NaN
  kFn,    // finite; only all-ones exponent *and* mantissa is NaN
  kFnuz,  // finite, no negative zero; the pattern 1000...0 is the one NaN
};

struct MiniFloat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  Special special;
};

double decode(const MiniFloat& f, uint32_t bits) {
  const uint32_t width = 1 + f.exponent_bits + f.mantissa_bits;
  const uint32_t sign = (bits >> (width - 1)) & 1u;
  const uint32_t exp_max = (1u << f.exponent_bits) - 1;
  const uint32_t mant_max = (1u << f.mantissa_bits) - 1;
  const uint32_t exponent = (bits >> f.mantissa_bits) & exp_max;
  const uint32_t mantissa = bits & mant_max;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (f.special) {
    case Special::kIeee:
      if (exponent == exp_max) {
        if (mantissa != 0) return nan;
        return sign ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
      }
      break;
    case Special::kFn:
      if (exponent == exp_max && mantissa == mant_max) return nan;
      break;
    case Special::kFnuz:
      if (sign && exponent == 0 && mantissa == 0) return nan;
      break;
  }
  // Subnormals share the smallest normal exponent without the implicit 1;
  // ldexp of an integer mantissa is exact for every format here.
  const double magnitude = exponent == 0
                               ? std::ldexp(double(mantissa), 1 - f.bias - f.mantissa_bits)
                               : std::ldexp(double(mantissa | (1u << f.mantissa_bits)),
                                            int(exponent) - f.bias - f.mantissa_bits);
  return sign ? -magnitude : magnitude;
}

}  // namespace

double float16_to_double(uint16_t bits) { return decode({5, 10, 15, Special::kIeee}, bits); }

double bfloat16_to_double(uint16_t bits) {
  // bfloat16 is the upper half of a float32.
  const uint32_t wide = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return double(f);
}

double float8_to_double(uint8_t code, uint8_t bits) {
  switch (code) {
    case kDLFloat8_e3m4: return decode({3, 4, 3, Special::kIeee}, bits);
    case kDLFloat8_e4m3: return decode({4, 3, 7, Special::kIeee}, bits);
    case kDLFloat8_e4m3b11fnuz: return decode({4, 3, 11, Special::kFnuz}, bits);
    case kDLFloat8_e4m3fn: return decode({4, 3, 7, Special::kFn}, bits);
    case kDLFloat8_e4m3fnuz: return decode({4, 3, 8, Special::kFnuz}, bits);
    case kDLFloat8_e5m2: return decode({5, 2, 15, Special::kIeee}, bits);
    case kDLFloat8_e5m2fnuz: return decode({5, 2, 16, Special::kFnuz}, bits);
    case kDLFloat8_e8m0fnu:
      // Unsigned powers of two 2**-127 .. 2**127; all ones is NaN, no zero.
      if (bits == 0xff) return std::numeric_limits<double>::quiet_NaN();
      return std::ldexp(1.0, int(bits) - 127);
    default: fail(ErrorKind::Type, "dtype code " + std::to_string(code) + " is not a float8 type");
  }
}

Scalar load_scalar(DLDataType dt, const void* p) {
  check_dtype_supported(dt);
  Scalar s;
  switch (dt.code) {
    case kDLBool:
      s.kind = Scalar::kBool;
      s.i = load<uint8_t>(p) != 0;
      return s;
    case kDLInt:
      s.kind = Scalar::kInt;
      switch (dt.bits) {
        case 8: s.i = load<int8_t>(p); break;
        case 16: s.i = load<int16_t>(p); break;
        case 32: s.i = load<int32_t>(p); break;
        default: s.i = load<int64_t>(p); break;
      }
      return s;
    case kDLUInt:
      s.kind = Scalar::kUInt;
      switch (dt.bits) {
        case 8: s.u = load<uint8_t>(p); break;
        case 16: s.u = load<uint16_t>(p); break;
        case 32: s.u = load<uint32_t>(p); break;
        default: s.u = load<uint64_t>(p); break;
      }
      return s;
    case kDLFloat:
      s.kind = Scalar::kFloat;
      switch (dt.bits) {
        case 16: s.real = float16_to_double(load<uint16_t>(p)); break;
        case 32: s.real = load<float>(p); break;
        default: s.real = load<double>(p); break;
      }
      return s;
    case kDLBfloat:
      s.kind = Scalar::kFloat;
      s.real = bfloat16_to_double(load<uint16_t>(p));
      return s;
    case kDLComplex: {
      s.kind = Scalar::kComplex;
      const char* c = static_cast<const char*>(p);
      if (dt.bits == 64) {
        s.real = load<float>(c);
        s.imag = load<float>(c + sizeof(float));
      } else {
        s.real = load<double>(c);
        s.imag = load<double>(c + sizeof(double));
      }
      return s;
    }
    default:
      // check_dtype_supported admitted it, so it is one of the float8 codes.
      s.kind = Scalar::kFloat;
      s.real = float8_to_double(dt.code, load<uint8_t>(p));
      return s;
  }
}

const void* element_address(const TensorView& v, const int64_t* index) {
  // Within a validated view every element offset is at most the extent, so
  // these sums cannot overflow.
  int64_t offset = 0;
  for (int32_t d = 0; d < v.ndim; ++d) offset += index[d] * v.strides[d];
  return static_cast<const char*>(v.data) + v.byte_offset + offset * dtype_itemsize(v.dtype);
}

int64_t normalize_index(const TensorView& v, int32_t axis, int64_t i) {
  const int64_t n = v.shape[axis];
  const int64_t pos = i < 0 ? i + n : i;
  if (pos < 0 || pos >= n) {
    fail(ErrorKind::Index, "index " + std::to_string(i) + " is out of bounds for axis " +
                               std::to_string(axis) + " with size " + std::to_string(n));
  }
  return pos;
}

void unravel_flat_index(const TensorView& v, int64_t flat, int64_t* index) {
  const int64_t size = view_size(v);
  const int64_t pos = flat < 0 ? flat + size : flat;
  if (pos < 0 || pos >= size) {
    fail(ErrorKind::Index,
         "index " + std::to_string(flat) + " is out of bounds for size " + std::to_string(size));
  }
  int64_t rest = pos;
  for (int32_t d = v.ndim - 1; d >= 0; --d) {
    index[d] = rest % v.shape[d];
    rest /= v.shape[d];
  }
}

}  // namespace dla
