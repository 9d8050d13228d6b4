#include "dlpackarray/dtype.hpp"

#include <cstring>

#include "dlpackarray/errors.hpp"

namespace dla {

namespace {

struct NamedDtype {
  const char* name;
  uint8_t code;
  uint8_t bits;
  // Arrow C data interface format of the same bytes, or nullptr when Arrow
  // has no primitive for the type.  bool is nullptr: Arrow's own boolean is
  // bit-packed, and the byte-per-element match is the arrow.bool8 extension
  // over int8 (arrow_bridge.cpp).
  const char* arrow;
};

// The one table of supported dtypes; every other mapping is derived from it.
constexpr NamedDtype kDtypes[] = {
    {"bool", kDLBool, 8, nullptr},
    {"int8", kDLInt, 8, "c"},
    {"int16", kDLInt, 16, "s"},
    {"int32", kDLInt, 32, "i"},
    {"int64", kDLInt, 64, "l"},
    {"uint8", kDLUInt, 8, "C"},
    {"uint16", kDLUInt, 16, "S"},
    {"uint32", kDLUInt, 32, "I"},
    {"uint64", kDLUInt, 64, "L"},
    {"float16", kDLFloat, 16, "e"},
    {"float32", kDLFloat, 32, "f"},
    {"float64", kDLFloat, 64, "g"},
    {"bfloat16", kDLBfloat, 16, nullptr},
    {"complex64", kDLComplex, 64, nullptr},
    {"complex128", kDLComplex, 128, nullptr},
    {"float8_e3m4", kDLFloat8_e3m4, 8, nullptr},
    {"float8_e4m3", kDLFloat8_e4m3, 8, nullptr},
    {"float8_e4m3b11fnuz", kDLFloat8_e4m3b11fnuz, 8, nullptr},
    {"float8_e4m3fn", kDLFloat8_e4m3fn, 8, nullptr},
    {"float8_e4m3fnuz", kDLFloat8_e4m3fnuz, 8, nullptr},
    {"float8_e5m2", kDLFloat8_e5m2, 8, nullptr},
    {"float8_e5m2fnuz", kDLFloat8_e5m2fnuz, 8, nullptr},
    {"float8_e8m0fnu", kDLFloat8_e8m0fnu, 8, nullptr},
};

// (code, bytes) -> index into kDtypes, -1 where unsupported: every wrap and
// export validates its dtype, so the lookup is one load instead of a scan.
constexpr int kCodeSlots = 32;
constexpr int kByteSlots = 17;  // 0..16 bytes: complex128 is the widest
struct DtypeIndex {
  int8_t at[kCodeSlots][kByteSlots];
};

constexpr DtypeIndex make_index() {
  DtypeIndex ix{};
  for (auto& row : ix.at) {
    for (auto& slot : row) slot = -1;
  }
  for (size_t i = 0; i < sizeof kDtypes / sizeof kDtypes[0]; ++i) {
    ix.at[kDtypes[i].code][kDtypes[i].bits / 8] = int8_t(i);
  }
  return ix;
}

constexpr bool table_fits_index() {
  for (const auto& d : kDtypes) {
    if (d.code >= kCodeSlots || d.bits % 8 != 0 || d.bits / 8 >= kByteSlots) return false;
  }
  return sizeof kDtypes / sizeof kDtypes[0] < 128;
}
static_assert(table_fits_index(), "a dtype of kDtypes falls outside DtypeIndex");

constexpr DtypeIndex kIndex = make_index();

// Arrow primitive format character -> index into kDtypes, -1 where none:
// every Arrow import reads its format, so one load instead of a scan.
struct ArrowFormatIndex {
  int8_t at[128];
};

constexpr ArrowFormatIndex make_arrow_index() {
  ArrowFormatIndex ix{};
  for (auto& slot : ix.at) slot = -1;
  for (size_t i = 0; i < sizeof kDtypes / sizeof kDtypes[0]; ++i) {
    const char* f = kDtypes[i].arrow;
    // Every primitive format of the table is one ASCII character.
    if (f != nullptr && f[0] > 0 && f[1] == '\0') ix.at[int(f[0])] = int8_t(i);
  }
  return ix;
}

constexpr ArrowFormatIndex kArrowIndex = make_arrow_index();

const NamedDtype* find(DLDataType dt) {
  if (dt.lanes != 1 || dt.code >= kCodeSlots || dt.bits % 8 != 0 || dt.bits / 8 >= kByteSlots) {
    return nullptr;
  }
  const int8_t i = kIndex.at[dt.code][dt.bits / 8];
  return i < 0 ? nullptr : &kDtypes[i];
}

DLDataType make(uint8_t code, uint8_t bits) { return DLDataType{code, bits, 1}; }

std::string spelled(DLDataType dt) {
  return "DLDataType(code=" + std::to_string(dt.code) + ", bits=" + std::to_string(dt.bits) +
         ", lanes=" + std::to_string(dt.lanes) + ")";
}

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// What a NumPy kind character without a DLPack equivalent holds, for error
// messages; nullptr for characters that are no NumPy kind at all.
const char* unsupported_kind_name(char kind) {
  switch (kind) {
    case 'V': return "void/structured";
    case 'O': return "Python object";
    case 'S':
    case 'a': return "bytes";
    case 'U': return "str";
    case 'M': return "datetime64";
    case 'm': return "timedelta64";
    case 't': return "bit field";
    case 'T': return "variable-width string (StringDType)";
    default: return nullptr;
  }
}

// Sub-byte types by their ml_dtypes names.  DLPack has type codes for them,
// but a DLPack tensor of one is packed (several elements per byte) unless the
// producer sets DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, a flag only a
// versioned tensor can carry; ml_dtypes stores one element per byte, and this
// package holds whole-byte element types only.
struct SubByteName {
  const char* name;
  const char* dlpack;  // the DLPack type code that describes it
  int bits;
};

constexpr SubByteName kSubByteNames[] = {
    {"float4_e2m1fn", "kDLFloat4_e2m1fn (code 17)", 4},
    {"float6_e2m3fn", "kDLFloat6_e2m3fn (code 15)", 6},
    {"float6_e3m2fn", "kDLFloat6_e3m2fn (code 16)", 6},
    {"int4", "kDLInt (code 0)", 4},
    {"uint4", "kDLUInt (code 1)", 4},
    {"int2", "kDLInt (code 0)", 2},
    {"uint2", "kDLUInt (code 1)", 2},
    {"int1", "kDLInt (code 0)", 1},
    {"uint1", "kDLUInt (code 1)", 1},
};

// Complex types of 16-bit parts, by their ml_dtypes names: DLPack's complex
// code has 32-bit (IEEE half parts) but not bfloat16 parts, and this package
// holds complex64 and complex128 only.
void fail_half_complex_name(const std::string& name) {
  if (name == "complex32") {
    fail(ErrorKind::Buffer,
         "dtype 'complex32' (two float16 parts) is kDLComplex (code 5) with bits=32 in DLPack, "
         "a width dlpackarray does not hold: its complex types are complex64 and complex128; " +
             supported_dtypes_text());
  }
  if (name == "bcomplex32") {
    fail(ErrorKind::Buffer,
         "dtype 'bcomplex32' (two bfloat16 parts) has no DLPack type code: kDLComplex "
         "(code 5) has IEEE float parts; " +
             supported_dtypes_text());
  }
}

void fail_unheld_name(const std::string& name) {
  fail_half_complex_name(name);
  for (const auto& d : kSubByteNames) {
    if (name != d.name) continue;
    const std::string bits = std::to_string(d.bits);
    fail(ErrorKind::Buffer,
         "dtype '" + name + "' is a " + bits + "-bit type: DLPack describes it as " + d.dlpack +
             " with bits=" + bits +
             ", packed several to a byte unless a versioned tensor sets "
             "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED "
             "(https://dmlc.github.io/dlpack/latest/c_api.html), and dlpackarray holds "
             "whole-byte element types only, one or more bytes per element; " +
             supported_dtypes_text());
  }
}

// The typestr kinds DLPack has codes for, spelled out for messages.
const char* kind_word(char kind) {
  switch (kind) {
    case 'b': return "bool";
    case 'i': return "signed integer";
    case 'u': return "unsigned integer";
    case 'f': return "floating-point";
    default: return "complex";
  }
}

// Returns the kind + width a PEP 3118 code names, or false when unknown.
// `native_sizes` selects '@' sizes (C long is 8 bytes on LP64) over the
// standard sizes of '=<>!' (long is always 4 bytes).
bool pep3118_code(const char* code, bool native_sizes, DLDataType* out) {
  const char c = code[0];
  if (c == 'Z') {
    if (code[1] == 'f' && code[2] == '\0') return *out = make(kDLComplex, 64), true;
    if (code[1] == 'd' && code[2] == '\0') return *out = make(kDLComplex, 128), true;
    return false;
  }
  if (c == '\0' || code[1] != '\0') return false;
  const uint8_t long_bits = native_sizes ? uint8_t(8 * sizeof(long)) : uint8_t(32);
  switch (c) {
    case '?': *out = make(kDLBool, 8); return true;
    case 'b': *out = make(kDLInt, 8); return true;
    case 'B': *out = make(kDLUInt, 8); return true;
    case 'c': *out = make(kDLUInt, 8); return true;  // char: raw bytes
    case 'h': *out = make(kDLInt, 16); return true;
    case 'H': *out = make(kDLUInt, 16); return true;
    case 'i': *out = make(kDLInt, 32); return true;
    case 'I': *out = make(kDLUInt, 32); return true;
    case 'l': *out = make(kDLInt, long_bits); return true;
    case 'L': *out = make(kDLUInt, long_bits); return true;
    case 'q': *out = make(kDLInt, 64); return true;
    case 'Q': *out = make(kDLUInt, 64); return true;
    case 'n':
      if (!native_sizes) return false;
      *out = make(kDLInt, uint8_t(8 * sizeof(size_t)));
      return true;
    case 'N':
      if (!native_sizes) return false;
      *out = make(kDLUInt, uint8_t(8 * sizeof(size_t)));
      return true;
    case 'e': *out = make(kDLFloat, 16); return true;
    case 'f': *out = make(kDLFloat, 32); return true;
    case 'd': *out = make(kDLFloat, 64); return true;
    default: return false;
  }
}

}  // namespace

bool dtype_is_supported(DLDataType dt) { return find(dt) != nullptr; }

std::string supported_dtypes_text() {
  std::string s = "supported dtypes are ";
  bool first = true;
  for (const auto& d : kDtypes) {
    if (!first) s += ", ";
    s += d.name;
    first = false;
  }
  return s + " (one lane, whole bytes, native byte order)";
}

void fail_unsupported_kind(const std::string& what, char kind) {
  const char* name = unsupported_kind_name(kind);
  if (name == nullptr) return;
  fail(ErrorKind::Buffer, what + " holds " + name + " data (kind '" + std::string(1, kind) +
                              "'), which DLPack cannot describe; " + supported_dtypes_text());
}

void check_dtype_supported(DLDataType dt) {
  if (dt.lanes != 1) {
    fail(ErrorKind::Buffer,
         "dtype " + spelled(dt) +
             " has lanes != 1; vector dtypes cannot be represented element-wise; " +
             supported_dtypes_text());
  }
  if (find(dt) == nullptr) {
    if (dt.code == kDLFloat6_e2m3fn || dt.code == kDLFloat6_e3m2fn || dt.code == kDLFloat4_e2m1fn ||
        dt.bits % 8 != 0) {
      fail(ErrorKind::Buffer, "dtype " + spelled(dt) +
                                  " is a sub-byte type; packed sub-byte data is not supported; " +
                                  supported_dtypes_text());
    }
    fail(ErrorKind::Buffer, "unsupported dtype " + spelled(dt) + "; " + supported_dtypes_text());
  }
}

// Per type code, bit b set when (code, b bytes) is a dtype of the table: the
// check of every validate() in one load and one shift (bits / 8 < 32).
struct ByteMasks {
  uint32_t at[kCodeSlots];
};

constexpr ByteMasks make_byte_masks() {
  ByteMasks m{};
  for (const auto& d : kDtypes) m.at[d.code] |= uint32_t(1) << (d.bits / 8);
  return m;
}

constexpr ByteMasks kByteMasks = make_byte_masks();

int64_t supported_itemsize(DLDataType dt) {
  // A dtype of the table has one lane and whole bytes: its size is bits / 8.
  const uint32_t bytes = dt.bits / 8u;
  if (dt.lanes == 1 && dt.code < kCodeSlots && dt.bits % 8 == 0 &&
      ((kByteMasks.at[dt.code] >> bytes) & 1u) != 0) {
    return bytes;
  }
  check_dtype_supported(dt);  // raises, with its message
  return bytes;               // not reached: dt is not in the table
}

namespace {
// Out of line and cold: dtype_itemsize stays small enough to inline.
[[noreturn, gnu::noinline, gnu::cold]] void fail_no_whole_bytes(DLDataType dt) {
  fail(ErrorKind::Buffer, "dtype " + spelled(dt) + " has no whole-byte item size");
}
}  // namespace

int64_t dtype_itemsize(DLDataType dt) {
  if (dt.lanes == 0 || dt.bits == 0 || dt.bits % 8 != 0) fail_no_whole_bytes(dt);
  return int64_t(dt.bits / 8) * dt.lanes;
}

std::string dtype_name(DLDataType dt) {
  if (const NamedDtype* d = find(dt)) return d->name;
  return spelled(dt);
}

DLDataType dtype_from_name(const std::string& raw) {
  for (const auto& d : kDtypes) {
    if (raw == d.name) return make(d.code, d.bits);
  }
  struct Alias {
    const char* alias;
    const char* name;
  };
  static constexpr Alias kAliases[] = {
      {"bool_", "bool"},       {"?", "bool"},
      {"float", "float64"},    {"double", "float64"},
      {"half", "float16"},     {"single", "float32"},
      {"int", "int64"},        {"complex", "complex128"},
      {"cfloat", "complex64"}, {"cdouble", "complex128"},
      {"byte", "int8"},        {"ubyte", "uint8"},
      {"short", "int16"},      {"ushort", "uint16"},
  };
  for (const auto& a : kAliases) {
    if (raw == a.alias) return dtype_from_name(a.name);
  }
  fail_unheld_name(raw);
  // Typestr ("<f4", "|u1", "f8") and single PEP 3118 codes ("f", "Zd").
  if (!raw.empty()) {
    try {
      std::string t = raw;
      if (t[0] != '<' && t[0] != '>' && t[0] != '|' && t[0] != '=' && t.size() >= 2 &&
          (t[1] >= '0' && t[1] <= '9')) {
        t = "=" + t;
      }
      // Two characters already make a typestr of a kind without a width ('|O').
      if (t.size() >= 2 && (t[0] == '<' || t[0] == '>' || t[0] == '|' || t[0] == '=')) {
        return dtype_from_typestr(t.c_str());
      }
      DLDataType dt;
      if (pep3118_code(raw.c_str(), true, &dt)) return dt;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Buffer) throw;
    }
  }
  fail(ErrorKind::Type, "unknown dtype name '" + raw + "'");
}

DLDataType dtype_from_pep3118(const char* format, int64_t itemsize) {
  const char* f = (format == nullptr) ? "B" : format;
  bool native_sizes = true;
  char order = '@';
  if (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!') {
    order = *f;
    native_sizes = (*f == '@');
    ++f;
  }
  DLDataType dt;
  if (!pep3118_code(f, native_sizes, &dt)) {
    fail(ErrorKind::Buffer,
         std::string("buffer format '") + (format ? format : "B") +
             "' is not a single native scalar type representable in DLPack "
             "(structured, padded, pointer, long double and multi-item formats are not); " +
             supported_dtypes_text());
  }
  const int64_t size = dt.bits / 8;
  const bool swapped = (order == '>' || order == '!') ? kLittleEndian
                       : (order == '<')               ? !kLittleEndian
                                                      : false;
  if (swapped && size > 1) {
    fail(ErrorKind::Buffer, std::string("buffer format '") + format + "' has " +
                                (kLittleEndian ? "big-endian" : "little-endian") +
                                " byte order; DLPack data must be in native byte order");
  }
  if (itemsize != size) {
    fail(ErrorKind::Buffer, std::string("buffer format '") + (format ? format : "B") +
                                "' implies an item size of " + std::to_string(size) +
                                " bytes but the exporter reports " + std::to_string(itemsize));
  }
  return dt;
}

const char* pep3118_from_dtype(DLDataType dt) {
  if (dt.lanes != 1) return nullptr;
  switch (dt.code) {
    case kDLBool: return dt.bits == 8 ? "?" : nullptr;
    case kDLInt:
      switch (dt.bits) {
        case 8: return "b";
        case 16: return "h";
        case 32: return "i";
        case 64: return "q";
      }
      return nullptr;
    case kDLUInt:
      switch (dt.bits) {
        case 8: return "B";
        case 16: return "H";
        case 32: return "I";
        case 64: return "Q";
      }
      return nullptr;
    case kDLFloat:
      switch (dt.bits) {
        case 16: return "e";
        case 32: return "f";
        case 64: return "d";
      }
      return nullptr;
    case kDLComplex:
      switch (dt.bits) {
        case 64: return "Zf";
        case 128: return "Zd";
      }
      return nullptr;
    default: return nullptr;
  }
}

const char* arrow_format_from_dtype(DLDataType dt) {
  const NamedDtype* d = find(dt);
  return d == nullptr ? nullptr : d->arrow;
}

bool dtype_from_arrow_format(const char* format, DLDataType* out) {
  if (format == nullptr || format[0] == '\0' || format[1] != '\0') return false;
  const auto c = static_cast<unsigned char>(format[0]);
  if (c >= 128 || kArrowIndex.at[c] < 0) return false;
  const NamedDtype& d = kDtypes[kArrowIndex.at[c]];
  *out = make(d.code, d.bits);
  return true;
}

DLDataType dtype_from_typestr(const char* typestr) {
  const std::string t = typestr ? typestr : "";
  auto bad = [&]() -> DLDataType {
    fail(ErrorKind::Type, "invalid array-interface typestr '" + t +
                              "': expected <byteorder><kind><bytes> such as '<f4' or '|u1'");
  };
  if (t.size() < 2) return bad();
  const char order = t[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') return bad();
  const char kind = t[1];
  // Before the width, which NumPy omits for objects ('|O') and follows with
  // units for datetimes ('<M8[D]').
  fail_unsupported_kind("array-interface typestr '" + t + "'", kind);
  if (t.size() < 3) return bad();
  // Any run of digits is a well-formed width; one DLPack lacks (wider than
  // complex128's 16 bytes, however many digits) is unsupported data below.
  int64_t nbytes = 0;
  for (size_t i = 2; i < t.size(); ++i) {
    if (t[i] < '0' || t[i] > '9') return bad();
    if (nbytes <= 1000000) nbytes = nbytes * 10 + (t[i] - '0');
  }
  uint8_t code;
  switch (kind) {
    case 'b': code = kDLBool; break;
    case 'i': code = kDLInt; break;
    case 'u': code = kDLUInt; break;
    case 'f': code = kDLFloat; break;
    case 'c': code = kDLComplex; break;
    default: return bad();
  }
  if (nbytes <= 0) return bad();
  const DLDataType dt = make(code, uint8_t(nbytes <= 16 ? nbytes * 8 : 0));
  if (kind == 'f' && nbytes == 1) {
    // ml_dtypes' float8_e5m2 describes itself as '<f1'.  DLPack does carry the
    // 8-bit floats, each under a code of its own (kDLFloat8_e5m2, ...), and a
    // typestr cannot say which one these bytes are.
    fail(ErrorKind::Buffer, "array-interface typestr '" + t +
                                "' names a 1-byte float without saying which: DLPack's 8-bit "
                                "floats (float8_e5m2, float8_e4m3fn, ...) each have a type code "
                                "of their own; wrap the array itself, whose dtype names the type, "
                                "or DLPackArray.from_buffer(obj, 'float8_e5m2', ...); " +
                                supported_dtypes_text());
  }
  if (nbytes > 16 || !dtype_is_supported(dt)) {
    fail(ErrorKind::Buffer,
         "array-interface typestr '" + t + "' names a " +
             (nbytes > 1000000 ? std::string("wider") : std::to_string(nbytes * 8) + "-bit") + " " +
             kind_word(kind) + " type, a width dlpackarray does not exchange; " +
             supported_dtypes_text());
  }
  const bool swapped = (order == '>' && kLittleEndian) || (order == '<' && !kLittleEndian);
  if (swapped && nbytes > 1) {
    fail(ErrorKind::Buffer, "array-interface typestr '" + t + "' has " +
                                (kLittleEndian ? "big-endian" : "little-endian") +
                                " byte order; DLPack data must be in native byte order");
  }
  return dt;
}

std::string typestr_from_dtype(DLDataType dt) {
  if (dt.lanes != 1 || dt.bits % 8 != 0) return {};
  char kind;
  switch (dt.code) {
    case kDLBool: kind = 'b'; break;
    case kDLInt: kind = 'i'; break;
    case kDLUInt: kind = 'u'; break;
    case kDLFloat: kind = 'f'; break;
    case kDLComplex: kind = 'c'; break;
    default: return {};
  }
  if (!dtype_is_supported(dt)) return {};
  const int nbytes = dt.bits / 8;
  const char order = nbytes == 1 ? '|' : (kLittleEndian ? '<' : '>');
  return std::string(1, order) + kind + std::to_string(nbytes);
}

}  // namespace dla
