// The per-thread memo in front of arrow_parse_schema (arrow_schema_memo.cpp)
// and the uncached parse behind it (arrow_import.cpp).  Internal: the fuzz
// harness and the memo are its only users.
#pragma once

#include <cstddef>

#include "dlpackarray/arrow_abi.hpp"
#include "dlpackarray/arrow_bridge.hpp"

namespace dla {

// Every check and the whole parse, as arrow_parse_schema without its memo.
void arrow_parse_schema_uncached(const ArrowSchema& s, ArrowTypeInfo* out);

// The uncached parse of a plain column -- one node without children,
// metadata, dictionary or name, whose one-character format is a number or
// "b" -- in a fraction of its instructions, or false (out untouched) for
// every other schema.  Where it answers, it answers as the uncached parse
// does (the Arrow fuzz harness compares the two on every input).
bool arrow_parse_plain_column(const ArrowSchema& s, ArrowTypeInfo* out);

namespace arrow_schema_memo {

// Room for one schema chain's fingerprint; a longer chain is never
// remembered (it is parsed every time).
inline constexpr size_t kKeyCapacity = 1024;

// Writes into key[0, kKeyCapacity) the bytes of everything the parse reads
// from `s`: along the chain that starts at `s` and follows children[0]
// while a node has exactly one child, each node's format, name, metadata
// (walked by its declared lengths) and child count.  Returns the length, or
// 0 where the parse refuses anyway (a released node, a NULL format, a
// dictionary, a child count other than 0 or 1 or a NULL child, negative
// metadata counts or lengths) or the fingerprint does not fit.  Reads only
// what the structs declare: every declared metadata entry (the parse stops
// at the keys it needs), and a node's child only when it declares one.
size_t fingerprint(const ArrowSchema& s, char* key);

}  // namespace arrow_schema_memo
}  // namespace dla
