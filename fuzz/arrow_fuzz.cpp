// libFuzzer harness over the Arrow import of the C++ core: arrow_parse_schema
// (its plain-column path and its memo against the uncached parse),
// arrow_bind_array,
// arrow_materialize and arrow_concat on ArrowSchema and ArrowArray trees
// built from the fuzz input; and over the export's requested_schema path,
// arrow_apply_request, on the same schema trees (a consumer's request is as
// hostile as an imported schema).  Formats come from a small
// dictionary or raw bytes (any byte, UTF-8 or not), NULL sometimes; names
// likewise; metadata is an extension (arrow.bool8, arrow.fixed_shape_tensor
// with fuzzed JSON, unknown names) or fuzzed pairs, negative counts too;
// counts (n_children, n_buffers), lengths, offsets and null counts are small
// or extreme; any pointer may be NULL (children arrays, child entries,
// buffers arrays, buffers, dictionaries, release callbacks); the schema and
// array chains are nested up to 5 levels and need not agree.
//
// Built with clang -fsanitize=fuzzer,address,undefined (fuzz/build.sh), so
// any out-of-bounds access, NULL dereference or signed overflow is a crash.
// Oracles beyond the sanitizers:
//  * buffers are heap blocks of exactly the size the node's offset + length
//    imply (at 8 bytes per value, 1 bit per validity slot), so an importer
//    that reads outside the window its struct describes touches a byte ASan
//    flags; when that size is too large to allocate, the node gets a small
//    block and no bitmap, and accepted views are not read;
//  * an accepted (non bit-packed) view must lie inside its values block;
//  * every error message must be valid UTF-8 (Python builds exceptions from
//    them), and so must every string arrow_meta::printable returns;
//  * a request is validated by the import's parse: where the parse refuses a
//    malformed schema, the request raises the same kind with the same
//    message after its prefix; where the parse names a type it does not
//    read (TypeError), the request is best effort (or a struct, refused);
//    an accepted request plans an export whose schema the import reads back.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "../cpp/src/arrow_metadata.hpp"
#include "../cpp/src/arrow_schema_memo.hpp"
#include "dlpackarray/arrow_abi.hpp"
#include "dlpackarray/arrow_bridge.hpp"
#include "dlpackarray/errors.hpp"
#include "dlpackarray/strided_copy.hpp"
#include "dlpackarray/tensor_view.hpp"

namespace arrow_meta = dla::arrow_meta;

namespace {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  template <typename T>
  T take() {
    T value{};
    size_t k = n_ < sizeof(T) ? n_ : sizeof(T);
    std::memcpy(&value, p_, k);
    p_ += k;
    n_ -= k;
    return value;
  }
  bool bit() { return take<uint8_t>() & 1; }
  // Mostly small, sometimes near the int64 limits.
  int64_t count() {
    const uint8_t sel = take<uint8_t>();
    if (sel < 160) return sel % 7;
    if (sel < 200) return static_cast<int64_t>(sel % 5) - 2;
    if (sel < 230) return take<uint8_t>();
    static constexpr int64_t kEdges[] = {
        INT64_MAX,         INT64_MIN,        INT64_MAX - 1,       INT64_MAX / 2,
        INT64_MAX / 8 + 1, int64_t(1) << 62, INT32_MAX,           int64_t(INT32_MAX) + 1,
        INT64_MIN + 1,     INT64_MIN / 2,    -(int64_t(1) << 62), int64_t(1) << 32};
    if (sel < 245) return kEdges[take<uint8_t>() % (sizeof(kEdges) / sizeof(kEdges[0]))];
    return take<int64_t>();
  }
  std::string bytes(size_t max) {
    size_t k = take<uint8_t>() % (max + 1);
    if (k > n_) k = n_;
    std::string s(reinterpret_cast<const char*>(p_), k);
    p_ += k;
    n_ -= k;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

constexpr int64_t kMaxBlock = 1 << 16;  // bytes of one honest buffer
constexpr int kMaxDepth = 5;

// Everything one input allocates; freed when the input is done.
struct Arena {
  std::deque<std::string> strings;
  std::deque<std::vector<uint8_t>> blocks;
  std::deque<ArrowSchema> schemas;
  std::deque<ArrowArray> arrays;
  std::deque<std::vector<ArrowSchema*>> schema_lists;
  std::deque<std::vector<ArrowArray*>> array_lists;
  std::deque<std::vector<const void*>> buffer_lists;
  bool honest = true;  // every buffer has the size its node implies

  const char* text(std::string s) {
    strings.push_back(std::move(s));
    return strings.back().c_str();
  }
  uint8_t* block(size_t n, uint8_t fill) {
    blocks.emplace_back(n, fill);
    return blocks.back().data();
  }
};

void release_schema(ArrowSchema* s) { s->release = nullptr; }
void release_array(ArrowArray* a) { a->release = nullptr; }

const char* const kFormats[] = {
    "f",
    "c",
    "C",
    "s",
    "S",
    "i",
    "I",
    "l",
    "L",
    "e",
    "g",
    "b",
    "n",
    "u",
    "z",
    "+s",
    "+l",
    "+L",
    "+w:1",
    "+w:2",
    "+w:3",
    "+w:0",
    "+w:",
    "+w:-1",
    "+w:a",
    "w:4",
    "d:10,2",
    "tdD",
    "",
    "+w:2147483647",
    "+w:2147483648",
    "+w:99999999999999999999",
    "+m",
    "+ud:0",
};

std::string format(Reader& r, bool list) {
  const uint8_t sel = r.take<uint8_t>();
  if (sel < 40 && list) return "+w:" + std::to_string(r.take<uint8_t>() % 5);
  if (sel < 200) return kFormats[r.take<uint8_t>() % (sizeof kFormats / sizeof *kFormats)];
  return r.bytes(12);  // raw bytes: invalid UTF-8, control characters, anything but NUL
}

std::string tensor_json(Reader& r) {
  static const char* const kJson[] = {
      "{\"shape\":[2,3]}",
      "{\"shape\":[3,2],\"permutation\":[1,0]}",
      "{\"shape\":[1]}",
      "{\"shape\":[]}",
      "{\"shape\":[0,9223372036854775807,9223372036854775807]}",
      "{\"shape\":[4294967296,4294967296]}",
      "{\"shape\":[2,2],\"permutation\":[0,0]}",
      "{\"shape\":[-1]}",
      "{\"dim_names\":[\"a\",\"\\\"\"],\"shape\":[6]}",
  };
  const uint8_t sel = r.take<uint8_t>();
  if (sel < 200) return kJson[sel % (sizeof kJson / sizeof *kJson)];
  return r.bytes(40);
}

// Metadata blob: consistent lengths (a lying length cannot be detected by
// any consumer: the blob has no size), fuzzed content.
const char* metadata(Arena& A, Reader& r) {
  const uint8_t sel = r.take<uint8_t>() % 8;
  arrow_meta::KeyValues kv;
  switch (sel) {
    case 0:
    case 1:
    case 2: return nullptr;
    case 3: kv = {{arrow_meta::kExtensionName, arrow_meta::kBool8}}; break;
    case 4:
      kv = {{arrow_meta::kExtensionName, arrow_meta::kFixedShapeTensor},
            {arrow_meta::kExtensionMetadata, tensor_json(r)}};
      break;
    case 5: kv = {{arrow_meta::kExtensionName, r.bytes(16)}}; break;
    case 6: kv = {{r.bytes(24), r.bytes(24)}, {r.bytes(24), r.bytes(24)}}; break;
    default: {
      // Negative count or lengths: refused before anything past them is read.
      std::string blob(12, '\0');
      int32_t v[3] = {r.bit() ? -1 : 1, r.bit() ? -5 : 0, -int32_t(r.take<uint8_t>() % 3)};
      std::memcpy(&blob[0], v, sizeof v);
      A.strings.push_back(blob);
      return A.strings.back().data();
    }
  }
  A.strings.push_back(arrow_meta::encode(kv));
  return A.strings.back().data();
}

ArrowSchema* schema(Arena& A, Reader& r, int depth, int levels) {
  A.schemas.emplace_back();
  ArrowSchema* s = &A.schemas.back();
  std::memset(s, 0, sizeof *s);
  const bool list = depth + 1 < levels;
  const uint8_t which = r.take<uint8_t>();
  s->format = (which & 1) && r.take<uint8_t>() < 8 ? nullptr : A.text(format(r, list));
  const uint8_t name = r.take<uint8_t>() % 4;
  // NULL and "" (pyarrow's arrays) take the plain-column path where it applies.
  s->name = name == 0   ? nullptr
            : name == 1 ? A.text("")
            : name == 3 ? A.text(r.bytes(8))
                        : A.text("x");
  s->metadata = metadata(A, r);
  s->flags = 2;
  std::vector<ArrowSchema*> kids;
  if (list) kids.push_back(schema(A, r, depth + 1, levels));
  if ((which & 2) && !kids.empty() && r.take<uint8_t>() < 32) kids[0] = nullptr;
  s->n_children = static_cast<int64_t>(kids.size());
  if (which & 4) s->n_children = r.count();
  // Room for small lies about the count, so that trusting one reads NULLs.
  const int64_t room = s->n_children > 0 && s->n_children <= 8 ? s->n_children : 0;
  if (int64_t(kids.size()) < room) kids.resize(size_t(room), nullptr);
  if (!kids.empty() && !((which & 8) && r.take<uint8_t>() < 24)) {
    A.schema_lists.push_back(kids);
    s->children = A.schema_lists.back().data();
  }
  if ((which & 16) && r.take<uint8_t>() < 16) {
    A.schemas.emplace_back();
    ArrowSchema* d = &A.schemas.back();
    std::memset(d, 0, sizeof *d);
    d->format = "i";
    d->release = release_schema;
    s->dictionary = d;
  }
  s->release = (which & 32) && r.take<uint8_t>() < 8 ? nullptr : release_schema;
  return s;
}

// A buffer of exactly `bytes` bytes (pattern `fill`), or, when that is too
// large, a small block and the input is marked dishonest.
const void* buffer(Arena& A, int64_t bytes, uint8_t fill) {
  if (bytes < 0 || bytes > kMaxBlock) {
    A.honest = false;
    return A.block(16, fill);
  }
  return A.block(static_cast<size_t>(bytes), fill);
}

ArrowArray* array(Arena& A, Reader& r, int depth, int levels, int64_t rows) {
  A.arrays.emplace_back();
  ArrowArray* a = &A.arrays.back();
  std::memset(a, 0, sizeof *a);
  const bool list = depth + 1 < levels;
  const uint8_t which = r.take<uint8_t>();
  a->length = (which & 1) ? r.count() : rows;
  a->offset = (which & 2) ? r.count() : 0;
  a->null_count = (which & 4) ? r.count() : 0;
  int64_t end = 0;  // slots the node's buffers cover
  const bool sane = a->length >= 0 && a->offset >= 0 &&
                    !__builtin_add_overflow(a->length, a->offset, &end) && end <= kMaxBlock;
  std::vector<const void*> bufs;
  // Validity: none, all valid, or a pattern with nulls; never a bitmap that
  // is smaller than the window (dishonest nodes get none).
  const uint8_t v = r.take<uint8_t>() % 3;
  if (v == 0 || !sane) {
    bufs.push_back(nullptr);
    if (!sane) A.honest = false;
  } else {
    bufs.push_back(buffer(A, (end + 7) / 8, v == 1 ? 0xFF : r.take<uint8_t>()));
  }
  std::vector<ArrowArray*> kids;
  if (list) {
    const int64_t size = r.take<uint8_t>() % 5;
    int64_t child_rows = 0;
    if (!sane || __builtin_mul_overflow(end, size, &child_rows)) child_rows = 0;
    kids.push_back(array(A, r, depth + 1, levels, child_rows));
  } else {
    // Values: 8 bytes a slot covers every primitive type; bits for "b".
    bufs.push_back(sane ? buffer(A, end * 8, r.take<uint8_t>()) : buffer(A, -1, 0));
    if ((which & 8) && r.take<uint8_t>() < 32) bufs[1] = nullptr;
  }
  if ((which & 16) && !kids.empty() && r.take<uint8_t>() < 32) kids[0] = nullptr;
  a->n_buffers = static_cast<int64_t>(bufs.size());
  a->n_children = static_cast<int64_t>(kids.size());
  const uint8_t lie = r.take<uint8_t>();
  if (lie & 1) a->n_buffers = r.count();
  if (lie & 2) a->n_children = r.count();
  const int64_t broom = a->n_buffers > 0 && a->n_buffers <= 8 ? a->n_buffers : 0;
  if (int64_t(bufs.size()) < broom) bufs.resize(size_t(broom), nullptr);
  const int64_t kroom = a->n_children > 0 && a->n_children <= 8 ? a->n_children : 0;
  if (int64_t(kids.size()) < kroom) kids.resize(size_t(kroom), nullptr);
  if (!((lie & 4) && r.take<uint8_t>() < 24)) {
    A.buffer_lists.push_back(bufs);
    a->buffers = A.buffer_lists.back().data();
  }
  if (!kids.empty() && !((lie & 8) && r.take<uint8_t>() < 24)) {
    A.array_lists.push_back(kids);
    a->children = A.array_lists.back().data();
  }
  if ((lie & 16) && r.take<uint8_t>() < 16) {
    A.arrays.emplace_back();
    ArrowArray* d = &A.arrays.back();
    std::memset(d, 0, sizeof *d);
    d->release = release_array;
    a->dictionary = d;
  }
  a->release = (lie & 32) && r.take<uint8_t>() < 8 ? nullptr : release_array;
  return a;
}

void check_message(const dla::Error& e) {
  if (!arrow_meta::valid_utf8(e.what())) __builtin_trap();  // Python could not raise it
}

// The outcome of one parse: the type as arrow_describe names it plus every
// field the bind reads, or the error's kind and message.
std::string parse_outcome(const ArrowSchema& s, bool memo, dla::ArrowTypeInfo* info) {
  try {
    if (memo) {
      dla::arrow_parse_schema(s, info);
    } else {
      dla::arrow_parse_schema_uncached(s, info);
    }
  } catch (const dla::Error& e) {
    check_message(e);
    return "error " + std::to_string(int(e.kind())) + " " + e.what();
  }
  std::string out = dla::arrow_describe(*info) + " " + std::to_string(info->dtype.code) + "/" +
                    std::to_string(info->dtype.bits) + " " + std::to_string(info->bit_packed) +
                    std::to_string(info->bool8) + std::to_string(info->tensor) + " " +
                    std::to_string(info->n_sizes) + " " + std::to_string(info->cell_ndim);
  for (int32_t i = 0; i < info->n_sizes; ++i) out += " s" + std::to_string(info->sizes[i]);
  for (int32_t i = 0; i < info->cell_ndim; ++i) {
    out += " c" + std::to_string(info->cell[i]) + ":" + std::to_string(info->cell_strides[i]);
  }
  return out;
}

void import(Arena& A, const ArrowSchema& s, const ArrowArray& a) {
  dla::ArrowTypeInfo info;
  // The plain-column path and the memo (cpp/src/arrow_schema_memo.cpp) never
  // change an outcome: the uncached parse, a first call (a memo hit when the
  // previous input left an equal fingerprint) and a second one (a hit after
  // any success) agree.
  dla::ArrowTypeInfo plain, again;
  const std::string expected = parse_outcome(s, false, &plain);
  if (parse_outcome(s, true, &info) != expected || parse_outcome(s, true, &again) != expected) {
    __builtin_trap();
  }
  if (expected.compare(0, 6, "error ") == 0) return;
  std::vector<dla::ArrowBinding> chunks(1);
  const dla::DLDevice cpu{dla::kDLCPU, 0};
  try {
    dla::arrow_bind_array(info, a, cpu, &chunks[0]);
  } catch (const dla::Error& e) {
    check_message(e);
    return;
  }
  if (!A.honest) return;  // buffers smaller than the struct says: not read
  const dla::ArrowBinding& b = chunks[0];
  int64_t nbytes;
  try {
    nbytes = dla::view_nbytes(b.view);
  } catch (const dla::Error& e) {
    check_message(e);
    return;
  }
  if (nbytes > (int64_t(1) << 22)) return;
  // The importer read only the bytes its struct describes: copy them all
  // (ASan flags anything outside the exact-size blocks).
  std::vector<uint8_t> dst(static_cast<size_t>(nbytes) + 1);
  dla::arrow_materialize(b, dst.data());
  chunks.push_back(b);
  dla::TensorView whole;
  try {
    const int64_t total = dla::arrow_concat_layout(info, chunks, cpu, &whole);
    if (total <= (int64_t(1) << 23)) {
      std::vector<uint8_t> out(static_cast<size_t>(total) + 1);
      dla::arrow_concat(chunks, out.data());
    }
  } catch (const dla::Error& e) {
    check_message(e);
  }
}

// The export's view of the request path: `ndim` dimensions of 2 (0-D too),
// float32 or bool, C-ordered or with its last two dimensions swapped.
void request(Reader& r, const ArrowSchema& s) {
  dla::TensorView v;
  const int32_t ndim = r.take<uint8_t>() % 5;
  v.set_ndim(ndim);
  for (int32_t i = ndim, step = 1; i-- > 0; step *= 2) {
    v.shape[i] = 2;
    v.strides[i] = step;
  }
  if (ndim >= 3 && r.bit()) std::swap(v.strides[ndim - 1], v.strides[ndim - 2]);
  v.dtype = r.bit() ? dla::DLDataType{dla::kDLBool, 8, 1} : dla::DLDataType{dla::kDLFloat, 32, 1};
  v.device = dla::DLDevice{dla::kDLCPU, 0};
  v.data = nullptr;
  v.byte_offset = 0;
  v.readonly = false;
  v.ready_stream = nullptr;
  dla::ArrowTypeInfo info;
  const std::string parsed = parse_outcome(s, false, &info);
  const std::string type_tag = "error " + std::to_string(int(dla::ErrorKind::Type)) + " ";
  const bool type_error = parsed.compare(0, type_tag.size(), type_tag) == 0;
  dla::ArrowExportOptions opts;
  opts.copy = int32_t(r.take<uint8_t>() % 3) - 1;
  opts.schema_only = true;
  try {
    dla::arrow_apply_request(s, v, &opts);
  } catch (const dla::Error& e) {
    check_message(e);
    const std::string what = e.what();
    if (parsed.compare(0, 6, "error ") == 0 && !type_error) {
      // "error <kind> <message>": the same kind, the parse's message.
      const std::string prefix = "requested_schema is not a valid ArrowSchema (";
      const size_t colon = what.find("): ");
      if (what.compare(0, prefix.size(), prefix) != 0 || colon == std::string::npos ||
          parsed != "error " + std::to_string(int(e.kind())) + " " + what.substr(colon + 3)) {
        __builtin_trap();
      }
      return;
    }
    // A schema the parse accepts or names as a type it does not read is
    // refused only as a struct or as lists of another depth.
    if (what.rfind("the requested schema is a struct", 0) != 0 &&
        what.rfind("the requested schema nests", 0) != 0) {
      __builtin_trap();
    }
    return;
  }
  if (parsed.compare(0, 6, "error ") == 0 && !type_error) __builtin_trap();
  // The export it plans: its schema is one the import reads.
  dla::ArrowExport* ex = nullptr;
  try {
    ex = dla::arrow_export_new(v, opts);
  } catch (const dla::Error& e) {
    check_message(e);  // copy=False against a layout that needs a copy
    return;
  }
  ArrowSchema out;
  dla::arrow_export_schema(ex, &out);
  dla::ArrowTypeInfo back;
  if (parse_outcome(out, false, &back).compare(0, 6, "error ") == 0) __builtin_trap();
  out.release(&out);
  dla::arrow_export_unref(ex);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r(data, size);
  const uint8_t mode = r.take<uint8_t>();
  if (mode >= 240) {
    // Producer text: printable() always yields valid UTF-8.
    const std::string text = r.bytes(64);
    (void)arrow_meta::valid_utf8(text);
    if (!arrow_meta::valid_utf8(arrow_meta::printable(text, r.take<uint8_t>() % 80))) {
      __builtin_trap();
    }
    arrow_meta::TensorParams params;
    try {
      arrow_meta::parse_tensor_json(text, &params);
    } catch (const dla::Error& e) {
      check_message(e);
    }
    return 0;
  }
  Arena A;
  const int schema_levels = 1 + r.take<uint8_t>() % kMaxDepth;
  const int array_levels = (mode & 1) ? 1 + r.take<uint8_t>() % kMaxDepth : schema_levels;
  ArrowSchema* s = schema(A, r, 0, schema_levels);
  ArrowArray* a = array(A, r, 0, array_levels, r.take<uint8_t>() % 9);
  import(A, *s, *a);
  request(r, *s);
  return 0;
}
