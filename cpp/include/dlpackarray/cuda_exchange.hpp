// Stream ordering and copies for CUDA data, built on cuda_driver.hpp.
//
// A view's ready token is TensorView::ready_stream: the CUDA stream on which
// its data is ready (NULL: the legacy default stream, or no pending work).
// "Can the host address this memory" is device_is_host_accessible(); "is it
// safe to read now" is answered here, by consulting the token.
#pragma once

#include <cstdint>

#include "dlpackarray/cuda_driver.hpp"
#include "dlpackarray/tensor_view.hpp"

namespace dla::cuda {

// Whether two stream handles name the same stream (NULL is the legacy stream).
bool same_stream(void* a, void* b) noexcept;

// Makes `consumer` wait for the work pending on `ready` with an event
// (cuEventRecord on `ready` in its context, cuStreamWaitEvent on `consumer`
// in its context; stream_context() with `device_id` for the legacy and
// per-thread handles): the host never blocks.  No driver call when both name
// the same stream.
void order_streams(int device_id, void* ready, void* consumer);

// Blocks the host until v's data is ready (cuStreamSynchronize on its ready
// stream, in that stream's context, the GIL released).  For a view with no
// ready stream, in a process where the driver cannot be loaded, nothing can
// be pending and nothing happens.
void synchronize_for_host(const TensorView& v);

// Blocks the host until every stream of device `device_id`'s primary
// context is idle (cuCtxSynchronize): for memory whose producer named no
// stream (pinned memory from a producer that takes none).
void synchronize_device(int device_id);

// Copies device data (v.device CUDA-family; validated) into `dst`, host
// memory of view_nbytes(src) bytes, densely in C order.  The copy runs on
// src's ready stream in its context, one 2-D copy per block of rows within
// the device's pitch limit or one 1-D copy per row (never the whole
// allocation), and the host waits for it (the GIL released).
void copy_device_to_host(const TensorView& src, void* dst);

// A new device allocation of view_nbytes(src) bytes (at least 1) on src's
// device holding src's elements densely in C order; the copy is enqueued on
// src's ready stream (the result is ready there).  Free with free_device()
// (cuMemFree, which waits for the device: the GIL is released).
CUdeviceptr copy_on_device(const TensorView& src);

void free_device(int device_id, CUdeviceptr p) noexcept;

// A new allocation of max(nbytes, 1) bytes on device `device_id` holding a
// copy of `nbytes` of host memory at `src`; the host waits for the copy, so
// `src` may be freed on return and the data is ready on every stream.  For
// unpickling (docs/processes.md).  Free with free_device().
CUdeviceptr copy_host_to_device(int device_id, const void* src, int64_t nbytes);

// Copies `nbytes` of device memory at `src` (on CUDA-family device `d`) to
// host memory `dst` on the legacy stream, and waits for the copy.  For small
// reads of data known to be ready (an Arrow validity bitmap after its
// sync_event).
void copy_bytes_to_host(DLDevice d, const void* src, int64_t nbytes, void* dst);

// -- events (the Arrow C Device Data interface's sync_event) ---------------------

// A new event (DISABLE_TIMING) recorded on `ready` (a ready token: NULL is
// the legacy default stream of device `device_id`) in that stream's context,
// for a consumer to wait on (cuStreamWaitEvent accepts it from any context).
// Returns NULL when nothing can be pending: a NULL token in a process where
// the driver cannot be loaded (as synchronize_for_host).  Destroy with
// destroy_event().
CUevent record_ready_event(int device_id, void* ready);

// Destroys an event from record_ready_event() (NULL: nothing).  Never throws
// and never needs Python: it runs from Arrow release callbacks, on any thread;
// a driver that fails or is gone (process exit) took the event with it.
void destroy_event(int device_id, CUevent event) noexcept;

// Blocks the host until `event` (another producer's, valid in device
// `device_id`'s context) has completed (cuEventSynchronize, the GIL
// released).
void wait_event_on_host(int device_id, CUevent event);

}  // namespace dla::cuda
