// Whether the core keeps freed memory for reuse: the managed-tensor block pool
// (python_shim.cpp) and the Arrow export record's spare slot (arrow_export.cpp).
// One answer for both.  Internal header, no Python.h.
#ifndef DLPACKARRAY_MEMORY_RECYCLING_HPP_
#define DLPACKARRAY_MEMORY_RECYCLING_HPP_

namespace dla {

// Under AddressSanitizer nothing is recycled: every block goes back to the
// allocator, so a use after the last release (a consumer reading a tensor
// after calling its deleter, a deleter called twice) is reported instead of
// reading, or handing out twice, a parked block.  CI runs the whole suite
// under that build (docs/reliability.md).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRecycleMemory = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kRecycleMemory = false;
#else
inline constexpr bool kRecycleMemory = true;
#endif
#else
inline constexpr bool kRecycleMemory = true;
#endif

}  // namespace dla

#endif  // DLPACKARRAY_MEMORY_RECYCLING_HPP_
