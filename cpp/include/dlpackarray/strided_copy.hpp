// Copies any strided view into a dense C-ordered destination.
#pragma once

#include <cstdint>

#include "dlpackarray/tensor_view.hpp"

namespace dla {

// Copies the elements of `src` (host-accessible, validated) into `dst`, which
// must hold view_nbytes(src) bytes, in C order.  Contiguous runs are
// coalesced and copied with memcpy; transposed 2-D blocks are tiled.
void strided_copy_to_contiguous(const TensorView& src, void* dst);

// Allocates `nbytes` (at least 1) aligned to 64 bytes; throws MemoryError,
// also for a negative or absurd `nbytes`.
void* aligned_allocate(int64_t nbytes);
void aligned_free(void* p) noexcept;

// Marks the whole 2 MiB pages inside [p, p + nbytes) of memory allocated
// elsewhere (a bytes object) for transparent huge pages, as aligned_allocate
// does for its own large blocks; a hint for pages not yet touched, so call
// it before writing.  Nothing below 4 MiB.
void advise_huge_pages(void* p, int64_t nbytes) noexcept;

}  // namespace dla
