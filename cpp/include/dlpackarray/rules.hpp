// The request rules every protocol shares, on the import and the export side
// alike.  Each has one home here, beside the error kinds it raises, so that
// the DLPack, buffer-protocol, array-interface and exchange-API paths (and the
// CUDA and Arrow paths to come) cannot drift apart.
#pragma once

#include <cstdint>
#include <string>

#include "dlpackarray/dlpack_abi.hpp"
#include "dlpackarray/tensor_view.hpp"

namespace dla {

// The array API's `copy` keyword: None, False, True.
enum class CopyMode : int32_t { kIfNeeded = -1, kNever = 0, kAlways = 1 };

// Which side of an exchange applies a rule: the error kinds differ.
enum class Side : int32_t { kConsumer = 0, kProducer = 1 };

// How messages name a device: "CPU:0", "CUDA:1", "device type 99:0".
std::string device_text(DLDevice d);

// Host rule: reading or copying the data needs memory the host can access
// (CPU, CUDA pinned/managed, ROCm host).  Throws BufferError "cannot
// <action>: the data is on device CUDA:0 and dlpackarray reads host memory
// only", with how to get a host copy where one can be made (CUDA devices).
void require_host_memory(DLDevice d, const char* action);

// How a device request is met.
enum class DeviceRoute : int32_t {
  kSame = 0,         // the data is already on the requested device
  kRelabelHost = 1,  // host-accessible memory handed over as CPU:0, no copy
                     // (after waiting for its ready stream: cuda_sync.hpp)
  kCopyToHost = 2,   // CUDA device memory copied to the host (cuda_copy.hpp)
};

// Device rule, for data on `have` asked for on `want`:
//   same device -> kSame;
//   `want` is CPU:0 and `have` host-accessible -> kRelabelHost;
//   `want` is CPU:0 and `have` a CUDA device -> kCopyToHost, unless copy=False;
//   otherwise no route exists.  Refusals: ValueError when a consumer said
//   copy=False (array API from_dlpack), BufferError otherwise and always for a
//   producer (DLPack __dlpack__).
DeviceRoute route_device_request(DLDevice have, DLDevice want, CopyMode copy, Side side);

// The stride rule (bytes -> elements, unused strides normalised) lives one
// layer down, beside the view it fills: set_strides_from_bytes, tensor_view.hpp.

}  // namespace dla
