#include "dlpackarray/rules.hpp"

#include <string>

#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"

namespace dla {

namespace {

const char* device_name(DLDeviceType t) {
  switch (t) {
    case kDLCPU: return "CPU";
    case kDLCUDA: return "CUDA";
    case kDLCUDAHost: return "CUDA_HOST";
    case kDLOpenCL: return "OPENCL";
    case kDLVulkan: return "VULKAN";
    case kDLMetal: return "METAL";
    case kDLVPI: return "VPI";
    case kDLROCM: return "ROCM";
    case kDLROCMHost: return "ROCM_HOST";
    case kDLExtDev: return "EXT_DEV";
    case kDLCUDAManaged: return "CUDA_MANAGED";
    case kDLOneAPI: return "ONE_API";
    case kDLWebGPU: return "WEBGPU";
    case kDLHexagon: return "HEXAGON";
    case kDLMAIA: return "MAIA";
    case kDLTrn: return "TRN";
  }
  return nullptr;
}

bool same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

}  // namespace

std::string device_text(DLDevice d) {
  const char* name = device_name(d.device_type);
  const std::string type =
      name != nullptr ? std::string(name) : "device type " + std::to_string(int(d.device_type));
  return type + ":" + std::to_string(d.device_id);
}

void require_host_memory(DLDevice d, const char* action) {
  if (device_is_host_accessible(d)) return;
  std::string hint;
  if (d.device_type == kDLCUDA) {
    hint = "; for a host copy use DLPackArray(x, device='cpu') or __dlpack__(dl_device=(1, 0))";
  }
  fail(ErrorKind::Buffer, std::string("cannot ") + action + ": the data is on device " +
                              device_text(d) + " and dlpackarray reads host memory only" + hint);
}

// What a refusal offers instead, as the (device_type, device_id) pairs the caller passes:
// the data's own device, and the CPU where route_device_request reaches it.
static std::string accepted_devices(DLDevice have) {
  const auto pair = [](DLDevice d) {
    return "(" + std::to_string(int(d.device_type)) + ", " + std::to_string(d.device_id) +
           ") for " + device_text(d);
  };
  std::string text = "; accepted: None or " + pair(have);
  const DLDevice cpu{kDLCPU, 0};
  if (!same_device(have, cpu) && (device_is_host_accessible(have) || have.device_type == kDLCUDA)) {
    text += ", or " + pair(cpu);
  }
  return text;
}

DeviceRoute route_device_request(DLDevice have, DLDevice want, CopyMode copy, Side side) {
  if (same_device(have, want)) return DeviceRoute::kSame;
  const DLDevice cpu{kDLCPU, 0};
  const bool to_cpu = same_device(want, cpu);
  if (to_cpu && device_is_host_accessible(have)) return DeviceRoute::kRelabelHost;
  const bool copyable = to_cpu && have.device_type == kDLCUDA;
  if (copyable && copy != CopyMode::kNever) return DeviceRoute::kCopyToHost;
  const std::string reach =
      ": dlpackarray copies between host memory and from CUDA devices to the host only" +
      accepted_devices(have);
  if (copy == CopyMode::kNever && (copyable || side == Side::kConsumer)) {
    // The array API's rule for "possible only with a copy"; a producer
    // (DLPack __dlpack__) answers BufferError for every refusal.
    fail(side == Side::kProducer ? ErrorKind::Buffer : ErrorKind::Value,
         "data on device " + device_text(have) + " cannot reach device " + device_text(want) +
             " without a copy, and copy=False was given" + accepted_devices(have));
  }
  if (side == Side::kProducer) {
    fail(ErrorKind::Buffer, "cannot export data on device " + device_text(have) + " to device " +
                                device_text(want) + reach);
  }
  fail(ErrorKind::Buffer,
       "cannot move data from device " + device_text(have) + " to " + device_text(want) + reach);
}

}  // namespace dla
