// Fresh outputs come from here in the suite's runtimes: filled with all-ones bytes, a NaN
// in every float dtype, so that an element a backend forgets to write cannot pass.
#include "device.hpp"
#include "random.hpp"

#include <deltakern/conformance.hpp>

#include <cstdlib>
#include <cstring>

#if DELTAKERN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace deltakern::conformance {

Allocator poisoning_allocator() {
  Allocator a;
  a.allocate = [](DLDevice device, size_t bytes, void* stream) -> void* {
    if (device.device_type == kDLCPU) {
      // Rounded up and padded like the suite's own tensors, then poisoned throughout.
      const size_t n = (bytes + 63) / 64 * 64 + 64;
      void* p = std::aligned_alloc(64, n);
      if (p != nullptr) std::memset(p, kPoisonByte, n);
      return p;
    }
#if DELTAKERN_HAVE_CUDA
    if (device.device_type == kDLCUDA) {
      void* p = nullptr;
      cudaSetDevice(device.device_id);
      const auto s = static_cast<cudaStream_t>(stream);
      if (cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, s) != cudaSuccess) return nullptr;
      if (cudaMemsetAsync(p, kPoisonByte, bytes, s) != cudaSuccess) {
        cudaFreeAsync(p, s);
        return nullptr;
      }
      return p;
    }
#endif
    (void)stream;
    return nullptr;
  };
  a.deallocate = [](DLDevice device, void* ptr, void* stream) {
    if (ptr == nullptr) return;
    if (device.device_type == kDLCPU) {
      std::free(ptr);
      return;
    }
#if DELTAKERN_HAVE_CUDA
    cudaSetDevice(device.device_id);
    cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
#else
    (void)stream;
#endif
  };
  return a;
}

}  // namespace deltakern::conformance
