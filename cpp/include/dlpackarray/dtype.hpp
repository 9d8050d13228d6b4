// dtype tables: DLDataType <-> PEP 3118 format strings, NumPy typestr, and
// readable names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dlpackarray/dlpack_abi.hpp"

namespace dla {

inline bool dtype_equal(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// Bytes per element.  Throws TypeError for dtypes that cannot be addressed
// element by element (lanes != 1, bits not a multiple of 8, bits == 0).
int64_t dtype_itemsize(DLDataType dt);

// True when the dtype is one this package can store and export: lanes == 1 and
// a known code with a byte-multiple width valid for that code.
bool dtype_is_supported(DLDataType dt);

// Throws a BufferError naming the dtype if it is not supported.
void check_dtype_supported(DLDataType dt);

// check_dtype_supported's verdict and dtype_itemsize's answer from one
// table lookup (every validated import asks both).
int64_t supported_itemsize(DLDataType dt);

// "supported dtypes are bool, int8, ...": the tail of every unsupported-dtype
// message, built from the one dtype table.
std::string supported_dtypes_text();

// Throws BufferError ("<what> holds datetime64 data ...") when `kind` is a
// NumPy kind character with no DLPack equivalent (V O S a U M m t); returns
// for any other character.
void fail_unsupported_kind(const std::string& what, char kind);

// "float32", "bfloat16", "float8_e4m3fn", ...; for unknown combinations a
// spelled-out "DLDataType(code=C, bits=B, lanes=L)".
std::string dtype_name(DLDataType dt);

// Parses a name produced by dtype_name (and common aliases such as "float",
// "bool_", "f4", "<f4", "complex"); throws TypeError when unknown.
DLDataType dtype_from_name(const std::string& name);

// PEP 3118 struct format -> dtype.  `itemsize` is the exporter's claimed item
// size and must agree with the format.  Byte-order prefixes "@=<>!" are
// accepted; an order other than native raises BufferError naming it.
DLDataType dtype_from_pep3118(const char* format, int64_t itemsize);

// dtype -> PEP 3118 format (static string) or nullptr when PEP 3118 cannot
// express the dtype (bfloat16, float8, ...).
const char* pep3118_from_dtype(DLDataType dt);

// dtype -> Arrow C data interface primitive format ("f", "l", ...), or
// nullptr when Arrow has no primitive for it (bool, bfloat16, complex,
// float8).  Derived from the same table as every other mapping.
const char* arrow_format_from_dtype(DLDataType dt);

// Arrow primitive format -> dtype; false when the format is not one of the
// table's (strings, temporal types, nested types, bit-packed "b", ...).
bool dtype_from_arrow_format(const char* format, DLDataType* out);

// NumPy array-interface typestr ("<f4", "|b1", ...) -> dtype; throws
// TypeError for a malformed typestr, BufferError for a well-formed one DLPack
// cannot carry (datetime, object, str, void, unsupported width, non-native
// byte order).
DLDataType dtype_from_typestr(const char* typestr);

// dtype -> typestr, or empty string when the array interface cannot express
// it (bfloat16 and float8 have no typestr kind).
std::string typestr_from_dtype(DLDataType dt);

}  // namespace dla
