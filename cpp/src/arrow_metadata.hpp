// Arrow schema metadata: the binary key/value blob of ArrowSchema.metadata
// and the JSON parameters of the arrow.fixed_shape_tensor extension.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlpackarray/tensor_view.hpp"

namespace dla::arrow_meta {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

inline constexpr const char* kExtensionName = "ARROW:extension:name";
inline constexpr const char* kExtensionMetadata = "ARROW:extension:metadata";
inline constexpr const char* kFixedShapeTensor = "arrow.fixed_shape_tensor";
inline constexpr const char* kBool8 = "arrow.bool8";

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF): the C data interface says format and name strings
// are UTF-8, and Python refuses to build a message out of anything else.
bool valid_utf8(std::string_view s);

// Producer text as error messages quote it: valid UTF-8 except control
// characters is kept, every other byte is written \xNN, and text longer than
// `max` bytes is cut with "...".  The result is always valid UTF-8.
std::string printable(std::string_view s, size_t max = 80);

// int32 count, then per pair int32 length + bytes of key and value, native
// byte order, no terminators.
std::string encode(const KeyValues& kv);

// Whether the blob (NULL: no metadata) has `key`, and then its value, which
// points into the blob: import runs on every Arrow conversion, so nothing is
// copied or allocated.  Throws ValueError for negative counts/lengths.
bool lookup(const char* blob, std::string_view key, std::string_view* value);

// Bytes of a blob (not NULL) by its declared count and lengths, walked as
// lookup walks them; -1 for a negative count or length (which lookup
// refuses) or once the size passes `limit` (the walk stops there).
int64_t blob_size(const char* blob, int64_t limit);

// {"shape":[...]} plus "permutation" when it is not the identity.
std::string tensor_json(const std::vector<int64_t>& shape, const std::vector<int64_t>& permutation);

// The parameters of one arrow.fixed_shape_tensor type.  A tensor column adds
// the row dimension, so a cell has at most kMaxNdim - 1 dimensions.
struct TensorParams {
  static constexpr int32_t kMaxCellNdim = kMaxNdim - 1;
  int32_t ndim = 0;
  int64_t shape[kMaxCellNdim];
  int64_t permutation[kMaxCellNdim];  // identity when the metadata has none
};

// Reads "shape" (required) and "permutation" (optional) of a
// fixed_shape_tensor; other keys ("dim_names") are skipped.  Throws
// ValueError naming what is malformed or how many dimensions are too many.
void parse_tensor_json(std::string_view json, TensorParams* out);

}  // namespace dla::arrow_meta
