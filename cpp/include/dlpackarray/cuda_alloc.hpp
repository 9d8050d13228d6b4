// Fresh allocations on CUDA-family devices for DLPackArray_Empty (C API 1.1).
// Kept apart from cuda_copy/cuda_driver: only Empty allocates pinned or
// managed memory, so those entry points are bound here, on first use.
#ifndef DLPACKARRAY_CUDA_ALLOC_HPP_
#define DLPACKARRAY_CUDA_ALLOC_HPP_

#include <cstdint>

#include "dlpackarray/dlpack_abi.hpp"

namespace dla::cuda {

// `nbytes` (>= 0, computed and overflow-checked by the caller; at least one
// byte is allocated) of uninitialised memory of device `d`'s kind: device
// memory (kDLCUDA, cuMemAlloc), pinned host memory (kDLCUDAHost,
// cuMemAllocHost) or managed memory (kDLCUDAManaged, cuMemAllocManaged,
// attached globally), in device d.device_id's primary context.  Throws
// BufferError when the driver cannot be loaded, lacks the entry point or the
// allocation fails; NotImplementedError for any other device type.
void* allocate(DLDevice d, int64_t nbytes);

// Frees a pointer from allocate(d, ...).  Never throws (deallocators call it);
// a driver that is gone took the memory with it.
void release(DLDevice d, void* p) noexcept;

}  // namespace dla::cuda

#endif  // DLPACKARRAY_CUDA_ALLOC_HPP_
