// Ready tokens: cross-stream ordering for exports, host synchronisation for
// host reads, and the events the Arrow device interface exchanges.
#include <cstdint>

#include "dlpackarray/cuda_exchange.hpp"
#include "dlpackarray/errors.hpp"

namespace dla::cuda {
namespace {

CUstream canonical(void* s) noexcept {
  return s == nullptr ? legacy_stream() : static_cast<CUstream>(s);
}

}  // namespace

bool same_stream(void* a, void* b) noexcept { return canonical(a) == canonical(b); }

// The producer's and the consumer's streams may belong to different contexts
// (another device, or a context that is not primary): the event is created
// and recorded in the producer stream's context (cuEventRecord refuses an
// event and a stream of different contexts) and waited on in the consumer
// stream's (cuStreamWaitEvent accepts an event of any context).
void order_streams(int device_id, void* ready, void* consumer) {
  if (same_stream(ready, consumer)) return;
  const DriverTable& t = driver();
  CUcontext producer_ctx = stream_context(ready, device_id);
  CUcontext consumer_ctx = stream_context(consumer, device_id);
  CUevent event = nullptr;
  CUresult r;
  {
    ContextScope scope(producer_ctx);
    check(t.cuEventCreate(&event, kEventDisableTiming), "cuEventCreate");
    r = t.cuEventRecord(event, canonical(ready));
    if (r == kSuccess && consumer_ctx == producer_ctx) {
      r = t.cuStreamWaitEvent(canonical(consumer), event, 0);
    }
  }
  if (r == kSuccess && consumer_ctx != producer_ctx) {
    try {
      ContextScope scope(consumer_ctx);
      r = t.cuStreamWaitEvent(canonical(consumer), event, 0);
    } catch (...) {
      t.cuEventDestroy_v2(event);
      throw;
    }
  }
  // Destroying an event that a stream still waits on is allowed: the
  // driver releases it once the wait completes.
  t.cuEventDestroy_v2(event);
  check(r, "making the consumer stream wait for the data (cuEventRecord/cuStreamWaitEvent)");
}

void synchronize_for_host(const TensorView& v) {
  if (v.ready_stream == nullptr && !driver_available()) return;
  const DriverTable& t = driver();
  ContextScope scope(
      stream_context(v.ready_stream, v.device.device_type == kDLCPU ? 0 : v.device.device_id));
  CUresult r;
  {
    BlockingCall unlocked;
    r = t.cuStreamSynchronize(canonical(v.ready_stream));
  }
  check(r, "cuStreamSynchronize (waiting for the data before the host reads it)");
}

void synchronize_device(int device_id) {
  const DriverTable& t = driver();
  DeviceScope scope(device_id);
  CUresult r;
  {
    BlockingCall unlocked;
    r = t.cuCtxSynchronize();
  }
  check(r, "cuCtxSynchronize (waiting for the device before the host reads)");
}

CUevent record_ready_event(int device_id, void* ready) {
  if (ready == nullptr && !driver_available()) return nullptr;
  const DriverTable& t = driver();
  ContextScope scope(stream_context(ready, device_id));
  CUevent event = nullptr;
  check(t.cuEventCreate(&event, kEventDisableTiming), "cuEventCreate (the Arrow sync event)");
  const CUresult r = t.cuEventRecord(event, canonical(ready));
  if (r != kSuccess) {
    t.cuEventDestroy_v2(event);
    check(r, "cuEventRecord (the Arrow sync event, on the data's ready stream)");
  }
  return event;
}

void destroy_event(int device_id, CUevent event) noexcept {
  if (event == nullptr) return;
  try {
    DeviceScope scope(device_id);
    driver().cuEventDestroy_v2(event);
  } catch (...) {
    // Reached only when the context cannot be made current (the driver is
    // shutting down): the event went with it.
  }
}

void wait_event_on_host(int device_id, CUevent event) {
  const DriverTable& t = driver();
  DeviceScope scope(device_id);
  CUresult r;
  {
    BlockingCall unlocked;
    r = t.cuEventSynchronize(event);
  }
  check(r, "cuEventSynchronize (waiting on the Arrow sync_event before exposing the data)");
}

}  // namespace dla::cuda
