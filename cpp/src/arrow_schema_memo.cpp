// arrow_parse_schema with a per-thread memo of its last success.  Producers
// export a fresh ArrowSchema for every array of a type (pyarrow encodes the
// fixed_shape_tensor metadata anew each time), and the parse -- UTF-8
// checks of every string, metadata lookups, the extension's JSON -- was
// most of what an import of a tensor column cost beyond the producer's own
// export.  The parse is a pure function of the bytes the fingerprint holds,
// so a schema whose fingerprint equals the last success's gets that
// success's type: compared by content, never by address (a producer may
// reuse one struct for different types).  A refusal is never remembered, so
// it is raised, with its message, every time.
#include "arrow_schema_memo.hpp"

#include <cstdint>
#include <cstring>

#include "arrow_metadata.hpp"

namespace dla {
namespace arrow_schema_memo {

namespace {

class KeyWriter {
 public:
  explicit KeyWriter(char* key) : p_(key), begin_(key), end_(key + kKeyCapacity) {}

  // The string with its terminator (formats and names hold no NUL, so the
  // terminator delimits).
  bool put_string(const char* s) {
    while (p_ < end_) {
      if ((*p_++ = *s++) == '\0') return true;
    }
    return false;
  }
  bool put_bytes(const void* data, size_t n) {
    if (n > size_t(end_ - p_)) return false;
    std::memcpy(p_, data, n);
    p_ += n;
    return true;
  }
  bool put_byte(char c) { return put_bytes(&c, 1); }
  bool put_int64(int64_t v) { return put_bytes(&v, sizeof v); }
  size_t size() const { return size_t(p_ - begin_); }

 private:
  char* p_;
  char* begin_;
  char* end_;
};

bool put_node(const ArrowSchema& s, KeyWriter* w) {
  if (s.release == nullptr || s.format == nullptr || s.dictionary != nullptr) return false;
  if (!w->put_string(s.format)) return false;
  // NULL and "" are different names: 0 for none, 1 before a name.
  if (s.name == nullptr ? !w->put_byte(0) : !(w->put_byte(1) && w->put_string(s.name))) {
    return false;
  }
  if (s.metadata == nullptr) return w->put_int64(-1);
  const int64_t size = arrow_meta::blob_size(s.metadata, int64_t(kKeyCapacity));
  return size >= 0 && w->put_int64(size) && w->put_bytes(s.metadata, size_t(size));
}

}  // namespace

size_t fingerprint(const ArrowSchema& s, char* key) {
  KeyWriter w(key);
  const ArrowSchema* node = &s;
  // kMaxNdim + 1 nodes at most: deeper chains are refused by the parse.
  for (int32_t depth = 0; depth <= kMaxNdim; ++depth) {
    if (!put_node(*node, &w) || !w.put_int64(node->n_children)) return 0;
    if (node->n_children == 0) return w.size();
    if (node->n_children != 1 || node->children == nullptr || node->children[0] == nullptr) {
      return 0;
    }
    node = node->children[0];
  }
  return 0;
}

}  // namespace arrow_schema_memo

namespace {

// Plain data, zero-initialised: no guard on each thread_local access.  The
// parsed type is kept field by field (ArrowTypeInfo has initialisers).
struct Memo {
  size_t key_size;  // 0: nothing remembered yet
  char key[arrow_schema_memo::kKeyCapacity];
  DLDataType dtype;
  bool bit_packed, bool8, tensor;
  int32_t n_sizes, cell_ndim;
  int64_t sizes[kMaxNdim], cell[kMaxNdim], cell_strides[kMaxNdim], tensor_shape[kMaxNdim];
};

thread_local Memo t_memo;

// Copies the fields a parse sets (only the used entries of the arrays).
template <class From, class To>
void copy_type(const From& from, To* to) {
  to->dtype = from.dtype;
  to->bit_packed = from.bit_packed;
  to->bool8 = from.bool8;
  to->tensor = from.tensor;
  to->n_sizes = from.n_sizes;
  to->cell_ndim = from.cell_ndim;
  for (int32_t i = 0; i < from.n_sizes; ++i) to->sizes[i] = from.sizes[i];
  for (int32_t i = 0; i < from.cell_ndim; ++i) {
    to->cell[i] = from.cell[i];
    to->cell_strides[i] = from.cell_strides[i];
  }
  if (!from.tensor) return;  // tensor_shape is set for tensors only
  for (int32_t i = 0; i < from.cell_ndim; ++i) to->tensor_shape[i] = from.tensor_shape[i];
}

// Apart from arrow_parse_schema, so that a plain column's parse pays for
// none of this frame (the key's kilobyte, the saved registers).
[[gnu::noinline]] void parse_with_memo(const ArrowSchema& s, ArrowTypeInfo* out) {
  char key[arrow_schema_memo::kKeyCapacity];
  const size_t size = arrow_schema_memo::fingerprint(s, key);
  Memo& memo = t_memo;
  if (size != 0 && size == memo.key_size && std::memcmp(key, memo.key, size) == 0) {
    copy_type(memo, out);
    return;
  }
  arrow_parse_schema_uncached(s, out);  // throws: nothing remembered
  if (size == 0) return;
  copy_type(*out, &memo);
  std::memcpy(memo.key, key, size);
  memo.key_size = size;
}

}  // namespace

void arrow_parse_schema(const ArrowSchema& s, ArrowTypeInfo* out) {
  // A plain column parses in fewer instructions than its fingerprint takes
  // to build and compare (~40 against ~160): the memo is for the rest.
  if (arrow_parse_plain_column(s, out)) return;
  parse_with_memo(s, out);
}

}  // namespace dla
