// Device-to-host and device-to-device copies of strided CUDA views, as a
// sequence of driver copies on the data's ready stream: 2-D copies
// (cuMemcpy2DAsync) where the pitches are within the device's limit, 1-D
// copies (cuMemcpyDtoHAsync / cuMemcpyDtoDAsync, no pitch) for single rows.
// Host-to-device uploads (unpickling) are one 1-D copy.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "dlpackarray/cuda_exchange.hpp"
#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"

namespace dla::cuda {
namespace {

struct Dim {
  int64_t n;
  int64_t stride;  // bytes
};

struct Block {
  int64_t width;   // contiguous bytes per row
  int64_t height;  // rows
  int64_t pitch;   // source bytes between rows
};

// Splits the view into outer dimensions and one 2-D block shape such that
// the blocks, visited in C order, are the elements in C order.  cuMemcpy2D
// refuses any pitch beyond the device's CU_DEVICE_ATTRIBUTE_MAX_PITCH
// (2**31 - 1 on current GPUs), the destination's (the block's width)
// included: a block of more rows is planned only when both pitches fit, else
// every row is its own 1-D copy, however wide.
void plan(const TensorView& v, int64_t max_pitch, std::vector<Dim>& outer, Block& block) {
  const int64_t item = dtype_itemsize(v.dtype);
  std::vector<Dim> dims;
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 1) continue;
    Dim d{v.shape[i], byte_stride(v, i)};
    // Merge with the dimension inside it when together they step evenly.
    if (!dims.empty() && dims.back().stride == d.stride * d.n) {
      dims.back() = Dim{dims.back().n * d.n, d.stride};
    } else {
      dims.push_back(d);
    }
  }
  block = Block{item, 1, item};
  if (dims.empty()) return;
  if (dims.back().stride == item) {
    block.width = dims.back().n * item;
    dims.pop_back();
    if (!dims.empty() && block.width <= max_pitch && dims.back().stride >= block.width &&
        dims.back().stride <= max_pitch) {
      block.height = dims.back().n;
      block.pitch = dims.back().stride;
      dims.pop_back();
    }
  } else if (item <= max_pitch && dims.back().stride >= item && dims.back().stride <= max_pitch) {
    block.height = dims.back().n;
    block.pitch = dims.back().stride;
    dims.pop_back();
  }
  if (block.height == 1) block.pitch = block.width;
  outer = std::move(dims);
}

// Runs `emit(src_offset, dst_offset)` for every block in C order.
template <class Emit>
void for_each_block(const std::vector<Dim>& outer, const Block& block, Emit emit) {
  const int64_t block_bytes = block.width * block.height;
  std::vector<int64_t> index(outer.size(), 0);
  int64_t src = 0;
  int64_t dst = 0;
  while (true) {
    emit(src, dst);
    dst += block_bytes;
    size_t k = outer.size();
    while (k > 0) {
      --k;
      if (++index[k] < outer[k].n) {
        src += outer[k].stride;
        break;
      }
      src -= outer[k].stride * (outer[k].n - 1);
      index[k] = 0;
      if (k == 0) return;
    }
    if (outer.empty()) return;
  }
}

// Enqueues the copies on src's ready stream; its context must be current.
void copy_blocks(const TensorView& src, bool to_device, void* dst_host, CUdeviceptr dst_device) {
  const DriverTable& t = driver();
  std::vector<Dim> outer;
  Block block{};
  plan(src, max_copy_pitch(src.device.device_id), outer, block);
  auto base = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(src.data) + src.byte_offset);
  auto stream = static_cast<CUstream>(src.ready_stream);
  for_each_block(outer, block, [&](int64_t s, int64_t d) {
    const CUdeviceptr from = base + static_cast<CUdeviceptr>(s);
    const auto width = static_cast<size_t>(block.width);
    if (block.height == 1) {
      if (to_device) {
        check(t.cuMemcpyDtoDAsync_v2(dst_device + static_cast<CUdeviceptr>(d), from, width, stream),
              "cuMemcpyDtoDAsync");
      } else {
        check(t.cuMemcpyDtoHAsync_v2(static_cast<char*>(dst_host) + d, from, width, stream),
              "cuMemcpyDtoHAsync");
      }
      return;
    }
    Memcpy2D c{};
    c.srcMemoryType = kMemoryTypeDevice;
    c.srcDevice = from;
    c.srcPitch = static_cast<size_t>(block.pitch);
    if (to_device) {
      c.dstMemoryType = kMemoryTypeDevice;
      c.dstDevice = dst_device + static_cast<CUdeviceptr>(d);
    } else {
      c.dstMemoryType = kMemoryTypeHost;
      c.dstHost = static_cast<char*>(dst_host) + d;
    }
    c.dstPitch = static_cast<size_t>(block.width);
    c.WidthInBytes = static_cast<size_t>(block.width);
    c.Height = static_cast<size_t>(block.height);
    check(t.cuMemcpy2DAsync_v2(&c, stream), "cuMemcpy2DAsync");
  });
}

// After a failure: no copy into the caller's host buffer may still be pending
// when the error reaches the caller, who frees the buffer.  The stream is
// waited for, and when that fails too, the whole context (a context with a
// sticky error runs nothing more).  The current context is the stream's.
void drain_after_failure(const DriverTable& t, CUstream stream) noexcept {
  BlockingCall unlocked;
  if (t.cuStreamSynchronize(stream) != kSuccess) t.cuCtxSynchronize();
}

}  // namespace

void copy_device_to_host(const TensorView& src, void* dst) {
  if (view_size(src) == 0) return;
  const DriverTable& t = driver();
  auto stream = static_cast<CUstream>(src.ready_stream);
  // Copies run on the ready stream, so in its context (another device's,
  // for pinned memory written there, or a non-primary one).
  ContextScope scope(stream_context(src.ready_stream, src.device.device_id));
  try {
    copy_blocks(src, false, dst, 0);
  } catch (...) {
    drain_after_failure(t, stream);  // earlier blocks may be queued
    throw;
  }
  // The host reads dst next: wait for the copies (and the work before them).
  CUresult r;
  {
    BlockingCall unlocked;
    r = t.cuStreamSynchronize(stream);
  }
  if (r != kSuccess) drain_after_failure(t, stream);
  check(r, "cuStreamSynchronize");
}

CUdeviceptr copy_on_device(const TensorView& src) {
  const int64_t nbytes = view_nbytes(src);
  const DriverTable& t = driver();
  DeviceScope scope(src.device.device_id);  // the copy lives on src's device
  CUdeviceptr p = 0;
  check(t.cuMemAlloc_v2(&p, static_cast<size_t>(nbytes > 0 ? nbytes : 1)), "cuMemAlloc");
  if (nbytes > 0) {
    try {
      ContextScope stream_scope(stream_context(src.ready_stream, src.device.device_id));
      copy_blocks(src, true, nullptr, p);
    } catch (...) {
      BlockingCall unlocked;
      t.cuMemFree_v2(p);
      throw;
    }
  }
  return p;
}

CUdeviceptr copy_host_to_device(int device_id, const void* src, int64_t nbytes) {
  if (nbytes < 0) fail(ErrorKind::Value, "copy_host_to_device: negative byte count");
  const DriverTable& t = driver();
  DeviceScope scope(device_id);
  CUdeviceptr p = 0;
  check(t.cuMemAlloc_v2(&p, static_cast<size_t>(nbytes > 0 ? nbytes : 1)), "cuMemAlloc");
  try {
    // Rows of at most the device's copy pitch: a wider pitch is refused
    // even for a single row.
    const int64_t max_pitch = max_copy_pitch(device_id);
    for (int64_t done = 0; done < nbytes;) {
      const int64_t width = std::min(nbytes - done, max_pitch);
      Memcpy2D c{};
      c.srcMemoryType = kMemoryTypeHost;
      c.srcHost = static_cast<const char*>(src) + done;
      c.srcPitch = static_cast<size_t>(width);
      c.dstMemoryType = kMemoryTypeDevice;
      c.dstDevice = p + static_cast<CUdeviceptr>(done);
      c.dstPitch = static_cast<size_t>(width);
      c.WidthInBytes = static_cast<size_t>(width);
      c.Height = 1;
      check(t.cuMemcpy2DAsync_v2(&c, legacy_stream()), "cuMemcpy2DAsync");
      done += width;
    }
    // The caller frees `src` next, and the new data must be ready on the
    // legacy stream (a NULL ready token) for every consumer.
    BlockingCall unlocked;
    check(t.cuStreamSynchronize(legacy_stream()), "cuStreamSynchronize");
  } catch (...) {
    t.cuMemFree_v2(p);
    throw;
  }
  return p;
}

void free_device(int device_id, CUdeviceptr p) noexcept {
  try {
    DeviceScope scope(device_id);
    // cuMemFree waits for the device's pending work.
    BlockingCall unlocked;
    driver().cuMemFree_v2(p);
  } catch (...) {
    // Freeing must not throw (called from a deallocator); a driver that is
    // gone took the allocation with it.
  }
}

void copy_bytes_to_host(DLDevice d, const void* src, int64_t nbytes, void* dst) {
  TensorView v;
  v.set_ndim(1);
  v.shape[0] = nbytes;
  v.strides[0] = 1;
  v.dtype = DLDataType{kDLUInt, 8, 1};
  v.device = d;
  v.data = const_cast<void*>(src);
  validate(v);
  copy_device_to_host(v, dst);
}

}  // namespace dla::cuda
