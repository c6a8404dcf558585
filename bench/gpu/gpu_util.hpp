// Small host-side CUDA helpers of the GPU programs: error checks, owning device buffers, random
// device fills, DLTensor views and event timing. Shared by bench/gpu (bench_gpu,
// native_kernel_bench) and tests/gpu (native_selftest, portable_cut_digest). Element types are
// the project's vocabulary (deltakern/scalar_type.hpp); the float64 reference is conformance's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>
#include <deltakern/scalar_type.hpp>

#include "../batch_mixes.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace dkgpu {

using deltakern::ScalarType;
using deltakern::short_name;
using deltakern::size_of;
using deltakern::to_dl;

inline void cuda_check(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                             cudaGetErrorString(err));
}
#define DKGPU_CHECK(call) ::dkgpu::cuda_check((call), #call, __FILE__, __LINE__)

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) DKGPU_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Fills device memory with random nonzero bf16 values in [-1, 1): one random block uploaded,
// then replicated on the device, which is fast for gigabytes.
inline void fill_random_bf16(void* dst, size_t bytes, cudaStream_t s, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const size_t block = std::min<size_t>((bytes + 1) / 2 * 2, size_t{4} << 20);
  std::vector<uint16_t> h(block / 2);
  for (auto& v : h) {
    float f = static_cast<float>(dist(rng));
    if (f == 0.f) f = 0.5f;
    const __nv_bfloat16 b = __float2bfloat16_rn(f);
    std::memcpy(&v, &b, 2);
  }
  DKGPU_CHECK(cudaMemcpyAsync(dst, h.data(), std::min(block, bytes), cudaMemcpyHostToDevice, s));
  for (size_t off = block; off < bytes; off += block)
    DKGPU_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + off, dst, std::min(block, bytes - off),
                                cudaMemcpyDeviceToDevice, s));
  DKGPU_CHECK(cudaStreamSynchronize(s));
}

// A DLTensor view with its own shape and strides storage.
struct View {
  int64_t shape[4]{};
  int64_t strides[4]{};
  DLTensor t{};
  View() = default;
  View(void* data, int device, DLDataType dtype, std::vector<int64_t> shp, std::vector<int64_t> str,
       uint64_t byte_offset = 0) {
    t.data = data;
    t.device = DLDevice{kDLCUDA, device};
    t.ndim = static_cast<int32_t>(shp.size());
    t.dtype = dtype;
    for (size_t i = 0; i < shp.size(); ++i) {
      shape[i] = shp[i];
      strides[i] = str[i];
    }
    t.shape = shape;
    t.strides = strides;
    t.byte_offset = byte_offset;
  }
  View(const View& o) { *this = o; }
  View& operator=(const View& o) {
    std::memcpy(shape, o.shape, sizeof shape);
    std::memcpy(strides, o.strides, sizeof strides);
    t = o.t;
    t.shape = shape;
    t.strides = strides;
    return *this;
  }
  const DLTensor* get() const { return &t; }
};

// CUDA events around `iters` back-to-back calls on one stream: the device time per call.
struct EventTimer {
  cudaEvent_t a{}, b{};
  EventTimer() {
    DKGPU_CHECK(cudaEventCreate(&a));
    DKGPU_CHECK(cudaEventCreate(&b));
  }
  ~EventTimer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  // Mean device time per call of `iters` back-to-back calls, after 3 warm-ups.
  template <class F>
  double us_per_call(cudaStream_t s, int iters, F&& f) {
    for (int i = 0; i < 3; ++i) f(i);
    DKGPU_CHECK(cudaStreamSynchronize(s));
    DKGPU_CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < iters; ++i) f(i);
    DKGPU_CHECK(cudaEventRecord(b, s));
    DKGPU_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    DKGPU_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1000.0 / iters;
  }
};

using deltakern::bench::batch_lengths;  // the batch mixes, shared with the CPU benchmark
using deltakern::bench::mixed_lengths;

}  // namespace dkgpu
