// Import half of the Arrow bridge: ArrowSchema + ArrowArray -> TensorView.
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "arrow_metadata.hpp"
#include "arrow_schema_memo.hpp"
#include "dlpackarray/arrow_bridge.hpp"
#include "dlpackarray/cuda_exchange.hpp"
#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"
#include "dlpackarray/strided_copy.hpp"

namespace dla {

namespace {

using arrow_meta::printable;

bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// A readable name for formats without a DLPack equivalent.
std::string describe_format(const char* f) {
  struct Known {
    const char* prefix;
    const char* what;
  };
  static constexpr Known kKnown[] = {
      {"+w:", "fixed-size list"},
      {"+l", "list"},
      {"+L", "large list"},
      {"+vl", "list view"},
      {"+vL", "list view"},
      {"+s", "struct"},
      {"+m", "map"},
      {"+ud:", "union"},
      {"+us:", "union"},
      {"+r", "run-end encoded"},
      {"vu", "string view"},
      {"vz", "binary view"},
      {"u", "string"},
      {"U", "large string"},
      {"z", "binary"},
      {"Z", "large binary"},
      {"w:", "fixed-size binary"},
      {"d:", "decimal"},
      {"td", "date"},
      {"tt", "time"},
      {"ts", "timestamp"},
      {"tD", "duration"},
      {"ti", "interval"},
      {"n", "null"},
      {"b", "boolean"},
  };
  for (const auto& k : kKnown) {
    if (starts_with(f, k.prefix)) return "'" + printable(f) + "' (" + k.what + ")";
  }
  return "'" + printable(f) + "'";
}

// How messages name a schema node: "the top-level Arrow field 'x'", "the
// Arrow child field 'item' at nesting level 2".  Only built to fail.
std::string field_label(const ArrowSchema& s, int32_t level) {
  std::string label = level == 0 ? "the top-level Arrow field" : "the Arrow child field";
  if (s.name != nullptr && s.name[0] != '\0') label += " '" + printable(s.name) + "'";
  if (level > 0) label += " at nesting level " + std::to_string(level);
  return label;
}

std::string array_label(int32_t level) {
  return level == 0 ? std::string("the Arrow array")
                    : "the Arrow child array at nesting level " + std::to_string(level);
}

[[noreturn]] void unsupported(const char* format, const char* where) {
  fail(ErrorKind::Type,
       "Arrow type " + describe_format(format) + where +
           " has no DLPack equivalent: dlpackarray imports int8-64, uint8-64, float16/32/64 and "
           "boolean arrays, fixed-size lists of them and arrow.fixed_shape_tensor");
}

// "+w:N" with N a decimal int32 (Arrow list sizes are int32).
int64_t parse_list_size(const char* format) {
  int64_t n = 0;
  const char* p = format + 3;
  if (*p == '\0') fail(ErrorKind::Value, "malformed Arrow format '" + printable(format) + "'");
  for (; *p; ++p) {
    if (*p < '0' || *p > '9' || __builtin_mul_overflow(n, 10, &n) ||
        __builtin_add_overflow(n, *p - '0', &n) || n > INT32_MAX) {
      fail(ErrorKind::Value, "malformed Arrow format '" + printable(format) +
                                 "': a fixed-size list size is a decimal int32");
    }
  }
  return n;
}

// What every schema node must satisfy before its format or children are
// read: alive, a format, UTF-8 strings, a consistent children array.
void check_schema_node(const ArrowSchema& s, int32_t level) {
  if (s.release == nullptr) {
    fail(ErrorKind::Value, "the Arrow schema of " + field_label(s, level) +
                               " has already been released (its release callback is NULL)");
  }
  if (s.format == nullptr) {
    fail(ErrorKind::Value,
         "the Arrow schema of " + field_label(s, level) + " has no format string (NULL)");
  }
  if (!arrow_meta::valid_utf8(s.format)) {
    fail(ErrorKind::Value, "the Arrow format string of " + field_label(s, level) +
                               " is not valid UTF-8: '" + printable(s.format) + "'");
  }
  if (s.name != nullptr && !arrow_meta::valid_utf8(s.name)) {
    fail(ErrorKind::Value, "the name of " + field_label(s, level) + " (format " +
                               describe_format(s.format) + ") is not valid UTF-8");
  }
  if (s.n_children < 0) {
    fail(ErrorKind::Value, field_label(s, level) + " has a negative number of children (" +
                               std::to_string(s.n_children) + ")");
  }
  if (s.n_children > 0 && s.children == nullptr) {
    fail(ErrorKind::Value, field_label(s, level) + " has " + std::to_string(s.n_children) +
                               " children but a NULL children array");
  }
  if (s.dictionary != nullptr) {
    fail(ErrorKind::Type, "dictionary-encoded Arrow arrays (" + field_label(s, level) +
                              ", format " + describe_format(s.format) +
                              " with a dictionary) cannot be imported: decode them first");
  }
}

// A node of a known layout has exactly `n` children, none of them NULL.
void require_children(const ArrowSchema& s, int32_t level, int64_t n) {
  if (s.n_children != n) {
    fail(ErrorKind::Value, field_label(s, level) + " (format " + describe_format(s.format) +
                               ") has " + std::to_string(s.n_children) +
                               " children; its type has " + std::to_string(n));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (s.children[i] == nullptr) {
      fail(ErrorKind::Value,
           "child " + std::to_string(i) + " of " + field_label(s, level) + " is NULL");
    }
  }
}

// Whether `s` names an extension type, and then its name.
bool extension_of(const ArrowSchema& s, std::string_view* ext) {
  return arrow_meta::lookup(s.metadata, arrow_meta::kExtensionName, ext);
}

// The extension of a node where only arrow.bool8 may appear (any node but a
// top level already read as arrow.fixed_shape_tensor), checked against its
// storage.  Returns whether it is arrow.bool8.
bool inner_extension(const ArrowSchema& s, int32_t level, const char* where) {
  std::string_view ext;
  if (!extension_of(s, &ext)) return false;
  if (ext != arrow_meta::kBool8) {
    fail(ErrorKind::Type, "Arrow extension type '" + printable(ext) + "'" + where +
                              " is not supported: dlpackarray reads arrow.fixed_shape_tensor and "
                              "arrow.bool8");
  }
  // Canonical extension: storage int8, as pyarrow requires on import.
  if (std::strcmp(s.format, "c") != 0) {
    fail(ErrorKind::Value, "arrow.bool8 on " + field_label(s, level) + " has storage " +
                               describe_format(s.format) +
                               "; the arrow.bool8 extension type is stored as int8 ('c')");
  }
  return true;
}

// The leaf (innermost) type: a primitive, arrow.bool8 or "b"; no children.
void parse_leaf(const ArrowSchema& s, int32_t level, bool bool8, ArrowTypeInfo* out,
                const char* where) {
  if (bool8) {
    out->dtype = DLDataType{kDLBool, 8, 1};
    out->bool8 = true;
  } else if (std::strcmp(s.format, "b") == 0) {
    out->dtype = DLDataType{kDLBool, 8, 1};
    out->bit_packed = true;
  } else if (!dtype_from_arrow_format(s.format, &out->dtype)) {
    unsupported(s.format, where);
  }
  require_children(s, level, 0);
}

std::string join(const int64_t* v, int32_t n) {
  std::string s;
  for (int32_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(ErrorKind::Overflow, "Arrow array size overflows int64");
  return r;
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(ErrorKind::Overflow, "Arrow array size overflows int64");
  return r;
}

// Dense C-order strides of a shape with n dimensions (zero extents count as
// 1, so a size-0 cell can still have extents whose product overflows).
void set_dense_strides(const int64_t* shape, int32_t n, int64_t* strides) {
  int64_t s = 1;
  for (int32_t i = n; i-- > 0;) {
    strides[i] = s;
    if (i > 0) s = checked_mul(s, shape[i] > 0 ? shape[i] : 1);
  }
}

// Counts the null slots in [start, start + n) of a validity bitmap.
int64_t count_nulls(const void* bitmap, int64_t start, int64_t n) {
  const auto* bits = static_cast<const unsigned char*>(bitmap);
  int64_t nulls = 0;
  for (int64_t i = start; i < start + n; ++i) {
    if (((bits[i >> 3] >> (i & 7)) & 1) == 0) ++nulls;
  }
  return nulls;
}

// check_nulls' count, out of line: most arrays say they have no nulls.
[[gnu::noinline]] void count_and_refuse_nulls(const ArrowArray& a, int64_t first, int64_t n,
                                              DLDevice dev, const char* what) {
  const void* validity = a.buffers[0];  // n_buffers >= 1 checked by check_array_node
  int64_t nulls;
  if (validity == nullptr) {
    if (a.null_count < 0) return;  // unknown count, no bitmap: no nulls
    nulls = a.null_count;
  } else if (!device_is_host_accessible(dev)) {
    // CUDA memory (its sync event already waited on): count in a host copy
    // of the bitmap bytes that cover the window.
    const auto nbytes = int64_t((uint64_t(first & 7) + uint64_t(n) + 7) >> 3);  // no overflow
    std::vector<unsigned char> bytes(static_cast<size_t>(nbytes));
    cuda::copy_bytes_to_host(dev, static_cast<const unsigned char*>(validity) + (first >> 3),
                             nbytes, bytes.data());
    nulls = count_nulls(bytes.data(), first & 7, n);
  } else {
    nulls = count_nulls(validity, first, n);
  }
  if (nulls != 0) {
    fail(ErrorKind::Value,
         "cannot import an Arrow array with nulls: " + std::string(what) + " has " +
             std::to_string(nulls) + " null(s) among " + std::to_string(n) +
             " slot(s), and DLPack has no validity mask (fill the nulls first, e.g. with "
             "pyarrow.compute.fill_null)");
  }
}

inline void check_nulls(const ArrowArray& a, int64_t first, int64_t n, DLDevice dev,
                        const char* what) {
  if (a.null_count != 0 && n != 0) count_and_refuse_nulls(a, first, n, dev, what);
}

// check_array_node's refusal, out of line and cold: the checks, in order,
// each with its message (the first that fails throws).
[[noreturn, gnu::noinline, gnu::cold]] void fail_array_node(const ArrowArray& a, int32_t level,
                                                            int64_t n_buffers, int64_t n_children,
                                                            const char* layout) {
  if (a.release == nullptr) {
    fail(ErrorKind::Value,
         array_label(level) + " has already been released (its release callback is NULL)");
  }
  if (a.length < 0 || a.offset < 0) {
    fail(ErrorKind::Value, array_label(level) + " has a negative length or offset (length " +
                               std::to_string(a.length) + ", offset " + std::to_string(a.offset) +
                               ")");
  }
  int64_t end;
  if (__builtin_add_overflow(a.offset, a.length, &end)) {
    fail(ErrorKind::Value, array_label(level) + " has offset " + std::to_string(a.offset) +
                               " + length " + std::to_string(a.length) + " beyond int64");
  }
  if (a.null_count < -1 || a.null_count > a.length) {
    fail(ErrorKind::Value, array_label(level) + " has null_count " + std::to_string(a.null_count) +
                               "; it must be -1 (unknown) or 0 to its length " +
                               std::to_string(a.length));
  }
  if (a.n_buffers != n_buffers || a.n_children != n_children) {
    fail(ErrorKind::Value, array_label(level) + " has " + std::to_string(a.n_buffers) +
                               " buffer(s) and " + std::to_string(a.n_children) + " child(ren); " +
                               layout);
  }
  if (a.buffers == nullptr) {
    fail(ErrorKind::Value, array_label(level) + " has a NULL buffers array");
  }
  if (n_children > 0 && a.children == nullptr) {
    fail(ErrorKind::Value, array_label(level) + " has a NULL children array");
  }
  for (int64_t i = 0; i < n_children; ++i) {
    if (a.children[i] == nullptr) {
      fail(ErrorKind::Value,
           "child " + std::to_string(i) + " of " + array_label(level) + " is NULL");
    }
  }
  if (a.dictionary != nullptr) {
    fail(ErrorKind::Value,
         array_label(level) + " has a dictionary, but its schema is not dictionary-encoded");
  }
  fail(ErrorKind::Value, array_label(level) + " failed a layout check");  // not reached
}

// What every array node must satisfy before anything reads through it: alive,
// lengths and offsets in range (offset + length fits int64, null_count is -1
// or 0..length), buffer and child counts of its type's layout, no NULL
// pointer where one is dereferenced, no dictionary (its schema has none).
// The checks without their messages, inlined into every bind (the first
// that fails is named by fail_array_node).
inline void check_array_node(const ArrowArray& a, int32_t level, int64_t n_buffers,
                             int64_t n_children, const char* layout) {
  int64_t end;
  bool bad = a.release == nullptr || a.length < 0 || a.offset < 0 ||
             __builtin_add_overflow(a.offset, a.length, &end) || a.null_count < -1 ||
             a.null_count > a.length || a.n_buffers != n_buffers || a.n_children != n_children ||
             a.buffers == nullptr || (n_children > 0 && a.children == nullptr) ||
             a.dictionary != nullptr;
  for (int64_t i = 0; !bad && i < n_children; ++i) bad = a.children[i] == nullptr;
  if (bad) fail_array_node(a, level, n_buffers, n_children, layout);
}

}  // namespace

std::string arrow_describe(const ArrowTypeInfo& t) {
  const std::string leaf = t.bool8 ? "arrow.bool8" : t.bit_packed ? "bool" : dtype_name(t.dtype);
  if (t.tensor) {
    return "arrow.fixed_shape_tensor<" + leaf + ">[" + join(t.tensor_shape, t.cell_ndim) + "]";
  }
  return t.n_sizes == 0 ? leaf : leaf + "[" + join(t.sizes, t.n_sizes) + "]";
}

namespace {

// arrow.fixed_shape_tensor: a fixed-size list of K = prod(shape) values.
void parse_tensor(const ArrowSchema& s, ArrowTypeInfo* out) {
  if (!starts_with(s.format, "+w:")) {
    fail(ErrorKind::Value,
         "arrow.fixed_shape_tensor storage must be a fixed-size list, got format " +
             describe_format(s.format));
  }
  require_children(s, 0, 1);
  const int64_t k = parse_list_size(s.format);
  std::string_view json;
  arrow_meta::lookup(s.metadata, arrow_meta::kExtensionMetadata, &json);
  arrow_meta::TensorParams params;
  arrow_meta::parse_tensor_json(json, &params);
  int64_t product = 1;
  for (int32_t i = 0; i < params.ndim; ++i) product = checked_mul(product, params.shape[i]);
  if (product != k) {
    fail(ErrorKind::Value, "arrow.fixed_shape_tensor shape [" + join(params.shape, params.ndim) +
                               "] holds " + std::to_string(product) +
                               " elements but its storage lists hold " + std::to_string(k));
  }
  const ArrowSchema& child = *s.children[0];
  check_schema_node(child, 1);
  const char* where = " inside arrow.fixed_shape_tensor";
  parse_leaf(child, 1, inner_extension(child, 1, where), out, where);
  out->tensor = true;
  out->n_sizes = 1;
  out->sizes[0] = k;
  out->cell_ndim = params.ndim;
  // Cells are stored C-ordered in the physical shape; logical dimension i
  // is physical dimension perm[i].
  int64_t phys_strides[arrow_meta::TensorParams::kMaxCellNdim];
  set_dense_strides(params.shape, params.ndim, phys_strides);
  for (int32_t i = 0; i < params.ndim; ++i) {
    const int64_t p = params.permutation[i];
    out->tensor_shape[i] = params.shape[i];
    out->cell[i] = params.shape[p];
    out->cell_strides[i] = phys_strides[p];
  }
}

}  // namespace

bool arrow_parse_plain_column(const ArrowSchema& s, ArrowTypeInfo* out) {
  // Of check_schema_node's checks, a one-character format is valid UTF-8 and
  // an empty or missing name has nothing to check; no metadata means no
  // extension; no children means no list to walk.  Anything else (a name,
  // "z", "u", a released node) takes the whole parse, with its errors.
  if (s.n_children != 0 || s.metadata != nullptr || s.dictionary != nullptr ||
      s.release == nullptr || s.format == nullptr || s.format[0] == '\0' || s.format[1] != '\0' ||
      (s.name != nullptr && s.name[0] != '\0')) {
    return false;
  }
  const bool bit_packed = s.format[0] == 'b';
  DLDataType dtype{kDLBool, 8, 1};
  if (!bit_packed && !dtype_from_arrow_format(s.format, &dtype)) return false;
  out->dtype = dtype;
  out->bit_packed = bit_packed;
  out->bool8 = out->tensor = false;
  out->n_sizes = out->cell_ndim = 0;
  return true;
}

void arrow_parse_schema_uncached(const ArrowSchema& s, ArrowTypeInfo* out) {
  out->dtype = DLDataType{kDLUInt, 8, 1};
  out->bit_packed = out->bool8 = out->tensor = false;
  out->n_sizes = out->cell_ndim = 0;
  check_schema_node(s, 0);
  std::string_view ext;
  if (extension_of(s, &ext)) {
    if (ext == arrow_meta::kFixedShapeTensor) {
      parse_tensor(s, out);
      return;
    }
    if (ext != arrow_meta::kBool8) {
      fail(ErrorKind::Type, "Arrow extension type '" + printable(ext) + "' (storage " +
                                describe_format(s.format) +
                                ") is not supported: dlpackarray reads arrow.fixed_shape_tensor "
                                "and arrow.bool8");
    }
  }
  // Walk the chain of fixed-size lists down to the leaf; every node is
  // checked before its format or children are read.
  const ArrowSchema* node = &s;
  int32_t level = 0;
  const char* where = "";
  bool bool8 = inner_extension(*node, 0, where);
  while (!bool8 && starts_with(node->format, "+w:")) {
    require_children(*node, level, 1);
    if (out->n_sizes + 2 > kMaxNdim) {
      fail(ErrorKind::Value, "Arrow fixed-size lists nest deeper than the " +
                                 std::to_string(kMaxNdim) + " dimensions supported");
    }
    out->sizes[out->n_sizes++] = parse_list_size(node->format);
    node = node->children[0];
    ++level;
    where = " inside fixed-size lists";
    check_schema_node(*node, level);
    bool8 = inner_extension(*node, level, " inside a fixed-size list");
  }
  parse_leaf(*node, level, bool8, out, where);
  out->cell_ndim = out->n_sizes;
  for (int32_t i = 0; i < out->n_sizes; ++i) out->cell[i] = out->sizes[i];
  set_dense_strides(out->cell, out->cell_ndim, out->cell_strides);
}

void arrow_bind_array(const ArrowTypeInfo& t, const ArrowArray& a, DLDevice dev,
                      ArrowBinding* out) {
  out->bit_packed = t.bit_packed;
  arrow_bind_view(t, a, dev, &out->view, &out->bit_offset);
}

void arrow_bind_view(const ArrowTypeInfo& t, const ArrowArray& a, DLDevice dev, TensorView* view,
                     int64_t* bit_offset) {
  static constexpr const char* kListLayout =
      "a fixed-size list array has 1 buffer (validity) and 1 child";
  static constexpr const char* kLeafLayout =
      "a primitive or boolean array has 2 buffers (validity, values) and no children";
  const ArrowArray* node = &a;
  int32_t level = 0;
  // The window of slots used at this level: [node->offset + first, ... + n).
  // check_array_node bounds offset + length, and each child must hold its
  // parent's window, so no sum below can overflow.
  int64_t first = 0;
  int64_t n = a.length;
  int64_t row_elems = 1;
  for (; level < t.n_sizes; ++level) {
    check_array_node(*node, level, 1, 1, kListLayout);
    check_nulls(*node, node->offset + first, n, dev,
                level == 0 ? "the array" : "a nested list level");
    const ArrowArray* child = node->children[0];
    check_array_node(*child, level + 1, level + 1 < t.n_sizes ? 1 : 2,
                     level + 1 < t.n_sizes ? 1 : 0,
                     level + 1 < t.n_sizes ? kListLayout : kLeafLayout);
    const int64_t size = t.sizes[level];
    // Parent slot j covers child slots [j * size, (j + 1) * size).
    first = checked_mul(node->offset + first, size);
    n = checked_mul(n, size);
    row_elems = checked_mul(row_elems, size);
    const int64_t needed = checked_add(first, n);
    if (child->length < needed) {
      fail(ErrorKind::Value, array_label(level + 1) + " has " + std::to_string(child->length) +
                                 " slots but its parent needs " + std::to_string(needed));
    }
    node = child;
  }
  if (level == 0) check_array_node(*node, 0, 2, 0, kLeafLayout);
  const int64_t start = node->offset + first;
  check_nulls(*node, start, n, dev, t.n_sizes == 0 ? "the array" : "the values");
  const void* values = node->buffers[1];
  if (values == nullptr && n > 0) {
    fail(ErrorKind::Value,
         "the Arrow array has " + std::to_string(n) + " values but a NULL data buffer");
  }

  TensorView& v = *view;
  v.set_ndim(1 + t.cell_ndim);
  v.shape[0] = a.length;
  v.strides[0] = row_elems;
  for (int32_t i = 0; i < t.cell_ndim; ++i) {
    v.shape[i + 1] = t.cell[i];
    v.strides[i + 1] = t.cell_strides[i];
  }
  v.dtype = t.dtype;
  v.device = dev;
  v.readonly = true;  // Arrow data is immutable once exported
  v.ready_stream = nullptr;
  v.byte_offset = 0;
  if (t.bit_packed) {
    v.data = const_cast<void*>(values);
    *bit_offset = start;
    return;
  }
  const int64_t itemsize = dtype_itemsize(t.dtype);
  v.data = values == nullptr
               ? nullptr
               : const_cast<char*>(static_cast<const char*>(values)) + checked_mul(start, itemsize);
  validate(v);
}

void arrow_materialize(const ArrowBinding& b, void* dst) {
  if (!b.bit_packed) {
    strided_copy_to_contiguous(b.view, dst);
    return;
  }
  const int64_t n = view_size(b.view);
  const auto* bits = static_cast<const unsigned char*>(b.view.data);
  std::vector<unsigned char> unpacked;
  const bool direct = is_c_contiguous(b.view);
  unsigned char* out = direct ? static_cast<unsigned char*>(dst) : nullptr;
  if (!direct) {
    unpacked.resize(size_t(n));
    out = unpacked.data();
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = b.bit_offset + i;
    out[i] = (bits[j >> 3] >> (j & 7)) & 1;
  }
  if (!direct) {
    TensorView physical = b.view;
    physical.data = unpacked.data();
    physical.byte_offset = 0;
    strided_copy_to_contiguous(physical, dst);
  }
}

int64_t arrow_concat_layout(const ArrowTypeInfo& t, const std::vector<ArrowBinding>& chunks,
                            DLDevice dev, TensorView* out) {
  int64_t rows = 0;
  for (const ArrowBinding& b : chunks) rows = checked_add(rows, b.view.shape[0]);
  out->set_ndim(1 + t.cell_ndim);
  out->shape[0] = rows;
  for (int32_t i = 0; i < t.cell_ndim; ++i) out->shape[i + 1] = t.cell[i];
  set_c_strides(*out);
  out->dtype = t.dtype;
  out->device = dev;
  out->data = nullptr;
  out->byte_offset = 0;
  out->readonly = false;
  out->ready_stream = nullptr;
  int64_t n = 1;
  for (int32_t i = 0; i < out->ndim; ++i) n = checked_mul(n, out->shape[i]);
  return checked_mul(n, dtype_itemsize(t.dtype));
}

void arrow_concat(const std::vector<ArrowBinding>& chunks, void* dst) {
  auto* p = static_cast<char*>(dst);
  for (const ArrowBinding& b : chunks) {
    const int64_t n = view_size(b.view);
    if (n == 0) continue;
    arrow_materialize(b, p);
    p += n * dtype_itemsize(b.view.dtype);
  }
}

}  // namespace dla
