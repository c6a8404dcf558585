// The CUDA services through the CUDA runtime API (linked statically, so libdeltakern loads
// on a machine with no driver; the calls then fail with the runtime's reason).
#include "services/cuda_services.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

namespace deltakern::detail::cuda {
namespace {

Failure failure_of(cudaError_t status) noexcept {
  if (status == cudaSuccess) return nullptr;
  cudaGetLastError();  // a sticky error is not ours to keep; clear the non-sticky one
  return cudaGetErrorString(status);
}

cudaStream_t as_stream(void* stream) noexcept { return static_cast<cudaStream_t>(stream); }

// Makes `device` current for a scope and restores the caller's, so the core never changes
// which device an engine's thread is on.
class DeviceScope {
 public:
  explicit DeviceScope(int device) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) status_ = cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0 && status_ == cudaSuccess) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  cudaError_t status() const noexcept { return status_; }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

constexpr int kCachedDevices = 64;
std::array<std::atomic<int>, kCachedDevices> capability_cache{};  // 0: not asked yet

// Fresh outputs come from a pool of the core's own per device, which keeps freed memory for the
// next call. The device's default pool has a release threshold of 0: it hands every unused byte
// back to the driver at each synchronization and maps it again at the next allocation, which cost
// a 128 MB output about 290 us per call on an H200 when the caller synchronizes between calls
// (docs/performance.md). Changing the default pool's threshold would change the engine's memory
// too, so the core makes its own. A device without memory pools, or a failed creation, falls back
// to the current pool (nullptr). Pools live as long as the process: destroying one at exit could
// run after the driver has gone.
struct DevicePool {
  std::once_flag once;
  cudaMemPool_t pool = nullptr;
};

// The pool is made at the first allocation, which may be the first call of a process made inside
// an engine's graph capture. In the capture's default (global) mode the runtime refuses a pool's
// creation there and invalidates the whole capture (H200: the capture's allocation then failed,
// "operation failed due to a previous error during capture"), so this thread creates it in relaxed
// mode, as PyTorch's allocator does for its cudaMalloc. Creating a pool enqueues nothing.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() noexcept { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};
std::array<DevicePool, kCachedDevices> device_pools;

cudaMemPool_t output_pool(int device) noexcept {
  if (device < 0 || device >= kCachedDevices) return nullptr;
  DevicePool& slot = device_pools[device];
  std::call_once(slot.once, [&] {
    const RelaxedCaptureMode relaxed;
    int supported = 0;
    if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess ||
        supported == 0) {
      cudaGetLastError();
      return;
    }
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    uint64_t keep_all = UINT64_MAX;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all) != cudaSuccess) {
      cudaGetLastError();
      cudaMemPoolDestroy(pool);
      return;
    }
    slot.pool = pool;
  });
  return slot.pool;
}

}  // namespace

Failure built_with_cuda() noexcept { return nullptr; }

Failure device_count(int& count) noexcept {
  count = 0;
  return failure_of(cudaGetDeviceCount(&count));
}

Failure compute_capability(int device, int& capability) noexcept {
  const bool cacheable = device >= 0 && device < kCachedDevices;
  if (cacheable) {
    capability = capability_cache[device].load(std::memory_order_relaxed);
    if (capability != 0) return nullptr;
  }
  int major = 0, minor = 0;
  if (Failure f = failure_of(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device)))
    return f;
  if (Failure f = failure_of(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device)))
    return f;
  capability = major * 10 + minor;
  if (cacheable) capability_cache[device].store(capability, std::memory_order_relaxed);
  return nullptr;
}

Failure malloc_async(int device, size_t bytes, void* stream, void** out) noexcept {
  *out = nullptr;
  DeviceScope scope(device);
  if (Failure f = failure_of(scope.status())) return f;
  if (cudaMemPool_t pool = output_pool(device))
    return failure_of(cudaMallocFromPoolAsync(out, bytes, pool, as_stream(stream)));
  // With a null stream the pool is the current device's; with a stream, the stream's.
  return failure_of(cudaMallocAsync(out, bytes, as_stream(stream)));
}

Failure free_async(int device, void* ptr, void* stream) noexcept {
  DeviceScope scope(device);
  if (Failure f = failure_of(scope.status())) return f;
  return failure_of(cudaFreeAsync(ptr, as_stream(stream)));
}

Failure copy_to_host_async(void* host_dst, const void* device_src, size_t bytes, void* stream) noexcept {
  return failure_of(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)));
}

Failure copy_to_device_async(void* device_dst, const void* host_src, size_t bytes, void* stream) noexcept {
  return failure_of(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, as_stream(stream)));
}

Failure synchronize(void* stream) noexcept { return failure_of(cudaStreamSynchronize(as_stream(stream))); }

Failure is_capturing(void* stream, bool& capturing) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const Failure f = failure_of(cudaStreamIsCapturing(as_stream(stream), &status));
  capturing = status != cudaStreamCaptureStatusNone;
  return f;
}

}  // namespace deltakern::detail::cuda
