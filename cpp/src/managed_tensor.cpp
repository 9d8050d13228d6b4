#include "dlpackarray/managed_tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "dlpackarray/errors.hpp"
#include "managed_tensor_read.hpp"

namespace dla {

namespace {

static_assert(sizeof(DLManagedTensorVersioned) % alignof(int64_t) == 0, "arrays follow aligned");
static_assert(sizeof(DLManagedTensor) % alignof(int64_t) == 0, "arrays follow aligned");

// The arrays live right after the struct, in the same block.
template <class Managed>
void fill_in_block(Managed* m, const TensorView& v) {
  auto* arrays = reinterpret_cast<int64_t*>(reinterpret_cast<char*>(m) + sizeof(Managed));
  fill_dltensor(v, &m->dl_tensor, arrays, arrays + (v.ndim > 0 ? v.ndim : 0));
}

void* checked_malloc(size_t n) {
  void* block = std::malloc(n);
  if (block == nullptr) fail(ErrorKind::Memory, "could not allocate a DLPack managed tensor");
  return block;
}

}  // namespace

// The arrays never overlap the view (__restrict): without it the compiler
// guards a vectorised copy with overlap checks that cost more than copying
// the few dimensions a tensor has.
void fill_dltensor(const TensorView& v, DLTensor* out, int64_t* __restrict shape,
                   int64_t* __restrict strides) {
  out->data = v.data;
  out->device = v.device;
  out->ndim = v.ndim;
  out->dtype = v.dtype;
  out->byte_offset = v.byte_offset;
  // A plain loop: tensors have a few dimensions, and two calls into libc's
  // memcpy cost more than the copies on every export.
  for (int32_t i = 0; i < v.ndim; ++i) {
    shape[i] = v.shape[i];
    strides[i] = v.strides[i];
  }
  // DLPack >= 1.2: strides must be non-NULL when ndim != 0.
  out->shape = v.ndim > 0 ? shape : nullptr;
  out->strides = v.ndim > 0 ? strides : nullptr;
}

DLManagedTensorVersioned* init_versioned(void* block, const TensorView& v, uint64_t flags,
                                         void* manager_ctx, VersionedDeleter deleter) {
  auto* m = static_cast<DLManagedTensorVersioned*>(block);
  m->version = DLPackVersion{kDLPackMajorVersion, kDLPackMinorVersion};
  m->manager_ctx = manager_ctx;
  m->deleter = deleter;
  m->flags = flags;
  fill_in_block(m, v);
  return m;
}

DLManagedTensor* init_legacy(void* block, const TensorView& v, void* manager_ctx,
                             LegacyDeleter deleter) {
  auto* m = static_cast<DLManagedTensor*>(block);
  m->manager_ctx = manager_ctx;
  m->deleter = deleter;
  fill_in_block(m, v);
  return m;
}

DLManagedTensorVersioned* new_versioned(const TensorView& v, uint64_t flags, void* manager_ctx,
                                        VersionedDeleter deleter) {
  return init_versioned(checked_malloc(versioned_block_size(v.ndim)), v, flags, manager_ctx,
                        deleter);
}

DLManagedTensor* new_legacy(const TensorView& v, void* manager_ctx, LegacyDeleter deleter) {
  return init_legacy(checked_malloc(legacy_block_size(v.ndim)), v, manager_ctx, deleter);
}

void free_managed_block(void* block) noexcept { std::free(block); }

namespace detail {

// Shape and strides of a producer's tensor into a view: a scalar loop, which
// for the few dimensions a tensor has costs less than a vectorised copy's
// set-up or a call into memcpy (GCC turns a loop over __restrict pointers
// into one unless told not to).
#if defined(__GNUC__) && !defined(__clang__)
#define DLA_PLAIN_LOOP __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define DLA_PLAIN_LOOP
#endif

DLA_PLAIN_LOOP void copy_dims(int64_t* __restrict dst, const int64_t* __restrict src, int32_t n) {
#pragma GCC unroll 1
  for (int32_t i = 0; i < n; ++i) dst[i] = src[i];
}

DLA_PLAIN_LOOP void copy_dims_and_strides(int64_t* __restrict shape, int64_t* __restrict strides,
                                          const int64_t* __restrict src_shape,
                                          const int64_t* __restrict src_strides, int32_t n) {
#pragma GCC unroll 1
  for (int32_t i = 0; i < n; ++i) {
    shape[i] = src_shape[i];
    strides[i] = src_strides[i];
  }
}

void fail_dlpack_major_version(DLPackVersion v) {
  fail(ErrorKind::Buffer, "DLPack tensor has version " + std::to_string(v.major) + "." +
                              std::to_string(v.minor) +
                              "; this consumer understands major version " +
                              std::to_string(kDLPackMajorVersion) + " only");
}

void fail_dltensor_ndim(int32_t ndim) {
  fail(ErrorKind::Buffer, "DLPack tensor has ndim " + std::to_string(ndim) +
                              ", outside the supported range 0.." + std::to_string(kMaxNdim));
}

void fail_dltensor_null_shape(int32_t ndim) {
  fail(ErrorKind::Buffer,
       "DLPack tensor has ndim " + std::to_string(ndim) + " but a NULL shape pointer");
}

}  // namespace detail

void view_from_dltensor(const DLTensor& t, TensorView* out) { detail::read_dltensor(t, out); }

void view_from_managed(const DLManagedTensorVersioned& m, TensorView* out, bool* copied) {
  detail::read_managed(m, out, copied);
}

void view_from_managed(const DLManagedTensor& m, TensorView* out) { detail::read_managed(m, out); }

}  // namespace dla
