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

[[noreturn]] void bad_json(const std::string& json, const std::string& why) {
  fail(ErrorKind::Value, "malformed arrow.fixed_shape_tensor metadata '" + json + "': " + why);
}

// A recursive-descent reader for the JSON the tensor extension uses: an
// object whose values are arrays of integers or strings; anything else is
// skipped structurally.
class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}

  void read_object(std::vector<int64_t>* shape, std::vector<int64_t>* perm, bool* has_shape) {
    expect('{');
    if (peek() == '}') {
      ++i_;
      return;
    }
    for (;;) {
      const std::string key = read_string();
      expect(':');
      if (key == "shape") {
        read_int_array(shape);
        *has_shape = true;
      } else if (key == "permutation") {
        read_int_array(perm);
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
    if (next() != c) bad_json(s_, std::string("expected '") + c + "'");
  }
  std::string read_string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') ++i_;  // escaped character: kept verbatim
      if (i_ < s_.size()) out += s_[i_++];
    }
    if (i_ >= s_.size()) bad_json(s_, "unterminated string");
    ++i_;
    return out;
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
  void read_int_array(std::vector<int64_t>* out) {
    out->clear();
    expect('[');
    if (peek() == ']') {
      ++i_;
      return;
    }
    for (;;) {
      out->push_back(read_int());
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

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

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

KeyValues decode(const char* blob) {
  KeyValues kv;
  if (blob == nullptr) return kv;
  const char* p = blob;
  const int32_t n = get_int32(p);
  if (n < 0) fail(ErrorKind::Value, "Arrow schema metadata has a negative entry count");
  for (int32_t i = 0; i < n; ++i) {
    const int32_t klen = get_int32(p);
    if (klen < 0) fail(ErrorKind::Value, "Arrow schema metadata has a negative key length");
    std::string key(p, size_t(klen));
    p += klen;
    const int32_t vlen = get_int32(p);
    if (vlen < 0) fail(ErrorKind::Value, "Arrow schema metadata has a negative value length");
    std::string value(p, size_t(vlen));
    p += vlen;
    kv.emplace_back(std::move(key), std::move(value));
  }
  return kv;
}

const std::string* find(const KeyValues& kv, const char* key) {
  for (const auto& [k, v] : kv) {
    if (k == key) return &v;
  }
  return nullptr;
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

void parse_tensor_json(const std::string& json, std::vector<int64_t>* shape,
                       std::vector<int64_t>* perm) {
  bool has_shape = false;
  shape->clear();
  perm->clear();
  JsonReader(json).read_object(shape, perm, &has_shape);
  if (!has_shape) bad_json(json, "no \"shape\"");
  for (int64_t d : *shape) {
    if (d < 0) bad_json(json, "negative dimension in \"shape\"");
  }
  if (perm->empty()) {
    for (size_t i = 0; i < shape->size(); ++i) perm->push_back(int64_t(i));
  }
  if (perm->size() != shape->size())
    bad_json(json, "\"permutation\" and \"shape\" differ in length");
  std::vector<bool> seen(shape->size(), false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= int64_t(shape->size()) || seen[size_t(p)]) {
      bad_json(json, "\"permutation\" is not a permutation of 0..ndim-1");
    }
    seen[size_t(p)] = true;
  }
}

}  // namespace dla::arrow_meta
