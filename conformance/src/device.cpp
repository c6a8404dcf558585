#include "device.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#if DELTAKERN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace deltakern::conformance {

void no_cuda() {
  throw std::runtime_error("this conformance library was built without CUDA; it cannot make CUDA tensors");
}

#if DELTAKERN_HAVE_CUDA
void check_cuda(int status, const char* what) {
  const auto e = static_cast<cudaError_t>(status);
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                             ")");
}
#endif

namespace {

bool is_cpu(DLDevice device) { return device.device_type == kDLCPU; }

// Host allocations are padded and aligned so that a backend's vector loads at the end
// of a tensor stay inside memory the suite owns.
constexpr size_t kHostAlign = 64;
size_t host_bytes(size_t bytes) { return (bytes + kHostAlign - 1) / kHostAlign * kHostAlign + kHostAlign; }

}  // namespace

DeviceMemory::DeviceMemory(DLDevice device, size_t bytes) : device_(device), bytes_(bytes) {
  if (is_cpu(device)) {
    ptr_ = std::aligned_alloc(kHostAlign, host_bytes(bytes));
    if (ptr_ == nullptr) throw std::bad_alloc();
    return;
  }
#if DELTAKERN_HAVE_CUDA
  activate(device);
  check_cuda(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), "cudaMalloc");
#else
  no_cuda();
#endif
}

void DeviceMemory::reset() noexcept {
  if (ptr_ == nullptr) return;
  if (is_cpu(device_)) {
    std::free(ptr_);
  } else {
#if DELTAKERN_HAVE_CUDA
    cudaFree(ptr_);
#endif
  }
  ptr_ = nullptr;
}

DeviceMemory::~DeviceMemory() { reset(); }

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : device_(other.device_),
      ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void copy_to_host(DLDevice device, void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (is_cpu(device)) {
    std::memcpy(host_dst, src, bytes);
    return;
  }
#if DELTAKERN_HAVE_CUDA
  activate(device);
  check_cuda(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
#else
  no_cuda();
#endif
}

void copy_from_host(DLDevice device, void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  if (is_cpu(device)) {
    std::memcpy(dst, host_src, bytes);
    return;
  }
#if DELTAKERN_HAVE_CUDA
  activate(device);
  check_cuda(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy from host");
  // From pageable memory cudaMemcpy may return before the DMA lands; the calls that read
  // these bytes run on a non-blocking stream, which does not wait for the legacy one.
  check_cuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize (legacy stream)");
#else
  no_cuda();
#endif
}

Stream::Stream(DLDevice device) : device_(device) {
  if (is_cpu(device)) return;
#if DELTAKERN_HAVE_CUDA
  activate(device);
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
#else
  no_cuda();
#endif
}

Stream::~Stream() {
#if DELTAKERN_HAVE_CUDA
  if (stream_ != nullptr) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
#endif
}

void Stream::synchronize() const {
#if DELTAKERN_HAVE_CUDA
  if (stream_ != nullptr)
    check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
#endif
}

void activate(DLDevice device) {
  if (is_cpu(device)) return;
#if DELTAKERN_HAVE_CUDA
  check_cuda(cudaSetDevice(device.device_id), "cudaSetDevice");
#else
  no_cuda();
#endif
}

bool cuda_usable(int id, std::string* why) {
#if DELTAKERN_HAVE_CUDA
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why != nullptr) *why = std::string("no CUDA device: ") + cudaGetErrorString(status);
    return false;
  }
  if (id >= count) {
    if (why != nullptr) *why = "no CUDA device " + std::to_string(id);
    return false;
  }
  return true;
#else
  (void)id;
  if (why != nullptr) *why = "the conformance library was built without CUDA";
  return false;
#endif
}

int cuda_compute_capability(int id) {
#if DELTAKERN_HAVE_CUDA
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, id) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, id) != cudaSuccess) return 0;
  return major * 10 + minor;
#else
  (void)id;
  return 0;
#endif
}

}  // namespace deltakern::conformance
