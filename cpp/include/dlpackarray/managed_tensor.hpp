// Builders for DLManagedTensor(Versioned) that describe a TensorView.  Each
// struct and its shape/strides arrays are one allocation, freed by
// free_managed_block() (the deleters call it after releasing their context).
#pragma once

#include <cstddef>
#include <cstdint>

#include "dlpackarray/dlpack_abi.hpp"
#include "dlpackarray/tensor_view.hpp"

namespace dla {

using VersionedDeleter = void (*)(DLManagedTensorVersioned*);
using LegacyDeleter = void (*)(DLManagedTensor*);

// Fills a DLTensor from the view; shape/strides point at caller storage.
void fill_dltensor(const TensorView& v, DLTensor* out, int64_t* shape, int64_t* strides);

// Bytes a block for an `ndim`-dimensional tensor needs: the struct followed by
// shape[ndim] and strides[ndim].  Inline: every export asks (the capsule pool
// compares against them), and a call into another file cost more than the sum.
constexpr size_t versioned_block_size(int32_t ndim) {
  return sizeof(DLManagedTensorVersioned) + 2 * size_t(ndim > 0 ? ndim : 0) * sizeof(int64_t);
}
constexpr size_t legacy_block_size(int32_t ndim) {
  return sizeof(DLManagedTensor) + 2 * size_t(ndim > 0 ? ndim : 0) * sizeof(int64_t);
}

// Build the managed tensor inside caller-provided storage of at least
// *_block_size(v.ndim) bytes, suitably aligned for int64_t (malloc'd memory).
DLManagedTensorVersioned* init_versioned(void* block, const TensorView& v, uint64_t flags,
                                         void* manager_ctx, VersionedDeleter deleter);
DLManagedTensor* init_legacy(void* block, const TensorView& v, void* manager_ctx,
                             LegacyDeleter deleter);

// malloc + init; both throw MemoryError when allocation fails.
DLManagedTensorVersioned* new_versioned(const TensorView& v, uint64_t flags, void* manager_ctx,
                                        VersionedDeleter deleter);
DLManagedTensor* new_legacy(const TensorView& v, void* manager_ctx, LegacyDeleter deleter);
void free_managed_block(void* block) noexcept;

// Reads a producer's DLTensor into a view; throws for ndim/dtype/shape
// problems (BufferError for what DLPack can carry but we cannot use).
void view_from_dltensor(const DLTensor& t, TensorView* out);

// The consumer's whole reading of a managed tensor it has taken over:
// view_from_dltensor, the READ_ONLY flag (legacy tensors: writable), the
// IS_COPIED flag, validate() and fold_byte_offset().  A versioned tensor of
// another major version is refused (BufferError) before anything is read.
// On any throw the tensor is still the caller's to delete.
void view_from_managed(const DLManagedTensorVersioned& m, TensorView* out, bool* copied);
void view_from_managed(const DLManagedTensor& m, TensorView* out);

}  // namespace dla
