// Arrow schema metadata: the binary key/value blob of ArrowSchema.metadata
// and the JSON parameters of the arrow.fixed_shape_tensor extension.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dla::arrow_meta {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

inline constexpr const char* kExtensionName = "ARROW:extension:name";
inline constexpr const char* kExtensionMetadata = "ARROW:extension:metadata";
inline constexpr const char* kFixedShapeTensor = "arrow.fixed_shape_tensor";
inline constexpr const char* kBool8 = "arrow.bool8";

// int32 count, then per pair int32 length + bytes of key and value, native
// byte order, no terminators.
std::string encode(const KeyValues& kv);

// NULL means no metadata.  Throws ValueError for negative counts/lengths.
KeyValues decode(const char* blob);

// The value of `key`, or nullptr.
const std::string* find(const KeyValues& kv, const char* key);

// {"shape":[...]} plus "permutation" when it is not the identity.
std::string tensor_json(const std::vector<int64_t>& shape, const std::vector<int64_t>& permutation);

// Reads "shape" (required) and "permutation" (optional, identity when
// absent) of a fixed_shape_tensor; other keys ("dim_names") are skipped.
// Throws ValueError naming what is malformed.
void parse_tensor_json(const std::string& json, std::vector<int64_t>* shape,
                       std::vector<int64_t>* permutation);

}  // namespace dla::arrow_meta
