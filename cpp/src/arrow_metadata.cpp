#include "arrow_metadata.hpp"

#include <cstring>

#include "dlpackarray/errors.hpp"

namespace dla::arrow_meta {

namespace {

void put_int32(std::string& out, int32_t v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof v);
}

int32_t get_int32(const char*& p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

int32_t checked_length(size_t n) {
  if (n > size_t(INT32_MAX)) fail(ErrorKind::Overflow, "Arrow metadata entry too long");
  return int32_t(n);
}

[[noreturn]] void bad_json(std::string_view json, const char* why) {
  fail(ErrorKind::Value,
       "malformed arrow.fixed_shape_tensor metadata '" + printable(json) + "': " + why);
}

// Length of the UTF-8 sequence at s[i] (1 to 4), or 0 when it is malformed.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;  // continuation byte, overlong lead (C0, C1) or past U+10FFFF
  }
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// An integer array of at most `cap` stored entries; `count` goes on counting
// past the cap so that the error can say how many there were.
struct IntList {
  int64_t* items;
  int32_t cap;
  int64_t count = 0;
};

// A recursive-descent reader for the JSON the tensor extension uses: an
// object whose values are arrays of integers or strings; anything else is
// skipped structurally.  Works on a view of the schema's metadata and
// allocates nothing unless it fails.
class JsonReader {
 public:
  explicit JsonReader(std::string_view s) : s_(s) {}

  void read_object(IntList* shape, IntList* perm, bool* has_shape, bool* has_perm) {
    expect('{');
    if (peek() == '}') {
      ++i_;
      return;
    }
    for (;;) {
      const std::string_view key = read_string();
      expect(':');
      if (key == "shape") {
        read_int_array(shape);
        *has_shape = true;
      } else if (key == "permutation") {
        read_int_array(perm);
        *has_perm = true;
      } else {
        skip_value(0);
      }
      const char c = next();
      if (c == '}') break;
      if (c != ',') bad_json(s_, "expected ',' or '}'");
    }
    if (peek() != '\0') bad_json(s_, "trailing characters");
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  char peek() {
    skip_space();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  char next() {
    const char c = peek();
    if (c == '\0') bad_json(s_, "unexpected end");
    ++i_;
    return c;
  }
  void expect(char c) {
    if (next() != c) {
      const char what[] = {'e', 'x', 'p', 'e', 'c', 't', 'e', 'd', ' ', '\'', c, '\'', '\0'};
      bad_json(s_, what);
    }
  }
  // The raw characters between the quotes; escapes are kept verbatim (the
  // keys this reader looks for have none).
  std::string_view read_string() {
    expect('"');
    const size_t begin = i_;
    while (i_ < s_.size() && s_[i_] != '"') i_ += s_[i_] == '\\' ? 2 : 1;
    if (i_ >= s_.size()) bad_json(s_, "unterminated string");
    return s_.substr(begin, i_++ - begin);
  }
  int64_t read_int() {
    skip_space();
    bool neg = false;
    if (i_ < s_.size() && s_[i_] == '-') {
      neg = true;
      ++i_;
    }
    if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') bad_json(s_, "expected an integer");
    int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[i_] - '0', &v)) {
        bad_json(s_, "integer overflows int64");
      }
      ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
      bad_json(s_, "expected an integer");
    }
    return neg ? -v : v;
  }
  void read_int_array(IntList* out) {
    out->count = 0;
    expect('[');
    if (peek() == ']') {
      ++i_;
      return;
    }
    for (;;) {
      const int64_t v = read_int();
      if (out->count < out->cap) out->items[out->count] = v;
      ++out->count;
      const char c = next();
      if (c == ']') return;
      if (c != ',') bad_json(s_, "expected ',' or ']'");
    }
  }
  void skip_value(int depth) {
    if (depth > 64) bad_json(s_, "nested too deeply");
    const char c = peek();
    if (c == '"') {
      read_string();
    } else if (c == '[' || c == '{') {
      const char close = c == '[' ? ']' : '}';
      ++i_;
      if (peek() == close) {
        ++i_;
        return;
      }
      for (;;) {
        if (close == '}') {
          read_string();
          expect(':');
        }
        skip_value(depth + 1);
        const char d = next();
        if (d == close) return;
        if (d != ',') bad_json(s_, "expected ','");
      }
    } else {
      // number, true, false, null
      if (c == '\0') bad_json(s_, "unexpected end");
      while (i_ < s_.size() && std::strchr(",]} \n\t\r", s_[i_]) == nullptr) ++i_;
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string printable(std::string_view s, size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  size_t i = 0;
  while (i < s.size() && i < max) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_sequence(s, i);
    if (n > 1 || (n == 1 && c >= 0x20 && c != 0x7F)) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
    ++i;
  }
  if (i < s.size()) out += "...";
  return out;
}

std::string encode(const KeyValues& kv) {
  std::string out;
  put_int32(out, checked_length(kv.size()));
  for (const auto& [k, v] : kv) {
    put_int32(out, checked_length(k.size()));
    out += k;
    put_int32(out, checked_length(v.size()));
    out += v;
  }
  return out;
}

bool lookup(const char* blob, std::string_view key, std::string_view* value) {
  if (blob == nullptr) return false;
  const char* p = blob;
  const int32_t n = get_int32(p);
  if (n < 0) fail(ErrorKind::Value, "Arrow schema metadata has a negative entry count");
  for (int32_t i = 0; i < n; ++i) {
    const int32_t klen = get_int32(p);
    if (klen < 0) fail(ErrorKind::Value, "Arrow schema metadata has a negative key length");
    const std::string_view k(p, size_t(klen));
    p += klen;
    const int32_t vlen = get_int32(p);
    if (vlen < 0) fail(ErrorKind::Value, "Arrow schema metadata has a negative value length");
    if (k == key) {
      *value = std::string_view(p, size_t(vlen));
      return true;
    }
    p += vlen;
  }
  return false;
}

int64_t blob_size(const char* blob, int64_t limit) {
  const char* p = blob;
  const int32_t n = get_int32(p);
  if (n < 0) return -1;
  int64_t size = 4;
  for (int32_t i = 0; i < n; ++i) {
    for (int part = 0; part < 2; ++part) {  // key, then value
      const int32_t len = get_int32(p);
      if (len < 0) return -1;
      size += 4 + int64_t(len);
      if (size > limit) return -1;
      p += len;
    }
  }
  return size;
}

std::string tensor_json(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  auto list = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  std::string json = "{\"shape\":" + list(shape);
  if (!identity) json += ",\"permutation\":" + list(perm);
  return json + "}";
}

void parse_tensor_json(std::string_view json, TensorParams* out) {
  bool has_shape = false, has_perm = false;
  IntList shape{out->shape, TensorParams::kMaxCellNdim};
  IntList perm{out->permutation, TensorParams::kMaxCellNdim};
  JsonReader(json).read_object(&shape, &perm, &has_shape, &has_perm);
  if (!has_shape) bad_json(json, "no \"shape\"");
  if (shape.count > TensorParams::kMaxCellNdim) {
    fail(ErrorKind::Value, "arrow.fixed_shape_tensor has " + std::to_string(shape.count) +
                               " cell dimensions; at most " +
                               std::to_string(TensorParams::kMaxCellNdim) + " are supported");
  }
  out->ndim = int32_t(shape.count);
  for (int32_t i = 0; i < out->ndim; ++i) {
    if (out->shape[i] < 0) bad_json(json, "negative dimension in \"shape\"");
  }
  if (!has_perm || perm.count == 0) {
    for (int32_t i = 0; i < out->ndim; ++i) out->permutation[i] = i;
    return;
  }
  if (perm.count != shape.count) bad_json(json, "\"permutation\" and \"shape\" differ in length");
  bool seen[TensorParams::kMaxCellNdim] = {};
  for (int32_t i = 0; i < out->ndim; ++i) {
    const int64_t p = out->permutation[i];
    if (p < 0 || p >= out->ndim || seen[p]) {
      bad_json(json, "\"permutation\" is not a permutation of 0..ndim-1");
    }
    seen[p] = true;
  }
}

}  // namespace dla::arrow_meta
