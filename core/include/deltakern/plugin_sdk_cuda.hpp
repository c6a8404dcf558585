// deltakern plugin SDK, CUDA part: what every CUDA plugin needs around its launches. Header-only
// and separate from plugin_sdk.hpp, so that a CPU plugin never sees the CUDA runtime's headers.
#pragma once

#include <cuda_runtime_api.h>

#include <deltakern/plugin_sdk.hpp>

#include <string>

namespace deltakern::plugin::cuda {

// "what: the CUDA runtime's message".
inline std::string message(const std::string& what, cudaError_t err) {
  return what + ": " + cudaGetErrorString(err);
}

// Throws Failure(DK_ERR_RUNTIME) naming `what` unless err is cudaSuccess.
inline void check(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw Failure(DK_ERR_RUNTIME, message(what, err));
}

// Makes `device` current for a call's launches (they go to a stream of that device) and restores
// the caller's device afterwards. cudaSetDevice neither syncs nor breaks a stream capture.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) {
      check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace deltakern::plugin::cuda
