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

void order_streams(int device_id, void* ready, void* consumer) {
  if (same_stream(ready, consumer)) return;
  const DriverTable& t = driver();
  DeviceScope scope(device_id);
  CUevent event = nullptr;
  check(t.cuEventCreate(&event, kEventDisableTiming), "cuEventCreate");
  CUresult r = t.cuEventRecord(event, canonical(ready));
  if (r == kSuccess) r = t.cuStreamWaitEvent(canonical(consumer), event, 0);
  // Destroying an event that a stream still waits on is allowed: the
  // driver releases it once the wait completes.
  t.cuEventDestroy_v2(event);
  check(r, "making the consumer stream wait for the data (cuEventRecord/cuStreamWaitEvent)");
}

void synchronize_for_host(const TensorView& v) {
  if (v.ready_stream == nullptr && !driver_available()) return;
  const DriverTable& t = driver();
  DeviceScope scope(v.device.device_type == kDLCPU ? 0 : v.device.device_id);
  check(t.cuStreamSynchronize(canonical(v.ready_stream)),
        "cuStreamSynchronize (waiting for the data before the host reads it)");
}

void synchronize_device(int device_id) {
  const DriverTable& t = driver();
  DeviceScope scope(device_id);
  check(t.cuCtxSynchronize(), "cuCtxSynchronize (waiting for the device before the host reads)");
}

CUevent record_ready_event(int device_id, void* ready) {
  if (ready == nullptr && !driver_available()) return nullptr;
  const DriverTable& t = driver();
  DeviceScope scope(device_id);
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
  check(t.cuEventSynchronize(event),
        "cuEventSynchronize (waiting on the Arrow sync_event before exposing the data)");
}

}  // namespace dla::cuda
